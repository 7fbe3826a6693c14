-- chat_fetch.lua: take a member's pending messages of one chat, advance the member's
-- position past them and delete the messages every member has now read.
-- KEYS[1] members zset user -> last seen id (rp:chat:{id}:members)
-- KEYS[2] messages zset (rp:chat:{id}:msgs)
-- ARGV[1] user   ARGV[2] most messages to take
-- Returns {position, json1, json2, ...} with the member's new position (the last id
-- taken, or the old position when nothing was pending); {-1} when the user is not a
-- member, {-2} when the chat does not exist.
local seen = redis.call('zscore', KEYS[1], ARGV[1])
if not seen then
  if redis.call('exists', KEYS[1]) == 0 then return {-2} end
  return {-1}
end
local found = redis.call('zrangebyscore', KEYS[2], '(' .. seen, '+inf', 'WITHSCORES',
  'LIMIT', 0, tonumber(ARGV[2]))
local out = {tonumber(seen)}
if #found == 0 then
  return out
end
for i = 1, #found, 2 do
  out[#out + 1] = found[i]
end
out[1] = tonumber(found[#found])
redis.call('zadd', KEYS[1], 'XX', found[#found], ARGV[1])
local lowest = redis.call('zrange', KEYS[1], 0, 0, 'WITHSCORES')
redis.call('zremrangebyscore', KEYS[2], '-inf', lowest[2])
return out
