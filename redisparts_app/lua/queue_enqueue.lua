-- queue_enqueue.lua: store a task and make it ready now or due later, optionally de-duplicated.
-- KEYS[1] tasks hash (id -> task JSON)        KEYS[2] the task's queue list (ids)
-- KEYS[3] delayed zset (id -> due ms)          KEYS[4] set of the group's queue names
-- KEYS[5] worker wake list                     KEYS[6] scheduler wake list
-- KEYS[7] optional de-duplication key
-- ARGV[1] task id   ARGV[2] task JSON   ARGV[3] queue name   ARGV[4] delay ms (0: ready now)
-- ARGV[5] de-duplication TTL ms   ARGV[6] wake list length cap
-- ARGV[7] optional: 1 puts a ready task at the head of its queue (a higher priority)
-- The key is released when the task is done or fails for good (the TTL bounds it).
-- Returns {1, id} when stored, {0, id of the task holding the de-duplication key} otherwise.
if KEYS[7] then
  local holder = redis.call('get', KEYS[7])
  if holder then return {0, holder} end
end
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
local delay = tonumber(ARGV[4])
if delay > 0 then
  redis.call('sadd', KEYS[4], ARGV[3])
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('zadd', KEYS[3], now + delay, ARGV[1])
  -- One token is enough: a woken scheduler recomputes its next wake-up time.
  redis.call('lpush', KEYS[6], 1)
  redis.call('ltrim', KEYS[6], 0, 0)
else
  -- The group's set of queue names gets the queue when its list is made (never removed).
  local push = ARGV[7] == '1' and 'lpush' or 'rpush'
  if redis.call(push, KEYS[2], ARGV[1]) == 1 then redis.call('sadd', KEYS[4], ARGV[3]) end
  if redis.call('lpush', KEYS[5], 1) > tonumber(ARGV[6]) then
    redis.call('ltrim', KEYS[5], 0, tonumber(ARGV[6]) - 1)
  end
end
-- Taken last: a script stopped by an error before this point leaves no key behind that
-- would turn away enqueues of a task that was never stored.
if KEYS[7] then redis.call('set', KEYS[7], ARGV[1], 'PX', ARGV[5]) end
return {1, ARGV[1]}
