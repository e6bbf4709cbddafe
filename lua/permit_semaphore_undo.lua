-- Gives back the permit an acquisition of a permit-expirable semaphore
-- took, if it took it (its answer was lost, came too late, or the caller
-- gave up meanwhile).
-- KEYS[1]  the semaphore (lua/permit_semaphore_acquire.lua)
-- KEYS[2]  its permits taken, "{name}:timeout"
-- KEYS[3]  its channel, redisson_sc:{name}
-- ARGV[1]  the permit (its id's 16 bytes)
-- ARGV[2]  the publish command (PUBLISH, or SPUBLISH on a sharded cluster)
-- Returns 1 if it gave the permit back, 0 if it had none.
if redis.call('zrem', KEYS[2], ARGV[1]) == 0 then
  return 0
end
local free = redis.call('incr', KEYS[1])
if free > 0 then
  redis.call(ARGV[2], KEYS[3], free)
end
return 1
