-- Takes permits of a semaphore in Redisson's RSemaphore layout.
-- KEYS[1]  the semaphore: a string, how many permits are free (none when
--          the key is missing)
-- KEYS[2]  this acquisition's latch, relock_lock_latch:{name}:<request-id>
--          (ours): how many it took
-- ARGV[1]  how many permits to take (>= 1)
-- ARGV[2]  how long the latch remembers them, in milliseconds
-- Returns nil when they are taken, else -1: wait for a release (the
-- channel) and try again. A repeat of the same request finds its latch and
-- takes nothing more; lua/semaphore_undo.lua gives them back.
if redis.call('exists', KEYS[2]) == 1 then
  return nil
end
local want = tonumber(ARGV[1])
if tonumber(redis.call('get', KEYS[1]) or '0') < want then
  return -1
end
redis.call('decrby', KEYS[1], want)
redis.call('set', KEYS[2], want, 'px', ARGV[2])
return nil
