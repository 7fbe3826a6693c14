-- semaphore_acquire.lua: take a permit if one is free. Expiry, count and insert run as one
-- atomic step, which closes the race of the book's ZADD-then-ZRANK acquire.
-- KEYS[1] holders zset: holder id -> deadline, ms
-- KEYS[2] info hash: holder id -> JSON {"acquired_ms": ..., "reason": ...}, and "limit" ->
--         the limit of the last acquire (for the metrics)
-- KEYS[3], KEYS[4] (fair semaphores only) owners zset: holder id -> ticket;
--         counter: last ticket handed out (kept without a TTL, so tickets only grow)
-- ARGV[1] holder id   ARGV[2] limit   ARGV[3] timeout, ms   ARGV[4] reason
-- ARGV[5] now, ms on the caller's clock; empty for the server's clock (TIME)
-- Returns 0 when the semaphore is full; when acquired, the permit's ticket (fair) or 1.
local now = tonumber(ARGV[5])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local timeout = tonumber(ARGV[3])
local fair = KEYS[3] ~= nil

-- Drop expired permits first, so crashed holders free their slots.
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  redis.call('ZREM', KEYS[1], gone)
  redis.call('HDEL', KEYS[2], gone)
  if fair then
    redis.call('ZREM', KEYS[3], gone)
  end
end

if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
local ticket = 1
redis.call('ZADD', KEYS[1], now + timeout, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode({acquired_ms = now, reason = ARGV[4]}),
  'limit', ARGV[2])
if fair then
  ticket = redis.call('INCR', KEYS[4])
  redis.call('ZADD', KEYS[3], ticket, ARGV[1])
end
-- The keys live exactly as long as the latest live permit (deadlines are on the clock of
-- "now", so this holds for the callers' clocks too): one read instead of a PTTL per key.
local latest = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
for i = 1, math.min(#KEYS, 3) do
  redis.call('PEXPIRE', KEYS[i], latest - now)
end
return ticket
