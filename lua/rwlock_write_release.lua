-- Releases one write hold of a read-write lock, idempotently (Redisson's
-- RReadWriteLock layout: lua/rwlock_read_acquire.lua).
-- KEYS[1]  the lock hash
-- KEYS[2]  its channel, redisson_rwlock:{name}
-- KEYS[3]  this release's latch, redisson_unlock_latch:{name}:<request-id>
--          (for an undo: the acquisition's latch)
-- KEYS[4]  the writers waiting, relock_rwlock_writers:{name} (an undo
--          takes the writer out of it)
-- ARGV[1]  lease in milliseconds (kept while write holds remain)
-- ARGV[2]  the writer's field, "<client-id>:<owner>:write"
-- ARGV[3]  how long the latch keeps this release's answer, in milliseconds
--          ("undo": KEYS[3] is an acquisition's latch, and the hold is
--          given back only if that acquisition counted it)
-- ARGV[4]  the publish command (PUBLISH, SPUBLISH; empty: none)
-- Returns nil when the field holds no write hold, 0 when write holds
-- remain, 1 when the last went: the lock is then free, or (the writer had
-- taken read holds) held for reading only. Either way "1" is published on
-- the channel: every waiter tries again, readers may all get in.
--#include lua/shared/kind.lua
local undo = ARGV[3] == 'undo'
if undo then
  redis.call('zrem', KEYS[4], ARGV[2])
  if redis.call('del', KEYS[3]) == 0 then
    return 0
  end
else
  local answered = redis.call('get', KEYS[3])
  if answered then
    return tonumber(answered)
  end
end
local function answer(result)
  if not undo then
    redis.call('set', KEYS[3], result, 'px', ARGV[3])
  end
  return result
end
local refused = wrong_kind(KEYS[1], 'read-write lock', 'release')
if refused then
  return refused
end

if redis.call('hget', KEYS[1], 'mode') ~= 'write' or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  return answer(0)
end
redis.call('hdel', KEYS[1], ARGV[2])
if redis.call('hlen', KEYS[1]) == 1 then
  redis.call('del', KEYS[1])
else
  redis.call('hset', KEYS[1], 'mode', 'read') -- its own read holds remain
end
if ARGV[4] ~= '' then
  redis.call(ARGV[4], KEYS[2], '1')
end
return answer(1)
