"""A minimal blocking Redis client for the supervisor's own questions
(who is master, is the cluster ok): one command per connection, a short
timeout, so that a partitioned or paused node costs a timeout and never
a hang."""

import socket


class RedisError(Exception):
    pass


def command(addr, *args, timeout=0.5):
    """Sends one command to "host:port" and returns its decoded reply
    (str, int, list, None); a Redis error reply raises RedisError, a
    network failure OSError."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.settimeout(timeout)
        out = b"*%d\r\n" % len(args)
        for a in args:
            b = str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(b), b)
        s.sendall(out)
        return _Reader(s).reply()


class _Reader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            self._more()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _more(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed")
        self.buf += chunk

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:].decode()
        if kind == b"+":
            return rest
        if kind == b"-":
            raise RedisError(rest)
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._more()
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data.decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise ConnectionError("unexpected reply %r" % line)
