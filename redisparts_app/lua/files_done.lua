-- files_done.lua: a processor reports a file finished; the last one deletes the file.
-- KEYS[1] done counter (rp:files:{<channel>#<n>}:done)
-- KEYS[2..] the file's chunk keys (rp:files:{<channel>#<n>}:chunk:<i>)
-- ARGV[1] number of processors
-- Returns the processors done so far (the file's keys are gone once it reaches
-- ARGV[1]), or -1 when the file is already gone.
if redis.call('exists', KEYS[1]) == 0 then
  return -1
end
local done = redis.call('incr', KEYS[1])
if done >= tonumber(ARGV[1]) then
  -- unpack() has a stack limit: delete in slices.
  for first = 1, #KEYS, 1000 do
    redis.call('del', unpack(KEYS, first, math.min(first + 999, #KEYS)))
  end
end
return done
