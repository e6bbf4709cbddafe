-- Releases one hold of a reentrant lock, idempotently.
-- KEYS[1]  the lock hash
-- KEYS[2]  its unlock channel
-- KEYS[3]  this release's latch, redisson_unlock_latch:{name}:<request-id>;
--          the first release after an acquisition takes over that
--          acquisition's latch (value "a": lua/lock_acquire.lua)
-- KEYS[4]  the relock processes waiting, relock_lock_latch:{name}:waiters
--          (lua/lock_acquire.lua)
-- ARGV[1]  the unlock message
-- ARGV[2]  lease in milliseconds (kept at least while holds remain)
-- ARGV[3]  the holder's field
-- ARGV[4]  how long the latch keeps this release's answer, in milliseconds
-- ARGV[5]  the publish command (PUBLISH, or SPUBLISH on a sharded
--          cluster; empty: none, for a spin lock)
-- Returns nil when the field does not hold the lock, 0 when holds remain,
-- 1 when the lock was freed (and waiters were told). A retried release finds
-- its latch and returns the first answer instead of releasing twice.
--
-- A partial release only ever extends the lease: the holds that remain may
-- have a longer one (a fixed lease under a watchdog hold, or the reverse),
-- which their holder believes (lua/lock_renew.lua).
--
-- Waiters are told by the unlock message, which Redisson's waiters and
-- relock's older ones hear: it wakes one waiter in every process. Before
-- it goes the waker id of the relock process registered longest: relock's
-- processes hear both in that order, so only that one wakes (its one
-- waiter) and the others let this unlock message pass. Best effort: where
-- the waiting processes cannot be read (an ACL without these commands),
-- the unlock message goes alone and wakes every process, as before.
--#include lua/shared/kind.lua
local answered = redis.call('get', KEYS[3])
if answered and answered ~= 'a' then
  return tonumber(answered)
end
local refused = wrong_kind(KEYS[1], 'lock', 'release')
if refused then
  return refused
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
local result = 0
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('pexpire', KEYS[1], ARGV[2])
  end
else
  redis.call('del', KEYS[1])
  if ARGV[5] ~= '' then
    local t = redis.call('exists', KEYS[4]) == 1 and redis.pcall('time') or {}
    local now = t[1] ~= nil and t[1] * 1000 + math.floor(t[2] / 1000)
    -- the longest registered; a registration past its time is a waiter
    -- that went away without leaving
    for _ = 1, now and 8 or 0 do
      local w = redis.pcall('zpopmin', KEYS[4])
      if w.err or w[1] == nil then
        break
      end
      if tonumber(w[2]) > now then
        redis.call(ARGV[5], KEYS[2], w[1])
        break
      end
    end
    redis.call(ARGV[5], KEYS[2], ARGV[1])
  end
  result = 1
end
redis.call('set', KEYS[3], result, 'px', ARGV[4])
return result
