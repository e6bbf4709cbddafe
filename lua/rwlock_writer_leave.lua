-- A writer that waited gives up (deadline, cancel): it no longer keeps new
-- readers out, and the readers it kept waiting try again.
-- KEYS[1]  the writers waiting, relock_rwlock_writers:{name}
-- KEYS[2]  the lock's channel, redisson_rwlock:{name}
-- ARGV[1]  the writer's field
-- ARGV[2]  the publish command (PUBLISH, SPUBLISH; empty: none)
-- Returns 1 if it was waiting, 0 if not.
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if ARGV[2] ~= '' then
  redis.call(ARGV[2], KEYS[2], '1')
end
return 1
