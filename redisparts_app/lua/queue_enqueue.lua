-- queue_enqueue.lua: store a task and make it ready now or due later, optionally de-duplicated.
-- KEYS[1] tasks hash (id -> task JSON)
-- KEYS[2] the task's queue list (ids); when delayed, the delayed zset (id -> due ms)
-- KEYS[3] set of the group's queue names
-- KEYS[4] worker wake list; when delayed, the scheduler's wake list
-- KEYS[5] optional de-duplication key
-- ARGV[1] task id   ARGV[2] task JSON   ARGV[3] queue name   ARGV[4] wake list length cap
-- ARGV[5] optional: delay ms (absent or 0: ready now)
-- ARGV[6] de-duplication TTL ms (with KEYS[5])
-- ARGV[7] optional: 1 puts a ready task at the head of its queue (a higher priority)
-- The common case (ready now, no de-duplication) passes ARGV[1..4] and KEYS[1..4] only.
-- The key is released when the task is done or fails for good (the TTL bounds it).
-- Returns 1 when stored, else the id of the task holding the de-duplication key.
if KEYS[5] then
  local holder = redis.call('get', KEYS[5])
  if holder then return holder end
end
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
local delay = tonumber(ARGV[5] or 0)
if delay > 0 then
  redis.call('sadd', KEYS[3], ARGV[3])
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('zadd', KEYS[2], now + delay, ARGV[1])
  -- One token is enough: a woken scheduler recomputes its next wake-up time.
  redis.call('lpush', KEYS[4], 1)
  redis.call('ltrim', KEYS[4], 0, 0)
else
  -- The group's set of queue names gets the queue when its list is made (never removed).
  local ready = redis.call(ARGV[7] == '1' and 'lpush' or 'rpush', KEYS[2], ARGV[1])
  if ready == 1 then redis.call('sadd', KEYS[3], ARGV[3]) end
  -- One token per ready task, at most cap. Tokens are all alike, so a full list is left
  -- as it is (a push and a trim would leave the same list); a queue holding fewer than
  -- cap tasks is the common case, where the push alone runs.
  local cap = tonumber(ARGV[4])
  if ready < cap or redis.call('llen', KEYS[4]) < cap then
    if redis.call('lpush', KEYS[4], 1) > cap then redis.call('ltrim', KEYS[4], 0, cap - 1) end
  end
end
-- Taken last: a script stopped by an error before this point leaves no key behind that
-- would turn away enqueues of a task that was never stored.
if KEYS[5] then redis.call('set', KEYS[5], ARGV[1], 'PX', ARGV[6]) end
return 1
