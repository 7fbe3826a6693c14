-- queue_dequeue.lua: move up to ARGV[3] ready tasks, first queue first, to the in-flight
-- set, and record finished tasks as done: a worker's one round trip between two tasks.
-- KEYS[1] tasks hash   KEYS[2] in-flight zset (id -> lease deadline ms)
-- KEYS[3] owners hash (id -> worker id)   KEYS[4] deliveries hash (id -> count)
-- KEYS[5] worker wake list   KEYS[6..5+q] queue lists, highest priority first
-- KEYS[6+q..5+q+2l] for each limited queue: its permits zset (id -> ms taken), its log
-- of starts (zset start -> ms)
-- KEYS[6+q+2l..5+q+2l+2r] for each done task that keeps a result: its result key, its
-- done list
-- KEYS[6+q+2l+2r..] de-duplication keys of done tasks, released if they still name their
-- task
-- ARGV[1] worker id   ARGV[2] lease ms   ARGV[3] most tasks to take (0: only record)
-- ARGV[4] q, the number of queue lists   ARGV[5] n, the number of done task ids
-- ARGV[6] r, the number of results   ARGV[7] result TTL ms
-- ARGV[8] l, the number of limited queues   ARGV[9..8+4l] for each: its place among the
-- q queues, its number of permits, its number of starts per window, the window ms
-- (0 for a limit it does not have)
-- ARGV[9+4l..8+4l+n] done task ids   then for each result: its task id, its JSON
-- then for each de-duplication key, its task id
-- A limited queue (a task registered with a concurrency) gives a task only with a permit:
-- at most its number of tasks taken from it are in flight at once. A permit is held while
-- its task is in flight: one whose task left the in-flight set (ended, reaped, deleted)
-- is free, and dropped here; those of the done tasks are free for this claim already.
-- A rate limit is a sliding log of the claims' times: every window of its length holds
-- at most its number of starts (as lua/rate_limit.lua).
-- The tasks over a limit stay in their queue, holding no worker.
-- A result is written only for a task still held, in the step that records it done:
-- never a done task without its result, nor a result of a task that will run again.
-- Returns {ids no longer held (reaped or deleted; left as they are), {id, task JSON,
-- delivery count, id, ...}}; the second list is empty when every queue is empty.
-- A task delivered before (its worker died holding it, or it is a retry) is only ever
-- taken alone, so a task that kills its worker is the only one its deaths are counted on.
-- One wake-up token is dropped per task taken: tokens left stand for tasks still ready,
-- so idle workers are not woken for tasks a claim already took.
local worker, queues, done_count = ARGV[1], tonumber(ARGV[4]), tonumber(ARGV[5])
local results, limits = tonumber(ARGV[6]), tonumber(ARGV[8])
local first, permits_at = 9 + 4 * limits, 6 + queues
local wanted = tonumber(ARGV[3])
local taken = {}
local now
if wanted > 0 or limits > 0 then
  local t = redis.call('time')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Limited queues: place -> {permits key, tasks it may give, log of starts, window ms}
-- (false for a limit it does not have);
-- permits to drop once claimed;
-- the places of the queues a done task returns a permit to; the ids given one now.
local limited, finishing, dropped, returned, permitted = {}, {}, {}, {}, {}
if limits > 0 then
  if done_count > 0 then
    local ids = {unpack(ARGV, first, first - 1 + done_count)}
    local holders = redis.call('hmget', KEYS[3], unpack(ids))
    for j, id in ipairs(ids) do
      if holders[j] == worker then finishing[id] = true end
    end
  end
  for k = 0, limits - 1 do
    local key, log = KEYS[permits_at + 2 * k], KEYS[permits_at + 2 * k + 1]
    local place, permits = tonumber(ARGV[9 + 4 * k]), tonumber(ARGV[10 + 4 * k])
    local rate, window = tonumber(ARGV[11 + 4 * k]), tonumber(ARGV[12 + 4 * k])
    local free = wanted
    if permits > 0 then
      free = permits
      for _, id in ipairs(redis.call('zrange', key, 0, -1)) do
        if finishing[id] then returned[place] = true end
        if finishing[id] or not redis.call('zscore', KEYS[2], id) then
          dropped[#dropped + 1] = {key, id}
        else
          free = free - 1
        end
      end
    end
    if rate > 0 then
      -- Read only: the log's old starts are dropped after the claim (see below).
      free = math.min(free, rate - redis.call('zcount', log, '(' .. (now - window), '+inf'))
    end
    limited[place] = {permits = permits > 0 and key, free = free, log = rate > 0 and log,
                      window = window}
  end
end
-- The claim goes first: while a Cluster slot is being moved, a script may only touch
-- keys that exist, and recording the done tasks may delete a hash or the in-flight set
-- that the claim would then write (it writes them again only once the claim is done).
if wanted > 0 then
  local deadline = now + tonumber(ARGV[2])
  local ids, stamps, owners, counts, alone = {}, {}, {}, {}, false
  for i = 6, 5 + queues do
    local limit = limited[i - 5]
    local drained = false
    while not alone and not drained and #ids < wanted and (not limit or limit.free > 0) do
      local asked = wanted - #ids
      if limit then asked = math.min(asked, limit.free) end
      local popped = redis.call('lpop', KEYS[i], asked)
      if not popped then break end
      -- A short answer emptied the list, and Redis deleted it: no second LPOP, which on a
      -- Cluster slot being moved would fail on the missing key after this one wrote.
      drained = #popped < asked
      local bodies = redis.call('hmget', KEYS[1], unpack(popped))
      local before = redis.call('hmget', KEYS[4], unpack(popped))
      local rest = #popped + 1
      for j, id in ipairs(popped) do
        -- An id without a record was deleted while queued: drop it.
        if bodies[j] then
          local delivered = tonumber(before[j] or '0')
          alone = delivered > 0
          if alone and #ids > 0 then
            rest = j  -- left first in line, for a claim of its own
            break
          end
          ids[#ids + 1] = id
          stamps[#stamps + 1], stamps[#stamps + 2] = deadline, id
          owners[#owners + 1], owners[#owners + 2] = id, worker
          counts[#counts + 1], counts[#counts + 2] = id, delivered + 1
          taken[#taken + 1], taken[#taken + 2], taken[#taken + 3] = id, bodies[j], delivered + 1
          if limit then
            limit.free = limit.free - 1
            if limit.permits then
              redis.call('zadd', limit.permits, now, id)
              permitted[id] = true  -- a reaped task taken again: its old permit is its new one
            end
            if limit.log then
              redis.call('zadd', limit.log, now, now .. ':' .. id)
              redis.call('pexpire', limit.log, limit.window)
            end
          end
          if alone then
            rest = j + 1
            break
          end
        end
      end
      if rest <= #popped then
        local back = {}
        for j = #popped, rest, -1 do back[#back + 1] = popped[j] end
        redis.call('lpush', KEYS[i], unpack(back))
      end
    end
    if alone or #ids >= wanted then break end
  end
  if #ids > 0 then
    redis.call('zadd', KEYS[2], unpack(stamps))
    redis.call('hset', KEYS[3], unpack(owners))
    redis.call('hset', KEYS[4], unpack(counts))
    redis.call('ltrim', KEYS[5], #ids, -1)
  end
end
-- Dropped after the claim, which may have written the same keys (see above).
for _, permit in ipairs(dropped) do
  if not permitted[permit[2]] then redis.call('zrem', permit[1], permit[2]) end
end
for _, limit in pairs(limited) do
  if limit.log then redis.call('zremrangebyscore', limit.log, '-inf', now - limit.window) end
end
-- A permit a done task returns lets a task waiting in its queue run: wake a worker.
for place in pairs(returned) do
  if redis.call('llen', KEYS[5 + place]) > 0 and redis.call('llen', KEYS[5]) == 0 then
    redis.call('lpush', KEYS[5], 1)
  end
end
local lost = {}
if done_count > 0 then
  local ids = {unpack(ARGV, first, first - 1 + done_count)}
  local holders = redis.call('hmget', KEYS[3], unpack(ids))
  local done, held = {}, {}
  for j, id in ipairs(ids) do
    if holders[j] == worker then
      done[#done + 1] = id
      held[id] = true
    else
      lost[#lost + 1] = id
    end
  end
  if #done > 0 then
    redis.call('zrem', KEYS[2], unpack(done))
    redis.call('hdel', KEYS[3], unpack(done))
    redis.call('hdel', KEYS[1], unpack(done))
    redis.call('hdel', KEYS[4], unpack(done))
  end
  local at = first + done_count
  for j = 0, results - 1 do
    local id, key = ARGV[at + 2 * j], permits_at + 2 * limits + 2 * j
    if held[id] then
      redis.call('set', KEYS[key], ARGV[at + 2 * j + 1], 'PX', ARGV[7])
      -- A new list: an earlier run's is cleared by the requeue or enqueue that reused the id.
      redis.call('rpush', KEYS[key + 1], 1)
      redis.call('pexpire', KEYS[key + 1], ARGV[7])
    end
  end
  local dedup = permits_at + 2 * limits + 2 * results
  for k = dedup, #KEYS do
    local owner = ARGV[at + 2 * results + k - dedup]
    if held[owner] and redis.call('get', KEYS[k]) == owner then redis.call('del', KEYS[k]) end
  end
end
return {lost, taken}
