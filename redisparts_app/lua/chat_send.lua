-- chat_send.lua: give a message the chat's next id and add it, in one step, to the pending
-- messages, to the chat's history and to its push stream, so ids enter all three in
-- increasing order whatever the number of senders; also delete the pending messages every
-- member has fetched; with member names, create the chat with this first message.
-- KEYS[1] members zset user -> id of the last message fetched (rp:chat:{id}:members)
-- KEYS[2] pending messages zset JSON -> id (rp:chat:{id}:msgs)
-- KEYS[3] message id counter (rp:chat:{id}:ids)
-- KEYS[4] history zset JSON -> id (rp:chat:{id}:history)
-- KEYS[5] push stream, entry id <message id>-0, field m = message JSON (rp:chat:{id}:push)
-- ARGV[1] sender   ARGV[2] message JSON object without its id: {"sender":..,"ts":..,..}
-- ARGV[3] messages the history keeps (0: none)   ARGV[4] seconds it keeps one (0: no limit)
-- ARGV[5] entries the push stream keeps at least (approximate MAXLEN: whole nodes go)
-- ARGV[6..] when creating: the member names, all at position 0
-- Returns the message id; 0 when creating a chat that exists, -1 when the sender is not a
-- member, -2 when the chat does not exist.
local lowest
if #ARGV > 5 then
  if redis.call('exists', KEYS[1], KEYS[3]) > 0 then return 0 end
  for i = 6, #ARGV do
    redis.call('zadd', KEYS[1], 0, ARGV[i])
  end
else
  if not redis.call('zscore', KEYS[1], ARGV[1]) then
    if redis.call('exists', KEYS[1]) == 0 then return -2 end
    return -1
  end
  lowest = redis.call('zrange', KEYS[1], '0', '0', 'WITHSCORES')[2]
end
-- INCR is the script's first write: over maxmemory it fails before anything is written (a
-- script that has written once is let through to its end, even over maxmemory).
local id = redis.call('incr', KEYS[3])
if lowest then
  -- The messages every member has fetched (up to the lowest position, below the new id)
  -- leave here rather than in the fetch, which then costs three commands per chat.
  redis.call('zremrangebyscore', KEYS[2], '-inf', lowest)
end
local message = string.format('{"id":%d,', id) .. string.sub(ARGV[2], 2)
redis.call('zadd', KEYS[2], id, message)
-- The stream entry's id is the message id: a reader resumes from the last id it showed,
-- and ids without a gap tell it whether the trimming took messages it had not read.
redis.call('xadd', KEYS[5], 'MAXLEN', '~', ARGV[5], id .. '-0', 'm', message)

local keep, age = tonumber(ARGV[3]), tonumber(ARGV[4])
if keep > 0 then
  redis.call('zadd', KEYS[4], id, message)
end
-- A message's time: the first "ts": key (in the sender's JSON string a quote is escaped).
local function ts(json)
  return tonumber(string.match(json, '"ts":([^,}]+)'))
end
-- Bounded work per send: at most STEP messages leave the history. One more than the
-- length leaves at each send; after the settings are lowered the rest go over the next sends.
local STEP = 100
local drop = math.min(math.max(redis.call('zcard', KEYS[4]) - keep, 0), STEP)
if keep > 0 and age > 0 then
  local cutoff = ts(ARGV[2]) - age
  while drop < STEP do  -- one message at a time: usually the first is young enough
    local oldest = redis.call('zrange', KEYS[4], drop, drop)[1]
    local time = oldest and ts(oldest)
    if not time or time >= cutoff then break end
    drop = drop + 1
  end
  -- A chat quiet for longer than the age limit loses its whole history.
  redis.call('expire', KEYS[4], age)
elseif keep > 0 then
  redis.call('persist', KEYS[4])
end
if drop > 0 then
  redis.call('zremrangebyrank', KEYS[4], 0, drop - 1)
end
return id
