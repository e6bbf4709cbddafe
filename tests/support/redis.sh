# Shell helper for tests, demo and benchmarks: a private redis-server (temp
# dir, free loopback port, no persistence). start_redis sets $port, $redis_pid
# and $redis_dir, and stops exactly that server (by its pid) when the script
# exits. Extra arguments go to redis-server.

need() {
  for tool in "$@"; do
    command -v "$tool" >/dev/null || {
      echo "needs $tool (Debian: apt-get install redis-server redis-tools)" >&2
      exit 1
    }
  done
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((30000 + ($$ * 7919 + $(date +%N | cut -c1-6)) % 30000))
}

start_redis() {
  need redis-server redis-cli
  redis_dir=$(mktemp -d)
  redis_pid=
  trap 'stop_redis' EXIT
  trap 'exit 130' INT TERM
  for _try in 1 2 3 4 5; do
    port=$(free_port)
    redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$redis_dir" \
      --logfile "$redis_dir/redis.log" --daemonize no "$@" </dev/null >/dev/null 2>&1 &
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

# The server on $port's version as major * 10000 + minor * 100 + patch
# (Redis 6.0.16: 60016), from INFO server; 0 when it does not say.
redis_version() {
  redis-cli -p "$port" INFO server 2>/dev/null | tr -d '\r' |
    awk -F'[:.]' '/^redis_version:/ { v = $2 * 10000 + $3 * 100 + $4 } END { print v + 0 }'
}

# docs/ACL.md ($1) as it reads for the server on $port: before Redis 6.2
# (no channel permissions) its section "### Redis 6.0" alone, whose lines
# are the others without their '&' rules; else the page without it.
acl_doc_for_server() {
  if [ "$(redis_version)" -lt 60200 ]; then
    sed -n '/^### Redis 6.0$/,/^## /p' "$1"
  else
    sed '/^### Redis 6.0$/,/^## /{/^## /!d}' "$1"
  fi
}
