-- counter_trim.lua: delete the samples of one counter hash older than a cutoff.
-- KEYS[1] counter hash, bucket start (epoch seconds) -> count (rp:counter:{<name>}:<precision>)
-- ARGV[1] cutoff: buckets starting before it are deleted (epoch seconds)
-- Returns {samples deleted, samples left}. Atomic, so an increment of a kept bucket
-- arriving meanwhile is never lost; an emptied hash no longer exists.
local cutoff = tonumber(ARGV[1])
local old = {}
for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
  local start = tonumber(field)
  if start == nil or start < cutoff then
    old[#old + 1] = field
  end
end
-- HDEL in slices: unpack() of a huge table overflows Lua's stack.
for i = 1, #old, 1000 do
  redis.call('hdel', KEYS[1], unpack(old, i, math.min(i + 999, #old)))
end
return {#old, redis.call('hlen', KEYS[1])}
