-- Whether a count-down latch (Redisson's RCountDownLatch: a string, the
-- count; no key once it reached zero) is open.
-- KEYS[1]  the latch
-- Returns nil when the count is zero (or was never set), else -1: wait for
-- the zero message on redisson_countdownlatch__channel__{name}.
if tonumber(redis.call('get', KEYS[1]) or '0') <= 0 then
  return nil
end
return -1
