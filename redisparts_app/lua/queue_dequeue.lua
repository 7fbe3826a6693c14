-- queue_dequeue.lua: move the first task of the first non-empty queue to the in-flight set.
-- KEYS[1] tasks hash   KEYS[2] in-flight zset (id -> lease deadline ms)
-- KEYS[3] owners hash (id -> worker id)   KEYS[4] deliveries hash (id -> count)
-- KEYS[5..] queue lists, highest priority first
-- ARGV[1] worker id   ARGV[2] lease ms
-- Returns {id, task JSON, delivery count} or false when every queue is empty.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 5, #KEYS do
  while true do
    local id = redis.call('lpop', KEYS[i])
    if not id then break end
    local body = redis.call('hget', KEYS[1], id)
    -- An id without a record was deleted while queued: drop it.
    if body then
      redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), id)
      redis.call('hset', KEYS[3], id, ARGV[1])
      local deliveries = redis.call('hincrby', KEYS[4], id, 1)
      return {id, body, deliveries}
    end
  end
end
return false
