-- chat_send.lua: give a message the chat's next id and add it, in one step, so ids
-- enter the messages zset in increasing order whatever the number of senders.
-- KEYS[1] members zset (rp:chat:{id}:members)   KEYS[2] messages zset (rp:chat:{id}:msgs)
-- KEYS[3] message id counter (rp:chat:{id}:ids)
-- ARGV[1] sender   ARGV[2] message JSON object without its id
-- Returns the message id, -1 when the sender is not a member, -2 when the chat does not exist.
if not redis.call('zscore', KEYS[1], ARGV[1]) then
  if redis.call('exists', KEYS[1]) == 0 then return -2 end
  return -1
end
local id = redis.call('incr', KEYS[3])
redis.call('zadd', KEYS[2], id, string.format('{"id":%d,', id) .. string.sub(ARGV[2], 2))
return id
