-- registry_forget.lua: forget registered names that nobody noted since a cutoff.
-- KEYS[1] registry zset (name -> when last noted, Unix seconds)
-- ARGV[1] cutoff (Unix seconds)   ARGV[2..] names to forget
-- Returns how many names were forgotten. A name noted after the cutoff (by a process
-- that started using it while the caller looked) keeps its place.
local forgotten = 0
local cutoff = tonumber(ARGV[1])
for i = 2, #ARGV do
  local noted = redis.call('zscore', KEYS[1], ARGV[i])
  if noted and tonumber(noted) <= cutoff then
    forgotten = forgotten + redis.call('zrem', KEYS[1], ARGV[i])
  end
end
return forgotten
