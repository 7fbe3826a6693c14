-- queue_cancel.lua: cancel a task: a ready, delayed or retry-scheduled one is removed and
-- recorded CANCELLED (it never runs); a running one is marked for its worker to abort.
-- KEYS[1] tasks hash   KEYS[2] the task's queue list   KEYS[3] delayed zset
-- KEYS[4] owners hash   KEYS[5] deliveries hash   KEYS[6] failed zset
-- KEYS[7] quarantine zset   KEYS[8] the task's result key   KEYS[9] its done list
-- KEYS[10] its abort mark   KEYS[11] optional de-duplication key of the task, released
-- if it still names the task
-- ARGV[1] task id   ARGV[2] the CANCELLED result JSON ('' when the task keeps none)
-- ARGV[3] result TTL ms (also the abort mark's)
-- One script with the worker's claim (queue_dequeue.lua): a task is either taken by a
-- worker or cancelled here, never both.
-- Returns 'cancelled', 'aborting' (a worker holds it: marked), 'finished' (it ended, or
-- it is failed or quarantined) or 'unknown' (no such task, or it ended keeping no result).
local id = ARGV[1]
if redis.call('hget', KEYS[4], id) then
  -- The worker's heartbeat reads the mark (queue_extend.lua).
  redis.call('set', KEYS[10], 1, 'PX', ARGV[3])
  return 'aborting'
end
if redis.call('hexists', KEYS[1], id) == 0 then
  if redis.call('exists', KEYS[9]) == 1 then return 'finished' end
  return 'unknown'
end
if redis.call('zscore', KEYS[6], id) or redis.call('zscore', KEYS[7], id) then
  return 'finished'
end
-- The record first: over maxmemory it is refused before anything changes (lua/__init__.py).
if ARGV[2] ~= '' then
  redis.call('set', KEYS[8], ARGV[2], 'PX', ARGV[3])
  redis.call('rpush', KEYS[9], 1)
  redis.call('pexpire', KEYS[9], ARGV[3])
end
redis.call('lrem', KEYS[2], 0, id)
redis.call('zrem', KEYS[3], id)
redis.call('hdel', KEYS[1], id)
redis.call('hdel', KEYS[5], id)
if KEYS[11] and redis.call('get', KEYS[11]) == id then redis.call('del', KEYS[11]) end
return 'cancelled'
