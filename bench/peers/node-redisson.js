'use strict';
// node-redisson (Redisson's lock format in Node, on ioredis; its own
// connections, pub/sub for the waits) (bench/peers/common.js runs the
// workloads): lock() with the watchdog lease, as relock and Redisson take it.
const { run, Redis } = require('./common');
const { Redisson } = require('node-redisson');

run(async (port) => {
  const redis = new Redis({ port, host: '127.0.0.1' });
  const redisson = new Redisson({ redis: { options: { host: '127.0.0.1', port } } });
  return {
    redis,
    lock(name) {
      const l = redisson.getLock(name);
      return { acquire: () => l.lock(), release: () => l.unlock() };
    },
    close: async () => {
      await redis.quit();
    },
  };
});
