-- Deletes a lock whoever holds it, and wakes its waiters.
-- KEYS[1]  the lock hash
-- KEYS[2]  its unlock channel
-- ARGV[1]  the unlock message
-- ARGV[2]  the publish command (PUBLISH, or SPUBLISH on a sharded
--          cluster; empty: none, for a spin lock)
-- Returns 1 if the lock existed, 0 if not.
if redis.call('del', KEYS[1]) == 1 then
  if ARGV[2] ~= '' then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
  end
  return 1
end
return 0
