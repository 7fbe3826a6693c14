-- presence_online_friends.lua: friends active in the window, from the per-minute sets.
-- KEYS[1] the user's friends set (rp:presence:{presence}:friends:<user>)
-- KEYS[2..] the per-minute sets of the current window (rp:presence:{presence}:minute:<n>)
-- Returns the online friends (array of user names, any order).
-- One SINTER per minute, each as costly as the smaller of the two sets, and no write: it
-- answers on a Redis over its maxmemory or a read-only replica too.
local online, seen = {}, {}
for i = 2, #KEYS do
  for _, name in ipairs(redis.call('sinter', KEYS[1], KEYS[i])) do
    if not seen[name] then
      seen[name] = true
      online[#online + 1] = name
    end
  end
end
return online
