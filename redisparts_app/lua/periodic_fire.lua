-- periodic_fire.lua: claim a slot of a periodic schedule and enqueue its task, at most once
-- per slot however many schedulers run this at the same moment.
-- KEYS[1] the schedule's hash (last = latest slot claimed, ms; paused; fired = JSON)
-- KEYS[2] tasks hash   KEYS[3] the task's queue list   KEYS[4] set of the group's queue names
-- KEYS[5] worker wake list
-- ARGV[1] slot ms   ARGV[2] 1: enqueue the task; 0: only move past the slot (a slot
-- skipped by catch_up="none", or the first one a new schedule sees)
-- ARGV[3] task id   ARGV[4] task JSON   ARGV[5] queue name   ARGV[6] wake list length cap
-- ARGV[7] fired JSON (slot, task id) kept for the admin
-- Returns 1 when the slot was claimed, 0 when the schedule is paused or a slot as late
-- or later was claimed already (by another scheduler, or before a pause or an edit).
if redis.call('hget', KEYS[1], 'paused') == '1' then return 0 end
local last = tonumber(redis.call('hget', KEYS[1], 'last') or '-1')
local slot = tonumber(ARGV[1])
if last >= slot then return 0 end
redis.call('hset', KEYS[1], 'last', ARGV[1])
if ARGV[2] ~= '1' then return 1 end
redis.call('hset', KEYS[1], 'fired', ARGV[7])
redis.call('hset', KEYS[2], ARGV[3], ARGV[4])
if redis.call('rpush', KEYS[3], ARGV[3]) == 1 then redis.call('sadd', KEYS[4], ARGV[5]) end
local cap = tonumber(ARGV[6])
if redis.call('lpush', KEYS[5], 1) > cap then redis.call('ltrim', KEYS[5], 0, cap - 1) end
return 1
