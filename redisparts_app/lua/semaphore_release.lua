-- semaphore_release.lua: give a permit back and wake one waiter.
-- KEYS[1] holders zset: holder id -> deadline, ms
-- KEYS[2] info hash: holder id -> JSON
-- KEYS[3] wake list: one token per freed slot, popped by waiters (BLPOP)
-- ARGV[1] holder id   ARGV[2] limit (longest useful wake list)   ARGV[3] wake list TTL, ms
-- ARGV[4] now, ms on the caller's clock; absent for the server's clock (TIME)
-- Returns 1 when the permit was still live, 0 when it had expired or was never held.
local call = redis.call
local now = ARGV[4]
if now == nil then
  local t = call('TIME')
  now = t[1] .. string.sub('00000' .. t[2], -6, -4)
end

-- Raises the deadline to now + 0.5 ms only if it had passed (deadlines are whole ms): 1
-- exactly when the permit had expired, one call instead of ZSCORE and a comparison, and
-- no write for a live permit (the member is removed next anyway).
local expired = call('ZADD', KEYS[1], 'XX', 'GT', 'CH', now .. '.5', ARGV[1])
if call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
call('HDEL', KEYS[2], ARGV[1])
-- A slot was freed either way; tokens beyond the limit would only cause idle retries, so
-- a full list is left as it is (then nobody is blocked on it: a waiter blocks only on an
-- empty list), and uncontended releases write nothing to it.
if call('LLEN', KEYS[3]) < tonumber(ARGV[2]) then
  call('RPUSH', KEYS[3], '1')
  call('PEXPIRE', KEYS[3], ARGV[3])
end
return 1 - expired
