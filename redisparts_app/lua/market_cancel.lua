-- market_cancel.lua: withdraw a listing and put the item back in its seller's inventory.
-- KEYS[1] listings zset    (rp:market:{market}:listings)
-- KEYS[2] seller inventory (rp:market:{market}:inventory:<seller>)
-- ARGV[1] listing member "<item>:<seller>"   ARGV[2] item
-- Returns 1 when withdrawn, 0 when the item was not listed (sold or already withdrawn).
-- SADD first: over maxmemory it is refused before the listing goes (see lua/__init__.py).
if redis.call('zscore', KEYS[1], ARGV[1]) then
  redis.call('sadd', KEYS[2], ARGV[2])
  redis.call('zrem', KEYS[1], ARGV[1])
  return 1
end
return 0
