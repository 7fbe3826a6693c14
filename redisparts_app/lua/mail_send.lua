-- mail_send.lua: store one message in a mailbox and drop the oldest beyond the cap.
-- KEYS[1] id counter (rp:mail:{user}:ids)    KEYS[2] box zset id -> id (rp:mail:{user}:box)
-- KEYS[3] messages hash id -> JSON (rp:mail:{user}:msgs)
-- KEYS[4] unread set of ids (rp:mail:{user}:unread)
-- ARGV[1] message JSON object without its id, e.g. {"sender":"ann",...}
-- ARGV[2] most messages kept in the mailbox
-- Returns the new message id.
local id = redis.call('incr', KEYS[1])
local text = string.format('{"id":%d,', id) .. string.sub(ARGV[1], 2)
redis.call('hset', KEYS[3], id, text)
redis.call('zadd', KEYS[2], id, id)
redis.call('sadd', KEYS[4], id)
local excess = redis.call('zcard', KEYS[2]) - tonumber(ARGV[2])
if excess > 0 then
  local old = redis.call('zrange', KEYS[2], 0, excess - 1)
  redis.call('zremrangebyrank', KEYS[2], 0, excess - 1)
  redis.call('hdel', KEYS[3], unpack(old))
  redis.call('srem', KEYS[4], unpack(old))
end
return id
