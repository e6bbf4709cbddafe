-- Acquires (or re-enters) the write side of a read-write lock in Redisson's
-- RReadWriteLock layout (lua/rwlock_read_acquire.lua has the layout).
-- KEYS[1]  the lock hash
-- KEYS[2]  this acquisition's latch, relock_lock_latch:{name}:<request-id>
-- KEYS[3]  the writers waiting, relock_rwlock_writers:{name} (ours)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the writer's field, "<client-id>:<owner>:write"
-- ARGV[3]  the same owner's reader field, "<client-id>:<owner>"
-- ARGV[4]  how long the latch remembers a success, in milliseconds
-- ARGV[5]  1: a wait (not a single try): count as a waiting writer
-- ARGV[6]  how long a waiting writer counts as waiting without trying again
-- Returns {count} when the caller now holds the write lock (its field's
-- hold count now, as lua/lock_acquire.lua answers); an error
-- "RELOCK_UPGRADE <message>" when the owner holds read holds (it would wait
-- for itself), "RELOCK_WRONGKIND <message>" when the name holds another
-- kind; otherwise how long to wait at most (ms) before trying again. The
-- tag is the error's code (src/redis/reply.c), the message the user's.
--
-- Read holds that ended unrenewed are dropped first
-- (lua/shared/dead_readers.lua): a lock only they kept is free.
--
-- A waiting writer keeps new readers out (they wait: rwlock_read_acquire)
-- for ARGV[6] ms from each try, and tries again within a third of it.
--#include lua/shared/kind.lua
local lease = tonumber(ARGV[1])
local function extend()
  if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
  end
end
local function take()
  local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  extend()
  redis.call('set', KEYS[2], 1, 'px', ARGV[4])
  redis.call('zrem', KEYS[3], ARGV[2])
  return {count}
end

local refused = wrong_kind(KEYS[1], 'read-write lock', 'take')
if refused then
  return refused
end
--#include lua/shared/suffix_name.lua
--#include lua/shared/dead_readers.lua
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'read' and drop_dead_readers(KEYS[1], base_of(KEYS[1])) == 0 then
  mode = false -- only ended read holds were left
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  if redis.call('exists', KEYS[2]) == 1 then
    extend()
    return {tonumber(redis.call('hget', KEYS[1], ARGV[2]))} -- this request counted its hold already
  end
  return take()
end
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'write')
  return take()
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
  return redis.error_reply("RELOCK_UPGRADE '" .. KEYS[1] .. "' is held as a read lock by this owner; a read " ..
    'lock cannot be upgraded to the write lock (it would wait for itself): release its read holds first')
end
local ttl = redis.call('pttl', KEYS[1])
if ARGV[5] ~= '1' then
  return ttl
end
local now = redis.call('time')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local keep = tonumber(ARGV[6])
redis.call('zadd', KEYS[3], now + keep, ARGV[2])
redis.call('pexpire', KEYS[3], keep)
local again = math.floor(keep / 3)
if ttl >= 0 and ttl < again then
  again = ttl
end
return again
