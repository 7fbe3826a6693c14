-- queue_ack.lua: record tasks as done, each one only if this worker still holds it.
-- KEYS[1] tasks hash   KEYS[2] in-flight zset   KEYS[3] owners hash   KEYS[4] deliveries hash
-- ARGV[1] worker id   ARGV[2..] task ids
-- Returns the ids the worker no longer held (their lease expired and they were reaped,
-- or they were deleted); those are left as they are.
local lost = {}
for i = 2, #ARGV do
  local id = ARGV[i]
  if redis.call('hget', KEYS[3], id) == ARGV[1] then
    redis.call('zrem', KEYS[2], id)
    redis.call('hdel', KEYS[3], id)
    redis.call('hdel', KEYS[1], id)
    redis.call('hdel', KEYS[4], id)
  else
    lost[#lost + 1] = id
  end
end
return lost
