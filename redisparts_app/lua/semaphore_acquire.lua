-- semaphore_acquire.lua: take a permit if one is free. Count and insert run as one atomic
-- step, which closes the race of the book's ZADD-then-ZRANK acquire.
-- KEYS[1] holders zset: holder id -> deadline, ms
-- KEYS[2] info hash: holder id -> JSON {"acquired_ms": ..., "ticket": ..., "reason": ...}
--         ("ticket" for fair semaphores only), and "limit" -> the limit of the last acquire
-- KEYS[3] (fair semaphores only) counter: last ticket handed out (no TTL: tickets only grow)
-- ARGV[1] holder id   ARGV[2] limit   ARGV[3] timeout, ms   ARGV[4] reason (absent: none)
-- ARGV[5] now, ms on the caller's clock; absent for the server's clock (TIME)
-- Returns 0 when the semaphore is full; when acquired, the permit's ticket (fair) or 1.
-- Times stay strings: a Lua number passed to redis.call costs the server a float formatting.
local call = redis.call
local now = ARGV[5]
if now == nil then
  local t = call('TIME')
  now = t[1] .. string.sub('00000' .. t[2], -6, -4)
end
local limit = tonumber(ARGV[2])

-- Fewer members than the limit: a slot is free, even if some have expired. Only a full set
-- is swept of its expired permits (crashed holders free their slots that way), so expired
-- ones never outnumber the limit.
local count = call('ZCARD', KEYS[1])
if count >= limit then
  local expired = call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
  for i = 1, #expired, 1000 do -- unpack takes a bounded number of values
    local last = math.min(i + 999, #expired)
    call('ZREM', KEYS[1], unpack(expired, i, last))
    call('HDEL', KEYS[2], unpack(expired, i, last))
  end
  count = count - #expired
  if count >= limit then
    return 0
  end
end

local timeout = tonumber(ARGV[3])
call('ZADD', KEYS[1], string.format('%d', now + timeout), ARGV[1])
local reason = '""'
if ARGV[4] and ARGV[4] ~= '' then
  reason = cjson.encode(ARGV[4])
end
local ticket, record = 1, nil
if KEYS[3] then
  ticket = call('INCR', KEYS[3])
  record = '{"acquired_ms":' .. now .. ',"ticket":' .. ticket .. ',"reason":' .. reason .. '}'
else
  record = '{"acquired_ms":' .. now .. ',"reason":' .. reason .. '}'
end
call('HSET', KEYS[2], ARGV[1], record, 'limit', ARGV[2])
-- Both keys expire with the latest permit. They are always extended together, so the info
-- hash's TTL tells whether this permit outlives them; a holders set that was empty is new
-- and has no TTL yet.
if count == 0 or call('PTTL', KEYS[2]) < timeout then
  call('PEXPIRE', KEYS[1], ARGV[3])
  call('PEXPIRE', KEYS[2], ARGV[3])
end
return ticket
