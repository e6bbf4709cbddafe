"""The checked resource: the storage the workers' critical sections guard.

Each named resource holds one integer. A worker in its critical section
READs it and later WRITEs it plus one, or ABORTs (relock told it the lock
was lost). Every request is logged with the machine's monotonic clock at
the moment the resource acted on it, so the log is the one timeline the
checker trusts: two workers between a READ and its WRITE at once is a
violation of mutual exclusion, whatever the workers believed.

Fencing: a request with a token > 0 is refused if a larger token was
already seen on that resource (by a READ or a WRITE: a holder that only
read with a newer token still fences off the older one), as storage that
checks fencing tokens does. Token 0 is a plain lock's: never refused.

    python3 resource.py PORT LOGFILE

Protocol (lines): READ res id token -> OK value | REFUSED newest;
WRITE res id token value -> OK | REFUSED newest; ABORT res id -> OK.
"""

import asyncio
import sys
import time


class Store:
    def __init__(self, log):
        self.log = log
        self.value = {}
        self.newest = {}

    def handle(self, words):
        op = words[0] if words else ""
        try:
            if op == "READ" and len(words) == 4:
                return self._access(op, words[1], words[2], int(words[3]), None)
            if op == "WRITE" and len(words) == 5:
                return self._access(op, words[1], words[2], int(words[3]), int(words[4]))
            if op == "ABORT" and len(words) == 3:
                self._record(op, words[1], words[2], 0, "-", "ok")
                return "OK"
        except ValueError:
            pass
        return "ERR bad request"

    def _access(self, op, res, who, token, value):
        newest = self.newest.get(res, 0)
        if token > 0 and token < newest:
            self._record(op, res, who, token, "-" if value is None else value, "refused")
            return "REFUSED %d" % newest
        self.newest[res] = max(newest, token)
        if value is None:
            current = self.value.get(res, 0)
            self._record(op, res, who, token, current, "ok")
            return "OK %d" % current
        self._record(op, res, who, token, value, "ok")
        self.value[res] = value
        return "OK"

    def _record(self, op, res, who, token, value, result):
        self.log.write("%d %s %s %s %d %s %s\n" % (time.monotonic_ns(), op, res, who, token, value, result))
        self.log.flush()


async def serve(store, reader, writer):
    try:
        while True:
            line = await reader.readline()
            if not line:
                break
            answer = store.handle(line.decode(errors="replace").split())
            writer.write((answer + "\n").encode())
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def main(port, path):
    with open(path, "a") as log:
        store = Store(log)
        server = await asyncio.start_server(lambda r, w: serve(store, r, w), "0.0.0.0", port)
        print("ready", flush=True)
        async with server:
            await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
