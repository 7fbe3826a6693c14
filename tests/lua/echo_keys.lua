-- echo_keys.lua: return KEYS followed by ARGV; checks that scripts load and run.
-- KEYS[*] any keys   ARGV[*] any values
-- Returns the list KEYS .. ARGV.
local out = {}
for _, key in ipairs(KEYS) do out[#out + 1] = key end
for _, arg in ipairs(ARGV) do out[#out + 1] = arg end
return out
