-- Checks that many holds are still there, and for how long Redis keeps
-- each (the watchdog's batch for holds with a fixed lease, which nothing
-- renews), without extending anything.
-- KEYS[i]    a lock hash
-- ARGV[1]    one character per key: 'r' for a read hold of a read-write
--            lock, 'p' for a permit of a permit-expirable semaphore, '-'
--            for any other
-- ARGV[i+1]  the field this client holds KEYS[i] with (a permit: the
--            permit, its id's 16 bytes)
-- Returns an array, as PTTL answers: -2 where the field is not in its lock
-- (deleted, force-released, lost in a failover, or expired), else how long
-- Redis surely keeps the hold, in milliseconds (-1: no expiry). A key that
-- is no longer a hash (someone replaced the lock) answers -2 for itself
-- alone: pcall keeps one bad key from failing the whole batch.
--
-- That is the key's PTTL, which a foreign client may have cut below the
-- holder's lease (Redisson's read-lock renewal is a plain PEXPIRE to its
-- own lease): a belief is never longer than what Redis keeps, so the
-- holder's validity comes down to it (never up: a fixed lease is never
-- renewed). A read hold is kept no longer than the longest of its owner's
-- timeout keys, "<base>:<field>:rwlock_timeout:<k>" for k = 1..count (base:
-- the key in braces, or the key itself when it has a hash tag): the last
-- release of another reader sets the lock's expiry from them, and deletes
-- the lock when none is left.
-- A permit is kept until its expiry, its score in "<base>:timeout" (on
-- the server's clock; gone once past it), and no longer than that zset.
local function shorter(a, b) -- of two PTTLs, -1 being the longest
  if a == -1 or (b ~= -1 and b < a) then
    return b
  end
  return a
end
--#include lua/shared/suffix_name.lua
local never = 922337203685477
local function permit_kept(key, permit)
  local timeouts = base_of(key) .. ':timeout'
  local expiry = tonumber(redis.pcall('zscore', timeouts, permit))
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if not expiry or expiry <= now then
    return -2
  end
  return shorter(expiry >= never and -1 or expiry - now, redis.call('pttl', timeouts))
end
local kept = {}
for i = 1, #KEYS do
  local field = ARGV[i + 1]
  local role = string.sub(ARGV[1], i, i)
  local count = role ~= 'p' and redis.pcall('hget', KEYS[i], field)
  if role == 'p' then
    kept[i] = permit_kept(KEYS[i], field)
  elseif type(count) ~= 'string' then
    kept[i] = -2
  else
    kept[i] = redis.call('pttl', KEYS[i])
    if role == 'r' then
      local base = base_of(KEYS[i])
      local longest = 0 -- none left: kept no time at all
      for k = tonumber(count) or 0, 1, -1 do
        local ttl = redis.call('pttl', base .. ':' .. field .. ':rwlock_timeout:' .. k)
        if ttl == -1 or (longest ~= -1 and ttl > longest) then
          longest = ttl
        end
      end
      kept[i] = shorter(kept[i], longest)
    end
  end
end
return kept
