-- semaphore_refresh.lua: push back the deadline of a live permit; an expired one is removed.
-- KEYS[1] holders zset: holder id -> deadline, ms
-- KEYS[2] info hash: holder id -> JSON
-- ARGV[1] holder id   ARGV[2] timeout, ms
-- ARGV[3] now, ms on the caller's clock; absent for the server's clock (TIME)
-- Returns 1 when refreshed, 0 when the permit had expired or was never held.
local call = redis.call
local now = ARGV[3]
if now == nil then
  local t = call('TIME')
  now = t[1] .. string.sub('00000' .. t[2], -6, -4)
end
local timeout = tonumber(ARGV[2])

local deadline = call('ZSCORE', KEYS[1], ARGV[1])
if not deadline then
  return 0
end
if tonumber(deadline) <= tonumber(now) then
  -- Expired: the slot may already count another holder, so never revive it.
  call('ZREM', KEYS[1], ARGV[1])
  call('HDEL', KEYS[2], ARGV[1])
  return 0
end
call('ZADD', KEYS[1], string.format('%d', now + timeout), ARGV[1])
-- As in acquire: the two keys are extended together, to the latest deadline.
if call('PTTL', KEYS[2]) < timeout then
  call('PEXPIRE', KEYS[1], ARGV[2])
  call('PEXPIRE', KEYS[2], ARGV[2])
end
return 1
