"""redis-py's Lock (PyPI redis), the workloads of bench/run part peers.

One JSON object on standard output, as bench/lock and common.js print:

  python redis-py.py PORT b1 PAIRS         sequential pairs on one lock
  python redis-py.py PORT b2 NAMES SECONDS NAMES chains in flight (redis.asyncio)
  python redis-py.py PORT b3 SECTIONS      one of B3's contending processes

(common.js says what each mode measures and how B3's gate works.) The lock
as shipped but for a 30 s lease like the watchdog's (its default is none:
a crashed holder's lock would never expire); its waits poll every 0.1 s,
its default.
"""

import asyncio
import json
import os
import sys
import time

import redis
import redis.asyncio

WARMUP = 1000
B3_WARMUP = 100
LEASE_S = 30


def pct(v, p):
    return v[min(len(v) - 1, max(0, round(p * (len(v) - 1))))] / 1e3


def b1(port, pairs):
    r = redis.Redis(host="127.0.0.1", port=port)
    lock = r.lock("bench:peers:b1", timeout=LEASE_S)
    t = []
    for i in range(-WARMUP, pairs):
        t0 = time.monotonic_ns()
        lock.acquire()
        lock.release()
        if i >= 0:
            t.append(time.monotonic_ns() - t0)
    mean = sum(t) / pairs / 1e3
    t.sort()
    return {"pairs": pairs, "warmup": WARMUP, "p50_us": round(pct(t, 0.5), 1),
            "p99_us": round(pct(t, 0.99), 1), "mean_us": round(mean, 1)}


async def b2_async(port, names, seconds):
    # a connection per chain in flight, from the client's pool
    r = redis.asyncio.Redis(host="127.0.0.1", port=port, max_connections=names + 1)
    state = {"pairs": 0, "running": True}

    async def chain(lock):
        while state["running"]:
            await lock.acquire()
            await lock.release()
            state["pairs"] += 1

    tasks = [asyncio.create_task(chain(r.lock(f"bench:peers:b2:{i}", timeout=LEASE_S)))
             for i in range(names)]
    await asyncio.sleep(0.5)
    p0, t0 = state["pairs"], time.monotonic_ns()
    await asyncio.sleep(seconds)
    p1, t1 = state["pairs"], time.monotonic_ns()
    state["running"] = False
    await asyncio.gather(*tasks)
    await r.aclose()
    span = (t1 - t0) / 1e9
    return {"names": names, "seconds": round(span, 2), "pairs": p1 - p0,
            "pairs_per_s": round((p1 - p0) / span)}


def sections(r, lock, counter, n, times):
    for s in range(n):
        lock.acquire()
        got = time.monotonic_ns()
        v = r.get(counter)
        r.set(counter, (0 if v is None else int(v)) + 1)
        freed = time.monotonic_ns()
        lock.release()
        if times is not None:
            if s == 0:
                times["first"] = got
            times["last"] = freed


def b3(port, n):
    r = redis.Redis(host="127.0.0.1", port=port)
    warm = f"bench:peers:b3warm:{os.getpid()}"  # uncontended: a name of its own
    sections(r, r.lock(warm, timeout=LEASE_S), warm + ":counter", B3_WARMUP, None)
    r.incr("bench:peers:b3:ready")
    r.blpop(["bench:peers:b3:go"], 0)
    times = {}
    sections(r, r.lock("bench:peers:b3", timeout=LEASE_S), "bench:peers:b3:counter", n, times)
    return {"sections": n, "warmup": B3_WARMUP, "first_got_us": times["first"] // 1000,
            "last_freed_us": times["last"] // 1000}


def main(argv):
    if len(argv) >= 4 and argv[2] == "b1":
        out = b1(int(argv[1]), int(argv[3]))
    elif len(argv) >= 5 and argv[2] == "b2":
        out = asyncio.run(b2_async(int(argv[1]), int(argv[3]), float(argv[4])))
    elif len(argv) >= 4 and argv[2] == "b3":
        out = b3(int(argv[1]), int(argv[3]))
    else:
        sys.stderr.write("usage: redis-py.py PORT b1 PAIRS | b2 NAMES SECONDS | b3 SECTIONS\n")
        return 2
    print(json.dumps(out, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
