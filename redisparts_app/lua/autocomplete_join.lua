-- autocomplete_join.lua: add a name to a guild's index, replacing its previous entries.
-- KEYS[1] index zset (rp:ac:{guild}:members), members "<folded>\0<name>", score 0
-- KEYS[2] names hash (rp:ac:{guild}:names): name -> its folded word starts joined by "\0"
-- ARGV[1] name as written   ARGV[2..n] folded word starts of the name
-- Returns 1 when the name is new, 0 when it was already a member.
local index, registry, name = KEYS[1], KEYS[2], ARGV[1]
local old = redis.call('HGET', registry, name)
-- HSET first: over maxmemory it is refused before anything changes (lua/__init__.py).
redis.call('HSET', registry, name, table.concat({unpack(ARGV, 2)}, '\0'))
if old then
  for start in string.gmatch(old, '[^%z]+') do
    redis.call('ZREM', index, start .. '\0' .. name)
  end
end
for i = 2, #ARGV do
  redis.call('ZADD', index, 0, ARGV[i] .. '\0' .. name)
end
if old then return 0 end
return 1
