#!/bin/sh
# Pipelined command rate of relock against redis-benchmark -P 16, both on
# one private redis-server started here (no persistence), in the same run.
#   bench/command.sh [N=100000]
# Run from the build directory (after make).
set -eu
n=${1:-100000}
bin=${BENCH_COMMAND:-./bench/command}
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null || {
  echo "needs redis-server and redis-benchmark (Debian: redis-server redis-tools)" >&2
  exit 1
}
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
       echo $((20000 + $$ % 20000)))
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --logfile "$dir/redis.log" --daemonize no &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT INT TERM
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done

rate_of() { # the requests/s that redis-benchmark -q prints for test $1
  redis-benchmark -p "$port" -P 16 -n "$n" -t "$1" -q 2>/dev/null | tr '\r' '\n' |
    grep -i "^$2:" | tail -n 1 | sed 's/.*: *\([0-9.]*\) requests.*/\1/'
}
printf '| command | relock (1 connection) | redis-benchmark -P 16 -c 50 | ratio |\n|---|---|---|---|\n'
for t in ping set; do
  case $t in ping) name=PING_MBULK ;; set) name=SET ;; esac
  ref=$(rate_of "$t" "$name")
  ours=$("$bin" 127.0.0.1 "$port" "$n" 5 "$t" | awk '{print $3}')
  ratio=$(awk -v a="$ours" -v b="$ref" 'BEGIN { printf "%.2f", a / b }')
  printf '| %s | %s/s | %s/s | %s |\n' "$name" "$ours" "$ref" "$ratio"
done
