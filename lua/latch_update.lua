-- Changes a count-down latch (Redisson's RCountDownLatch layout), once: a
-- repeat of the same request (a retry after a lost answer) answers as the
-- first did and changes nothing - a retried count-down never counts twice.
-- KEYS[1]  the latch: a string, the count; deleted when it reaches zero
-- KEYS[2]  its channel, redisson_countdownlatch__channel__{name}: "0" when
--          the count reaches zero, "1" when a new count is set
-- KEYS[3]  this request's latch, redisson_unlock_latch:{name}:<request-id>
-- ARGV[1]  what to do:
--          set     set the count ARGV[2] if none is set; answers 1, else 0
--          down    count down by one; answers the count left
--          delete  delete the count (opens it); answers 1 if there was one
-- ARGV[2]  the count (set)
-- ARGV[3]  how long the request's latch remembers the answer, milliseconds
-- ARGV[4]  the publish command (PUBLISH, or SPUBLISH on a sharded cluster)
local answered = redis.call('get', KEYS[3])
if answered then
  return tonumber(answered)
end
local what = ARGV[1]
local answer
if what == 'set' then
  answer = 0
  if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[2])
    redis.call(ARGV[4], KEYS[2], '1')
    answer = 1
  end
elseif what == 'down' then
  local left = redis.call('decr', KEYS[1])
  if left <= 0 then
    redis.call('del', KEYS[1])
  end
  if left == 0 then
    redis.call(ARGV[4], KEYS[2], '0')
  end
  answer = left > 0 and left or 0
else
  answer = redis.call('del', KEYS[1])
  if answer == 1 then
    redis.call(ARGV[4], KEYS[2], '0')
  end
end
redis.call('set', KEYS[3], answer, 'px', ARGV[3])
return answer
