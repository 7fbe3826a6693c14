-- autocomplete_leave.lua: remove a name and all its index entries from a guild.
-- KEYS[1] index zset (rp:ac:{guild}:members)   KEYS[2] names hash (rp:ac:{guild}:names)
-- ARGV[1] name as written
-- Returns 1 when the name was a member, 0 otherwise.
local index, registry, name = KEYS[1], KEYS[2], ARGV[1]
local old = redis.call('HGET', registry, name)
if not old then return 0 end
for start in string.gmatch(old, '[^%z]+') do
  redis.call('ZREM', index, start .. '\0' .. name)
end
redis.call('HDEL', registry, name)
return 1
