-- Renews the leases of many locks at once (the watchdog's batch).
-- KEYS[i]    a lock hash
-- ARGV[1]    lease in milliseconds
-- ARGV[i+1]  the field this client holds KEYS[i] with
-- Returns an array: 1 where the field still held its lock (lease renewed),
-- 0 where it did not (the lock is lost). A key that is no longer a hash
-- (someone replaced the lock) answers 0 for itself alone: pcall keeps one
-- bad key from failing the whole batch.
local renewed = {}
for i = 1, #KEYS do
  if redis.pcall('hexists', KEYS[i], ARGV[i + 1]) == 1 then
    redis.call('pexpire', KEYS[i], ARGV[1])
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
