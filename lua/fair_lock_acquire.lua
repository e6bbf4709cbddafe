-- Acquires (or re-enters) a fair lock in Redisson's RFairLock layout, or
-- keeps the caller's place in its queue.
-- KEYS[1]  the lock: a hash, field "<client-id>:<owner>" -> hold count
-- KEYS[2]  the queue, redisson_lock_queue:{name}: a list of waiting fields
-- KEYS[3]  their deadlines, redisson_lock_timeout:{name}: field -> ms
-- KEYS[4]  the waiters' channel prefix, redisson_lock__channel:{name}
--          (a waiter hears on "<prefix>:<its field>")
-- KEYS[5]  this acquisition's latch, relock_lock_latch:{name}:<request-id>
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the caller's field
-- ARGV[3]  the wait timeout (Redisson's fairLockWaitTimeout), ms
-- ARGV[4]  how long the latch remembers a success, in milliseconds
-- ARGV[5]  1: a wait - join (or stay in) the queue; 0: a single try
-- ARGV[6]  the publish command (PUBLISH, SPUBLISH; empty: none)
-- Returns {count} when the caller now holds the lock (its field's hold
-- count now, as lua/lock_acquire.lua answers), otherwise how long to wait
-- at most (ms) before trying again.
--
-- The lock goes to the head of the queue (or to anyone when it is empty);
-- an acquisition takes the caller out of the queue and brings every other
-- deadline one wait timeout (the acquirer's) nearer, as Redisson's does: its
-- deadlines are a chain, each the one ahead's plus the waiter's wait
-- timeout, the head's from the holder's remaining TTL. Ours join the chain
-- the same way, and heal it: a waiter's every try sets its own deadline to
-- at least what joining behind the one ahead would give now (the head:
-- now + the holder's TTL + the wait timeout), and a waiter tries again at
-- least every third of the wait timeout, so a live waiter never goes stale,
-- and a dead one is removed from the head within the wait timeout plus the
-- holder's TTL at its last try, by any client's script (Java's included). "now" is the server's clock (TIME): C clients
-- never disagree among themselves; Java's deadlines use Java's clock.
-- A head found stale is removed, and the new head told at once if the lock
-- is free.
--#include lua/shared/kind.lua
local lease = tonumber(ARGV[1])
local field = ARGV[2]
local wait = tonumber(ARGV[3])
local now = redis.call('time')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)

local refused = wrong_kind(KEYS[1], 'lock', 'take')
if refused then
  return refused
end
local pruned = false
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
  pruned = true
end

local function extend()
  if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
  end
end
local function take()
  local count = redis.call('hincrby', KEYS[1], field, 1)
  extend()
  redis.call('set', KEYS[5], 1, 'px', ARGV[4])
  return {count}
end

local mine = redis.call('hexists', KEYS[1], field) == 1
if mine and redis.call('exists', KEYS[5]) == 1 then
  extend()
  return {tonumber(redis.call('hget', KEYS[1], field))} -- this request counted its hold already
end
local head = redis.call('lindex', KEYS[2], 0)
if redis.call('exists', KEYS[1]) == 0 and (not head or head == field) then
  if head then
    redis.call('lpop', KEYS[2])
  end
  redis.call('zrem', KEYS[3], field)
  local others = redis.call('zrange', KEYS[3], 0, -1)
  for i = 1, #others do
    redis.call('zincrby', KEYS[3], -wait, others[i])
  end
  return take()
end
if mine then
  return take()
end

local ttl = redis.call('pttl', KEYS[1])
if pruned and ttl == -2 and head and ARGV[6] ~= '' then
  redis.call(ARGV[6], KEYS[4] .. ':' .. head, '0') -- the new head: its turn
end
if ARGV[5] ~= '1' then
  return ttl
end
-- A deadline is Redisson's: the one of the waiter ahead (for the head: now
-- plus the holder's remaining TTL) plus the wait timeout. Redisson's
-- waiters join behind it with its deadline plus their own wait, so one
-- without the holder's TTL, or below the chain, would hand them a deadline
-- that runs out while they wait (the next release drops them).
local at = redis.call('lpos', KEYS[2], field)
local deadline
if not at then
  local last = redis.call('lindex', KEYS[2], -1)
  local ahead = last and redis.call('zscore', KEYS[3], last)
  deadline = (ahead and tonumber(ahead) or now + ttl) + wait
  at = redis.call('rpush', KEYS[2], field) - 1
else
  -- healing: at least what joining behind the one ahead would give now
  local ahead = at > 0 and redis.call('zscore', KEYS[3], redis.call('lindex', KEYS[2], at - 1))
  deadline = (ahead and math.max(tonumber(ahead), now) or now + math.max(ttl, 0)) + wait
end
local old = redis.call('zscore', KEYS[3], field)
if not old or tonumber(old) < deadline then
  redis.call('zadd', KEYS[3], deadline, field)
end
-- try again when the lock's lease ends, when the waiter ahead would be
-- stale (it is being woken, or dead), and at least every third of the wait
local again = math.floor(wait / 3)
if ttl >= 0 and ttl < again then
  again = ttl
end
if ttl == -2 and at > 0 then
  local ahead = redis.call('zscore', KEYS[3], redis.call('lindex', KEYS[2], 0))
  if ahead and tonumber(ahead) - now < again then
    again = math.max(tonumber(ahead) - now, 1)
  end
end
return again
