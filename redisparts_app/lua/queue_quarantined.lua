-- queue_quarantined.lua: record the FAILED result of a task the reaper quarantined, if
-- it is still in quarantine (not requeued or deleted since).
-- KEYS[1] quarantine zset   KEYS[2] the task's result key   KEYS[3] its done list
-- ARGV[1] task id   ARGV[2] result JSON   ARGV[3] result TTL ms
-- Returns 1 when written, 0 when the task is no longer quarantined.
if not redis.call('zscore', KEYS[1], ARGV[1]) then return 0 end
redis.call('set', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('rpush', KEYS[3], 1)
redis.call('pexpire', KEYS[3], ARGV[3])
return 1
