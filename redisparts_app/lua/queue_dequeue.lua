-- queue_dequeue.lua: move up to ARGV[3] ready tasks, first queue first, to the in-flight set.
-- KEYS[1] tasks hash   KEYS[2] in-flight zset (id -> lease deadline ms)
-- KEYS[3] owners hash (id -> worker id)   KEYS[4] deliveries hash (id -> count)
-- KEYS[5] worker wake list   KEYS[6..] queue lists, highest priority first
-- ARGV[1] worker id   ARGV[2] lease ms   ARGV[3] most tasks to take
-- Returns {id, task JSON, delivery count, id, ...}, empty when every queue is empty.
-- A task delivered before (its worker died holding it, or it is a retry) is only ever
-- taken alone, so a task that kills its worker is the only one its deaths are counted on.
-- One wake-up token is dropped per task taken: tokens left stand for tasks still ready,
-- so idle workers are not woken for tasks a batch already took.
local t = redis.call('time')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
local wanted = tonumber(ARGV[3])
local taken, alone = {}, false
for i = 6, #KEYS do
  while not alone and #taken < wanted * 3 do
    local id = redis.call('lpop', KEYS[i])
    if not id then break end
    local body = redis.call('hget', KEYS[1], id)
    -- An id without a record was deleted while queued: drop it.
    if body then
      local before = tonumber(redis.call('hget', KEYS[4], id) or '0')
      alone = before > 0
      if alone and #taken > 0 then
        redis.call('lpush', KEYS[i], id)  -- left first in line for a claim of its own
      else
        redis.call('zadd', KEYS[2], deadline, id)
        redis.call('hset', KEYS[3], id, ARGV[1])
        redis.call('hset', KEYS[4], id, before + 1)
        taken[#taken + 1] = id
        taken[#taken + 1] = body
        taken[#taken + 1] = before + 1
      end
    end
  end
  if alone then break end
end
if #taken > 0 then redis.call('ltrim', KEYS[5], #taken / 3, -1) end
return taken
