-- semaphore_holders.lua: one consistent snapshot of a semaphore's permits (read only).
-- KEYS[1] holders zset: holder id -> deadline, ms
-- KEYS[2] info hash: holder id -> JSON {"acquired_ms": ..., "ticket": ..., "reason": ...}
-- Returns {server time ms, {id, deadline, ...}, {id, JSON, ...}}.
local t = redis.call('TIME')
return {
  t[1] .. string.sub('00000' .. t[2], -6, -4),
  redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES'),
  redis.call('HGETALL', KEYS[2]),
}
