-- A fair lock's waiter gives up its place (deadline, cancel): Redisson's
-- acquireFailed, and the new head is told at once when the lock is free.
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue, redisson_lock_queue:{name}
-- KEYS[3]  the deadlines, redisson_lock_timeout:{name}
-- KEYS[4]  the waiters' channel prefix, redisson_lock__channel:{name}
-- ARGV[1]  the waiter's field
-- ARGV[2]  the wait timeout, ms: every waiter behind it moves one place up,
--          its deadline one wait timeout nearer
-- ARGV[3]  the publish command (PUBLISH, SPUBLISH; empty: none)
-- Returns 1 if it was in the queue, 0 if not.
local queue = redis.call('lrange', KEYS[2], 0, -1)
local at = nil
for i = 1, #queue do
  if queue[i] == ARGV[1] then
    at = i
    break
  end
end
if not at then
  redis.call('zrem', KEYS[3], ARGV[1])
  return 0
end
for i = at + 1, #queue do
  redis.call('zincrby', KEYS[3], -tonumber(ARGV[2]), queue[i])
end
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('lrem', KEYS[2], 0, ARGV[1])
if at == 1 and queue[2] and ARGV[3] ~= '' and redis.call('exists', KEYS[1]) == 0 then
  redis.call(ARGV[3], KEYS[4] .. ':' .. queue[2], '0')
end
return 1
