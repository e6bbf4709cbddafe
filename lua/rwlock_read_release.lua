-- Releases one read hold of a read-write lock, idempotently (Redisson's
-- RReadWriteLock layout: lua/rwlock_read_acquire.lua).
-- KEYS[1]  the lock hash
-- KEYS[2]  its channel, redisson_rwlock:{name}
-- KEYS[3]  this release's latch, redisson_unlock_latch:{name}:<request-id>
--          (a release's or, for an undo, the acquisition's latch)
-- ARGV[1]  the reader's field
-- ARGV[2]  how long the latch keeps this release's answer, in milliseconds
--          ("undo": KEYS[3] is an acquisition's latch, and the hold is
--          given back only if that acquisition counted it)
-- ARGV[3]  the publish command (PUBLISH, SPUBLISH; empty: none)
-- Returns nil when the field holds no read hold, 0 when the owner still
-- has read holds, 1 when it has none left (the lock may still be held by
-- other readers or by its writer). When the last hold of the lock goes,
-- "0" is published on the channel: one waiter per process (a writer, or a
-- reader) tries again.
--
-- With other holds left, the lock's expiry becomes the longest of their
-- timeout keys', as Redisson does: a hold no longer renewed ends with its
-- own lease. So a timeout key must never end before a hold its owner still
-- believes in: the release of one of an owner's read holds deletes its last
-- timeout key (Redisson's layout numbers them 1..count), whichever hold
-- that was, so the next one down keeps the longer of the two expiries (and
-- is made again if it had expired).
--#include lua/shared/kind.lua
local undo = ARGV[2] == 'undo'
if undo then
  if redis.call('del', KEYS[3]) == 0 then
    return 0
  end
else
  local answered = redis.call('get', KEYS[3])
  if answered then
    return tonumber(answered)
  end
end
local function answer(result)
  if not undo then
    redis.call('set', KEYS[3], result, 'px', ARGV[2])
  end
  return result
end
local refused = wrong_kind(KEYS[1], 'read-write lock', 'release')
if refused then
  return refused
end
--#include lua/shared/suffix_name.lua
local base = base_of(KEYS[1])

local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return nil
end
local n = redis.call('hincrby', KEYS[1], ARGV[1], -1)
local timeout = base .. ':' .. ARGV[1] .. ':rwlock_timeout:'
local gone = redis.call('pttl', timeout .. (n + 1))
redis.call('del', timeout .. (n + 1))
if n > 0 then
  -- the key below may be gone already (a fixed hold's lease ran out while
  -- a longer hold of the owner goes on): it is made again with the expiry
  -- of the one deleted
  local kept = redis.call('pttl', timeout .. n) -- -1: never expires, -2: gone
  if gone > 0 and (kept == -2 or (kept >= 0 and gone > kept)) then
    redis.call('set', timeout .. n, 1, 'px', gone)
  end
  return answer(0)
end
redis.call('hdel', KEYS[1], ARGV[1])
if redis.call('hlen', KEYS[1]) > 1 then
  local longest = -3
  local all = redis.call('hgetall', KEYS[1])
  for i = 1, #all, 2 do
    local count = tonumber(all[i + 1])
    if count then
      for k = count, 1, -1 do
        local ttl = redis.call('pttl', base .. ':' .. all[i] .. ':rwlock_timeout:' .. k)
        if ttl > longest then
          longest = ttl
        end
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    return answer(1)
  end
  if mode == 'write' then
    return answer(1)
  end
end
redis.call('del', KEYS[1])
if ARGV[3] ~= '' then
  redis.call(ARGV[3], KEYS[2], '0')
end
return answer(1)
