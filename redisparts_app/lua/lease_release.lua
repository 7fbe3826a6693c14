-- lease_release.lua: delete a lease, only for its owner, and wake one waiter.
-- KEYS[1] lease key (holds the owner token)
-- KEYS[2] optional wake-up list, same hash tag (e.g. rp:lock:{name}:signal)
-- ARGV[1] owner token   ARGV[2] TTL of the wake-up list in milliseconds
-- Returns 1 when released, 0 when the key is gone or holds another token.
-- The wake-up list keeps at most one element: one release wakes one BLPOP waiter.
-- A waiter blocked in BLPOP means an empty list, so a release pushes only to an empty
-- list; an element already there (a release nobody waited for) wakes the next waiter
-- at once, and expires soon otherwise. Uncontended releases then write nothing to it.
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
if #KEYS > 1 and redis.call('llen', KEYS[2]) == 0 then
  redis.call('lpush', KEYS[2], '1')
  redis.call('pexpire', KEYS[2], ARGV[2])
end
return 1
