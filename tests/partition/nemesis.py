"""The nemesis: a seeded schedule of faults, one at a time, each undone
before the next after a quiet spell.

    isolate-master  the locks' master and one client host apart from every
                    other host (RedLock: two of the five masters and a
                    client) - the classic split brain: the old master keeps
                    accepting its client's writes while a failover promotes
                    a replica behind it
    isolate-node    one server host alone (a replica, a sentinel's host,
                    one RedLock master)
    cut-client      one client host cut from every server host
    pause-master    SIGSTOP of the locks' master, then SIGCONT
    pause-client    SIGSTOP of every worker on a client host (a stop-the-
                    world pause), often past the lease
    kill-master     kill -9 of the locks' master, restarted after a while

The seed fixes the kinds, the roles (which client, which of the RedLock
masters) and every duration; who is master when a fault starts is read
from the servers then, so a replay retraces the same schedule over the
same roles, not necessarily the same hosts.
"""

import random
import threading
import time

# kind -> (weight, shortest, longest duration in s)
FAULTS = {
    "isolate-master": (3, 2.0, 8.0),
    "isolate-node": (1, 1.0, 6.0),
    "cut-client": (2, 1.0, 6.0),
    "pause-master": (2, 1.0, 5.0),
    "pause-client": (3, 1.0, 6.0),
    "kill-master": (1, 0.5, 5.0),
}
QUIET = (1.0, 4.0)


def now_ns():
    return time.monotonic_ns()


class Nemesis:
    def __init__(self, seed, net, topo, clients, workers_on, only=None):
        """clients: the client hosts; workers_on(host): that host's worker
        processes (objects with pause and resume); only: the fault kinds
        to draw from (None: all)."""
        self.rng = random.Random(seed)
        self.only = only
        self.net, self.topo, self.clients = net, topo, clients
        self.workers_on = workers_on
        self.events = []  # dicts: kind, start, end (monotonic ns), hosts, detail
        self.stopping = threading.Event()

    def kinds(self):
        ks = [k for k in FAULTS if not (k == "isolate-node" and self.topo.kind == "single")
              and (self.only is None or k in self.only)]
        return ks, [FAULTS[k][0] for k in ks]

    def run(self, seconds):
        end = time.monotonic() + seconds
        kinds, weights = self.kinds()
        while not self.stopping.is_set():
            kind = self.rng.choices(kinds, weights)[0]
            lo, hi = FAULTS[kind][1:]
            length = round(self.rng.uniform(lo, hi), 2)
            quiet = round(self.rng.uniform(*QUIET), 2)
            client = self.rng.choice(self.clients)
            picks = self.rng.sample(self.topo.server_hosts, min(2, len(self.topo.server_hosts)))
            if time.monotonic() + length + 0.5 > end:
                break
            self._one(kind, length, client, picks)
            if self.stopping.wait(quiet):
                break

    def stop(self):
        self.stopping.set()

    # -- one fault --------------------------------------------------------
    def _master(self, picks):
        m = self.topo.master()
        return m if m is not None else picks[0]

    def _one(self, kind, length, client, picks):
        ev = {"kind": kind, "length": length, "hosts": [], "detail": ""}
        servers = list(self.topo.server_hosts)
        if kind == "isolate-master":
            apart = picks if self.topo.kind == "redlock" else [self._master(picks)]
            ev["hosts"] = apart + [client]
            undo = self._partition(apart + [client], [h for h in self.net.hosts if h not in apart + [client]])
        elif kind == "isolate-node":
            ev["hosts"] = [picks[0]]
            undo = self._partition([picks[0]], [h for h in self.net.hosts if h != picks[0]])
        elif kind == "cut-client":
            ev["hosts"] = [client]
            undo = self._partition([client], servers)
        elif kind == "pause-master":
            p = self.topo.servers[self._master(picks)]
            ev["hosts"] = [p.host]
            p.pause()
            undo = p.resume
        elif kind == "pause-client":
            ev["hosts"] = [client]
            ws = self.workers_on(client)
            for w in ws:
                w.pause()
            undo = lambda: [w.resume() for w in ws]
        else:  # kill-master
            p = self.topo.servers[self._master(picks)]
            ev["hosts"] = [p.host]
            p.kill()
            undo = p.start
        ev["start"] = now_ns()
        self.events.append(ev)
        self.stopping.wait(length)
        undo()
        ev["end"] = now_ns()

    def _partition(self, a, b):
        self.net.partition(a, b)
        return self.net.heal


def paused_during(events, host, t0, t1):
    """The pause-client events on host that overlap [t0, t1]."""
    return [e for e in events if e["kind"] == "pause-client" and host in e["hosts"]
            and e["start"] < t1 and e.get("end", t1) > t0]


def active_at(events, t):
    return [e for e in events if e["start"] <= t <= e.get("end", t)]
