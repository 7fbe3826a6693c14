-- lease_acquire.lua: take a lease and draw its fencing token in one atomic step.
-- KEYS[1] lease key, holds the owner token (e.g. rp:lock:{name}:owner)
-- KEYS[2] fence counter, same hash tag, never expires (e.g. rp:lock:{name}:fence)
-- ARGV[1] owner token   ARGV[2] lease TTL in milliseconds
-- Returns {1, fence} when acquired, fence being the counter after INCR (>= 1);
--         {0, pttl} when someone else holds it, pttl being the holder's remaining
--         milliseconds (-1 when the key has no TTL, -2 when it vanished meanwhile).
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('incr', KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}
