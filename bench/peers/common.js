'use strict';
// The workloads of bench/run part peers, shared by the Node peers (each peer
// file says how its library takes and gives back a lock). One JSON object on
// standard output, as bench/lock prints:
//
//   node PEER.js PORT b1 PAIRS
//       one lock, sequential acquire+release pairs after WARMUP of them:
//       p50/p99/mean in microseconds
//   node PEER.js PORT b2 NAMES SECONDS
//       NAMES locks, each in its own chain acquire -> release -> acquire ...,
//       all in flight at once from this one process: pairs per second over
//       SECONDS after half a second of warm-up
//   node PEER.js PORT b3 SECTIONS
//       one of B3's contending processes: B3_WARMUP sections on a name of its
//       own (uncontended: the JIT, not the waits), then it counts itself ready (INCR bench:peers:b3:ready) and waits for
//       bench/run's go (BLPOP bench:peers:b3:go), then SECTIONS sections on
//       bench:peers:b3 (acquire, GET, SET counter+1, release); the times of
//       its first acquisition and its last release (CLOCK_MONOTONIC, shared
//       by the processes) in microseconds
//
// A peer module exports open(port) -> {redis, lock(name) -> {acquire(),
// release()}, close()}: redis is an ioredis client for the counter and the
// gate, each lock one owner.
const Redis = require('ioredis');

const WARMUP = 1000;
const B3_WARMUP = 100;

const nowNs = () => process.hrtime.bigint();
const r1 = (x) => Math.round(x * 10) / 10;

function pct(sorted, p) {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.round(p * (sorted.length - 1))));
  return sorted[i] / 1e3;
}

async function b1(peer, pairs) {
  const lock = peer.lock('bench:peers:b1');
  const t = new Float64Array(pairs);
  for (let i = -WARMUP; i < pairs; i++) {
    const t0 = nowNs();
    await lock.acquire();
    await lock.release();
    if (i >= 0) t[i] = Number(nowNs() - t0);
  }
  const mean = t.reduce((a, b) => a + b, 0) / pairs / 1e3;
  t.sort();
  return { pairs, warmup: WARMUP, p50_us: r1(pct(t, 0.5)), p99_us: r1(pct(t, 0.99)), mean_us: r1(mean) };
}

async function b2(peer, names, seconds) {
  let pairs = 0;
  let running = true;
  const chain = async (lock) => {
    while (running) {
      await lock.acquire();
      await lock.release();
      pairs++;
    }
  };
  const chains = [];
  for (let i = 0; i < names; i++) chains.push(chain(peer.lock(`bench:peers:b2:${i}`)));
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  await sleep(500);
  const p0 = pairs;
  const t0 = nowNs();
  await sleep(seconds * 1000);
  const p1 = pairs;
  const t1 = nowNs();
  running = false;
  await Promise.all(chains);
  const span = Number(t1 - t0) / 1e9;
  return { names, seconds: r1(span), pairs: p1 - p0, pairs_per_s: Math.round((p1 - p0) / span) };
}

async function sections(peer, lock, counter, n, times) {
  for (let s = 0; s < n; s++) {
    await lock.acquire();
    const got = nowNs();
    const v = await peer.redis.get(counter);
    await peer.redis.set(counter, (v === null ? 0 : parseInt(v, 10)) + 1);
    const freed = nowNs();
    await lock.release();
    if (times) {
      if (s === 0) times.first = got;
      times.last = freed;
    }
  }
}

async function b3(peer, n) {
  const warm = `bench:peers:b3warm:${process.pid}`;
  await sections(peer, peer.lock(warm), `${warm}:counter`, B3_WARMUP, null);
  const gate = new Redis({ port: peer.port, host: '127.0.0.1' });
  await gate.incr('bench:peers:b3:ready');
  await gate.blpop('bench:peers:b3:go', 0);
  gate.disconnect();
  const times = {};
  await sections(peer, peer.lock('bench:peers:b3'), 'bench:peers:b3:counter', n, times);
  return {
    sections: n,
    warmup: B3_WARMUP,
    first_got_us: Number(times.first / 1000n),
    last_freed_us: Number(times.last / 1000n),
  };
}

// main(open): runs the mode of process.argv with the peer's open()
async function main(open) {
  const [port, mode, a, b] = process.argv.slice(2);
  const peer = await open(parseInt(port, 10));
  peer.port = parseInt(port, 10);
  let out;
  if (mode === 'b1') out = await b1(peer, parseInt(a, 10));
  else if (mode === 'b2') out = await b2(peer, parseInt(a, 10), parseFloat(b));
  else if (mode === 'b3') out = await b3(peer, parseInt(a, 10));
  else {
    process.stderr.write('usage: node PEER.js PORT b1 PAIRS | b2 NAMES SECONDS | b3 SECTIONS\n');
    process.exit(2);
  }
  process.stdout.write(JSON.stringify(out) + '\n');
  await peer.close();
  process.exit(0);
}

function run(open) {
  main(open).catch((e) => {
    process.stderr.write(`${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
  });
}

module.exports = { run, Redis };
