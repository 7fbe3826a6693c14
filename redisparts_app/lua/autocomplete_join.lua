-- autocomplete_join.lua: add a name to a guild's index, replacing its previous entries.
-- KEYS[1] index zset (rp:ac:{guild}:members), members "<folded>\0<name>", score 0
-- KEYS[2] names hash (rp:ac:{guild}:names): name -> its folded word starts joined by "\0"
-- ARGV[1] name as written   ARGV[2..n] folded word starts of the name
-- Returns 1 when the name is new, 0 when it was already a member.
local index, registry, name = KEYS[1], KEYS[2], ARGV[1]
local old = redis.call('HGET', registry, name)
if old then
  for start in string.gmatch(old, '[^%z]+') do
    redis.call('ZREM', index, start .. '\0' .. name)
  end
end
local starts = {}
for i = 2, #ARGV do
  starts[#starts + 1] = ARGV[i]
  redis.call('ZADD', index, 0, ARGV[i] .. '\0' .. name)
end
redis.call('HSET', registry, name, table.concat(starts, '\0'))
if old then return 0 end
return 1
