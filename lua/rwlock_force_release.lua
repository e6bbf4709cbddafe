-- Deletes one side of a read-write lock whoever holds it, as Redisson's
-- forceUnlock of its read lock or its write lock: only while the lock is in
-- that side's mode.
-- KEYS[1]  the lock hash
-- KEYS[2]  its channel, redisson_rwlock:{name}
-- ARGV[1]  the side: "read" or "write"
-- ARGV[2]  the message: "0" (read side: wakes one waiter per process) or
--          "1" (write side: wakes them all)
-- ARGV[3]  the publish command (PUBLISH, SPUBLISH; empty: none)
-- Returns 1 if it deleted the lock, 0 if not.
-- The deletion is the force release; the message only tells (waiters, and
-- a watched holder): one that an ACL refuses leaves the deletion answered.
if redis.call('hget', KEYS[1], 'mode') ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
if ARGV[3] ~= '' then
  redis.pcall(ARGV[3], KEYS[2], ARGV[2])
end
return 1
