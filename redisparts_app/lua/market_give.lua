-- market_give.lua: put a new item in a user's inventory unless the user already has one
-- of that name, held or listed.
-- KEYS[1] user hash      (rp:market:{market}:user:<user>)
-- KEYS[2] inventory set  (rp:market:{market}:inventory:<user>)
-- KEYS[3] listings zset  (rp:market:{market}:listings)
-- ARGV[1] item   ARGV[2] the user's listing member "<item>:<user>"
-- Returns 1 when given, 0 when already in the inventory, -1 when listed, -3 unknown user.
if redis.call('exists', KEYS[1]) == 0 then
  return -3
end
if redis.call('zscore', KEYS[3], ARGV[2]) then
  return -1
end
return redis.call('sadd', KEYS[2], ARGV[1])
