-- Acquires (or re-enters) the read side of a read-write lock in Redisson's
-- RReadWriteLock layout.
-- KEYS[1]  the lock: a hash, "mode" -> "read" | "write", each reader's field
--          "<client-id>:<owner>" -> its read hold count, the writer's field
--          "<client-id>:<owner>:write" -> its write hold count
-- KEYS[2]  this acquisition's latch, relock_lock_latch:{name}:<request-id>
-- KEYS[3]  the writers waiting, relock_rwlock_writers:{name}: a sorted set,
--          field -> until when (server ms) it counts as waiting (ours)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the reader's field
-- ARGV[3]  the same owner's writer field (a writer may take read holds)
-- ARGV[4]  how long the latch remembers a success, in milliseconds
-- Returns {count} when the caller now holds a read hold (its field's read
-- hold count now, as lua/lock_acquire.lua answers), otherwise how long to
-- wait at most (ms) before trying again.
--
-- Each read hold n (1..count) has its own timeout key
-- "<base>:<field>:rwlock_timeout:<n>" with the lease (base: the name in
-- braces, or the name when it has a hash tag - the key's slot), as Redisson
-- keeps them. A new reader waits while a C writer waits (KEYS[3]), whether
-- the lock is read or free (the last reader's unlock woke that writer), so
-- that arriving readers cannot starve it; re-entrant holds and a writer's
-- own read holds go ahead.
--#include lua/shared/kind.lua
local lease = tonumber(ARGV[1])
--#include lua/shared/suffix_name.lua
--#include lua/shared/dead_readers.lua
local base = base_of(KEYS[1])

local function take()
  local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', base .. ':' .. ARGV[2] .. ':rwlock_timeout:' .. n, 1, 'px', lease)
  if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
  end
  redis.call('set', KEYS[2], 1, 'px', ARGV[4])
  return {n}
end

-- How long to wait before trying again when a C writer waits, else nil.
local function writer_waits()
  local now = redis.call('time')
  now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  redis.call('zremrangebyscore', KEYS[3], '-inf', now)
  local writer = redis.call('zrange', KEYS[3], -1, -1, 'withscores')
  if writer[2] == nil then
    return nil
  end
  -- try again when it may have the lock, or has stopped waiting
  local wait = tonumber(writer[2]) - now
  local ttl = redis.call('pttl', KEYS[1])
  if ttl >= 0 and ttl < wait then
    wait = ttl
  end
  return wait
end

local refused = wrong_kind(KEYS[1], 'read-write lock', 'take')
if refused then
  return refused
end
local mine = redis.call('hexists', KEYS[1], ARGV[2]) == 1
if mine and redis.call('exists', KEYS[2]) == 1 then
  return {tonumber(redis.call('hget', KEYS[1], ARGV[2]))} -- this request counted its hold already
end
-- ended read holds go first: the owner's own among them, which a new hold
-- must not count on
if drop_dead_readers(KEYS[1], base) >= 0 then
  mine = redis.call('hexists', KEYS[1], ARGV[2]) == 1
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'write' then
  if redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
    return take() -- the writer itself
  end
  return redis.call('pttl', KEYS[1])
end
if mine then
  return take()
end
-- a free lock too: the last reader's unlock woke the waiting writer, which
-- goes first
local wait = writer_waits()
if wait ~= nil then
  return wait
end
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'read')
end
return take()
