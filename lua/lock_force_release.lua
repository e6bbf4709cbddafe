-- Deletes a lock whoever holds it, and wakes its waiters.
-- KEYS[1]  the lock hash
-- KEYS[2]  its unlock channel
-- ARGV[1]  the unlock message
-- ARGV[2]  the publish command (PUBLISH, or SPUBLISH on a sharded
--          cluster; empty: none)
-- Returns 1 if the lock existed, 0 if not.
--
-- The spin lock's force release publishes too, though its waiters listen to
-- nothing: its holder, if it watches its hold, learns of the loss at once.
-- The deletion is the force release; the message only tells: one that an
-- ACL refuses (a spin lock's user may have no channel) leaves the deletion
-- answered, and a watched holder finds the loss at its next check instead.
if redis.call('del', KEYS[1]) == 1 then
  if ARGV[2] ~= '' then
    redis.pcall(ARGV[2], KEYS[2], ARGV[1])
  end
  return 1
end
return 0
