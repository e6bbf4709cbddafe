# Sourced by bench/run: part sync (bench/run sync), the function part_sync.

# 13. The semaphore's uncontended acquire+release pair against the two-
# round-trip floor (pinned, as part 1), a watched permit's pair against the
# reentrant lock's of the same client, and a count-down latch's last
# count-down to the last of 8 awaiting processes through, against the same
# floor (the count-down's round trip, then the message's way out).
part_sync() {
  say "13. semaphore and watched permit pairs; latch: the last count-down to 8 awaiting processes"
  lat=
  for _round in 1 2 3; do
    floor_once 4000
    j=$(on_cpu0 $tmo "$build/bench/sync" 127.0.0.1 "$port" semaphore 3000)
    lat="$lat $(json_field "$j" p50_us)"
    flush
  done
  p50=$(printf '%s\n' $lat | median)
  f50=$(calc "%.1f" "2 * $floor_p50")
  raw sync_semaphore "{\"p50_us\":$p50,\"each\":\"$lat\"}"
  row sync "13. semaphore: uncontended acquire(1)+release(1) pair, p50 (median of 3)" "$p50 µs" \
    "2 × EVALSHA p50 = $f50 µs" "$(ratio "$p50" "$f50")" "" ""
  # a watched permit's pair against the reentrant lock's, one client,
  # interleaved (pinned, as the pairs above)
  j=$(on_cpu0 $tmo "$build/bench/sync" 127.0.0.1 "$port" permit 3000)
  raw sync_permit "$j"
  flush
  p50=$(json_field "$j" permit_p50_us) l50=$(json_field "$j" lock_p50_us)
  row sync "13. permit semaphore: watched permit (lease: the watchdog) acquire+release pair, p50 (3000 pairs)" \
    "$p50 µs" "lock+unlock pair (reentrant, watchdog) of the same client, interleaved = $l50 µs" \
    "$(ratio "$p50" "$l50")" "" ""
  row sync "13. permit semaphore: the same, p99" "$(json_field "$j" permit_p99_us) µs" \
    "lock pair p99 = $(json_field "$j" lock_p99_us) µs" "" "" ""
  j=$($tmo "$build/bench/sync" 127.0.0.1 "$port" latch 100 8)
  raw sync_latch "$j"
  flush
  w50=$(json_field "$j" wake_p50_us)
  row sync "13. latch: last count-down -> all 8 awaiting processes through, p50 (100 rounds)" "$w50 µs" \
    "2 × EVALSHA p50 = $f50 µs" "$(ratio "$w50" "$f50")" "" ""
  row sync "13. latch: the same, p99" "$(json_field "$j" wake_p99_us) µs" "" "" "" ""
  # RedLock over 5 servers (4 more of this part's own, stopped by pid),
  # each pair next to a lock pair on the first alone; and the floor of
  # "in parallel" here: one EVAL to all 5 at once against one to one (5
  # servers and the client share this machine's CPUs).
  say "13. RedLock pairs over 5 servers, next to the lock pair on one"
  main_port=$port main_pid=$redis_pid main_dir=$redis_dir
  extra_ports=
  for _ in 1 2 3 4; do
    start_redis
    extra_ports="$extra_ports $port"
    extra_nodes="${extra_nodes:-} $redis_pid:$redis_dir"
  done
  port=$main_port redis_pid=$main_pid redis_dir=$main_dir main_pid=
  trap cleanup EXIT
  j=$($tmo "$build/bench/sync" 127.0.0.1 "$port" redlock 3000 $extra_ports)
  stop_extra_nodes
  raw sync_redlock "$j"
  flush
  r50=$(json_field "$j" redlock_p50_us) s50=$(json_field "$j" single_p50_us)
  r=$(ratio "$r50" "$s50")
  row sync "13. RedLock over 5 servers: uncontended acquire+release pair, p50 (3000 pairs)" "$r50 µs" \
    "lock pair on one of them, interleaved = $s50 µs" "$r" "≤ 1.3" "$(meets "$r" "<=" 1.3)"
  row sync "13. RedLock: the same, p99" "$(json_field "$j" redlock_p99_us) µs" \
    "lock pair p99 = $(json_field "$j" single_p99_us) µs" "" "" ""
  e5=$(json_field "$j" eval5_p50_us) e1=$(json_field "$j" eval1_p50_us)
  row sync "13. RedLock's floor here: EVAL to all 5 servers at once, all answered, p50" "$e5 µs" \
    "EVAL to one = $e1 µs" "$(ratio "$e5" "$e1")" "" ""
}
