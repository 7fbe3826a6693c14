-- chat_fetch.lua: take a member's pending messages of one or more chats and advance the
-- member's position in each past them. The messages every member has read leave at the
-- chat's next send or leave (chat_send, chat_leave), which keeps the fetch to three
-- commands per chat.
-- KEYS[2i-1] members zset of chat i: user -> last seen id (rp:chat:{id}:members)
-- KEYS[2i]   messages zset of chat i (rp:chat:{id}:msgs)
-- ARGV[1] user   ARGV[2] most messages to take per chat
-- Or, on one server, the user's own list first (an odd number of KEYS): KEYS[1] the user's zset of chats
-- (rp:chat_user:{user}:seen), then the chats' keys as above, and ARGV[3] the ids of those
-- chats joined by ':', in the zset's order. When the zset lists other chats (it changed
-- since the caller read it), nothing is taken and the reply is {-3, chat id, ...}: the
-- chats it lists.
-- Returns one flat array: for each chat, in KEYS order, the number of messages taken
-- (-1 when the user is not a member, -2 when the chat does not exist), then the JSON
-- of every message taken, chat after chat, joined by ',' (a JSON array's body). Flat
-- and joined because a reply holding one array per chat costs far more to deliver.
-- On a Redis Cluster the chats of one call share a slot; on one server any chats do.
-- Arguments go to redis.call as the strings they are: a Lua number is turned into text
-- with sprintf at every call, the most costly step of a command this small.
local call, user, limit = redis.call, ARGV[1], ARGV[2]
local first = 1
if #KEYS % 2 == 1 then
  local chats = call('zrange', KEYS[1], '0', '-1')
  if table.concat(chats, ':') ~= ARGV[3] then  -- chat ids have no ':'
    table.insert(chats, 1, -3)
    return chats
  end
  first = 2
end
local counts, taken, n, t = {}, {}, 0, 0
for k = first, #KEYS, 2 do
  local members = KEYS[k]
  local seen = call('zscore', members, user)
  n = n + 1
  if not seen then
    counts[n] = call('exists', members) == 0 and -2 or -1
  else
    local out = call('zrangebyscore', KEYS[k + 1], '(' .. seen, '+inf', 'LIMIT', '0', limit)
    local count = #out
    counts[n] = count
    if count > 0 then
      local last = out[count]
      -- chat_send and chat_create write every message as '{"id":<id>,...'.
      call('zadd', members, 'XX', string.match(last, '^{"id":(%d+)'), user)
      t = t + 1
      taken[t] = count == 1 and last or table.concat(out, ',')
    end
  end
end
counts[n + 1] = table.concat(taken, ',')
return counts
