# Sourced by bench/run: part replicas (bench/run replicas), the function part_replicas.

# Synced replicas (RELOCK_OPT_MIN_REPLICAS_ACKED): part 1's pair with
# min-replicas-acked=1 (each acquisition pipelined with WAIT 1 500) against
# the same pair without, on a master of its own with one replica, in the
# same run, interleaved in five rounds like part 1, and against part 1's
# floor on this master. The difference is the replica's acknowledgement:
# the master asks for it (REPLCONF GETACK) once WAIT blocks, and the replica
# answers. redis-benchmark cannot be the reference for the pair EVALSHA +
# WAIT: it sends one command per request, and a WAIT of a client that wrote
# nothing returns at once.
part_replicas() {
  say "9. synced replicas: the pair with min-replicas-acked=1 and without, on a master with one replica"
  main_port=$port main_pid=$redis_pid main_dir=$redis_dir
  start_redis
  m_port=$port m_pid=$redis_pid m_dir=$redis_dir
  start_redis --replicaof 127.0.0.1 "$m_port"
  replica_pid=$redis_pid replica_dir=$redis_dir
  port=$m_port redis_pid=$m_pid redis_dir=$m_dir
  trap cleanup EXIT
  synced=false
  for _ in $(seq 200); do
    if redis-cli -p "$port" INFO replication | tr -d '\r' | grep -q '^connected_slaves:1$' &&
      redis-cli -p "$(redis-cli -p "$port" INFO replication | tr -d '\r' | sed -n 's/^slave0:.*port=\([0-9]*\).*/\1/p')" \
        INFO replication | tr -d '\r' | grep -q '^master_link_status:up$'; then
      synced=true
      break
    fi
    sleep 0.05
  done
  if ! $synced; then
    cannot="*** part 9 (replicas) CANNOT RUN: the replica did not sync with the master; its rows count as missed ***"
    say "$cannot"
    row replicas "9. min-replicas-acked=1: uncontended lock+unlock pair, p50" "CANNOT RUN: the replica did not sync" "" "n/a" "" no
  else
    sha=$(redis-cli -p "$port" SCRIPT LOAD "$(acquire_script)")
    sl= pl= ff=
    for _round in 1 2 3 4 5; do
      j=$(BENCH_MIN_REPLICAS_ACKED=1 on_cpu0 $tmo "$lock" 127.0.0.1 "$port" latency 4000)
      sl="$sl $(json_field "$j" p50_us):$(json_field "$j" p99_us):$(json_field "$j" mean_us)"
      flush
      j=$(on_cpu0 $tmo "$lock" 127.0.0.1 "$port" latency 4000)
      pl="$pl $(json_field "$j" p50_us):$(json_field "$j" p99_us):$(json_field "$j" mean_us)"
      flush
      ff="$ff $(evalsha_once 4000)"
      flush
    done
    waits=$(redis-cli -p "$port" INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_wait:calls=\([0-9]*\),.*/\1/p')
  fi
  stop_redis
  redis_pid=$replica_pid redis_dir=$replica_dir
  stop_redis
  replica_pid= replica_dir=
  # sha= : the main server loads the script again when a later part needs it
  port=$main_port redis_pid=$main_pid redis_dir=$main_dir main_pid= sha=
  $synced || return 0
  med() { printf '%s\n' $1 | cut -d: -f"$2" | median; }
  raw replicas "{\"pairs\":20000,\"synced_pair\":\"$sl\",\"plain_pair\":\"$pl\",\"evalsha\":\"$ff\",\"wait_calls\":${waits:-0}}"
  s50=$(med "$sl" 1) p50=$(med "$pl" 1)
  row replicas "9. min-replicas-acked=1 (1 replica): uncontended lock+unlock pair, p50 (median of 5 rounds)" "$s50 µs" \
    "the same pair with min-replicas-acked=0, same master = $p50 µs" "$(ratio "$s50" "$p50")" "" ""
  s99=$(med "$sl" 2) p99=$(med "$pl" 2)
  row replicas "9. min-replicas-acked=1: pair p99" "$s99 µs" "min-replicas-acked=0 p99 = $p99 µs" "$(ratio "$s99" "$p99")" "" ""
  smean=$(med "$sl" 3) pmean=$(med "$pl" 3)
  row replicas "9. min-replicas-acked=1: pair mean (the extra: $(calc "%.1f" "$smean - $pmean") µs per pair, one WAIT)" \
    "$smean µs" "min-replicas-acked=0 mean = $pmean µs" "$(ratio "$smean" "$pmean")" "" ""
  f50=$(calc "%.1f" "2 * $(med "$ff" 1)")
  row replicas "9. min-replicas-acked=1: pair p50 against the round-trip floor" \
    "$s50 µs" "2 × EVALSHA p50 (redis-benchmark -c 1) on this master = $f50 µs" "$(ratio "$s50" "$f50")" "" ""
  # 5 rounds of 4,000 pairs + 1,000 to warm up, with WAIT; as many without
  w=$(calc "%.2f" "${waits:-0} / 25000")
  row replicas "9. WAITs on the master per synced acquisition (the rounds with min-replicas-acked=0 send none)" \
    "$w (${waits:-0})" "1 per acquisition (25,000), 0 without" "" "1" "$(meets "$(calc "%.0f" "$w")" "==" 1)"
}
