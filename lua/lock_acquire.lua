-- Acquires (or re-enters) a reentrant lock in Redisson's RLock layout.
-- KEYS[1]  the lock: a hash, field "<client-id>:<owner>" -> hold count
-- KEYS[2]  this acquisition's latch, redisson_unlock_latch:{name}:<id>:
--          the unlock latch of the hold's next release, which takes it over
--          (lua/lock_release.lua): an uncontended pair writes this one key
-- KEYS[3]  (a wait only) the relock processes waiting,
--          relock_lock_latch:{name}:waiters: a zset, waker id -> until when
--          the registration holds (ms, the server's clock)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the holder's field
-- ARGV[3]  how long the latch remembers a success at least (the retry
--          window), in milliseconds
-- ARGV[4]  (a wait only) the waiting process's waker id: a number the
--          release publishes on the unlock channel to wake that process
--          only (lua/lock_release.lua)
-- ARGV[5]  (a wait only) "1" when the process has other waiters for the
--          lock: it stays registered when this one acquires
-- Returns {count} when the caller now holds the lock - its field's hold
-- count now, this acquisition's included: fewer than the holds the caller
-- had plus one means the earlier ones are gone (the key vanished, and this
-- made it afresh) - otherwise the lock's remaining time to live in
-- milliseconds (how long waiting can take at most).
--
-- The latch makes a retried acquisition (after a lost reply) count its hold
-- once. It answers "acquired" only while the field still exists: a latch
-- can outlive the lease it remembers, and by then another client may hold
-- the lock (docs/SAFETY.md). Its value is "a", which the release that takes
-- the latch over tells apart from a release's answer (0 or 1).
--
-- Re-entry never shortens the lease: a hold renewed by the watchdog, or
-- taken with a longer lease, keeps the longer of the two.
--#include lua/shared/kind.lua
local lease = tonumber(ARGV[1])
local function extend()
  -- a key just made has no expiry yet: pttl -1
  if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
  end
end
-- A waiting process registers while the lock is held, and unregisters
-- when it takes it (unless other waiters of its wait still). Best effort:
-- a refusal (an ACL without these commands, a full server) leaves the
-- process unregistered, woken by every unlock as before.
local function registered(acquired)
  if KEYS[3] == nil then
    return
  end
  if acquired then
    if ARGV[5] ~= '1' then
      redis.pcall('zrem', KEYS[3], ARGV[4])
    end
    return
  end
  -- until the waiter's next try at the latest (it waits at most the
  -- holder's TTL; a lock without one is polled every second), and a margin
  local ttl = redis.call('pttl', KEYS[1])
  local keep = (ttl > 0 and ttl or 1000) + 2000
  local t = redis.pcall('time')
  if t[1] == nil then
    return ttl
  end
  local added = redis.pcall('zadd', KEYS[3], t[1] * 1000 + math.floor(t[2] / 1000) + keep, ARGV[4])
  if type(added) == 'table' then -- refused
    return ttl
  end
  if redis.call('pttl', KEYS[3]) < keep then
    redis.pcall('pexpire', KEYS[3], keep)
  end
  return ttl
end

-- The latch lasts the retry window and at least as long as the hold it
-- counted can last without a renewal (the key's TTL now), so that the
-- give-back of an acquisition whose answer was lost, retried until Redis
-- answers, finds it while that hold may still be there; never longer, so
-- that it can never take away a later hold of the owner.
local function latch(ttl)
  redis.call('set', KEYS[2], 'a', 'px', math.max(tonumber(ARGV[3]), ttl))
end

-- The uncontended case first, in the fewest calls: a free lock is no other
-- kind's, nor can this acquisition have run before (its latch would only
-- count a hold of a key that is there).
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], lease)
  latch(lease)
  registered(true)
  return {1}
end
local refused = wrong_kind(KEYS[1], 'lock', 'take')
if refused then
  return refused
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return registered(false) or redis.call('pttl', KEYS[1])
end
if redis.call('exists', KEYS[2]) == 1 then -- a repeat: counted already
  extend()
  return {tonumber(redis.call('hget', KEYS[1], ARGV[2]))}
end
local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
extend()
latch(redis.call('pttl', KEYS[1]))
registered(true)
return {count}
