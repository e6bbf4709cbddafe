# Shared by the benchmark scripts: a private redis-server for one run.
# start_redis sets $port and $redis_pid, and arranges for exactly that server
# to be stopped (by its pid) and its temp dir removed when the script exits.

need() {
  for tool in "$@"; do
    command -v "$tool" >/dev/null || {
      echo "needs $tool (Debian: redis-server redis-tools)" >&2
      exit 1
    }
  done
}

start_redis() {
  need redis-server redis-cli redis-benchmark
  redis_dir=$(mktemp -d)
  redis_pid=
  trap 'stop_redis' EXIT
  trap 'exit 130' INT TERM
  for try in 1 2 3 4 5; do
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
      2>/dev/null || echo $((30000 + ($$ + try * 7919) % 30000)))
    redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$redis_dir" \
      --logfile "$redis_dir/redis.log" --daemonize no "$@" &
    redis_pid=$!
    for _ in $(seq 100); do
      redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
      kill -0 "$redis_pid" 2>/dev/null || break
      sleep 0.05
    done
    kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null || true
    redis_pid=
  done
  echo "could not start redis-server" >&2
  exit 1
}

stop_redis() {
  [ -n "${redis_pid:-}" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
  [ -n "${redis_dir:-}" ] && rm -rf "$redis_dir"
  redis_pid=
}

# ratio A B: A / B with two decimals
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# json_field JSON NAME: a number from a flat JSON object
json_field() { printf '%s\n' "$1" | sed -n "s/.*\"$2\":\([-0-9.a-z]*\).*/\1/p"; }
