-- log_recent.lua: push one entry onto a recent log and keep only the newest ones.
-- KEYS[1] recent list, newest first (rp:log:{<name>}:recent:<severity>)
-- ARGV[1] entry JSON   ARGV[2] entries kept   ARGV[3] TTL of the list, seconds
-- Returns the list's length after trimming.
redis.call('lpush', KEYS[1], ARGV[1])
redis.call('ltrim', KEYS[1], 0, tonumber(ARGV[2]) - 1)
redis.call('expire', KEYS[1], tonumber(ARGV[3]))
return redis.call('llen', KEYS[1])
