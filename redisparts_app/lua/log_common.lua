-- log_common.lua: count a message in the common log of the current hour, rotating the
-- previous hour to :last when the hour changed, and push it onto the recent log.
-- KEYS[1] common zset, message -> count (rp:log:{name}:common:<severity>)
-- KEYS[2] common zset of the previous hour (...:common:<severity>:last)
-- KEYS[3] hour start of KEYS[1], epoch seconds (...:common:<severity>:start)
-- KEYS[4] hour start of KEYS[2] (...:common:<severity>:pstart)
-- KEYS[5] recent list, newest first (rp:log:{name}:recent:<severity>)
-- ARGV[1] message            ARGV[2] hour start of the caller's clock (multiple of 3600)
-- ARGV[3] recent entry JSON  ARGV[4] recent entries kept
-- ARGV[5] TTL of the common keys, seconds   ARGV[6] TTL of the recent list, seconds
-- Returns the message's count in the current hour.
local hour = tonumber(ARGV[2])
local start = tonumber(redis.call('get', KEYS[3]))
local common_ttl = tonumber(ARGV[5])

if start == nil or start < hour then
  if start ~= nil and start == hour - 3600 and redis.call('exists', KEYS[1]) == 1 then
    redis.call('rename', KEYS[1], KEYS[2])
    redis.call('set', KEYS[4], start, 'ex', common_ttl)
  elseif start ~= nil then
    -- Nothing was logged in the previous hour: its log is empty.
    redis.call('del', KEYS[1], KEYS[2], KEYS[4])
  end
  redis.call('set', KEYS[3], hour)
end
-- A caller whose clock is behind the stored hour counts in the current hour.

local count = redis.call('zincrby', KEYS[1], 1, ARGV[1])
redis.call('expire', KEYS[1], common_ttl)
redis.call('expire', KEYS[3], common_ttl)

redis.call('lpush', KEYS[5], ARGV[3])
redis.call('ltrim', KEYS[5], 0, tonumber(ARGV[4]) - 1)
redis.call('expire', KEYS[5], tonumber(ARGV[6]))
return tonumber(count)
