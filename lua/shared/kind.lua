-- One name, one kind (relock_error(3), RELOCK_EWRONGKIND), for the scripts
-- of both lock families; src/redis/embed-scripts.sh puts this file where a
-- script has the line "--#include lua/shared/kind.lua".
-- Redisson checks none of this: its lock script re-enters a read-write
-- lock's reader field of the same owner (the same "<client-id>:<owner>")
-- and leaves a stale read hold; its read lock adds a mode field to a plain
-- lock's hash and takes it beside the holder.
-- wrong_kind(key, family, verb) is nil when `family` may `verb` ('take',
-- 'release') key: for 'lock' (lock, fair, fenced, spin) no key or a hash
-- without a "mode" field, for 'read-write lock' no key or a hash with one.
-- Otherwise it is the error the script returns, before writing anything.
-- (TYPE only names what the key holds, where the ACL allows it: docs/ACL.md
-- does not require it.)
local function wrong_kind(key, family, verb)
  local mode = redis.pcall('hexists', key, 'mode')
  if type(mode) == 'table' then
    local t = redis.pcall('type', key)
    return redis.error_reply("RELOCK_WRONGKIND '" .. key .. "' holds a Redis " ..
      (t.ok or 'value of another type') .. ', not a ' .. family)
  end
  if family == 'lock' and mode == 1 then
    return redis.error_reply("RELOCK_WRONGKIND '" .. key .. "' is held as a read-write lock (its hash " ..
      'has a mode field): only its read and write locks may ' .. verb .. ' it')
  end
  if family ~= 'lock' and mode == 0 and redis.call('exists', key) == 1 then
    return redis.error_reply("RELOCK_WRONGKIND '" .. key .. "' is held as a lock of another kind (lock, " ..
      'fair, fenced or spin lock: a hash without a mode field): a read or write lock cannot ' .. verb .. ' it')
  end
  return nil
end
