-- Takes permits of a semaphore in Redisson's RSemaphore layout.
-- KEYS[1]  the semaphore: a string, how many permits are free (none when
--          the key is missing)
-- KEYS[2]  this acquisition's latch, relock_lock_latch:{name}:<request-id>
--          (ours): how many it took
-- ARGV[1]  how many permits to take (>= 1)
-- Returns nil when they are taken, else -1: wait for a release (the
-- channel) and try again. A repeat of the same request finds its latch and
-- takes nothing more; lua/semaphore_undo.lua gives them back.
--
-- The latch has no expiry: permits have no lease, so the give-back of an
-- acquisition whose answer was lost must find it however late it comes
-- (the client retries it until Redis answers). The client deletes it once
-- the answer came, or the give-back does; one is left only by a client
-- that died in between, whose permits are taken for good anyway.
if redis.call('exists', KEYS[2]) == 1 then
  return nil
end
local want = tonumber(ARGV[1])
if tonumber(redis.call('get', KEYS[1]) or '0') < want then
  return -1
end
redis.call('decrby', KEYS[1], want)
redis.call('set', KEYS[2], want)
return nil
