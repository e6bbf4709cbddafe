-- Changes or reads a permit-expirable semaphore (Redisson's
-- RPermitExpirableSemaphore layout), once: a repeat of the same request (a
-- retry after a lost answer) answers as the first did and changes nothing.
-- Permits past their expiry return to the pool first, as on acquisition.
-- KEYS[1]  the semaphore: a string, how many permits are free
-- KEYS[2]  its channel, redisson_sc:{name}
-- KEYS[3]  this request's latch, redisson_unlock_latch:{name}:<request-id>
-- KEYS[4]  its permits taken, "{name}:timeout"
-- ARGV[1]  what to do:
--          release    give back permit ARGV[5]; answers 1, or 0 when it
--                     was not taken (expired, released, never taken)
--          add        add ARGV[2] permits (may be negative); answers the
--                     free count
--          set        set ARGV[2] free if no count is set; answers 1, else 0
--          available  answers the free count
-- ARGV[2]  a number of permits
-- ARGV[3]  how long the latch remembers the answer, in milliseconds
-- ARGV[4]  the publish command (PUBLISH, or SPUBLISH on a sharded cluster)
-- ARGV[5]  release: the permit
local answered = redis.call('get', KEYS[3])
if answered then
  return tonumber(answered)
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local what, n = ARGV[1], tonumber(ARGV[2])
local answer, free
local released = false
if what == 'release' then
  local expiry = redis.call('zscore', KEYS[4], ARGV[5])
  if expiry and tonumber(expiry) > now then
    redis.call('zrem', KEYS[4], ARGV[5])
    released = true
  end
end
local expired = redis.call('zrangebyscore', KEYS[4], 0, now, 'limit', 0, 1000)
if #expired > 0 then
  redis.call('zrem', KEYS[4], unpack(expired))
end
local back = #expired + (released and 1 or 0)
if back > 0 then
  free = redis.call('incrby', KEYS[1], back)
end
if what == 'release' then
  answer = released and 1 or 0
elseif what == 'set' then
  answer = 0
  if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], n)
    free, answer = n, 1
  end
elseif what == 'add' then
  free = redis.call('incrby', KEYS[1], n)
  answer = free
else
  answer = tonumber(redis.call('get', KEYS[1]) or '0')
end
-- Only a positive count: a Redisson waiter releases min(its waiters, the
-- message) local permits, which must not be negative.
if free ~= nil and free > 0 then
  redis.call(ARGV[4], KEYS[2], free)
end
if what ~= 'available' then
  redis.call('set', KEYS[3], answer, 'px', ARGV[3])
end
return answer
