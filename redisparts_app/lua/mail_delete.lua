-- mail_delete.lua: delete one message from a mailbox.
-- KEYS[1] box zset (rp:mail:{user}:box)   KEYS[2] messages hash (rp:mail:{user}:msgs)
-- KEYS[3] unread set (rp:mail:{user}:unread)
-- ARGV[1] message id
-- Returns 1 when deleted, 0 when the message does not exist.
if redis.call('hdel', KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.call('zrem', KEYS[1], ARGV[1])
redis.call('srem', KEYS[3], ARGV[1])
return 1
