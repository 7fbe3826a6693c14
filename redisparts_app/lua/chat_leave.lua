-- chat_leave.lua: remove a member; the last one out deletes the chat (its history too),
-- otherwise the messages every remaining member has read leave the pending messages.
-- KEYS[1] members zset (rp:chat:{id}:members)   KEYS[2] pending messages zset (rp:chat:{id}:msgs)
-- KEYS[3] message id counter (rp:chat:{id}:ids)   KEYS[4] history zset (rp:chat:{id}:history)
-- KEYS[5] joined hash (rp:chat:{id}:joined)   KEYS[6] push stream (rp:chat:{id}:push)
-- ARGV[1] user
-- Returns the number of members left (0: the chat was deleted), -1 when the user is not
-- a member, -2 when the chat does not exist.
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
  if redis.call('exists', KEYS[1]) == 0 then return -2 end
  return -1
end
local left = redis.call('zcard', KEYS[1])
if left == 0 then
  redis.call('del', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
  return 0
end
redis.call('hdel', KEYS[5], ARGV[1])
local lowest = redis.call('zrange', KEYS[1], 0, 0, 'WITHSCORES')
redis.call('zremrangebyscore', KEYS[2], '-inf', lowest[2])
return left
