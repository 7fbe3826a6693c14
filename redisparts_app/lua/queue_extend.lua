-- queue_extend.lua: push back the lease deadline of the tasks a worker still holds, and
-- (with KEYS[3]) record that the worker is alive: its heartbeat.
-- KEYS[1] in-flight zset (id -> lease deadline ms)   KEYS[2] owners hash (id -> worker id)
-- KEYS[3] optional workers hash (worker id -> last heartbeat ms, server clock)
-- KEYS[4..] optional, with KEYS[3]: the abort mark of each task of ARGV[3..], in order
-- ARGV[1] worker id   ARGV[2] lease ms from now   ARGV[3..] task ids
-- Returns the ids the worker no longer holds (reaped or deleted); those are left alone.
-- With the abort marks: {those ids, the ids of held tasks marked for abort}.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if KEYS[3] then redis.call('hset', KEYS[3], ARGV[1], now) end
local deadline = now + tonumber(ARGV[2])
local lost, aborting = {}, {}
for i = 3, #ARGV do
  local id = ARGV[i]
  if redis.call('hget', KEYS[2], id) == ARGV[1] and redis.call('zscore', KEYS[1], id) then
    redis.call('zadd', KEYS[1], deadline, id)
    if KEYS[i + 1] and redis.call('exists', KEYS[i + 1]) == 1 then
      aborting[#aborting + 1] = id
    end
  else
    lost[#lost + 1] = id
  end
end
if #KEYS > 3 then return {lost, aborting} end
return lost
