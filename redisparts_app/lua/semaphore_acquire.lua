-- semaphore_acquire.lua: take a permit of a timeout-based semaphore if one is free,
-- on the caller's clock (the book's basic semaphore, made atomic).
-- KEYS[1] holders zset: holder id -> deadline, ms on the callers' clocks
-- KEYS[2] info hash: holder id -> JSON {"acquired_ms": ..., "reason": ...}
-- ARGV[1] holder id   ARGV[2] limit   ARGV[3] now, ms (caller's clock)
-- ARGV[4] timeout, ms   ARGV[5] reason
-- Returns 1 when acquired, 0 when the semaphore is full.
local now = tonumber(ARGV[3])
local timeout = tonumber(ARGV[4])

-- Drop expired permits first, so crashed holders free their slots.
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  redis.call('ZREM', KEYS[1], gone)
  redis.call('HDEL', KEYS[2], gone)
end

if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + timeout, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode({acquired_ms = now, reason = ARGV[5]}))
-- The keys outlive every live permit: each write extends them to at least its timeout.
for i = 1, 2 do
  if redis.call('PTTL', KEYS[i]) < timeout then
    redis.call('PEXPIRE', KEYS[i], timeout)
  end
end
return 1
