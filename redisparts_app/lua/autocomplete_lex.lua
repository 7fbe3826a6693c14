-- autocomplete_lex.lua: names whose index entries start with a folded prefix, in order.
-- KEYS[1] index zset of a guild (rp:ac:{guild}:members), members "<folded>\0<name>", score 0
-- ARGV[1] folded prefix (UTF-8, may be empty)   ARGV[2] limit   ARGV[3] page size
-- Returns up to ARGV[2] distinct names as written, in index order. Members holding "\0\0"
-- (sentinels of the book method, possibly left by a killed client) are skipped.
local key, prefix = KEYS[1], ARGV[1]
local limit, page = tonumber(ARGV[2]), tonumber(ARGV[3])
-- "\255" never occurs in UTF-8, so every entry starting with prefix sorts below prefix.."\255".
local low, high = '[' .. prefix, '(' .. prefix .. '\255'
local names, seen = {}, {}
while true do
  local batch = redis.call('ZRANGEBYLEX', key, low, high, 'LIMIT', 0, page)
  for _, member in ipairs(batch) do
    if not string.find(member, '\0\0', 1, true) then
      local name = string.sub(member, string.find(member, '\0', 1, true) + 1)
      if not seen[name] then
        seen[name] = true
        names[#names + 1] = name
        if #names >= limit then return names end
      end
    end
  end
  if #batch < page then return names end
  -- Continue after the last member seen rather than at an offset.
  low = '(' .. batch[#batch]
end
