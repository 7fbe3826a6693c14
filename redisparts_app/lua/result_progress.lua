-- result_progress.lua: record a running task's progress in its result, if its worker
-- still holds it (a task reaped and run elsewhere keeps the other run's record).
-- KEYS[1] owners hash (id -> worker id)   KEYS[2] the task's result key
-- ARGV[1] task id   ARGV[2] worker id   ARGV[3] result JSON (RUNNING, with the progress)
-- ARGV[4] result TTL ms
-- Returns 1 when written, 0 when the worker no longer holds the task.
if redis.call('hget', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('set', KEYS[2], ARGV[3], 'PX', ARGV[4])
return 1
