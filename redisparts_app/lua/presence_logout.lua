-- presence_logout.lua: end one device's presence; drop the user if no other device is active.
-- KEYS[1] the user's devices zset (rp:presence:{presence}:devices:<user>), device -> last seen
-- KEYS[2] last-seen zset (rp:presence:{presence}:seen), user -> last seen
-- KEYS[3..] the per-minute sets of the current window (rp:presence:{presence}:minute:<n>)
-- ARGV[1] user   ARGV[2] device   ARGV[3] window start (Unix seconds)
-- Returns 1 when the user is now offline, 0 when another device keeps them online.
redis.call('zrem', KEYS[1], ARGV[2])
redis.call('zremrangebyscore', KEYS[1], '-inf', '(' .. ARGV[3])
if redis.call('zcard', KEYS[1]) > 0 then
  return 0
end
redis.call('del', KEYS[1])
redis.call('zrem', KEYS[2], ARGV[1])
for i = 3, #KEYS do
  redis.call('srem', KEYS[i], ARGV[1])
end
return 1
