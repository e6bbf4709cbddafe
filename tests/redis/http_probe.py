"""HTTP probes for tests/redis/test_metrics_server.sh: what curl cannot do
(a request sent a byte at a time, a connection that says nothing, many at
once, a peer slow to read), and the exposition read with Debian's
prometheus_client. Each prints one line for the shell test to compare.

  http_probe.py samples FILE LABEL=VALUE...   every sample as name{labels} value,
                                              labels sorted, those given checked
                                              on every sample and left out
  http_probe.py histograms FILE               each histogram's buckets checked
  http_probe.py raw PORT TEXT                 sends TEXT (Python escapes), prints the status line
  http_probe.py oversize PORT BYTES           a request head of BYTES without its end
  http_probe.py trickle PORT DELAY_MS         GET /metrics a byte at a time
  http_probe.py silent PORT READY_FILE        connects, says nothing, prints what
                                              comes back and after how long
  http_probe.py many PORT N                   N connections at once, requests interleaved
  http_probe.py slow_reader PORT              a small receive buffer, read late and slowly
"""
import math
import os
import socket
import sys
import time


def connect(port):
    return socket.create_connection(("127.0.0.1", int(port)), timeout=60)


def read_all(s):
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk


def parse_response(data):
    """(status line, headers dict lower-cased, body), or raises ValueError."""
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        raise ValueError("no end of head in %r" % data[:200])
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return lines[0], headers, body


def whole(data):
    """The status line, and whether the body is as long as Content-Length says."""
    status, headers, body = parse_response(data)
    ok = int(headers.get("content-length", -1)) == len(body)
    return "%s %s" % (status, "whole" if ok else "cut: %d of %s" % (len(body), headers.get("content-length")))


def cmd_samples(path, *fixed):
    # Debian's module, which bootstrap installs (python3-prometheus-client).
    from prometheus_client.parser import text_string_to_metric_families

    want = dict(f.split("=", 1) for f in fixed)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    out = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = dict(s.labels)
            for k, v in want.items():
                if labels.pop(k, None) != v:
                    print("sample %s %s lacks %s=%r" % (s.name, s.labels, k, v))
                    return 1
            value = s.value
            if value == math.floor(value) and not math.isinf(value):
                value = int(value)
            out.append("%s{%s} %s" % (s.name, ",".join('%s="%s"' % kv for kv in sorted(labels.items())), value))
    print("\n".join(out))
    return 0


def cmd_histograms(path):
    from prometheus_client.parser import text_string_to_metric_families

    with open(path, encoding="utf-8") as f:
        text = f.read()
    checked = 0
    for family in text_string_to_metric_families(text):
        if family.type != "histogram":
            continue
        series = {}
        for s in family.samples:
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            h = series.setdefault(key, {"buckets": []})
            if s.name.endswith("_bucket"):
                h["buckets"].append((float(s.labels["le"]), s.value))
            elif s.name.endswith("_count"):
                h["count"] = s.value
            elif s.name.endswith("_sum"):
                h["sum"] = s.value
        for key, h in series.items():
            where = "%s%s" % (family.name, dict(key))
            bounds = [b for b, _ in h["buckets"]]
            counts = [c for _, c in h["buckets"]]
            if "count" not in h or "sum" not in h:
                print("%s: no _count or _sum" % where)
                return 1
            if not bounds or bounds != sorted(bounds) or not math.isinf(bounds[-1]):
                print("%s: bucket bounds %s not ascending to +Inf" % (where, bounds))
                return 1
            if counts != sorted(counts) or counts[-1] != h["count"]:
                print("%s: buckets %s not cumulative up to _count %s" % (where, counts, h["count"]))
                return 1
            if h["sum"] < 0 or (h["count"] == 0 and h["sum"] != 0):
                print("%s: _sum %s with _count %s" % (where, h["sum"], h["count"]))
                return 1
            checked += 1
    print("%d histograms consistent" % checked)
    return 0


def cmd_raw(port, text):
    s = connect(port)
    s.sendall(text.encode("latin-1").decode("unicode_escape").encode("latin-1"))
    print(parse_response(read_all(s))[0])
    return 0


def cmd_oversize(port, n):
    s = connect(port)
    s.sendall(b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * (int(n) - 30))
    print(parse_response(read_all(s))[0])
    return 0


def cmd_trickle(port, delay_ms):
    s = connect(port)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for b in b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n":
        s.sendall(bytes([b]))
        time.sleep(int(delay_ms) / 1000)
    print(whole(read_all(s)))
    return 0


def cmd_silent(port, ready):
    s = connect(port)
    t0 = time.monotonic()
    open(ready, "w").close()
    data = read_all(s)
    took = int((time.monotonic() - t0) * 1000)
    status = parse_response(data)[0] if data else "(closed without a response)"
    print("%s after %d ms" % (status, took))
    return 0


def cmd_many(port, n):
    req = b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n"
    socks = [connect(port) for _ in range(int(n))]
    for s in socks:  # every request half sent, then every other half
        s.sendall(req[:10])
    for s in socks:
        s.sendall(req[10:])
    results = {}
    for s in socks:
        r = whole(read_all(s))
        results[r] = results.get(r, 0) + 1
    print("; ".join("%d x %s" % (c, r) for r, c in sorted(results.items())))
    return 0


def cmd_slow_reader(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window stays small
    s.settimeout(60)
    s.connect(("127.0.0.1", int(port)))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n")
    time.sleep(0.5)  # the server's writes fill the buffers and wait
    data = b""
    while True:
        chunk = s.recv(2048)
        if not chunk:
            break
        data += chunk
        time.sleep(0.001)
    print("%s, %d bytes" % (whole(data), len(data)))
    return 0


def main(argv):
    commands = {
        "samples": cmd_samples,
        "histograms": cmd_histograms,
        "raw": cmd_raw,
        "oversize": cmd_oversize,
        "trickle": cmd_trickle,
        "silent": cmd_silent,
        "many": cmd_many,
        "slow_reader": cmd_slow_reader,
    }
    if len(argv) < 2 or argv[1] not in commands:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        return commands[argv[1]](*argv[2:])
    except (OSError, ValueError) as e:
        print("%s: %s" % (argv[1], e))
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
