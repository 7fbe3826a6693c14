-- queue_release.lua: put tasks a worker took but did not start back at the head of their
-- queues, in the order they were taken, if it still holds them (a worker stopping early).
-- KEYS[1] in-flight zset   KEYS[2] owners hash   KEYS[3] deliveries hash
-- KEYS[4] worker wake list   KEYS[5..] the queue list of each task, one per ARGV[3..]
-- ARGV[1] worker id   ARGV[2] wake list length cap   ARGV[3..] task ids
-- Returns how many tasks were put back; the delivery that never ran is not counted.
local released = 0
for i = #ARGV, 3, -1 do
  local id = ARGV[i]
  if redis.call('hget', KEYS[2], id) == ARGV[1] then
    redis.call('zrem', KEYS[1], id)
    redis.call('hdel', KEYS[2], id)
    if redis.call('hincrby', KEYS[3], id, -1) <= 0 then redis.call('hdel', KEYS[3], id) end
    redis.call('lpush', KEYS[i + 2], id)
    redis.call('lpush', KEYS[4], 1)
    released = released + 1
  end
end
if released > 0 then redis.call('ltrim', KEYS[4], 0, tonumber(ARGV[2]) - 1) end
return released
