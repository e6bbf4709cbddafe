#!/bin/sh
# The demo: starts a throwaway redis-server (temp dir, free loopback port, no
# persistence), runs the examples against it, and stops exactly that server.
# Run from the build directory: make demo.
set -eu
command -v redis-server >/dev/null || {
  echo "demo: redis-server not found (Debian: apt-get install redis-server)" >&2
  exit 1
}
dir=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free port: let the kernel pick one, then hand it to the server (retrying
# if someone takes it in between).
for try in 1 2 3 4 5; do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
    2>/dev/null || echo $((30000 + ($$ + try * 7919) % 30000)))
  redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$dir" \
    --logfile "$dir/redis.log" --daemonize no &
  pid=$!
  for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  pid=
done
[ -n "$pid" ] || { echo "demo: could not start redis-server" >&2; exit 1; }
echo "demo: redis-server pid $pid on 127.0.0.1:$port (in $dir)"

echo "demo: examples/command - commands through futures"
./examples/command "redis://127.0.0.1:$port"
echo "demo: done"
