-- rate_limit.lua: admit one event unless `limit` were admitted in the last `window`.
-- A sliding log: every admitted event is a member scored with its time, so the limit
-- holds in every window, not only in fixed ones.
-- KEYS[1] log zset: event id -> admission time, microseconds (server clock, TIME)
-- ARGV[1] limit   ARGV[2] window, microseconds   ARGV[3] event id (unique)
-- Returns {1, events left in the window} when admitted,
--         {0, microseconds until the oldest event leaves the window} when refused.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
  return {1, limit - count - 1}
end
local oldest = tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2])
return {0, oldest + window - now}
