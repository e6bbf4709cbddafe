#!/bin/sh
# Lock latency and contended handoff, next to redis-benchmark's EVALSHA
# latency on the same private redis-server, in the same run.
#   bench/lock.sh            (run from the build directory)
set -eu
here=$(dirname "$0")
. "$here/lib.sh"
bin=${BENCH_LOCK:-./bench/lock}
src=${RELOCK_SRCDIR:-$here/..}
need redis-benchmark
start_redis

# The floor: one EVALSHA round trip of the acquire script on a fresh key
# (redis-benchmark -c 1), so a lock+unlock pair cannot beat two of them.
sha=$(redis-cli -p "$port" SCRIPT LOAD "$(sh "$src/src/redis/embed-scripts.sh" --print "$src" lua/lock_acquire.lua)")
csv=$(redis-benchmark -p "$port" -c 1 -n 20000 -r 100000000 --csv \
  EVALSHA "$sha" 2 "ref:__rand_int__" "latch:__rand_int__" 30000 "field:1" 30000 2>/dev/null | tail -n 1)
floor_p50=$(printf '%s\n' "$csv" | awk -F'","' '{print $5 * 1000}')
floor_p99=$(printf '%s\n' "$csv" | awk -F'","' '{print $7 * 1000}')
pair_floor=$(awk -v x="$floor_p50" 'BEGIN { print 2 * x }')

lat=$("$bin" 127.0.0.1 "$port" latency 20000)
p50=$(json_field "$lat" p50_us)
p99=$(json_field "$lat" p99_us)
a=$("$bin" 127.0.0.1 "$port" handoff 4 500 0)
b=$("$bin" 127.0.0.1 "$port" handoff 4 500 200)
hand_floor=$(awk -v x="$floor_p50" 'BEGIN { print 3 * x }')

printf '| figure | relock | reference | ratio | target |\n|---|---|---|---|---|\n'
printf '| lock+unlock pair p50 | %s us | 2 x EVALSHA p50 = %s us | %s | <= 1.15 |\n' "$p50" "$pair_floor" "$(ratio "$p50" "$pair_floor")"
printf '| lock+unlock pair p99 | %s us | 2 x EVALSHA p99 = %s us | %s | |\n' "$p99" \
  "$(awk -v x="$floor_p99" 'BEGIN { print 2 * x }')" "$(ratio "$p99" "$(awk -v x="$floor_p99" 'BEGIN { print 2 * x }')")"
printf '| 4 procs back-to-back: acquisitions/s | %s | 4000 | %s | >= 1 |\n' "$(json_field "$a" acquisitions_per_s)" \
  "$(ratio "$(json_field "$a" acquisitions_per_s)" 4000)"
printf '| 4 procs back-to-back: owner switches | %s of %s | | | |\n' "$(json_field "$a" owner_switches)" 2000
printf '| 4 procs back-to-back: wait p99 / max | %s / %s us | | | |\n' "$(json_field "$a" wait_p99_us)" "$(json_field "$a" wait_max_us)"
printf '| 4 procs, 200 us apart: handoff p50 | %s us | 3 x EVALSHA p50 = %s us | %s | <= 1.5 |\n' \
  "$(json_field "$b" handoff_p50_us)" "$hand_floor" "$(ratio "$(json_field "$b" handoff_p50_us)" "$hand_floor")"
printf '| 4 procs, 200 us apart: handoff p99 | %s us | | | |\n' "$(json_field "$b" handoff_p99_us)"
printf '| 4 procs, 200 us apart: real handoffs | %s of %s | | | |\n' "$(json_field "$b" handoffs)" 2000
printf '| counters exact | %s, %s | | | |\n' "$(json_field "$a" exact)" "$(json_field "$b" exact)"
