-- queue_reap.lua: put tasks whose lease expired, or whose worker stopped beating, back at
-- the head of their queue, or in quarantine once they were delivered too many times (a
-- task that kills its worker).
-- KEYS[1] tasks hash   KEYS[2] in-flight zset (id -> lease deadline ms)   KEYS[3] owners hash
-- KEYS[4] deliveries hash   KEYS[5] quarantine zset (id -> ms)   KEYS[6] errors hash
-- KEYS[7] worker wake list   KEYS[8] workers hash (worker id -> last heartbeat ms)
-- KEYS[9..] queue lists of the group
-- ARGV[1] max deliveries   ARGV[2] most tasks to reap   ARGV[3] wake list length cap
-- ARGV[4] ms without a heartbeat after which a worker is dead   ARGV[5..] queue names,
-- one per KEYS[9..]
-- Returns {requeued, the ids quarantined, ms until the next lease deadline or -1 when
-- none}; the caller records their results (queue_quarantined.lua).
-- A task whose queue is not among KEYS stays in flight for a later call that knows it.
-- Only workers that beat (are in KEYS[8]) are judged by their heartbeat; the tasks of any
-- holder also come back when their lease ends. A dead worker is forgotten once it holds
-- nothing.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local queue_keys = {}
for i = 5, #ARGV do queue_keys[ARGV[i]] = KEYS[i + 4] end
local max_deliveries, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local candidates = redis.call('zrangebyscore', KEYS[2], '-inf', now, 'LIMIT', 0, limit)
local dead, any_dead = {}, false
local beats = redis.call('hgetall', KEYS[8])
for i = 1, #beats, 2 do
  if tonumber(beats[i + 1]) < now - tonumber(ARGV[4]) then
    dead[beats[i]] = 0  -- tasks it still holds after this call
    any_dead = true
  end
end
local scanned_all = true
if any_dead then
  local chosen = {}
  for _, id in ipairs(candidates) do chosen[id] = true end
  local inflight = redis.call('zrange', KEYS[2], 0, limit - 1)
  scanned_all = #inflight < limit
  if #inflight > 0 then
    local holders = redis.call('hmget', KEYS[3], unpack(inflight))
    for j, id in ipairs(inflight) do
      if holders[j] and dead[holders[j]] and not chosen[id] then
        candidates[#candidates + 1] = id
        chosen[id] = true
      end
    end
  end
end
local requeued, quarantined = 0, {}
for _, id in ipairs(candidates) do
  local body = redis.call('hget', KEYS[1], id)
  local worker = redis.call('hget', KEYS[3], id) or ''
  if not body then
    redis.call('zrem', KEYS[2], id)
    redis.call('hdel', KEYS[3], id)
    redis.call('hdel', KEYS[4], id)
  else
    local queue_key = queue_keys[cjson.decode(body)['queue']]
    if queue_key then
      redis.call('zrem', KEYS[2], id)
      redis.call('hdel', KEYS[3], id)
      local deliveries = tonumber(redis.call('hget', KEYS[4], id) or '0')
      if deliveries >= max_deliveries then
        redis.call('zadd', KEYS[5], now, id)
        redis.call('hset', KEYS[6], id, cjson.encode({
          reason = 'delivered ' .. deliveries .. ' times without finishing; the last worker ('
            .. worker .. ') stopped holding its lease',
          traceback = '', at = now / 1000}))
        quarantined[#quarantined + 1] = id
      else
        redis.call('lpush', queue_key, id)
        redis.call('lpush', KEYS[7], 1)
        requeued = requeued + 1
      end
    elseif dead[worker] then
      dead[worker] = dead[worker] + 1
    end
  end
end
if requeued > 0 then redis.call('ltrim', KEYS[7], 0, tonumber(ARGV[3]) - 1) end
if scanned_all and #candidates < limit then
  for worker, holding in pairs(dead) do
    if holding == 0 then redis.call('hdel', KEYS[8], worker) end
  end
end
local next_deadline = -1
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if first[2] then next_deadline = math.max(0, tonumber(first[2]) - now) end
return {requeued, quarantined, next_deadline}
