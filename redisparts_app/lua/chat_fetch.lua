-- chat_fetch.lua: take a member's pending messages of one or more chats, advance the
-- member's position in each past them and delete the messages every member has now read.
-- KEYS[2i-1] members zset of chat i: user -> last seen id (rp:chat:{id}:members)
-- KEYS[2i]   messages zset of chat i (rp:chat:{id}:msgs)
-- ARGV[1] user   ARGV[2] most messages to take per chat
-- Returns one reply per chat, in KEYS order: {position, json1, json2, ...} with the
-- member's new position (the last id taken, or the old position when nothing was
-- pending); {-1} when the user is not a member, {-2} when the chat does not exist.
-- On a Redis Cluster the chats of one call share a slot; on one server any chats do.
local user, limit = ARGV[1], tonumber(ARGV[2])
local replies = {}
for k = 1, #KEYS, 2 do
  local members, msgs = KEYS[k], KEYS[k + 1]
  local seen = redis.call('zscore', members, user)
  local out
  if not seen then
    out = {redis.call('exists', members) == 0 and -2 or -1}
  else
    out = redis.call('zrangebyscore', msgs, '(' .. seen, '+inf', 'LIMIT', 0, limit)
    if #out == 0 then
      out[1] = tonumber(seen)
    else
      -- chat_send and chat_create write every message as '{"id":<id>,...'.
      local last = tonumber(string.match(out[#out], '^{"id":(%d+)'))
      -- Messages up to the lowest position are deleted already (by every fetch or leave
      -- that raised it); only a member alone at the lowest position raises it.
      local alone = redis.call('zcount', members, '-inf', seen) == 1
      redis.call('zadd', members, 'XX', last, user)
      if alone then
        local lowest = redis.call('zrange', members, 0, 0, 'WITHSCORES')
        redis.call('zremrangebyscore', msgs, '-inf', lowest[2])
      end
      table.insert(out, 1, last)
    end
  end
  replies[#replies + 1] = out
end
return replies
