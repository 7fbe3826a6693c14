-- geoip_find.lua: find the block holding an address and its city, in one atomic step.
-- KEYS[1] blocks zset (rp:geoip:{geoip}:blocks): member "<geoname_id>:<last address>:<row>",
--         score = first address of the block as an integer
-- KEYS[2] cities hash (rp:geoip:{geoip}:cities): geoname_id -> city JSON
-- ARGV[1] the address as an integer
-- Returns false when no block starts at or before the address, else
-- {member of the nearest block starting at or before it, city JSON or false}.
-- One script, so a lookup never pairs a block of one import with the cities of another.
local found = redis.call('zrevrangebyscore', KEYS[1], ARGV[1], '-inf', 'LIMIT', 0, 1)
if #found == 0 then
  return false
end
local member = found[1]
local geoname_id = string.match(member, '^([^:]+):')
return {member, redis.call('hget', KEYS[2], geoname_id)}
