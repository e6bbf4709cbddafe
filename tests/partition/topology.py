"""The Redis servers of each topology, each on a host of its own.

single    one master (n1)
sentinel  a master (n1) and its replica (n2), three sentinels (n1 n2 n3):
          quorum 2, down after 1 s, so a cut or paused master is replaced
          in about 2 s
cluster   3 masters and 3 replicas (n1-n6), node timeout 1 s
redlock   5 independent masters (n1-n5)

Every server keeps an append-only file (fsync every second): a killed and
restarted server comes back with what it had acknowledged - the process
dies, not the machine, so nothing written is lost (a power loss, which
loses the last second, is not simulated). Every process is started by
pid, on its host, and stopped by pid.
"""

import os
import signal
import subprocess
import time

import resp

PORT = 6379
SENTINEL_PORT = 26379
MASTER_NAME = "mymaster"


class Proc:
    """A server process on a host: start, pause, resume, kill, restart."""

    def __init__(self, net, host, argv, logfile):
        self.net, self.host, self.argv, self.logfile = net, host, argv, logfile
        self.p = None

    def start(self):
        with open(self.logfile, "a") as out:
            self.p = subprocess.Popen(self.net.exec_argv(self.host) + self.argv, stdout=out,
                                      stderr=subprocess.STDOUT, start_new_session=True)

    def signal(self, sig):
        if self.p is not None and self.p.poll() is None:
            os.kill(self.p.pid, sig)

    def pause(self):
        self.signal(signal.SIGSTOP)

    def resume(self):
        self.signal(signal.SIGCONT)

    def kill(self):
        if self.p is not None:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGKILL)
            self.p.wait()
            self.p = None


class Topology:
    kind = None
    server_hosts = ()

    def __init__(self, net, workdir, redis_server, redis_cli):
        self.net, self.workdir = net, workdir
        self.redis_server, self.redis_cli = redis_server, redis_cli
        self.servers = {}  # host -> Proc (the data node, not a sentinel)
        self.others = []  # sentinels

    def addr(self, host, port=PORT):
        return "%s:%d" % (self.net.ip(host), port)

    def host_of(self, ip):
        for h in self.net.hosts:
            if self.net.ip(h) == ip:
                return h
        return None

    def _dir(self, name):
        d = os.path.join(self.workdir, name)
        os.makedirs(d, exist_ok=True)
        return d

    def _server(self, host, extra=()):
        d = self._dir(host)
        argv = [self.redis_server, "--bind", self.net.ip(host), "--port", str(PORT), "--protected-mode", "no",
                "--save", "", "--appendonly", "yes", "--appendfsync", "everysec", "--dir", d,
                "--daemonize", "no", "--loglevel", "notice"] + list(extra)
        p = Proc(self.net, host, argv, os.path.join(d, "redis.log"))
        self.servers[host] = p
        p.start()
        return p

    def _wait(self, what, check, timeout=30):
        end = time.monotonic() + timeout
        last = None
        while time.monotonic() < end:
            try:
                if check():
                    return
            except (OSError, resp.RedisError) as e:
                last = e
            time.sleep(0.1)
        raise RuntimeError("%s: not ready in %d s (%s)" % (self.kind, timeout, last or what))

    def _ping_all(self):
        for h in self.servers:
            self._wait("PING " + h, lambda h=h: resp.command(self.addr(h), "PING") == "PONG")

    def stop(self):
        for p in self.others + list(self.servers.values()):
            p.kill()

    # -- what the nemesis and the workers need ------------------------------
    def nodes(self):
        """The workers' --nodes."""
        raise NotImplementedError

    def master(self):
        """The host now serving the locks as master, or None if unknown."""
        raise NotImplementedError


class Single(Topology):
    kind = "single"
    server_hosts = ("n1",)

    def start(self):
        self._server("n1")
        self._ping_all()

    def nodes(self):
        return self.addr("n1")

    def master(self):
        return "n1"


class Sentinel(Topology):
    kind = "sentinel"
    server_hosts = ("n1", "n2", "n3")

    def start(self):
        self._server("n1")
        self._server("n2", ["--replicaof", self.net.ip("n1"), str(PORT)])
        self._ping_all()
        self._wait("replication", lambda: "master_link_status:up" in resp.command(self.addr("n2"), "INFO", "replication"))
        for h in self.server_hosts:
            d = self._dir(h)
            conf = os.path.join(d, "sentinel.conf")
            with open(conf, "w") as f:
                f.write("bind %s\nport %d\ndaemonize no\ndir %s\nsentinel resolve-hostnames no\n"
                        "sentinel monitor %s %s %d 2\nsentinel down-after-milliseconds %s 1000\n"
                        "sentinel failover-timeout %s 4000\nsentinel parallel-syncs %s 1\n"
                        % (self.net.ip(h), SENTINEL_PORT, d, MASTER_NAME, self.net.ip("n1"), PORT, MASTER_NAME,
                           MASTER_NAME, MASTER_NAME))
            p = Proc(self.net, h, [self.redis_server, conf, "--sentinel"], os.path.join(d, "sentinel.log"))
            p.start()
            self.others.append(p)
        for h in self.server_hosts:
            self._wait("sentinel " + h, lambda h=h: self._sentinel_sees_all(h))

    def _sentinel_sees_all(self, h):
        info = resp.command(self.addr(h, SENTINEL_PORT), "SENTINEL", "MASTER", MASTER_NAME)
        fields = dict(zip(info[::2], info[1::2]))
        return fields.get("num-other-sentinels") == "2" and fields.get("num-slaves") == "1"

    def nodes(self):
        return ",".join(self.addr(h, SENTINEL_PORT) for h in self.server_hosts)

    def master(self):
        votes = {}
        for h in self.server_hosts:
            try:
                ip, _ = resp.command(self.addr(h, SENTINEL_PORT), "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME,
                                     timeout=0.2)
                votes[ip] = votes.get(ip, 0) + 1
            except (OSError, resp.RedisError, ValueError, TypeError):
                pass
        if not votes:
            return None
        return self.host_of(max(votes, key=votes.get))


class Cluster(Topology):
    kind = "cluster"
    server_hosts = ("n1", "n2", "n3", "n4", "n5", "n6")

    def __init__(self, *a, tag="pt"):
        super().__init__(*a)
        self.tag = tag
        self.slot = None

    def start(self):
        for h in self.server_hosts:
            self._server(h, ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                             "--cluster-node-timeout", "1000"])
        self._ping_all()
        out = subprocess.run([self.redis_cli, "--cluster", "create"] + [self.addr(h) for h in self.server_hosts]
                             + ["--cluster-replicas", "1", "--cluster-yes"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        if out.returncode != 0:
            raise RuntimeError("redis-cli --cluster create: " + out.stdout[-2000:])
        for h in self.server_hosts:
            self._wait("cluster_state " + h,
                       lambda h=h: "cluster_state:ok" in resp.command(self.addr(h), "CLUSTER", "INFO"))
        for h in self.server_hosts:  # a replica that never synced cannot take over
            self._wait("replication " + h, lambda h=h: _synced(resp.command(self.addr(h), "INFO", "replication")))
        self.slot = resp.command(self.addr("n1"), "CLUSTER", "KEYSLOT", "{%s}" % self.tag)
        self._wait("a master for slot %d" % self.slot, lambda: self.master() is not None)

    def nodes(self):
        return ",".join(self.addr(h) for h in self.server_hosts)

    def master(self):
        """The master of the locks' slot by the highest config epoch any
        reachable node reports for it."""
        best = None
        for h in self.server_hosts:
            try:
                text = resp.command(self.addr(h), "CLUSTER", "NODES", timeout=0.2)
            except (OSError, resp.RedisError):
                continue
            for line in text.splitlines():
                f = line.split()
                if len(f) < 9 or "master" not in f[2] or "fail" in f[2]:
                    continue
                if any(_covers(r, self.slot) for r in f[8:]):
                    epoch = int(f[6])
                    if best is None or epoch > best[0]:
                        best = (epoch, f[1].split("@")[0].rsplit(":", 1)[0])
        return self.host_of(best[1]) if best else None


class RedLock(Topology):
    kind = "redlock"
    server_hosts = ("n1", "n2", "n3", "n4", "n5")

    def start(self):
        for h in self.server_hosts:
            self._server(h)
        self._ping_all()

    def nodes(self):
        return ",".join(self.addr(h) for h in self.server_hosts)

    def master(self):
        return None  # five masters: the nemesis picks among them


def _synced(info):
    return "role:master" in info or "master_link_status:up" in info


def _covers(r, slot):
    if r.startswith("["):
        return False  # a slot being migrated
    lo, _, hi = r.partition("-")
    return int(lo) <= slot <= int(hi or lo)


KINDS = {t.kind: t for t in (Single, Sentinel, Cluster, RedLock)}
