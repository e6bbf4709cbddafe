-- Acquires (or re-enters) a reentrant lock in Redisson's RLock layout.
-- KEYS[1]  the lock: a hash, field "<client-id>:<owner>" -> hold count
-- KEYS[2]  this acquisition's latch, relock_lock_latch:{name}:<request-id>
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the holder's field
-- ARGV[3]  how long the latch remembers a success, in milliseconds
-- Returns nil when the caller now holds the lock, otherwise the lock's
-- remaining time to live in milliseconds (how long waiting can take at most).
--
-- The latch makes a retried acquisition (after a lost reply) count its hold
-- once. It answers "acquired" only while the field still exists: a latch
-- can outlive the lease it remembers, and by then another client may hold
-- the lock (docs/SAFETY.md).
--
-- Re-entry never shortens the lease: a hold renewed by the watchdog, or
-- taken with a longer lease, keeps the longer of the two.
local lease = tonumber(ARGV[1])
local function extend()
  -- a key just made has no expiry yet: pttl -1
  if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
  end
end

local mine = redis.call('hexists', KEYS[1], ARGV[2]) == 1
if mine and redis.call('exists', KEYS[2]) == 1 then
  extend()
  return nil
end
if mine or redis.call('exists', KEYS[1]) == 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  extend()
  redis.call('set', KEYS[2], 1, 'px', ARGV[3])
  return nil
end
return redis.call('pttl', KEYS[1])
