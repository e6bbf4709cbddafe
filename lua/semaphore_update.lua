-- Changes a semaphore's permits (Redisson's RSemaphore layout), once: a
-- repeat of the same request (a retry after a lost answer) answers as the
-- first did and changes nothing.
-- KEYS[1]  the semaphore: a string, how many permits are free
-- KEYS[2]  its channel, redisson_sc:{name}: the free count after a change
--          that adds permits (Redisson's waiters try again on any message)
-- KEYS[3]  this request's latch, redisson_unlock_latch:{name}:<request-id>
-- ARGV[1]  what to do:
--          release  give ARGV[2] permits back; answers the free count
--          add      add ARGV[2] (may be negative); answers the free count
--          set      set ARGV[2] if no count is set; answers 1, else 0
--          drain    take every free permit; answers how many
-- ARGV[2]  a number of permits
-- ARGV[3]  how long the latch remembers the answer, in milliseconds
-- ARGV[4]  the publish command (PUBLISH, or SPUBLISH on a sharded cluster)
local answered = redis.call('get', KEYS[3])
if answered then
  return tonumber(answered)
end
local what, n = ARGV[1], tonumber(ARGV[2])
local answer, free
if what == 'set' then
  answer = 0
  if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], n)
    free, answer = n, 1
  end
elseif what == 'drain' then
  answer = tonumber(redis.call('get', KEYS[1]) or '0')
  if redis.call('exists', KEYS[1]) == 1 then
    redis.call('set', KEYS[1], 0)
  end
else
  free = redis.call('incrby', KEYS[1], n)
  answer = free
end
-- Only a positive count: a Redisson waiter releases min(its waiters, the
-- message) local permits, which must not be negative.
if free ~= nil and free > 0 then
  redis.call(ARGV[4], KEYS[2], free)
end
redis.call('set', KEYS[3], answer, 'px', ARGV[3])
return answer
