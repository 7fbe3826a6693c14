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
-- Returns {code, value}:
--   { 1, price}  bought: money moved, listing removed, item in the buyer's inventory,
--                sale record in the outbox
--   { 0, price}  refused: the listed price is not the expected one (value: actual price)
--   {-1, 0}      refused: not listed
--   {-2, funds}  refused: the buyer's funds are below the price
--   {-3, 0}      refused: unknown buyer
--   {-4, 0}      refused: the buyer already holds or lists an item of that name
local listed = redis.call('zscore', KEYS[1], ARGV[1])
if not listed then
  return {-1, 0}
end
local price = tonumber(listed)
if price ~= tonumber(ARGV[3]) then
  return {0, price}
end
local funds = redis.call('hget', KEYS[2], 'funds')
if not funds then
  return {-3, 0}
end
funds = tonumber(funds)
if funds < price then
  return {-2, funds}
end
if redis.call('sismember', KEYS[4], ARGV[2]) == 1 or redis.call('zscore', KEYS[1], ARGV[4]) then
  return {-4, 0}
end
redis.call('hincrby', KEYS[2], 'funds', -price)
redis.call('hincrby', KEYS[3], 'funds', price)
redis.call('zrem', KEYS[1], ARGV[1])
redis.call('sadd', KEYS[4], ARGV[2])
redis.call('zadd', KEYS[5], ARGV[6], ARGV[5])
return {1, price}
