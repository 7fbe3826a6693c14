-- queue_requeue.lua: put a failed or quarantined task back at the tail of its queue.
-- KEYS[1] tasks hash   KEYS[2] failed zset   KEYS[3] quarantine zset   KEYS[4] errors hash
-- KEYS[5] deliveries hash   KEYS[6] the task's queue list   KEYS[7] worker wake list
-- KEYS[8..] optional: keys of the failed run's outcome (its result, its done list),
-- deleted so a waiter waits for the new run rather than read the failure again
-- ARGV[1] task id   ARGV[2] task JSON with its retry count reset   ARGV[3] wake list cap
-- Returns 1 when requeued, 0 when the task is neither failed nor quarantined.
local id = ARGV[1]
if not (redis.call('zscore', KEYS[2], id) or redis.call('zscore', KEYS[3], id)) then return 0 end
-- HSET first: over maxmemory it is refused before anything changes (lua/__init__.py).
redis.call('hset', KEYS[1], id, ARGV[2])
redis.call('zrem', KEYS[2], id)
redis.call('zrem', KEYS[3], id)
redis.call('hdel', KEYS[4], id)
redis.call('hdel', KEYS[5], id)
redis.call('rpush', KEYS[6], id)
redis.call('lpush', KEYS[7], 1)
redis.call('ltrim', KEYS[7], 0, tonumber(ARGV[3]) - 1)
if #KEYS > 7 then redis.call('del', unpack(KEYS, 8)) end
return 1
