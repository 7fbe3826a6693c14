-- market_notice_abandon.lua: drop a sale notice's sending claim if it is still ours.
-- KEYS[1] notice marker (rp:market:{market}:notice:<sale id>)
-- ARGV[1] the claim's value ("sending:<token>")
-- Returns 1 when dropped, 0 when the marker holds something else (sent, or another claim).
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
