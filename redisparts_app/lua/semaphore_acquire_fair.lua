-- semaphore_acquire_fair.lua: take a permit of a fair semaphore if one is free, on the
-- server's clock (TIME), so clock differences between client hosts change nothing.
-- KEYS[1] holders zset: holder id -> deadline, ms on the server's clock
-- KEYS[2] info hash: holder id -> JSON {"acquired_ms": ..., "reason": ...}
-- KEYS[3] owners zset: holder id -> ticket
-- KEYS[4] counter: last ticket handed out (kept without a TTL, so tickets only grow)
-- ARGV[1] holder id   ARGV[2] limit   ARGV[3] timeout, ms   ARGV[4] reason
-- Returns the permit's ticket (an integer > 0) when acquired, 0 when the semaphore is full.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local timeout = tonumber(ARGV[3])

-- Drop expired permits first, so crashed holders free their slots.
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  redis.call('ZREM', KEYS[1], gone)
  redis.call('HDEL', KEYS[2], gone)
  redis.call('ZREM', KEYS[3], gone)
end

if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
local ticket = redis.call('INCR', KEYS[4])
redis.call('ZADD', KEYS[1], now + timeout, ARGV[1])
redis.call('ZADD', KEYS[3], ticket, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode({acquired_ms = now, reason = ARGV[4]}))
-- The keys outlive every live permit: each write extends them to at least its timeout.
for i = 1, 3 do
  if redis.call('PTTL', KEYS[i]) < timeout then
    redis.call('PEXPIRE', KEYS[i], timeout)
  end
end
return ticket
