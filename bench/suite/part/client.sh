# Sourced by bench/run: part client (bench/run client), the function
# part_client: what the client itself costs per round trip, next to
# redis-benchmark -c 1 running the acquire script on the same server.
# Each figure is the difference of a long and a short run over the pairs
# (or requests) that separate them, so start-up and shutdown drop out.

# client_calls CMD...: the system calls CMD and its threads make (strace -f -c)
client_calls() {
  strace -f -c -o "$tmp/strace" "$@" >/dev/null 2>&1
  awk '$NF == "total" { print $4 }' "$tmp/strace"
}

# client_cpu CMD...: the user+sys CPU time of CMD in µs (getrusage of a
# child that was waited for)
client_cpu() {
  on_cpu0 python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.0f" % ((r.ru_utime + r.ru_stime) * 1e6))' "$@"
}

# the scripts the server has been sent so far, EVALSHA and EVAL: each is one
# round trip of the uncontended pair (total_commands_processed would count
# the commands the scripts run too)
server_commands() {
  redis-cli -p "$port" INFO commandstats | tr -d '\r' |
    awk -F'[:=,]' '$1 == "cmdstat_evalsha" || $1 == "cmdstat_eval" { n += $3 } END { print n + 0 }'
}

# evalsha_args N: redis-benchmark -c 1 running N acquire scripts on fresh keys
evalsha_args() {
  echo redis-benchmark -p "$port" -c 1 -n "$1" -r 100000000 --csv \
    EVALSHA "$sha" 2 "ref:__rand_int__" "latch:__rand_int__" 30000 "field:1" 30000
}

part_client() {
  acquire_sha
  client_syscalls_row
  client_cpu_row
}

# Syscalls per round trip: relock's uncontended pair (bench/lock latency: its
# 1000 warm-up pairs, then N) over 3000 − 1000 pairs, the round trips counted
# by the server (its EVALSHA and EVAL calls); redis-benchmark over 6000 − 2000 requests.
client_syscalls_row() {
  figure="16. client syscalls per round trip (strace -f -c; uncontended pairs, 3000 − 1000)"
  if ! command -v strace >/dev/null; then
    row client "$figure" "CANNOT RUN: strace not found (./bootstrap --deps installs it)" "" "n/a" "≤ 1.0" no
    return
  fi
  say "16. syscalls per round trip, under strace"
  c0=$(server_commands)
  s1=$(client_calls $tmo "$lock" 127.0.0.1 "$port" latency 1000)
  c1=$(server_commands)
  flush
  c2=$(server_commands)
  s3=$(client_calls $tmo "$lock" 127.0.0.1 "$port" latency 3000)
  c3=$(server_commands)
  flush
  mine=$(calc "%.2f" "($s3 - $s1) / (($c3 - $c2) - ($c1 - $c0))")
  b1=$(client_calls $(evalsha_args 2000))
  flush
  b3=$(client_calls $(evalsha_args 6000))
  flush
  theirs=$(calc "%.2f" "($b3 - $b1) / 4000")
  raw client_syscalls "{\"relock\":[$s1,$s3],\"relock_round_trips\":[$((c1 - c0)),$((c3 - c2))],\"redis_benchmark\":[$b1,$b3],\"per_round_trip\":[$mine,$theirs]}"
  r=$(ratio "$mine" "$theirs")
  row client "$figure" "$mine" "redis-benchmark -c 1 EVALSHA (6000 − 2000 requests): $theirs" "$r" "≤ 1.0" \
    "$(meets "$r" "<=" 1.0)"
}

# CPU per pair: user+sys of relock's uncontended pairs over 8000 − 2000 pairs
# (each run after the same 1000 warm-up pairs),
# against twice redis-benchmark's per request over 18000 − 6000 requests
# (a pair is two round trips), both pinned with the server like the latency
# part; median of three interleaved rounds.
client_cpu_row() {
  if ! command -v python3 >/dev/null; then
    row client "16. client CPU per uncontended pair" "CANNOT RUN: python3 not found (./bootstrap --deps installs it)" \
      "" "n/a" "" no
    return
  fi
  say "16. client CPU per pair"
  mine= theirs=
  for _round in 1 2 3; do
    a=$(client_cpu $tmo "$lock" 127.0.0.1 "$port" latency 2000)
    flush
    b=$(client_cpu $tmo "$lock" 127.0.0.1 "$port" latency 8000)
    flush
    mine="$mine $(calc "%.2f" "($b - $a) / 6000")"
    a=$(client_cpu $(evalsha_args 6000))
    flush
    b=$(client_cpu $(evalsha_args 18000))
    flush
    theirs="$theirs $(calc "%.2f" "2 * ($b - $a) / 12000")"
  done
  m=$(printf '%s\n' $mine | median)
  t=$(printf '%s\n' $theirs | median)
  raw client_cpu "{\"relock_us_per_pair\":\"$mine\",\"redis_benchmark_us_per_pair\":\"$theirs\"}"
  row client "16. client CPU per uncontended pair (user+sys, getrusage; median of 3)" "$m µs" \
    "2 × redis-benchmark -c 1 EVALSHA CPU per request = $t µs" "$(ratio "$m" "$t")" "" ""
}
