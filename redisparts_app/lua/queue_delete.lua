-- queue_delete.lua: remove a task wherever it is (queued, delayed, in flight, failed,
-- quarantined) with its record, delivery count and error.
-- KEYS[1] tasks hash   KEYS[2] the task's queue list   KEYS[3] delayed zset
-- KEYS[4] in-flight zset   KEYS[5] owners hash   KEYS[6] deliveries hash
-- KEYS[7] failed zset   KEYS[8] quarantine zset   KEYS[9] errors hash
-- ARGV[1] task id
-- Returns 1 when the task existed, 0 otherwise. A worker running it finds its lease gone.
local id = ARGV[1]
local existed = redis.call('hdel', KEYS[1], id)
redis.call('lrem', KEYS[2], 0, id)
redis.call('zrem', KEYS[3], id)
redis.call('zrem', KEYS[4], id)
redis.call('hdel', KEYS[5], id)
redis.call('hdel', KEYS[6], id)
redis.call('zrem', KEYS[7], id)
redis.call('zrem', KEYS[8], id)
redis.call('hdel', KEYS[9], id)
return existed
