-- presence_online_friends.lua: friends active in the window, from the per-minute sets.
-- KEYS[1] the user's friends set (rp:presence:{presence}:friends:<user>)
-- KEYS[2] a temporary key, unused before the call (rp:presence:{presence}:tmp:<random>)
-- KEYS[3..] the per-minute sets of the current window (rp:presence:{presence}:minute:<n>)
-- Returns the online friends (array of user names, any order).
-- The union is stored in KEYS[2] and deleted before returning: a script runs to the end
-- once started, so the temporary key never outlives the call.
if redis.call('scard', KEYS[1]) == 0 then
  return {}
end
local minutes = {}
for i = 3, #KEYS do
  minutes[#minutes + 1] = KEYS[i]
end
redis.call('sunionstore', KEYS[2], unpack(minutes))
local online = redis.call('sinter', KEYS[2], KEYS[1])
redis.call('del', KEYS[2])
return online
