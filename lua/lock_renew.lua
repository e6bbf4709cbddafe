-- Renews the leases of many locks at once (the watchdog's batch).
-- KEYS[i]    a lock hash
-- ARGV[1]    lease in milliseconds
-- ARGV[2]    one character per key: 'r' for a read hold of a read-write
--            lock, 'p' for a permit of a permit-expirable semaphore, '-'
--            for any other
-- ARGV[i+2]  the field this client holds KEYS[i] with (a permit: the
--            permit itself, its id's 16 bytes)
-- Returns an array: 1 where the field still held its lock (lease renewed),
-- 0 where it did not (the lock is lost). A key that is no longer a hash
-- (someone replaced the lock) answers 0 for itself alone: pcall keeps one
-- bad key from failing the whole batch.
--
-- A read hold's count n also has n timeout keys, Redisson's
-- "<base>:<field>:rwlock_timeout:<k>" (base: the key in braces, or the key
-- itself when it has a hash tag, so they share its slot): a read unlock by
-- anyone sets the lock's expiry from them, so they are renewed too. A read
-- hold none of whose timeout keys is left has ended: the renewal drops it
-- (lua/shared/dead_readers.lua), its own owner's included (answered 0).
--
-- A permit is not in KEYS[i] (the semaphore's count) but in the zset
-- "<base>:timeout", scored by its expiry on the server's clock (Redisson's
-- RPermitExpirableSemaphore): it is renewed while it is there and not past
-- its expiry (an expired permit belongs to the pool already, whoever
-- reclaims it first), its expiry moved to now + lease, never earlier.
--
-- A renewal only ever extends: a key whose expiry is further away keeps it.
-- A lock is shared by holds with other leases - the same owner's fixed
-- re-entries, other readers - and each of them believes its own lease;
-- Redisson's plain PEXPIRE would cut them to the watchdog's (PEXPIRE GT is
-- Redis 7 only). As in the acquire scripts, a key without an expiry
-- (PTTL -1) gets the lease; a timeout key that is gone (-2) stays gone.
local lease = tonumber(ARGV[1])
local function extend(key)
  local ttl = redis.call('pttl', key)
  if ttl ~= -2 and ttl < lease then
    redis.call('pexpire', key, lease)
  end
end
--#include lua/shared/suffix_name.lua
--#include lua/shared/dead_readers.lua
local now
local function renew_permit(key, permit)
  if not now then
    local t = redis.call('time')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local timeouts = base_of(key) .. ':timeout'
  local expiry = tonumber(redis.pcall('zscore', timeouts, permit))
  if not expiry or expiry <= now then
    return 0
  end
  if expiry < now + lease then
    redis.call('zadd', timeouts, now + lease, permit)
  end
  return 1
end
local renewed = {}
for i = 1, #KEYS do
  local field = ARGV[i + 2]
  local role = string.sub(ARGV[2], i, i)
  if role == 'r' and redis.call('type', KEYS[i]).ok == 'hash' then
    drop_dead_readers(KEYS[i], base_of(KEYS[i])) -- this owner's too: then it is not renewed
  end
  local count = role ~= 'p' and redis.pcall('hget', KEYS[i], field)
  if role == 'p' then
    renewed[i] = renew_permit(KEYS[i], field)
  elseif type(count) == 'string' then
    extend(KEYS[i])
    if role == 'r' then
      local base = base_of(KEYS[i])
      for k = tonumber(count), 1, -1 do
        extend(base .. ':' .. field .. ':rwlock_timeout:' .. k)
      end
    end
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
