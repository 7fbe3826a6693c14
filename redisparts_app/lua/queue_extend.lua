-- queue_extend.lua: push back the lease deadline of a task its worker still holds.
-- KEYS[1] in-flight zset (id -> lease deadline ms)   KEYS[2] owners hash (id -> worker id)
-- ARGV[1] task id   ARGV[2] worker id   ARGV[3] lease ms from now
-- Returns 1 when extended, 0 when the worker no longer holds the task (reaped or deleted).
if redis.call('hget', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
if not redis.call('zscore', KEYS[1], ARGV[1]) then return 0 end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('zadd', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
return 1
