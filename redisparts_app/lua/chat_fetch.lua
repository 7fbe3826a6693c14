-- chat_fetch.lua: take a member's pending messages of one or more chats, advance the
-- member's position in each past them and delete the messages every member has now read.
-- KEYS[2i-1] members zset of chat i: user -> last seen id (rp:chat:{id}:members)
-- KEYS[2i]   messages zset of chat i (rp:chat:{id}:msgs)
-- ARGV[1] user   ARGV[2] most messages to take per chat
-- Returns one flat array: for each chat, in KEYS order, the number of messages taken
-- (-1 when the user is not a member, -2 when the chat does not exist), then the JSON
-- of every message taken, chat after chat, joined by ',' (a JSON array's body). Flat
-- and joined because a reply holding one array per chat costs far more to deliver.
-- On a Redis Cluster the chats of one call share a slot; on one server any chats do.
-- Arguments go to redis.call as the strings they are: a Lua number is turned into text
-- with sprintf at every call, the most costly step of a command this small.
local user, limit = ARGV[1], ARGV[2]
local counts, taken, n, t = {}, {}, 0, 0
for k = 1, #KEYS, 2 do
  local members, msgs = KEYS[k], KEYS[k + 1]
  local seen = redis.call('zscore', members, user)
  n = n + 1
  if not seen then
    counts[n] = redis.call('exists', members) == 0 and -2 or -1
  else
    local out = redis.call('zrangebyscore', msgs, '(' .. seen, '+inf', 'LIMIT', '0', limit)
    local count = #out
    counts[n] = count
    if count > 0 then
      -- chat_send and chat_create write every message as '{"id":<id>,...'.
      local last = string.match(out[count], '^{"id":(%d+)')
      -- Messages up to the lowest position are deleted already (by every fetch or leave
      -- that raised it); only a member alone at the lowest position raises it.
      local alone = redis.call('zcount', members, '-inf', seen) == 1
      redis.call('zadd', members, 'XX', last, user)
      if alone then
        local lowest = redis.call('zrange', members, '0', '0', 'WITHSCORES')
        redis.call('zremrangebyscore', msgs, '-inf', lowest[2])
      end
      t = t + 1
      taken[t] = table.concat(out, ',')
    end
  end
end
counts[n + 1] = table.concat(taken, ',')
return counts
