-- chat_join.lua: add a member positioned at the chat's latest message, noting it as the
-- member's start: the history shows them the messages after it.
-- KEYS[1] members zset (rp:chat:{id}:members)   KEYS[2] message id counter (rp:chat:{id}:ids)
-- KEYS[3] joined hash member -> id of the last message before they joined (rp:chat:{id}:joined)
-- ARGV[1] user
-- Returns the member's position (unchanged for an existing member), -2 when the chat
-- does not exist.
if redis.call('exists', KEYS[1]) == 0 then
  return -2
end
local seen = redis.call('zscore', KEYS[1], ARGV[1])
if seen then
  return tonumber(seen)
end
local last = tonumber(redis.call('get', KEYS[2]) or '0')
redis.call('zadd', KEYS[1], last, ARGV[1])
if last > 0 then
  redis.call('hset', KEYS[3], ARGV[1], last)
end
return last
