# Sourced by bench/run: the references, measured by redis-benchmark on the
# same server in the same run: the round-trip floor, the pipelined rate,
# the floor across CPUs.

# The floor: one EVALSHA round trip of the acquire script on a fresh key, one
# connection (redis-benchmark -c 1). A lock+unlock pair is two of them.
# floor_once N appends one measurement of N calls; the floor is the median of
# those taken in this run, interleaved with the figures that use it (this
# machine's round trip drifts by 2x within a minute).
# evalsha_once N [OPTION...]: one measurement, "p50:p99:mean" in µs; the
# options go to redis-benchmark (part tls: the TLS port and --tls).
evalsha_once() {
  n_calls=$1
  shift
  on_cpu0 redis-benchmark -p "$port" "$@" -c 1 -n "$n_calls" -r 100000000 --csv \
    EVALSHA "$sha" 2 "ref:__rand_int__" "latch:__rand_int__" 30000 "field:1" 30000 2>/dev/null |
    tail -n 1 | awk -F'","' '{ print $5 * 1000 ":" $7 * 1000 ":" $3 * 1000 }'
}
floors=
floor_once() {
  acquire_sha
  floors="$floors $(evalsha_once "$1")"
  floor_p50=$(printf '%s\n' $floors | cut -d: -f1 | median)
  floor_p99=$(printf '%s\n' $floors | cut -d: -f2 | median)
  floor_mean=$(printf '%s\n' $floors | cut -d: -f3 | median)
  raw floor "{\"p50_us\":$floor_p50,\"p99_us\":$floor_p99,\"mean_us\":$floor_mean,\"each\":\"$floors\"}"
  flush
}

# The server's pipelined rate for the acquire script on fresh keys
# (redis-benchmark -P 16 -c 50), and its CPU meanwhile. rate_once appends one
# measurement; the reference is the median of those taken in this run.
rates=
rate_once() {
  acquire_sha
  say "reference: pipelined EVALSHA rate, redis-benchmark -P 16 -c 50"
  c0=$(server_cpu) t0=$(date +%s.%N)
  r=$(redis-benchmark -p "$port" -P 16 -c 50 -n 300000 -r 100000000 --csv \
    EVALSHA "$sha" 2 "key:__rand_int__" "latch:__rand_int__" 30000 field 30000 2>/dev/null |
    tail -n 1 | awk -F'","' '{ printf "%.0f", $2 }')
  c1=$(server_cpu) t1=$(date +%s.%N)
  rates="$rates $r:$(calc "%.2f" "($c1 - $c0) / ($t1 - $t0)")"
  flush
  evalsha_rate=$(printf '%s\n' $rates | cut -d: -f1 | median)
  evalsha_cpu=$(printf '%s\n' $rates | cut -d: -f2 | median)
  raw evalsha_rate "{\"evalsha_per_s\":$evalsha_rate,\"server_cpu\":$evalsha_cpu,\"each\":\"$rates\"}"
}
measure_rate() { [ -n "$rates" ] || rate_once; }

# The same floor across CPUs (median of three).
cross_p50=
cross_floor() {
  acquire_sha
  say "reference: EVALSHA latency across CPUs, redis-benchmark -c 1"
  cross=
  for _round in 1 2 3; do
    cross="$cross $(on_cpu1 redis-benchmark -p "$port" -c 1 -n 4000 -r 100000000 --csv \
      EVALSHA "$sha" 2 "ref:__rand_int__" "latch:__rand_int__" 30000 "field:1" 30000 2>/dev/null |
      tail -n 1 | awk -F'","' '{ print $5 * 1000 }')"
  done
  cross_p50=$(printf '%s\n' $cross | median)
  raw floor_cross_cpu "{\"p50_us\":$cross_p50,\"each\":\"$cross\"}"
  flush
}
