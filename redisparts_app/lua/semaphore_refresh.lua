-- semaphore_refresh.lua: push back the deadline of a live permit; an expired one is removed.
-- KEYS[1] holders zset: holder id -> deadline, ms
-- KEYS[2] info hash: holder id -> JSON
-- KEYS[3] (fair semaphores only) owners zset: holder id -> ticket
-- ARGV[1] holder id   ARGV[2] timeout, ms
-- ARGV[3] now, ms on the caller's clock; empty for the server's clock (TIME)
-- Returns 1 when refreshed, 0 when the permit had expired or was never held.
local now = tonumber(ARGV[3])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local timeout = tonumber(ARGV[2])

local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not deadline then
  return 0
end
if tonumber(deadline) <= now then
  -- Expired: the slot may already count another holder, so never revive it.
  for i = 1, #KEYS do
    if i == 2 then
      redis.call('HDEL', KEYS[i], ARGV[1])
    else
      redis.call('ZREM', KEYS[i], ARGV[1])
    end
  end
  return 0
end
redis.call('ZADD', KEYS[1], now + timeout, ARGV[1])
for i = 1, #KEYS do
  if redis.call('PTTL', KEYS[i]) < timeout then
    redis.call('PEXPIRE', KEYS[i], timeout)
  end
end
return 1
