-- market_purchase.lua: buy one listed item at the price the buyer saw, and record the sale
-- in the outbox, in one step.
-- KEYS[1] listings zset   (rp:market:{market}:listings)
-- KEYS[2] buyer hash      (rp:market:{market}:user:<buyer>)
-- KEYS[3] seller hash     (rp:market:{market}:user:<seller>)
-- KEYS[4] buyer inventory (rp:market:{market}:inventory:<buyer>)
-- KEYS[5] outbox zset     (rp:market:{market}:outbox)
-- ARGV[1] listing member "<item>:<seller>"   ARGV[2] item   ARGV[3] expected price (cents)
-- ARGV[4] the buyer's own listing member "<item>:<buyer>"
-- ARGV[5] sale record (JSON)   ARGV[6] sold at (ms, the outbox score)
-- Returns 1 when bought: money moved, listing removed, item in the buyer's inventory, sale
-- record in the outbox. Refused:
--   -1           not listed
--   -3           unknown buyer
--   -4           the buyer already holds or lists an item of that name
--   {0, price}   the listed price is not the expected one (the actual price)
--   {-2, funds}  the buyer's funds are below the price
-- A plain integer where there is no figure to give: on Redis 6.2 a table reply costs the
-- script about a fifth of its time, and a purchase or a lost race is most calls.
local listed = redis.call('zscore', KEYS[1], ARGV[1])
if not listed then
  return -1
end
local price = tonumber(listed)
if price ~= tonumber(ARGV[3]) then
  return {0, price}
end
local funds = redis.call('hget', KEYS[2], 'funds')
if not funds then
  return -3
end
funds = tonumber(funds)
if funds < price then
  return {-2, funds}
end
if redis.call('sismember', KEYS[4], ARGV[2]) == 1 or redis.call('zscore', KEYS[1], ARGV[4]) then
  return -4
end
redis.call('hincrby', KEYS[2], 'funds', -price)
redis.call('hincrby', KEYS[3], 'funds', price)
redis.call('zrem', KEYS[1], ARGV[1])
redis.call('sadd', KEYS[4], ARGV[2])
redis.call('zadd', KEYS[5], ARGV[6], ARGV[5])
return 1
