-- queue_settle.lua: record the outcome of a delivered task, if its worker still holds it.
-- KEYS[1] tasks hash   KEYS[2] in-flight zset   KEYS[3] owners hash   KEYS[4] deliveries hash
-- KEYS[5] delayed zset (id -> due ms)   KEYS[6] failed zset (id -> failed at ms)
-- KEYS[7] errors hash (id -> error JSON)   KEYS[8] scheduler wake list
-- KEYS[9] the task's result key   KEYS[10] its done list (see services/tasks/results.py)
-- KEYS[11] its abort mark (queue_cancel.lua)
-- KEYS[12] optional de-duplication key of the task, released unless retried if it
-- still names the task
-- ARGV[1] task id   ARGV[2] worker id
-- ARGV[3] outcome: done | retry | fail | expired | cancelled
-- ARGV[4] retry: updated task JSON; fail: error JSON   ARGV[5] retry: delay ms
-- ARGV[6] result JSON ('' for none: a retry, or a task that keeps no result)
-- ARGV[7] result TTL ms   ARGV[8] retry: the CANCELLED result JSON ('' for none)
-- The result is written with the outcome, in this one step: never an outcome recorded
-- without its result, nor a result of a task that will run again. A retry of a task
-- marked for abort is recorded cancelled instead: a cancelled task never runs again.
-- Returns 1 when settled (2: a retry recorded cancelled), 0 when the worker no longer
-- holds the task (its lease expired and it was reaped, or it was deleted); the task is
-- then left as it is.
local id, outcome, result, settled = ARGV[1], ARGV[3], ARGV[6], 1
if redis.call('hget', KEYS[3], id) ~= ARGV[2] then return 0 end
redis.call('zrem', KEYS[2], id)
redis.call('hdel', KEYS[3], id)
if outcome == 'retry' and redis.call('exists', KEYS[11]) == 1 then
  outcome, result, settled = 'cancelled', ARGV[8], 2
end
if outcome ~= 'retry' then redis.call('del', KEYS[11]) end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if outcome == 'done' or outcome == 'expired' or outcome == 'cancelled' then
  redis.call('hdel', KEYS[1], id)
  redis.call('hdel', KEYS[4], id)
elseif outcome == 'retry' then
  redis.call('hset', KEYS[1], id, ARGV[4])
  redis.call('zadd', KEYS[5], now + tonumber(ARGV[5]), id)
  redis.call('lpush', KEYS[8], 1)
  redis.call('ltrim', KEYS[8], 0, 0)
  -- The failed try's progress, if it reported any, is not the next try's.
  redis.call('del', KEYS[9])
else
  redis.call('zadd', KEYS[6], now, id)
  redis.call('hset', KEYS[7], id, ARGV[4])
end
if result ~= '' then
  redis.call('set', KEYS[9], result, 'PX', ARGV[7])
  -- A new list: an earlier run's is cleared by the requeue or enqueue that reused the id.
  redis.call('rpush', KEYS[10], 1)
  redis.call('pexpire', KEYS[10], ARGV[7])
end
if KEYS[12] and outcome ~= 'retry' and redis.call('get', KEYS[12]) == id then
  redis.call('del', KEYS[12])
end
return settled
