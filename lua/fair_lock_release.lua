-- Releases one hold of a fair lock, idempotently (Redisson's RFairLock
-- layout: lua/fair_lock_acquire.lua).
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue, redisson_lock_queue:{name}
-- KEYS[3]  the deadlines, redisson_lock_timeout:{name}
-- KEYS[4]  the waiters' channel prefix, redisson_lock__channel:{name}
-- KEYS[5]  this release's latch, redisson_unlock_latch:{name}:<request-id>
--          (for an undo: the acquisition's latch)
-- ARGV[1]  lease in milliseconds (kept while holds remain)
-- ARGV[2]  the holder's field
-- ARGV[3]  how long the latch keeps this release's answer, in milliseconds
--          ("undo": KEYS[5] is an acquisition's latch, and the hold is
--          given back only if that acquisition counted it)
-- ARGV[4]  the publish command (PUBLISH, SPUBLISH; empty: none)
-- Returns nil when the field does not hold the lock, 0 when holds remain,
-- 1 when the lock was freed: then "0" goes to the head of the queue only,
-- on its own channel (stale heads are removed first, as Redisson does).
--#include lua/shared/kind.lua
local undo = ARGV[3] == 'undo'
if undo then
  if redis.call('del', KEYS[5]) == 0 then
    return 0
  end
else
  local answered = redis.call('get', KEYS[5])
  if answered then
    return tonumber(answered)
  end
end
local function answer(result)
  if not undo then
    redis.call('set', KEYS[5], result, 'px', ARGV[3])
  end
  return result
end
local refused = wrong_kind(KEYS[1], 'lock', 'release')
if refused then
  return refused
end

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
local function wake_head()
  local head = redis.call('lindex', KEYS[2], 0)
  if head and ARGV[4] ~= '' then
    redis.call(ARGV[4], KEYS[4] .. ':' .. head, '0')
  end
end

if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  if redis.call('exists', KEYS[1]) == 0 then
    wake_head() -- free anyway (expired): the head need not wait for its timer
  end
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  return answer(0)
end
redis.call('del', KEYS[1])
wake_head()
return answer(1)
