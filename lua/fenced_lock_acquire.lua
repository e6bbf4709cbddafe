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
local lease = tonumber(ARGV[1])
local function extend()
  if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
  end
end

-- One name, one kind (relock_error(3), RELOCK_EWRONGKIND): Redisson's
-- script would re-enter a read-write lock's reader field of the same owner
-- (the same "<client-id>:<owner>") and leave a stale read hold, so a hash
-- with a "mode" field, or a value of another type, is refused before
-- anything is written.
-- (TYPE only names what the key holds, where the ACL allows it: docs/ACL.md
-- does not require it.)
local shape = redis.pcall('hexists', KEYS[1], 'mode')
if type(shape) == 'table' then
  local t = redis.pcall('type', KEYS[1])
  return redis.error_reply("RELOCK_WRONGKIND '" .. KEYS[1] .. "' holds a Redis " ..
    (t.ok or 'value of another type') .. ', not a lock')
end
if shape == 1 then
  return redis.error_reply("RELOCK_WRONGKIND '" .. KEYS[1] ..
    "' is held as a read-write lock (its hash has a mode field): only its read and write locks may take it")
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
