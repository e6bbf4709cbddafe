"""The checker: what the resource's log shows, joined with what each
worker believed and was told.

A critical section, as the resource saw it, runs from a worker's accepted
READ to its next WRITE or ABORT (a worker that never came back holds it
to the end of the log). Two sections of different workers that overlap
in time are a violation of mutual exclusion; the one that began first is
the stale holder's. For each violation: how long the two overlapped,
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
    """Per resource: the sections (id, start, end, stale write refused?)."""
    out = {}
    open_ = {}
    end_of_log = ops[-1]["t"] if ops else 0
    for o in ops:
        key = (o["res"], o["id"])
        if o["op"] == "READ":
            if key in open_:  # a new READ closes what was open
                s = open_.pop(key)
                out.setdefault(o["res"], []).append((o["id"], s, o["t"], False))
            if o["ok"]:
                open_[key] = o["t"]
        elif o["op"] in ("WRITE", "ABORT") and key in open_:
            s = open_.pop(key)
            refused = o["op"] == "WRITE" and not o["ok"]
            out.setdefault(o["res"], []).append((o["id"], s, o["t"], refused))
    for (res, who), s in open_.items():
        out.setdefault(res, []).append((who, s, end_of_log, False))
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

    def count(self, kind):
        return len(self.ev.get(kind, []))


def violations(secs, workers, events):
    by_id = {w.id: w for w in workers}
    found = []
    secs = sorted(secs, key=lambda s: s[1])
    for i, (a, a0, a1, a_refused) in enumerate(secs):
        for b, b0, b1, _ in secs[i + 1:]:
            if b0 >= a1:
                break
            if a == b:
                continue
            wa, wb = by_id.get(a), by_id.get(b)
            acq_a = _latest_before(wa.acq, a0) if wa else None
            acq_b = _latest_before(wb.acq, b0) if wb else None
            told = None
            if wa and acq_a is not None:
                told = next((t for t, _ in wa.lost if t >= acq_a), None)
            found.append({
                "stale": a, "other": b, "start": b0, "overlap_ms": (min(a1, b1) - b0) / 1e6,
                "caught": a_refused, "told_ms": None if told is None or acq_b is None else (told - acq_b) / 1e6,
                "told": told is not None,
                "paused": bool(wa and paused_during(events, wa.host, acq_a or a0, a1)),
                "faults": [e["kind"] + ":" + ",".join(e["hosts"]) for e in active_at(events, b0)],
            })
    return found


def summarize(res, ops, workers, events):
    """The row of one resource: counts, and the violations found."""
    secs = sections(ops).get(res, [])
    lost, disorder = lost_updates(ops)
    ws = [w for w in workers if w.res == res]
    v = violations(secs, ws, events)
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
