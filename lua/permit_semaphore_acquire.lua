-- Takes one permit of a permit-expirable semaphore, in Redisson's
-- RPermitExpirableSemaphore layout, under a permit id.
-- KEYS[1]  the semaphore: a string, how many permits are free
-- KEYS[2]  its permits taken: a zset "{name}:timeout", permit -> expiry (ms
--          since the epoch; 922337203685477: never)
-- KEYS[3]  its channel, redisson_sc:{name}: the free count after a change
--          that frees permits
-- ARGV[1]  the lease in milliseconds (-1: the permit never expires)
-- ARGV[2]  the permit: the 16 bytes its id (this acquisition's request id,
--          32 hex digits) spells, as Redisson keeps it (a repeat of the
--          same request finds it taken, and takes nothing more)
-- ARGV[3]  the publish command (PUBLISH, or SPUBLISH on a sharded cluster)
-- Returns nil when taken, else how long until the next permit expires
-- (-1: none will): wait for a release (the channel) or that long.
--
-- Expiry is measured on the server's clock (TIME), where Redisson uses
-- its client's: a Java client whose clock is off by s ms sees permits
-- expire s ms early or late (docs/SAFETY.md).
local never = 922337203685477
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('zscore', KEYS[2], ARGV[2]) then
  return nil
end
-- Expired permits return to the pool first (bounded work per call).
local expired = redis.call('zrangebyscore', KEYS[2], 0, now, 'limit', 0, 1000)
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  local free = redis.call('incrby', KEYS[1], #expired)
  if free > 0 then
    redis.call(ARGV[3], KEYS[3], free)
  end
end
if tonumber(redis.call('get', KEYS[1]) or '0') >= 1 then
  local lease = tonumber(ARGV[1])
  redis.call('decr', KEYS[1])
  redis.call('zadd', KEYS[2], lease < 0 and never or now + lease, ARGV[2])
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then
    redis.call('pexpire', KEYS[2], ttl)
  end
  return nil
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[2] == nil or tonumber(first[2]) >= never then
  return -1
end
return math.max(tonumber(first[2]) - now, 0)
