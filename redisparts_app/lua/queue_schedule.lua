-- queue_schedule.lua: move due delayed tasks to the tail of their queues, each exactly once
-- however many schedulers run this at the same moment.
-- KEYS[1] tasks hash   KEYS[2] delayed zset (id -> due ms)   KEYS[3] worker wake list
-- KEYS[4..] queue lists of the group
-- ARGV[1] most tasks to move   ARGV[2] wake list length cap   ARGV[3..] queue names,
-- one per KEYS[4..]
-- Returns {moved, ms until the next due task or -1 when none}.
-- A task whose queue is not among KEYS stays delayed for a later call that knows it.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local queue_keys = {}
for i = 3, #ARGV do queue_keys[ARGV[i]] = KEYS[i + 1] end
local moved = 0
local due = redis.call('zrangebyscore', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
for _, id in ipairs(due) do
  local body = redis.call('hget', KEYS[1], id)
  if not body then
    redis.call('zrem', KEYS[2], id)
  else
    local queue_key = queue_keys[cjson.decode(body)['queue']]
    if queue_key then
      redis.call('zrem', KEYS[2], id)
      redis.call('rpush', queue_key, id)
      redis.call('lpush', KEYS[3], 1)
      moved = moved + 1
    end
  end
end
if moved > 0 then redis.call('ltrim', KEYS[3], 0, tonumber(ARGV[2]) - 1) end
local next_due = -1
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if first[2] then next_due = math.max(0, tonumber(first[2]) - now) end
return {moved, next_due}
