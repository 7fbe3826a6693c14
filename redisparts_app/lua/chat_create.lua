-- chat_create.lua: create a chat with its members at position 0 and its first message.
-- KEYS[1] members zset user -> last seen message id (rp:chat:{id}:members)
-- KEYS[2] messages zset JSON -> message id (rp:chat:{id}:msgs)
-- KEYS[3] message id counter (rp:chat:{id}:ids)
-- ARGV[1] first message JSON object without its id   ARGV[2..] member names
-- Returns the first message's id (1), or 0 when the chat already exists.
if redis.call('exists', KEYS[1], KEYS[3]) > 0 then
  return 0
end
for i = 2, #ARGV do
  redis.call('zadd', KEYS[1], 0, ARGV[i])
end
local id = redis.call('incr', KEYS[3])
redis.call('zadd', KEYS[2], id, string.format('{"id":%d,', id) .. string.sub(ARGV[1], 2))
return id
