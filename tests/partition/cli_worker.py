#!/usr/bin/env python3
"""The partition worker for relock the command: the loop a shell script
or a cron job runs, `relock NAME -- job` over and over, where the job is
one critical section at the checked resource.

    cli_worker.py --relock PATH (the worker contract's options)
    cli_worker.py --section --resource HOST:PORT --res NAME --id ID
                  --hold-ms N     (what relock runs: one section)

The loop prints the contract's TIMEOUT, ERR and REL lines from relock's
exit status (75 busy, 69 unreachable, 76 lost: the job was stopped); the
section prints ACQ when it starts (relock holds the lock then), WROTE,
and, when relock stops it with SIGTERM before its write, LOST <t> stopped
and ABANDON: the CLI's stop is its lost callback. When relock exits 76
the loop prints LOST <t> exited too: a loss relock found only after the
job ended (the job's section is over, relock's release found the lock
gone) is told by that exit status alone. The section has no validity
check of its own: whether the stop comes in time is what the test
measures.
"""

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import time

EXIT_BUSY, EXIT_UNREACHABLE, EXIT_LOST = 75, 69, 76


def emit(event, *rest):
    line = " ".join([event, str(time.monotonic_ns())] + [str(r) for r in rest]) + "\n"
    os.write(1, line.encode())  # one write per line: the loop and its jobs share the file


class Resource:
    def __init__(self, addr, res, wid):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=2)
        self.file = self.sock.makefile("r")
        self.res, self.id = res, wid

    def call(self, *words):
        self.sock.sendall((" ".join(str(w) for w in words) + "\n").encode())
        answer = self.file.readline().split()
        if not answer:
            raise ConnectionError("the resource closed the connection")
        return answer


def section(a):
    stopped = []
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(time.monotonic_ns()))
    emit("ACQ", 0)
    r = Resource(a.resource, a.res, a.id)
    answer = r.call("READ", a.res, a.id, 0)
    if answer[0] != "OK":
        emit("ABANDON", "refused-read")
        return 0
    end = time.monotonic() + a.hold_ms / 1000
    while not stopped and time.monotonic() < end:
        time.sleep(min(0.005, max(0, end - time.monotonic())))
    if stopped:
        r.call("ABORT", a.res, a.id)
        emit("LOST", "stopped", "relock stopped the job")
        emit("ABANDON", "stopped")
        return 143
    answer = r.call("WRITE", a.res, a.id, 0, int(answer[1]) + 1)
    emit("WROTE", "ok" if answer[0] == "OK" else "refused")
    return 0


def url(a):
    if a.topology == "sentinel":
        return "redis+sentinel://%s/%s" % (a.nodes, a.master_name)
    if a.topology == "cluster":
        return "redis+cluster://%s" % a.nodes
    return "redis://%s" % a.nodes


def loop(a):
    rng = random.Random(a.seed)
    argv = [a.relock, "-u", url(a), "-w", "%dms" % a.wait_ms, "--watchdog", "%dms" % a.lease_ms,
            "--timeout", "1s", "-k", "1s", "-o", "connect-timeout=1000"]
    if a.synced:
        argv += ["-o", "min-replicas-acked=%d" % a.synced]
    me = os.path.abspath(__file__)
    emit("START", a.id, "cli")
    deadline = time.monotonic() + a.seconds
    acquisitions = writes = 0
    while time.monotonic() < deadline:
        hold = rng.randint(a.hold_min_ms, a.hold_max_ms)
        job = [sys.executable, me, "--section", "--resource", a.resource, "--res", a.res, "--id", a.id,
               "--hold-ms", str(hold)]
        rc = subprocess.run(argv + [a.name, "--"] + job).returncode
        if rc == 0:
            acquisitions += 1
            writes += 1
            emit("REL", "ok")
        elif rc == EXIT_LOST:
            # relock's other way of telling: a loss found after the job
            # had ended (its release found the lock gone) stops nothing,
            # its exit status says it; a stopped job printed LOST already
            acquisitions += 1
            emit("LOST", "exited", "relock exited 76")
            emit("REL", "error", "lost: relock exited 76")
        elif rc == EXIT_BUSY:
            emit("TIMEOUT")
        else:
            emit("ERR", "relock exited %d%s" % (rc, " (unreachable or failing)" if rc == EXIT_UNREACHABLE else ""))
        if rc not in (0, EXIT_LOST):
            time.sleep(0.05)
        time.sleep(rng.uniform(0, 0.03))
    emit("END", acquisitions, writes)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--section", action="store_true")
    ap.add_argument("--hold-ms", type=int, default=0)
    ap.add_argument("--relock")
    for o in ("--id", "--resource", "--res", "--object", "--name", "--topology", "--nodes"):
        ap.add_argument(o)
    ap.add_argument("--master-name", default="mymaster")
    for o, d in (("--synced", 0), ("--lease-ms", 3000), ("--wait-ms", 5000), ("--hold-min-ms", 20),
                 ("--hold-max-ms", 300), ("--seconds", 60), ("--seed", 1)):
        ap.add_argument(o, type=int, default=d)
    a = ap.parse_args()
    if a.section:
        sys.exit(section(a))
    if not a.relock or a.topology == "redlock":
        ap.error("--relock PATH is needed, and relock the command takes no RedLock")
    sys.exit(loop(a))


if __name__ == "__main__":
    main()
