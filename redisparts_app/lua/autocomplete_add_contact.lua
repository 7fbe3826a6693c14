-- autocomplete_add_contact.lua: move a contact to the front of a user's recent list, count a pick.
-- KEYS[1] recent list (rp:ac:{user}:recent)   KEYS[2] pick counts zset (rp:ac:{user}:picks)
-- ARGV[1] contact name   ARGV[2] most recent contacts kept   ARGV[3] most pick counts kept
-- Returns the contact's pick count after this pick.
local recent, picks, name = KEYS[1], KEYS[2], ARGV[1]
local keep_recent, keep_picks = tonumber(ARGV[2]), tonumber(ARGV[3])
-- ZINCRBY first: over maxmemory it is refused before anything changes (lua/__init__.py).
local count = redis.call('ZINCRBY', picks, 1, name)
redis.call('LREM', recent, 0, name)
redis.call('LPUSH', recent, name)
redis.call('LTRIM', recent, 0, keep_recent - 1)
local excess = redis.call('ZCARD', picks) - keep_picks
if excess > 0 then
  -- Drop the least picked, never the contact just picked (it could tie with them).
  local removed = 0
  for _, member in ipairs(redis.call('ZRANGE', picks, 0, excess)) do
    if removed < excess and member ~= name then
      redis.call('ZREM', picks, member)
      removed = removed + 1
    end
  end
end
return tonumber(count)
