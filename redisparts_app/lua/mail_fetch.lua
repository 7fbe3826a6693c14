-- mail_fetch.lua: one page of a mailbox, newest first, with read flags and counts.
-- KEYS[1] box zset (rp:mail:{user}:box)   KEYS[2] messages hash (rp:mail:{user}:msgs)
-- KEYS[3] unread set (rp:mail:{user}:unread)
-- ARGV[1] offset (0 = newest)   ARGV[2] page size
-- Returns {total, unread, json1, unread1, json2, unread2, ...} (unreadN is 1 or 0).
local first = tonumber(ARGV[1])
local ids = redis.call('zrevrange', KEYS[1], first, first + tonumber(ARGV[2]) - 1)
local out = {redis.call('zcard', KEYS[1]), redis.call('scard', KEYS[3])}
for _, id in ipairs(ids) do
  out[#out + 1] = redis.call('hget', KEYS[2], id)
  out[#out + 1] = redis.call('sismember', KEYS[3], id)
end
return out
