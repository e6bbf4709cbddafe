-- Deletes a fair lock whoever holds it, and wakes the head of its queue.
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue, redisson_lock_queue:{name}
-- KEYS[3]  the deadlines, redisson_lock_timeout:{name}
-- KEYS[4]  the waiters' channel prefix, redisson_lock__channel:{name}
-- ARGV[1]  the publish command (PUBLISH, SPUBLISH; empty: none)
-- Returns 1 if the lock existed, 0 if not.
--
-- Besides the head's own channel, "0" goes to the lock's channel KEYS[4]
-- itself, where a watched holder listens (relock_lock_watch_loss): no fair
-- waiter listens there (each has its own channel), and a waiter of
-- Redisson's RLock on the same name takes "0" for an unlock and tries once.
-- The deletion is the force release; the messages only tell: one that an
-- ACL refuses leaves the deletion answered (redis.pcall).
local now = redis.call('time')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then
    break
  end
  local deadline = redis.call('zscore', KEYS[3], head)
  if deadline and tonumber(deadline) > now then
    break
  end
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], head)
end
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
if ARGV[1] ~= '' then
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    redis.pcall(ARGV[1], KEYS[4] .. ':' .. head, '0')
  end
  redis.pcall(ARGV[1], KEYS[4], '0')
end
return 1
