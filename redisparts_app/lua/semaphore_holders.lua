-- semaphore_holders.lua: one consistent snapshot of a semaphore's permits (read only).
-- KEYS[1] holders zset: holder id -> deadline, ms
-- KEYS[2] info hash: holder id -> JSON {"acquired_ms": ..., "reason": ...}
-- KEYS[3] owners zset: holder id -> ticket (empty for the basic kind)
-- Returns {server time ms, {id, deadline, ...}, {id, JSON, ...}, {id, ticket, ...}}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {
  now,
  redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES'),
  redis.call('HGETALL', KEYS[2]),
  redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES'),
}
