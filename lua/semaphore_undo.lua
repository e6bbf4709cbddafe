-- Gives back what an acquisition of a semaphore took, if it took any (its
-- answer was lost, came too late, or the caller gave up meanwhile).
-- KEYS[1]  the semaphore (lua/semaphore_acquire.lua)
-- KEYS[2]  its channel, redisson_sc:{name}
-- KEYS[3]  the acquisition's latch: how many it took
-- ARGV[1]  the publish command (PUBLISH, or SPUBLISH on a sharded cluster)
-- Returns how many permits it gave back (0: the acquisition took none).
local taken = redis.call('get', KEYS[3])
if not taken then
  return 0
end
redis.call('del', KEYS[3])
local free = redis.call('incrby', KEYS[1], taken)
if free > 0 then
  redis.call(ARGV[1], KEYS[2], free)
end
return tonumber(taken)
