"""The checker: what the resource's log shows, joined with what each
worker believed and was told.

A critical section, as the resource saw it, runs from a worker's accepted
READ to its WRITE (accepted or refused). Two such sections of different
workers that overlap in time - two writers between one acquisition and
its release - are a violation of mutual exclusion. A section that ended
in an ABORT (relock told its worker the lock was lost, and it wrote
nothing) is no writer, and neither is one left open (a worker that never
came back). For each violation: how long the two overlapped,
whether the fenced resource refused the stale holder (a violation
fencing caught), whether the stale holder was told - relock's lost
callback - and how long before (-) or after (+) the other holder's
acquisition, whether its host was paused (SIGSTOP) during its section,
and the faults under way.

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


class Worker:
    def __init__(self, wid, host, lib, obj, res, out_path):
        self.id, self.host, self.lib, self.obj, self.res = wid, host, lib, obj, res
        self.ev = read_worker_output(out_path)
        self.acq = [t for t, _ in self.ev.get("ACQ", [])]
        self.lost = [(t, " ".join(r)) for t, r in self.ev.get("LOST", [])]
        self.valid = [t for t, _ in self.ev.get("VALID", [])]

    def count(self, kind):
        return len(self.ev.get(kind, []))


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
    [s0, s1] (its VALID line), or None: a pause excuses a violation only
    if it fell after that check, where no lock can see it."""
    t = _latest_before(w.valid, s1)
    return t if t is not None and t >= s0 else None


def violations(secs, workers, events, until):
    """The overlapping pairs of sections. Which of the two was wrong is
    not always the earlier one (a client cut off with an old master takes
    the lock after the rightful holder did), so "told" and "paused" look
    at both: the first loss either was told of, measured from the other's
    acquisition, and whether either's host was paused in its section (for
    a relock worker: after its last validity check)."""
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
            before = [e for e in events if e.get("end", b0) <= b0]
            found.append({
                "stale": a, "other": b, "start": b0, "overlap_ms": (min(a1, b1) - b0) / 1e6,
                "caught": a_refused or b_refused,
                "told": bool(told), "told_ms": min(told)[1] / 1e6 if told else None,
                "paused": paused,
                "faults": [e["kind"] + ":" + ",".join(e["hosts"]) for e in active_at(events, b0)],
                "after": ("%s:%s ended %.1f s before" % (before[-1]["kind"], ",".join(before[-1]["hosts"]),
                                                         (b0 - before[-1]["end"]) / 1e9)) if before else "",
            })
    return found


def summarize(res, ops, workers, events):
    """The row of one resource: counts, and the violations found."""
    secs = sections(ops).get(res, [])
    lost, disorder = lost_updates(ops)
    ws = [w for w in workers if w.res == res]
    v = violations(secs, ws, events, ops[-1]["t"] if ops else 0)
    mine = [o for o in ops if o["res"] == res]
    return {
        "acquisitions": sum(w.count("ACQ") for w in ws),
        "writes": sum(1 for o in mine if o["op"] == "WRITE" and o["ok"]),
        "refused": sum(1 for o in mine if not o["ok"]),
        "abandoned": sum(w.count("ABANDON") for w in ws),
        "errors": sum(w.count("ERR") for w in ws),
        "timeouts": sum(w.count("TIMEOUT") for w in ws),
        "lost_told": sum(len(w.lost) for w in ws),
        "violations": v,
        "lost_updates": lost.get(res, 0),
        "disorder": disorder.get(res, 0),
    }
