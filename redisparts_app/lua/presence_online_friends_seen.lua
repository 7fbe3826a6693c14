-- presence_online_friends_seen.lua: friends active in the window, from the last-seen zset.
-- KEYS[1] the user's friends set (rp:presence:{presence}:friends:<user>)
-- KEYS[2] last-seen zset (rp:presence:{presence}:seen), user -> last seen (Unix seconds)
-- ARGV[1] window start (Unix seconds)
-- Returns the online friends (array of user names, any order).
local start = tonumber(ARGV[1])
local online = {}
for _, friend in ipairs(redis.call('smembers', KEYS[1])) do
  local seen = redis.call('zscore', KEYS[2], friend)
  if seen and tonumber(seen) >= start then
    online[#online + 1] = friend
  end
end
return online
