-- Acquires (or re-enters) a fenced lock: Redisson's RLock layout plus a
-- fencing token, the counter redisson_lock_token:{name}, taken on every
-- acquisition (re-entries included), so tokens strictly increase per name
-- across every client, Java's too.
-- KEYS[1]  the lock: a hash, field "<client-id>:<owner>" -> hold count
-- KEYS[2]  this acquisition's latch, relock_lock_latch:{name}:<request-id>
-- KEYS[3]  the token counter, redisson_lock_token:{name}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the holder's field
-- ARGV[3]  how long the latch remembers a success, in milliseconds
-- Returns {count, token} when the caller now holds the lock (count: its
-- field's hold count now, as lua/lock_acquire.lua answers), otherwise the
-- lock's remaining time to live in milliseconds. Never an ambiguous answer:
-- a token is always >= 1, a wait always a plain integer.
--
-- The latch remembers the token: a retried acquisition (after a lost
-- reply) counts its hold once and answers the same token, while the field
-- still exists (as lua/lock_acquire.lua). Re-entry never shortens the lease.
--#include lua/shared/kind.lua
local lease = tonumber(ARGV[1])
local function extend()
  if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
  end
end

local refused = wrong_kind(KEYS[1], 'lock', 'take')
if refused then
  return refused
end
local mine = redis.call('hexists', KEYS[1], ARGV[2]) == 1
if mine then
  local token = redis.call('get', KEYS[2])
  if token then
    extend()
    return {tonumber(redis.call('hget', KEYS[1], ARGV[2])), tonumber(token)}
  end
end
if mine or redis.call('exists', KEYS[1]) == 0 then
  local token = redis.call('incr', KEYS[3])
  local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  extend()
  redis.call('set', KEYS[2], token, 'px', ARGV[3])
  return {count, token}
end
return redis.call('pttl', KEYS[1])
