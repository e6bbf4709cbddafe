-- Checks that many holds are still there (the watchdog's batch for holds
-- with a fixed lease, which nothing renews), without extending anything.
-- KEYS[i]  a lock hash
-- ARGV[i]  the field this client holds KEYS[i] with
-- Returns an array: 1 where the field is still in its lock, 0 where it is
-- not (deleted, force-released, lost in a failover, or expired). A key that
-- is no longer a hash (someone replaced the lock) answers 0 for itself
-- alone: pcall keeps one bad key from failing the whole batch.
local held = {}
for i = 1, #KEYS do
  held[i] = redis.pcall('hexists', KEYS[i], ARGV[i]) == 1 and 1 or 0
end
return held
