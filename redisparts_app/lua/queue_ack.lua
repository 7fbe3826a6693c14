-- queue_ack.lua: record tasks as done, each one only if this worker still holds it.
-- KEYS[1] tasks hash   KEYS[2] in-flight zset   KEYS[3] owners hash   KEYS[4] deliveries hash
-- ARGV[1] worker id   ARGV[2..] task ids
-- Returns the ids the worker no longer held (their lease expired and they were reaped,
-- or they were deleted); those are left as they are.
local ids = {unpack(ARGV, 2)}
if #ids == 0 then return {} end
local owners = redis.call('hmget', KEYS[3], unpack(ids))
local done, lost = {}, {}
for j, id in ipairs(ids) do
  if owners[j] == ARGV[1] then done[#done + 1] = id else lost[#lost + 1] = id end
end
if #done > 0 then
  redis.call('zrem', KEYS[2], unpack(done))
  redis.call('hdel', KEYS[3], unpack(done))
  redis.call('hdel', KEYS[1], unpack(done))
  redis.call('hdel', KEYS[4], unpack(done))
end
return lost
