"""The test's own network: one namespace per host, all joined by a router.

Every host (a Redis node, a client machine) is a network namespace with
one veth link to a router namespace; host i is 10.77.i.2 on 10.77.i.0/24,
the router's side 10.77.i.1 and the host's default route. A partition is
a set of nftables rules in the router's forward chain that drop packets
between two groups of hosts: a real partition (packets vanish, nothing
answers, TCP finds out only by its timeouts), not a proxy's imitation.

The router itself is never partitioned: the supervisor enters it (up)
and talks to every node from there, and the checked resource listens
there, reachable from every host at its gateway address (traffic to the
router is input, not forward).

Names carry the supervisor's pid ("rlp<pid>-..."), so a run removes only
its own namespaces, and a later run can tell a dead run's leftovers
(remove_stale) from a live one's.
"""

import ctypes
import os
import re
import subprocess

PREFIX = "rlp"


def run(*argv, check=True, quiet=False):
    """Runs a command; raises with its output when it fails."""
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(argv), p.returncode, p.stdout.strip()))
    return p.stdout if not quiet else None


class Network:
    def __init__(self, hosts):
        """hosts: the host names in order (host i+1 is hosts[i])."""
        self.tag = "%s%d" % (PREFIX, os.getpid())
        self.router = self.tag + "-r"
        self.hosts = list(hosts)
        self.index = {h: i + 1 for i, h in enumerate(self.hosts)}
        self.made = []

    # -- addresses ------------------------------------------------------
    def ns(self, host):
        return "%s-%s" % (self.tag, host)

    def ip(self, host):
        return "10.77.%d.2" % self.index[host]

    def gateway(self, host):
        """The router's address as seen from host: where the resource is."""
        return "10.77.%d.1" % self.index[host]

    def exec_argv(self, host):
        """The argv prefix that runs a program on host."""
        return ["ip", "netns", "exec", self.ns(host)]

    # -- making and removing --------------------------------------------
    def up(self):
        """Makes the namespaces and moves this process into the router's
        (call it before starting any thread: setns moves one thread)."""
        run("ip", "netns", "add", self.router)
        self.made.append(self.router)
        _enter("/var/run/netns/" + self.router)
        run("ip", "link", "set", "lo", "up")
        run("sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
        for host in self.hosts:
            self._add_host(host)
        run("nft", "add table inet partition")
        run("nft", "add chain inet partition cuts { type filter hook forward priority 0 ; policy accept ; }")

    def _add_host(self, host):
        i = self.index[host]
        ns = self.ns(host)
        outer, inner = "%sv%da" % (self.tag, i), "%sv%db" % (self.tag, i)
        run("ip", "netns", "add", ns)
        self.made.append(ns)
        run("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
        run("ip", "link", "set", inner, "netns", ns)
        run("ip", "addr", "add", "10.77.%d.1/24" % i, "dev", outer)
        run("ip", "link", "set", outer, "up")
        hx = self.exec_argv(host)
        run(*hx, "ip", "link", "set", "lo", "up")
        run(*hx, "ip", "link", "set", inner, "name", "eth0")
        run(*hx, "ip", "addr", "add", "10.77.%d.2/24" % i, "dev", "eth0")
        run(*hx, "ip", "link", "set", "eth0", "up")
        run(*hx, "ip", "route", "add", "default", "via", "10.77.%d.1" % i)

    def down(self):
        """Removes every namespace this run made (their links go with them)."""
        for ns in reversed(self.made):
            run("ip", "netns", "del", ns, check=False)
        self.made = []

    # -- partitions -----------------------------------------------------
    def partition(self, a, b):
        """Drops every packet between the hosts of a and those of b."""
        sa = ", ".join(self.ip(h) for h in a)
        sb = ", ".join(self.ip(h) for h in b)
        for src, dst in ((sa, sb), (sb, sa)):
            run("nft", "add rule inet partition cuts ip saddr { %s } ip daddr { %s } drop" % (src, dst))

    def heal(self):
        run("nft", "flush chain inet partition cuts")


def remove_stale():
    """Removes the namespaces of runs whose supervisor is gone (a run
    killed with SIGKILL cannot clean up after itself)."""
    out = run("ip", "netns", "list", check=False)
    for line in out.splitlines():
        m = re.match(r"(%s(\d+)-\S+)" % PREFIX, line)
        if m and not os.path.exists("/proc/%s" % m.group(2)):
            run("ip", "netns", "del", m.group(1), check=False)


def _enter(path):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
            raise OSError(ctypes.get_errno(), "setns " + path)
    finally:
        os.close(fd)
