#!/bin/sh
# Pipelined command rate of relock against redis-benchmark -P 16, both on
# one private redis-server started here (no persistence), in the same run.
#   bench/command.sh [N=100000]        (run from the build directory)
set -eu
. "$(dirname "$0")/lib.sh"
n=${1:-100000}
bin=${BENCH_COMMAND:-./bench/command}
need redis-benchmark
start_redis

rate_of() { # the requests/s that redis-benchmark -q prints for test $1
  redis-benchmark -p "$port" -P 16 -n "$n" -t "$1" -q 2>/dev/null | tr '\r' '\n' |
    grep -i "^$2:" | tail -n 1 | sed 's/.*: *\([0-9.]*\) requests.*/\1/'
}
printf '| command | relock (1 connection) | redis-benchmark -P 16 -c 50 | ratio |\n|---|---|---|---|\n'
for t in ping set; do
  case $t in ping) name=PING_MBULK ;; set) name=SET ;; esac
  ref=$(rate_of "$t" "$name")
  ours=$("$bin" 127.0.0.1 "$port" "$n" 5 "$t" | awk '{print $3}')
  printf '| %s | %s/s | %s/s | %s |\n' "$name" "$ours" "$ref" "$(ratio "$ours" "$ref")"
done
