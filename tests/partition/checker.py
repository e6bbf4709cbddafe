"""The checker: what the resource's log shows, joined with what each
worker believed and was told.

A critical section, as the resource saw it, runs from a worker's accepted
READ to its WRITE (accepted or refused). Two such sections of different
workers that overlap in time - two writers between one acquisition and
its release - are a violation of mutual exclusion. A section that ended
in an ABORT (the worker's validity check said no, or relock the command
stopped its job: it wrote nothing) is no writer, and neither is one left
open (a worker that never came back); contract() checks that a hold its
worker abandoned shows no write at the resource. For each violation: how
long the two overlapped, whether the fenced resource refused the stale
holder (a violation fencing caught), which holder was stale (the earlier
acquisition) and whether its own lost callback fired for that hold within
the library's bound (tell_deadline) - the one thing that excuses it -,
whether either holder was told and how long before (-) or after (+) the
other holder's acquisition, whether a host was paused (SIGSTOP) during
its section, and the faults under way.

An overlapped belief is a hold another worker acquired the same lock
during, written or abandoned: its holder is owed a lost callback within
the bound (overlapped_beliefs), so that a library that never calls it
shows even when its validity check keeps every write out.

A lost update is an accepted WRITE of v whose writer read v - 1 while the
resource no longer held v - 1: another write came between. Accepted
tokens must never go down on a resource (fencing's own promise).
"""

import bisect

from nemesis import active_at, paused_during


def read_resource_log(path):
    ops = []
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) != 7:
                continue
            ops.append({"t": int(w[0]), "op": w[1], "res": w[2], "id": w[3], "token": int(w[4]),
                        "value": w[5], "ok": w[6] == "ok"})
    return ops


def read_worker_output(path):
    """Events of one worker: {kind: [(t, rest...)]}, in order."""
    ev = {}
    with open(path, errors="replace") as f:
        for line in f:
            w = line.split()
            if len(w) >= 2 and w[1].isdigit():
                ev.setdefault(w[0], []).append((int(w[1]), w[2:]))
    return ev


def sections(ops):
    """Per resource: the writers' sections (id, start, end, refused?)."""
    out = {}
    open_ = {}
    for o in ops:
        key = (o["res"], o["id"])
        if o["op"] == "READ":
            open_.pop(key, None)  # a new READ: the last one wrote nothing
            if o["ok"]:
                open_[key] = o["t"]
        elif o["op"] == "ABORT":
            open_.pop(key, None)
        elif o["op"] == "WRITE" and key in open_:
            out.setdefault(o["res"], []).append((o["id"], open_.pop(key), o["t"], not o["ok"]))
    return out


def lost_updates(ops):
    value, last_read, lost, disorder, newest = {}, {}, {}, {}, {}
    for o in ops:
        res, who = o["res"], o["id"]
        lost.setdefault(res, 0)
        disorder.setdefault(res, 0)
        if not o["ok"]:
            continue
        if o["token"] > 0:
            if o["token"] < newest.get(res, 0):
                disorder[res] += 1
            newest[res] = max(newest.get(res, 0), o["token"])
        if o["op"] == "READ":
            last_read[(res, who)] = int(o["value"])
        elif o["op"] == "WRITE":
            if value.get(res, 0) != last_read.get((res, who), -1):
                lost[res] += 1
            value[res] = int(o["value"])
    return lost, disorder


def _latest_before(times, t):
    i = bisect.bisect_right(times, t)
    return times[i - 1] if i else None


# The library's promise (docs/SAFETY.md, "The bound of 3"): a belief that
# truth broke ends, with its lost callback, at the holder's next check of
# Redis - a renewal every third of the watchdog timeout, answered within
# the command timeout and its retries. The truth checker holds a break to
# a third of the watchdog timeout + 3 command timeouts + 0.5 s; so does
# this one. Both clients time commands out after 1 s (README.md).
COMMAND_TIMEOUT_MS = 1000


def tell_bound_ns(lease_ms, command_timeout_ms=COMMAND_TIMEOUT_MS):
    return (lease_ms // 3 + 3 * command_timeout_ms + 500) * 1000000


class Hold:
    """One acquisition of a worker, as its own log tells it: believed from
    its ACQ to its WROTE or ABANDON (the worker's work is over then; a
    release in flight after it is no belief the test can use), told when its
    first LOST line came (before the worker's next acquisition)."""

    def __init__(self, w, acq, nxt):
        self.worker, self.acq, self.next = w, acq, nxt
        ends = [t for kind in ("WROTE", "ABANDON", "REL", "END") for t, _ in w.ev.get(kind, []) if acq < t < nxt]
        self.end = min(ends) if ends else nxt
        self.told = next((t for t, _ in w.lost if acq <= t < nxt), None)
        self.abandoned = next((" ".join(r) for t, r in w.ev.get("ABANDON", []) if acq < t < nxt), None)
        self.valid = [t for t in w.valid if acq < t < nxt]


class Worker:
    def __init__(self, wid, host, lib, obj, res, out_path):
        self.id, self.host, self.lib, self.obj, self.res = wid, host, lib, obj, res
        self.ev = read_worker_output(out_path)
        self.acq = [t for t, _ in self.ev.get("ACQ", [])]
        self.lost = [(t, " ".join(r)) for t, r in self.ev.get("LOST", [])]
        self.valid = [t for t, _ in self.ev.get("VALID", [])]
        self.holds = []

    def count(self, kind):
        return len(self.ev.get(kind, []))

    def make_holds(self):
        """The last hold runs to the end of the log: a loss told late is
        still its own."""
        self.holds = [Hold(self, a, n) for a, n in zip(self.acq, self.acq[1:] + [2 ** 63])]

    def hold_at(self, t):
        """The hold whose acquisition came last at or before t, or None."""
        i = bisect.bisect_right(self.acq, t)
        return self.holds[i - 1] if i else None

    def tells(self):
        """Whether the worker's log has a lost callback at all: relock's
        workers (the library's callback, the command's stop or exit 76);
        Redisson has none."""
        return self.lib == "relock"


def _told(w, acq, until):
    """When w's lost callback fired for the hold it acquired at acq (a LOST
    before its next acquisition), or None."""
    if w is None or acq is None:
        return None
    i = bisect.bisect_right(w.acq, acq)
    nxt = w.acq[i] if i < len(w.acq) else until
    return next((t for t, _ in w.lost if acq <= t < nxt), None)


def _checked(w, s0, s1):
    """When relock's worker last found its lock valid in the section
    [s0, s1] (its VALID line), or None: the report's "paused" counts a
    pause after that check (or, without one, in the hold)."""
    t = _latest_before(w.valid, s1)
    return t if t is not None and t >= s0 else None


def tell_deadline(stale, other_acq, events, bound_ns):
    """By when the stale hold's loss must have been told: the bound after
    the other holder's acquisition (Redis had let the stale hold go by
    then: in a setting relock calls safe, another owner gets the lock only
    once the key expired or was deleted, and its holder's validity deadline
    comes before Redis's own expiry) - or, when faults were under way that
    could delay the stale holder's next check (a partition, a paused or
    killed server, a pause of the stale holder's own host; not a pause of
    another client's host), the bound after the last of them ended. A pause
    of the stale holder's host that begins before that deadline moves it
    again: a stopped process checks nothing."""
    host = stale.worker.host

    def delays(e):
        return e["kind"] != "pause-client" or host in e["hosts"]

    ref = other_acq
    for e in active_at(events, other_acq):
        if delays(e):
            ref = max(ref, e.get("end", ref))
    deadline = ref + bound_ns
    moved = True
    while moved:
        moved = False
        for e in paused_during(events, host, ref, deadline):
            if e.get("end", deadline) + bound_ns > deadline:
                deadline, moved = e.get("end", deadline) + bound_ns, True
    return deadline


def _judge(stale, other_acq, events, bound_ns):
    """'told': the stale holder's lost callback fired for that hold by the
    deadline; 'late': after it; None: never (or not a relock worker)."""
    if stale is None:
        return None, None
    deadline = tell_deadline(stale, other_acq, events, bound_ns)
    if stale.told is None or not stale.worker.tells():
        return None, deadline
    return ("told" if stale.told <= deadline else "late"), deadline


def overlapped_beliefs(workers, events, bound_ns):
    """Every hold another worker acquired the same lock during - between the
    stale hold's ACQ and the end of its work (WROTE or ABANDON) - whether
    the two wrote at once or not: the library broke the stale holder's
    belief, so it owes it a lost callback within the bound (SAFETY.md's
    invariant, 3: never silently). Its validity check saying no (ABANDON)
    keeps its write out, not its loss untold. One entry per stale hold,
    for the first acquisition that overlapped it."""
    found = []
    for w in workers:
        for h in w.holds:
            firsts = []
            for o in workers:
                if o is w:
                    continue
                i = bisect.bisect_right(o.acq, h.acq)
                if i < len(o.acq) and o.acq[i] < h.end:
                    firsts.append((o.acq[i], o))
            if not firsts:
                continue
            t, o = min(firsts, key=lambda x: x[0])
            verdict, deadline = _judge(h, t, events, bound_ns)
            found.append({
                "stale": w.id, "other": o.id, "stale_acq": h.acq, "other_acq": t,
                "believed_ms": (h.end - t) / 1e6, "abandoned": h.abandoned, "wrote": h.abandoned is None,
                "told": verdict, "told_ms": (h.told - t) / 1e6 if h.told is not None else None,
                "deadline_ms": (deadline - t) / 1e6 if deadline is not None else None,
                "paused": bool(paused_during(events, w.host, h.acq, h.end)),
                "faults": [e["kind"] + ":" + ",".join(e["hosts"]) for e in active_at(events, t)],
            })
    return found


def contract(secs, ops, workers):
    """Where a relock worker's log and the resource's disagree on what the
    checker relies on: an abandoned hold (its validity check said no, or
    the command was stopped) must have written nothing, so that it is no
    section at all; the C worker's writes come right after a passing
    validity check (VALID)."""
    problems = []
    by_id = {w.id: w for w in workers}
    for o in ops:
        w = by_id.get(o["id"])
        if o["op"] != "WRITE" or w is None or w.lib != "relock":
            continue
        h = w.hold_at(o["t"])
        if h is None:
            problems.append("%s wrote at %d outside any acquisition" % (w.id, o["t"]))
        elif h.abandoned is not None and h.end <= o["t"] < h.next:
            problems.append("%s wrote at %d in a hold it abandoned (%s)" % (w.id, o["t"], h.abandoned))
        elif w.obj != "cli" and not any(t <= o["t"] for t in h.valid):
            problems.append("%s wrote at %d without a validity check before" % (w.id, o["t"]))
    return problems


def violations(secs, workers, events, until, bound_ns):
    """The overlapping pairs of sections: two writers at once. Which of the
    two was wrong is the one that acquired first (ACQ): in a setting relock
    calls safe, the later one got the lock only after Redis let the first
    one's hold go. Elsewhere the later one may be the stale one (a client
    cut off with an old master takes the lock after the rightful holder
    did): those rows are measured, not judged. "excused": only the stale
    holder's own lost callback, fired for that hold by the deadline
    (tell_deadline), excuses the overlap; nothing about the other holder
    does, and a pause does not by itself - a pause between the last VALID
    and the write with no lost callback after it is a library that never
    told. "told"/"told_ms" and "paused" are the report's measurements, as
    before: the first loss either holder was told of, and whether either's
    host was paused in its section."""
    by_id = {w.id: w for w in workers}
    found = []
    secs = sorted(secs, key=lambda s: s[1])
    for i, (a, a0, a1, a_refused) in enumerate(secs):
        for b, b0, b1, b_refused in secs[i + 1:]:
            if b0 >= a1:
                break
            if a == b:
                continue
            wa, wb = by_id.get(a), by_id.get(b)
            acq_a = _latest_before(wa.acq, a0) if wa else None
            acq_b = _latest_before(wb.acq, b0) if wb else None
            told = [(t, t - other) for t, other in ((_told(wa, acq_a, until), acq_b), (_told(wb, acq_b, until), acq_a))
                    if t is not None and other is not None]
            paused = any(w and paused_during(events, w.host, _checked(w, s0, s1) or acq or s0, s1)
                         for w, acq, s0, s1 in ((wa, acq_a, a0, a1), (wb, acq_b, b0, b1)))
            # the stale one: the earlier acquisition
            if acq_a is not None and acq_b is not None and acq_b < acq_a:
                stale_w, stale_acq, other_id, other_acq = wb, acq_b, a, acq_a
            else:
                stale_w, stale_acq, other_id, other_acq = wa, acq_a, b, acq_b
            stale_h = stale_w.hold_at(stale_acq) if stale_w and stale_acq is not None else None
            verdict, deadline = (_judge(stale_h, other_acq, events, bound_ns) if other_acq is not None
                                 else (None, None))
            before = [e for e in events if e.get("end", b0) <= b0]
            found.append({
                "stale": stale_w.id if stale_w else a, "other": other_id, "start": b0, "stale_acq": stale_acq,
                "overlap_ms": (min(a1, b1) - b0) / 1e6,
                "caught": a_refused or b_refused,
                "told": bool(told), "told_ms": min(told)[1] / 1e6 if told else None,
                "paused": paused,
                "stale_told": verdict,
                "stale_told_ms": (stale_h.told - other_acq) / 1e6 if verdict else None,
                "deadline_ms": (deadline - other_acq) / 1e6 if deadline is not None else None,
                "excused": verdict == "told",
                "faults": [e["kind"] + ":" + ",".join(e["hosts"]) for e in active_at(events, b0)],
                "after": ("%s:%s ended %.1f s before" % (before[-1]["kind"], ",".join(before[-1]["hosts"]),
                                                         (b0 - before[-1]["end"]) / 1e9)) if before else "",
            })
    return found


def summarize(res, ops, workers, events, lease_ms):
    """The row of one resource: counts, and the violations found."""
    secs = sections(ops).get(res, [])
    lost, disorder = lost_updates(ops)
    ws = [w for w in workers if w.res == res]
    until = ops[-1]["t"] if ops else 0
    for w in ws:
        w.make_holds()
    bound = tell_bound_ns(lease_ms)
    v = violations(secs, ws, events, until, bound)
    mine = [o for o in ops if o["res"] == res]
    return {
        "acquisitions": sum(w.count("ACQ") for w in ws),
        "writes": sum(1 for o in mine if o["op"] == "WRITE" and o["ok"]),
        "refused": sum(1 for o in mine if not o["ok"]),
        "abandoned": sum(w.count("ABANDON") for w in ws),
        "errors": sum(w.count("ERR") for w in ws),
        "timeouts": sum(w.count("TIMEOUT") for w in ws),
        "lost_told": sum(1 for w in ws for h in w.holds if h.told is not None),
        "tell_bound_ms": bound / 1e6,
        "violations": v,
        "overlapped": overlapped_beliefs(ws, events, bound),
        "contract": contract(secs, mine, ws),
        "lost_updates": lost.get(res, 0),
        "disorder": disorder.get(res, 0),
    }
