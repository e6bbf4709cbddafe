-- Redisson's suffixName: the name of a key that goes with `key` (a read
-- hold's "<base>:<field>:rwlock_timeout:<n>", a permit-expirable
-- semaphore's "<base>:timeout") starts with base_of(key): the key in
-- braces, or the key itself when it has a hash tag, so that both share a
-- slot. src/redis/embed-scripts.sh puts this file where a script has the
-- line "--#include lua/shared/suffix_name.lua".
local function base_of(key)
  if not string.find(key, '{', 1, true) then
    return '{' .. key .. '}'
  end
  return key
end
