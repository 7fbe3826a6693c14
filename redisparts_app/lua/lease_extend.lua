-- lease_extend.lua: reset a lease's TTL, only for its owner.
-- KEYS[1] lease key (holds the owner token)
-- ARGV[1] owner token   ARGV[2] new TTL in milliseconds, counted from now
-- Returns 1 when extended, 0 when the key is gone or holds another token.
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
