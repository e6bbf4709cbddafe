'use strict';
// redis-semaphore's Mutex on ioredis (bench/peers/common.js runs the
// workloads): its defaults but for the acquire timeout, which B3's waits
// can pass (10 s by default, then acquire() fails).
const { run, Redis } = require('./common');
const { Mutex } = require('redis-semaphore');

run(async (port) => {
  const redis = new Redis({ port, host: '127.0.0.1' });
  return {
    redis,
    lock(name) {
      const m = new Mutex(redis, name, { acquireTimeout: 120000 });
      return { acquire: () => m.acquire(), release: () => m.release() };
    },
    close: () => redis.quit(),
  };
});
