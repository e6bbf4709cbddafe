-- Acquires (or re-enters) a reentrant lock in Redisson's RLock layout.
-- KEYS[1]  the lock: a hash, field "<client-id>:<owner>" -> hold count
-- KEYS[2]  this acquisition's latch, relock_lock_latch:{name}:<request-id>
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the holder's field
-- ARGV[3]  how long the latch remembers a success, in milliseconds
-- Returns nil when the caller now holds the lock, otherwise the lock's
-- remaining time to live in milliseconds (how long waiting can take at most).
-- The latch makes a retried acquisition (after a lost reply) idempotent: it
-- answers "acquired" again instead of counting a second hold.
if redis.call('exists', KEYS[2]) == 1 then
  return nil
end
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('set', KEYS[2], 1, 'px', ARGV[3])
  return nil
end
return redis.call('pttl', KEYS[1])
