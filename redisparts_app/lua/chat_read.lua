-- chat_read.lua: read a chat's messages without moving the member's position.
-- KEYS[1] members zset (rp:chat:{id}:members)   KEYS[2] messages zset (rp:chat:{id}:msgs)
-- ARGV[1] user   ARGV[2] mode: 'history' (the latest messages up to the member's
-- position, newest first), 'after' (messages after ARGV[3], oldest first) or 'unread'
-- (the count of messages after the member's position)
-- ARGV[3] message id (mode 'after')   ARGV[4] most messages to return
-- Returns {position, json1, ...} or {position, count} for 'unread'; {-1} when the user
-- is not a member, {-2} when the chat does not exist.
local seen = redis.call('zscore', KEYS[1], ARGV[1])
if not seen then
  if redis.call('exists', KEYS[1]) == 0 then return {-2} end
  return {-1}
end
local out = {tonumber(seen)}
if ARGV[2] == 'unread' then
  out[2] = redis.call('zcount', KEYS[2], '(' .. seen, '+inf')
  return out
end
local found
if ARGV[2] == 'history' then
  found = redis.call('zrevrangebyscore', KEYS[2], seen, '-inf', 'LIMIT', 0, tonumber(ARGV[4]))
else
  found = redis.call('zrangebyscore', KEYS[2], '(' .. ARGV[3], '+inf', 'LIMIT', 0,
    tonumber(ARGV[4]))
end
for _, message in ipairs(found) do
  out[#out + 1] = message
end
return out
