-- log_common_read.lua: read the common log of one hour, whichever zset holds it now.
-- KEYS[1] common zset (rp:log:{<name>}:common:<severity>)   KEYS[2] its :last zset
-- KEYS[3] hour start of KEYS[1] (:start)                    KEYS[4] hour start of KEYS[2] (:pstart)
-- ARGV[1] the wanted hour start (epoch seconds)   ARGV[2] last rank to return (-1: all)
-- Returns ZREVRANGE ... WITHSCORES of the zset holding that hour, or an empty list when
-- neither does (nothing was logged in it, or it is older than the previous hour).
local wanted = tonumber(ARGV[1])
if tonumber(redis.call('get', KEYS[3])) == wanted then
  return redis.call('zrevrange', KEYS[1], 0, tonumber(ARGV[2]), 'withscores')
end
if tonumber(redis.call('get', KEYS[4])) == wanted then
  return redis.call('zrevrange', KEYS[2], 0, tonumber(ARGV[2]), 'withscores')
end
return {}
