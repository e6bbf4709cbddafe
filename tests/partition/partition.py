#!/usr/bin/env python3
"""Partitions, measured: mutual exclusion under real network partitions,
relock and Redisson side by side (tests/partition/README.md).

    tests/partition/partition.py [--rows single,sentinel-sync,...] [--seconds N]
                                 [--seed S] [--out DIR] [--check] [--no-java]

Runs as root (network namespaces, nftables). For each row: a fresh
network, the row's servers, the checked resource, on each of three client
hosts a relock worker and a Redisson worker per object (a plain lock and a
fenced lock; RedLock's own), the seeded nemesis, then the checker. Every
row's nemesis is seeded from --seed and the row's name, so relock and
Redisson live through the very same faults, and a rerun the same schedule.
--check: exit 1 when relock broke mutual exclusion in a setting its
documentation calls safe (below), or when a worker did no work at all.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib

sys.dont_write_bytecode = True  # the source tree may be read-only (make distcheck)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import checker  # noqa: E402
import net as netmod  # noqa: E402
import nemesis as nemmod  # noqa: E402
import topology  # noqa: E402

# row -> (topology, --synced, objects, documented safe for relock)
ROWS = {
    "single": ("single", 0, ("lock", "fenced"), True),
    "sentinel-async": ("sentinel", 0, ("lock", "fenced"), False),
    "sentinel-sync": ("sentinel", 1, ("lock", "fenced"), True),
    "cluster-async": ("cluster", 0, ("lock", "fenced"), False),
    "cluster-sync": ("cluster", 1, ("lock", "fenced"), True),
    "redlock": ("redlock", 0, ("redlock",), True),
}
CLIENTS = ("c1", "c2", "c3")
RESOURCE_PORT = 7000
LEASE_MS = 3000
STARTUP_S = 40  # the longest a row's workers may take to connect
# the workers run this much longer than the nemesis: their startup (a JVM's
# takes seconds on a busy machine) and a quiet end, long enough for a master
# to get its replica back (a full resync waits 5 s) and grant locks again
SLACK_S = 25
SLACK_NO_JAVA_S = 15


def worker_id(host, lib, obj):
    return "%s-%s-%s" % (host, lib, obj)


def resource_name(lib, obj):
    return "%s-%s" % (lib, obj)


class WorkerProc:
    def __init__(self, net, host, lib, obj, argv, outdir):
        self.host, self.lib, self.obj = host, lib, obj
        self.id, self.res = worker_id(host, lib, obj), resource_name(lib, obj)
        self.out = os.path.join(outdir, self.id + ".out")
        with open(self.out, "w") as o, open(os.path.join(outdir, self.id + ".err"), "w") as e:
            self.p = subprocess.Popen(net.exec_argv(host) + argv, stdout=o, stderr=e, start_new_session=True)

    def pause(self):
        self._signal(signal.SIGSTOP)

    def resume(self):
        self._signal(signal.SIGCONT)

    def _signal(self, sig):
        """To the worker's process group: relock the command's loop pauses
        with its relock and its job."""
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, sig)
            except ProcessLookupError:
                pass

    def started(self):
        with open(self.out) as f:
            return f.readline().startswith("START ")

    def kill(self):
        self.resume()
        self._signal(signal.SIGKILL)
        self.p.wait()


class Row:
    def __init__(self, name, args, outdir):
        self.name, self.args, self.outdir = name, args, outdir
        self.kind, self.synced, self.objects, self.safe = ROWS[name]
        self.seed = (args.seed * 1000003 + zlib.crc32(name.encode())) & 0xFFFFFFFF
        self.workers = []
        self.failovers = []

    def _worker_argv(self, lib, obj, host, topo, seconds):
        common = ["--id", worker_id(host, lib, obj), "--resource", "%s:%d" % (self.net.gateway(host), RESOURCE_PORT),
                  "--res", resource_name(lib, obj), "--object", obj, "--name", "{pt}:%s-%s" % (lib, obj),
                  "--topology", self.kind, "--nodes", topo.nodes(), "--synced", str(self.synced),
                  "--lease-ms", str(LEASE_MS), "--seconds", str(seconds),
                  "--seed", str(self.seed + zlib.crc32(host.encode()))]
        if lib == "relock" and obj == "cli":
            return [sys.executable, os.path.join(HERE, "cli_worker.py"), "--relock", self.args.relock_cli] + common
        if lib == "relock":
            return [self.args.relock_worker] + common
        return ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx128m", "-cp", self.args.java_classpath,
                "relock.interop.PartitionWorker"] + common

    def run(self):
        hosts = list(topology.KINDS[self.kind].server_hosts) + list(CLIENTS)
        self.net = netmod.Network(hosts)
        resource = topo = None
        try:
            self.net.up()
            topo = topology.KINDS[self.kind](self.net, os.path.join(self.outdir, "servers"),
                                             self.args.redis_server, self.args.redis_cli)
            topo.start()
            reslog = os.path.join(self.outdir, "resource.log")
            resource = subprocess.Popen([sys.executable, os.path.join(HERE, "resource.py"), str(RESOURCE_PORT), reslog],
                                        stdout=subprocess.PIPE, text=True, start_new_session=True)
            if resource.stdout.readline().strip() != "ready":
                raise RuntimeError("the checked resource did not start")
            libs = ["relock"] + ([] if self.args.no_java else ["redisson"])
            worker_s = self.args.seconds + (SLACK_NO_JAVA_S if self.args.no_java else SLACK_S)
            for host in CLIENTS:
                for lib in libs:
                    for obj in self.objects + (("cli",) if lib == "relock" and self.kind != "redlock" else ()):
                        self.workers.append(WorkerProc(self.net, host, lib, obj,
                                                       self._worker_argv(lib, obj, host, topo, worker_s), self.outdir))
            t0 = time.monotonic()
            self._wait_started(t0)
            nem = nemmod.Nemesis(self.seed, self.net, topo, list(CLIENTS),
                                 lambda h: [w for w in self.workers if w.host == h], self.args.faults)
            watch = threading.Thread(target=self._watch_master, args=(topo, nem.stopping), daemon=True)
            watch.start()
            # the workers end worker_s after their start: the nemesis stops
            # 5 s before, so every fault is undone while they still work
            budget = min(self.args.seconds, t0 + worker_s - 5 - time.monotonic())
            started = time.monotonic()
            nem.run(budget)
            nem.stop()
            self.net.heal()
            self.nemesis_s = time.monotonic() - started
            self.events = nem.events
            self._wait_ended(time.monotonic() + worker_s + 30)
            watch.join()
            return self._check(reslog)
        finally:
            for w in self.workers:
                w.kill()
            if resource is not None:
                resource.kill()
                resource.wait()
            if topo is not None:
                topo.stop()
            self.net.down()

    def _wait_started(self, t0):
        while not all(w.started() for w in self.workers):
            dead = [w.id for w in self.workers if w.p.poll() is not None]
            if dead or time.monotonic() - t0 > STARTUP_S:
                raise RuntimeError("%s: workers did not start: %s (see %s/*.err)"
                                   % (self.name, dead or [w.id for w in self.workers if not w.started()], self.outdir))
            time.sleep(0.2)

    def _wait_ended(self, deadline):
        for w in self.workers:
            try:
                w.p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        self.unfinished = [w.id for w in self.workers if w.p.poll() != 0]

    def _watch_master(self, topo, stopping):
        last = topo.master()
        while not stopping.wait(0.3):
            m = topo.master()
            if m is not None and last is not None and m != last:
                self.failovers.append((nemmod.now_ns(), last, m))
            if m is not None:
                last = m

    def _check(self, reslog):
        ops = checker.read_resource_log(reslog)
        ws = [checker.Worker(w.id, w.host, w.lib, w.obj, w.res, w.out) for w in self.workers]
        self.results = {}
        for w in self.workers:
            if w.res not in self.results:
                self.results[w.res] = checker.summarize(w.res, ops, ws, self.events, LEASE_MS)
        return self.results


def _untold(x):
    """Why an overlap's stale holder is not excused."""
    if x["told"] == "late":
        return "its lost callback came %.0f ms after the other's acquisition, past the bound (%.0f ms)" % (
            x["told_ms"], x["deadline_ms"])
    return "the library never told it (no lost callback for that hold)"


def verdict(row):
    """What --check fails on. In a setting documented safe, for relock's
    workers: two writers at once, unless the stale holder (the earlier
    acquisition) was told - its own lost callback, for that hold, within
    the bound after the faults that could delay it (checker.tell_deadline);
    a hold another worker acquired the lock during whose holder was not
    told so, even if its validity check said no and it wrote nothing; a
    lost update or a token that went down on a fenced resource. Anywhere:
    a relock worker's log the resource contradicts (a write in a hold it
    abandoned, a write without its validity check), a worker that did
    nothing or did not end. Redisson's workers are measured, never judged:
    nothing tells them a loss."""
    problems = []
    if row.unfinished:
        problems.append("workers that did not end cleanly: %s" % ", ".join(row.unfinished))
    for res, r in row.results.items():
        if r["acquisitions"] == 0 or r["writes"] == 0:
            problems.append("%s: no work done (%d acquisitions, %d writes)" % (res, r["acquisitions"], r["writes"]))
        if not res.startswith("relock-"):
            continue
        for c in r["contract"]:
            problems.append("%s: the worker's log and the resource disagree: %s" % (res, c))
        if not row.safe:
            continue
        judged = set()
        for v in r["violations"]:
            if not v["excused"]:
                judged.add((v["stale"], v["stale_acq"]))
                problems.append("%s: two writers, %s stale over %s: %s: %s" % (res, v["stale"], v["other"], _untold(
                    {"told": v["stale_told"], "told_ms": v["stale_told_ms"], "deadline_ms": v["deadline_ms"]}),
                    json.dumps(v)))
        for b in r["overlapped"]:
            if b["told"] != "told" and (b["stale"], b["stale_acq"]) not in judged:
                problems.append("%s: a loss untold: %s acquired while %s still believed (%s): %s: %s" % (
                    res, b["other"], b["stale"], "abandoned, " + b["abandoned"] if b["abandoned"] else "it wrote",
                    _untold(b), json.dumps(b)))
        if res.endswith("fenced") and (r["lost_updates"] or r["disorder"]):
            problems.append("%s: fencing failed: %d lost updates, %d tokens out of order"
                            % (res, r["lost_updates"], r["disorder"]))
    return problems


def report(row):
    lines = ["### %s (%s%s) - seed %d, %.0f s of nemesis" % (
        row.name, row.kind, ", min-replicas-acked 1 / checkLockSyncedSlaves" if row.synced else "", row.seed,
        row.nemesis_s)]
    kinds = {}
    for e in row.events:
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
    lines.append("faults: %s; failovers seen: %d" % (", ".join("%s %d" % kv for kv in sorted(kinds.items())) or "none",
                                                     len(row.failovers)))
    lines.append("")
    lines.append("| client | object | acquisitions | violations (overlapping sections) | worst overlap ms | caught by fencing | lost updates |"
                 " told before the other acquired / after / never | abandoned | errors |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for res, r in sorted(row.results.items()):
        v = r["violations"]
        told = [x["told_ms"] for x in v if x["told_ms"] is not None]
        lib, obj = res.split("-", 1)
        lines.append("| %s | %s | %d | %d | %s | %d | %d | %s | %d | %d |" % (
            lib, obj, r["acquisitions"], len(v), "%.0f" % max(x["overlap_ms"] for x in v) if v else "-",
            sum(1 for x in v if x["caught"]), r["lost_updates"],
            "%d / %d / %d" % (sum(1 for t in told if t <= 0), sum(1 for t in told if t > 0), len(v) - len(told))
            if lib == "relock" else "n/a (no loss callback)", r["abandoned"], r["errors"]))
    owed = []
    for res, r in sorted(row.results.items()):
        b = r["overlapped"]
        if res.startswith("relock-") and b:
            owed.append("%s %d (told in time %d, late %d, never %d; %d abandoned)" % (
                res.split("-", 1)[1], len(b), sum(1 for x in b if x["told"] == "told"),
                sum(1 for x in b if x["told"] == "late"), sum(1 for x in b if x["told"] is None),
                sum(1 for x in b if x["abandoned"])))
    bound = next(iter(row.results.values()))["tell_bound_ms"] if row.results else 0
    lines.append("")
    lines.append("relock holds another worker acquired the lock during (a lost callback owed within %.1f s): %s"
                 % (bound / 1e3, "; ".join(owed) or "none"))
    return "\n".join(lines)


def details(row):
    out = []
    for res, r in sorted(row.results.items()):
        for v in r["violations"]:
            stale = {"told": "the stale holder was told %+.0f ms from the other's acquisition" % (v["stale_told_ms"] or 0),
                     "late": "the stale holder was told %+.0f ms from the other's acquisition, too late" % (
                         v["stale_told_ms"] or 0)}.get(v["stale_told"], "the stale holder was never told")
            out.append("%s %s: %s over %s for %.1f ms%s%s, %s%s; faults then: %s" % (
                row.name, res, v["stale"], v["other"], v["overlap_ms"], ", caught by fencing" if v["caught"] else "",
                ", a host was paused" if v["paused"] else "", stale,
                (" (either: told %+.0f ms)" % v["told_ms"]) if v["told_ms"] is not None else "",
                ", ".join(v["faults"]) or ("none; " + v["after"] if v["after"] else "none")))
        for b in r["overlapped"]:
            if b["told"] != "told" and res.startswith("relock-"):
                out.append("%s %s: %s acquired while %s still believed (%.0f ms more, %s): lost callback %s; faults then: %s"
                           % (row.name, res, b["other"], b["stale"], b["believed_ms"],
                              "abandoned " + b["abandoned"] if b["abandoned"] else "it wrote",
                              "never" if b["told"] is None else "%+.0f ms, past %.0f ms" % (b["told_ms"], b["deadline_ms"]),
                              ", ".join(b["faults"]) or "none"))
    return out


HERE = os.path.dirname(os.path.abspath(__file__))


def _cli_beside(server):
    """The redis-cli beside a REDIS_SERVER given as a path (a custom
    build's pair), as tests/support/cluster.c picks it; else the PATH's."""
    if server and os.sep in server:
        cli = os.path.join(os.path.dirname(server), "redis-cli")
        if os.access(cli, os.X_OK):
            return cli
    return "redis-cli"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=None)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--no-java", action="store_true")
    ap.add_argument("--faults", type=lambda s: s.split(","), default=None,
                    help="draw only these fault kinds (nemesis.py)")
    ap.add_argument("--expect-violations", action="store_true",
                    help="the harness's own canary: exit 1 unless relock's plain lock was seen violated")
    ap.add_argument("--relock-worker", default=os.environ.get("RELOCK_PARTITION_WORKER", "tests/partition/worker"))
    ap.add_argument("--relock-cli", default=os.environ.get("RELOCK_PARTITION_CLI", "tools/relock"))
    ap.add_argument("--java-classpath", default=os.environ.get("RELOCK_PARTITION_CLASSPATH"))
    ap.add_argument("--redis-server", default=os.environ.get("REDIS_SERVER") or "redis-server")
    ap.add_argument("--redis-cli", default=os.environ.get("REDIS_CLI") or _cli_beside(os.environ.get("REDIS_SERVER")))
    args = ap.parse_args()
    rows = args.rows.split(",")
    for r in rows:
        if r not in ROWS:
            ap.error("unknown row %r (rows: %s)" % (r, ", ".join(ROWS)))
    for k in args.faults or ():
        if k not in nemmod.FAULTS:
            ap.error("unknown fault %r (faults: %s)" % (k, ", ".join(nemmod.FAULTS)))
    if os.geteuid() != 0:
        sys.exit("partition.py: needs root (network namespaces, nftables)")
    for tool in ("ip", "nft", args.redis_server, args.redis_cli):
        if shutil.which(tool) is None:
            sys.exit("partition.py: %s not found (./bootstrap --deps installs it)" % tool)
    args.relock_worker = os.path.abspath(args.relock_worker)
    args.relock_cli = os.path.abspath(args.relock_cli)
    for path in (args.relock_worker, args.relock_cli):
        if not os.access(path, os.X_OK):
            sys.exit("partition.py: %s is missing (make check-build builds it)" % path)
    if not args.no_java and not args.java_classpath:
        sys.exit("partition.py: --java-classpath (or RELOCK_PARTITION_CLASSPATH) is needed for the Redisson workers")
    outdir = args.out or tempfile.mkdtemp(prefix="relock-partition.")
    os.makedirs(outdir, exist_ok=True)
    netmod.remove_stale()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    problems, texts = [], []
    for name in rows:
        row = Row(name, args, os.path.join(outdir, name))
        os.makedirs(row.outdir, exist_ok=True)
        print("# %s: %d s of nemesis, seed %d, logs in %s" % (name, args.seconds, row.seed, row.outdir), flush=True)
        row.run()
        texts.append(report(row))
        print(texts[-1] + "\n", flush=True)
        for d in details(row):
            print("# " + d, flush=True)
        with open(os.path.join(row.outdir, "events.json"), "w") as f:
            json.dump({"events": row.events, "failovers": row.failovers,
                       "results": row.results}, f, indent=1)
        if args.check:
            problems += ["%s: %s" % (name, p) for p in verdict(row)]
        if args.expect_violations and not row.results.get("relock-lock", {}).get("violations"):
            problems.append("%s: no violation of relock's plain lock seen where one was expected" % name)
    with open(os.path.join(outdir, "report.md"), "w") as f:
        f.write("\n\n".join(texts) + "\n\nrun: %.0f s in all\n" % (time.monotonic() - started))
    print("# report: %s/report.md (%.0f s in all)" % (outdir, time.monotonic() - started))
    for p in problems:
        print("FAIL " + p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
