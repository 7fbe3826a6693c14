-- semaphore_release.lua: give a permit back and wake one waiter.
-- KEYS[1] holders zset: holder id -> deadline, ms
-- KEYS[2] info hash: holder id -> JSON
-- KEYS[3] wake list: one token per freed slot, popped by waiters (BLPOP)
-- KEYS[4] (fair semaphores only) owners zset: holder id -> ticket
-- ARGV[1] holder id   ARGV[2] limit (longest useful wake list)   ARGV[3] wake list TTL, ms
-- ARGV[4] now, ms on the caller's clock; empty for the server's clock (TIME)
-- Returns 1 when the permit was still live, 0 when it had expired or was never held.
local now = tonumber(ARGV[4])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not deadline then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if KEYS[4] then
  redis.call('ZREM', KEYS[4], ARGV[1])
end
-- A slot was freed either way; tokens beyond the limit would only cause idle retries, so
-- a full list is left as it is (then nobody is blocked on it: a waiter blocks only on an
-- empty list), and uncontended releases write nothing to it.
if redis.call('LLEN', KEYS[3]) < tonumber(ARGV[2]) then
  redis.call('RPUSH', KEYS[3], '1')
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
end
if tonumber(deadline) <= now then
  return 0
end
return 1
