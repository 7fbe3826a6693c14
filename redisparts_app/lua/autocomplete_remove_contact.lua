-- autocomplete_remove_contact.lua: forget a contact (recent list and pick count).
-- KEYS[1] recent list (rp:ac:{user}:recent)   KEYS[2] pick counts zset (rp:ac:{user}:picks)
-- ARGV[1] contact name
-- Returns 1 when the contact was in the recent list, 0 otherwise.
local listed = redis.call('LREM', KEYS[1], 0, ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if listed > 0 then return 1 end
return 0
