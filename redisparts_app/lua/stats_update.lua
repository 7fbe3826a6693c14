-- stats_update.lua: add one value to the statistics of the current hour, first moving the
-- previous hour's statistics to :last when the hour changed.
-- KEYS[1] statistics hash of the current hour (rp:stats:{<context>}:<kind>), fields
--         hour (start, epoch seconds), count, sum, sumsq, min, max
-- KEYS[2] statistics hash of the previous hour (rp:stats:{<context>}:<kind>:last)
-- ARGV[1] value   ARGV[2] value squared (both as exact decimal strings)
-- ARGV[3] hour start of the caller's clock (multiple of 3600)   ARGV[4] TTL, seconds
-- Returns the current hash as a flat field/value list (HGETALL).
local hour = tonumber(ARGV[3])
local start = tonumber(redis.call('hget', KEYS[1], 'hour'))
if start == nil or start < hour then
  if start == hour - 3600 then
    redis.call('rename', KEYS[1], KEYS[2])
  elseif start ~= nil then
    -- Nothing was recorded in the previous hour.
    redis.call('del', KEYS[1], KEYS[2])
  end
  redis.call('hset', KEYS[1], 'hour', hour)
end
-- A caller whose clock is behind the stored hour adds to the current hour.

redis.call('hincrby', KEYS[1], 'count', 1)
redis.call('hincrbyfloat', KEYS[1], 'sum', ARGV[1])
redis.call('hincrbyfloat', KEYS[1], 'sumsq', ARGV[2])
local value = tonumber(ARGV[1])
local low = tonumber(redis.call('hget', KEYS[1], 'min'))
if low == nil or value < low then
  redis.call('hset', KEYS[1], 'min', ARGV[1])
end
local high = tonumber(redis.call('hget', KEYS[1], 'max'))
if high == nil or value > high then
  redis.call('hset', KEYS[1], 'max', ARGV[1])
end
redis.call('expire', KEYS[1], tonumber(ARGV[4]))
return redis.call('hgetall', KEYS[1])
