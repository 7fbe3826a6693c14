-- stats_read.lua: read the statistics of one hour, whichever hash holds it now.
-- KEYS[1] statistics hash of the current hour (rp:stats:{<context>}:<kind>)
-- KEYS[2] statistics hash of the previous hour (...:last)
-- ARGV[1] the wanted hour start (epoch seconds)
-- Returns HGETALL of the hash whose hour field is ARGV[1], or an empty list.
local wanted = tonumber(ARGV[1])
for _, key in ipairs(KEYS) do
  if tonumber(redis.call('hget', key, 'hour')) == wanted then
    return redis.call('hgetall', key)
  end
end
return {}
