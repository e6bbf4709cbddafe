-- Gives back what one acquisition took, if it took anything: for a try
-- whose answer was lost, came too late to be trusted, or was cancelled.
-- KEYS[1]  the lock hash
-- KEYS[2]  its unlock channel
-- KEYS[3]  the acquisition's latch, relock_lock_latch:{name}:<request-id>
-- ARGV[1]  the holder's field
-- ARGV[2]  the unlock message
-- ARGV[3]  the publish command (PUBLISH, or SPUBLISH on a sharded
--          cluster; empty: none, for a spin lock)
-- Returns 1 when the lock was freed, 0 otherwise. The latch exists only if
-- the acquisition counted a hold, and goes with the undo: running twice
-- gives back one hold at most. Holds the owner had before are kept, with
-- their lease.
if redis.call('del', KEYS[3]) == 0 or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then
  return 0
end
redis.call('del', KEYS[1])
if ARGV[3] ~= '' then
  redis.call(ARGV[3], KEYS[2], ARGV[2])
end
return 1
