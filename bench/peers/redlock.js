'use strict';
// redlock (node-redlock) on one instance, ioredis (bench/peers/common.js runs
// the workloads): a 30 s lease like the watchdog's, and retries without end
// (by default it gives up after 10, 200 ms apart, which B3's waits pass);
// its retry delay and jitter as shipped.
const { run, Redis } = require('./common');
const Redlock = require('redlock');

run(async (port) => {
  const redis = new Redis({ port, host: '127.0.0.1' });
  const redlock = new Redlock([redis], { retryCount: -1 });
  return {
    redis,
    lock(name) {
      let held = null;
      return {
        acquire: async () => {
          held = await redlock.lock(name, 30000);
        },
        release: () => held.unlock(),
      };
    },
    close: () => redis.quit(),
  };
});
