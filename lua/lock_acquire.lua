-- Acquires (or re-enters) a reentrant lock in Redisson's RLock layout.
-- KEYS[1]  the lock: a hash, field "<client-id>:<owner>" -> hold count
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the holder's field
-- Returns nil when the caller now holds the lock, otherwise the lock's
-- remaining time to live in milliseconds (how long waiting can take at most).
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
