-- mail_mark_read.lua: mark one message read.
-- KEYS[1] messages hash (rp:mail:{user}:msgs)   KEYS[2] unread set (rp:mail:{user}:unread)
-- ARGV[1] message id
-- Returns -1 when the message does not exist, 1 when it was unread, 0 when already read.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return -1
end
return redis.call('srem', KEYS[2], ARGV[1])
