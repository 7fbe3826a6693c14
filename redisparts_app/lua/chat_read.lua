-- chat_read.lua: read a chat for a member without moving the member's position.
-- KEYS[1] members zset (rp:chat:{id}:members)   KEYS[2] pending messages zset (rp:chat:{id}:msgs)
-- KEYS[3] history zset (rp:chat:{id}:history)   KEYS[4] joined hash (rp:chat:{id}:joined)
-- ARGV[1] user   ARGV[2] mode:
--   'history' the newest history messages older than id ARGV[3] (0: the newest), newest first
--   'after'   the pending messages (some member has not fetched them) after id ARGV[3],
--             oldest first
--   'unread'  the count of messages after the member's position
--   'summary' the count of unread messages, the newest message (history, else pending
--             as for 'after'; '' when none) and the member names
-- ARGV[4] most messages to return ('history', 'after')
-- A member who joined a running chat reads only the messages sent after their join.
-- Returns {position, json1, ...}, {position, count} for 'unread', {position, count, json,
-- member1, ...} for 'summary'; {-1} when the user is not a member, {-2} when the chat
-- does not exist.
local seen = redis.call('zscore', KEYS[1], ARGV[1])
if not seen then
  if redis.call('exists', KEYS[1]) == 0 then return {-2} end
  return {-1}
end
local out = {tonumber(seen)}
local mode = ARGV[2]
if mode == 'unread' or mode == 'summary' then
  out[2] = redis.call('zcount', KEYS[2], '(' .. seen, '+inf')
  if mode == 'unread' then return out end
end
local start = tonumber(redis.call('hget', KEYS[4], ARGV[1]) or '0')
-- The pending messages some member has not fetched are those above the lowest position:
-- the ones up to it, which every member has fetched, stay until the next send or leave.
local function above_lowest(after)
  local lowest = redis.call('zrange', KEYS[1], '0', '0', 'WITHSCORES')[2]
  return math.max(after, tonumber(lowest))
end
local found
if mode == 'summary' then
  local newest = redis.call('zrevrangebyscore', KEYS[3], '+inf', '(' .. start, 'LIMIT', 0, 1)
  if #newest == 0 then
    local after = above_lowest(start)
    newest = redis.call('zrevrangebyscore', KEYS[2], '+inf', '(' .. after, 'LIMIT', 0, 1)
  end
  out[3] = newest[1] or ''
  found = redis.call('zrange', KEYS[1], 0, -1)
elseif mode == 'history' then
  local before = ARGV[3] == '0' and '+inf' or '(' .. ARGV[3]
  found = redis.call('zrevrangebyscore', KEYS[3], before, '(' .. start, 'LIMIT', 0,
    tonumber(ARGV[4]))
else
  local after = ARGV[3]  -- as sent: a Lua number loses digits when turned into text
  local from = above_lowest(start)
  if tonumber(after) < from then after = from end
  found = redis.call('zrangebyscore', KEYS[2], '(' .. after, '+inf', 'LIMIT', 0,
    tonumber(ARGV[4]))
end
for _, value in ipairs(found) do
  out[#out + 1] = value
end
return out
