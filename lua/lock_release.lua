-- Releases one hold of a reentrant lock, idempotently.
-- KEYS[1]  the lock hash
-- KEYS[2]  its unlock channel
-- KEYS[3]  this release's latch, redisson_unlock_latch:{name}:<request-id>
-- ARGV[1]  the unlock message
-- ARGV[2]  lease in milliseconds (kept while holds remain)
-- ARGV[3]  the holder's field
-- ARGV[4]  how long the latch keeps this release's answer, in milliseconds
-- ARGV[5]  the publish command (PUBLISH, or SPUBLISH on a sharded
--          cluster; empty: none, for a spin lock)
-- Returns nil when the field does not hold the lock, 0 when holds remain,
-- 1 when the lock was freed (and waiters were told). A retried release finds
-- its latch and returns the first answer instead of releasing twice.
local answered = redis.call('get', KEYS[3])
if answered then
  return tonumber(answered)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
local result = 0
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
else
  redis.call('del', KEYS[1])
  if ARGV[5] ~= '' then
    redis.call(ARGV[5], KEYS[2], ARGV[1])
  end
  result = 1
end
redis.call('set', KEYS[3], result, 'px', ARGV[4])
return result
