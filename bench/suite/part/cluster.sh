# Sourced by bench/run: part cluster (bench/run cluster), the function part_cluster.

# Redis Cluster (part 11): bench/cluster starts and stops (by pid) a
# cluster of its own (3 masters, a replica each). Throughput: part 2's
# 1,024 names from one client, on the cluster, against the cluster's
# ceiling (redis-benchmark --cluster -P 16 -c 50 EVALSHA ÷ 2, before and
# after) and against the single node, measured here in the same run; and
# what bounds it: the servers' CPU and the client's, per pair, next to
# redis-benchmark's.
# Failover: kill -9 of a master -> the first acquisition of a name in its
# slots by a client running all along, against the promotion time.
part_cluster() {
  say "11. cluster: 1024 names on 3 masters; kill -9 of a master (3 failovers)"
  single=$($tmo "$lock" 127.0.0.1 "$port" throughput 1024 5)
  flush
  acquire_script >"$tmp/lock_acquire.lua"
  # more than the two minutes of the others: a hung reference is retried
  # (bench/cluster.c, ceiling)
  if ! j=$(${tmo:+timeout 360} "$build/bench/cluster" "$lock" "$tmp/lock_acquire.lua" 5 3); then
    cannot="*** part 11 (cluster) CANNOT RUN: bench/cluster failed (see above); its rows count as missed ***"
    say "$cannot"
    row cluster "11. cluster throughput, 1024 names" "CANNOT RUN" "" "n/a" "≥ 0.9" no
    row cluster "11. kill -9 of a master -> first acquire in its slots, p50" "CANNOT RUN" "" "n/a" "<= promotion + 200 ms" no
    return 0
  fi
  raw cluster "$j"
  raw cluster_single_node "$single"
  v=$(json_field "$j" pairs_per_s) ceil=$(calc "%.0f" "$(json_field "$j" ceiling_evalsha_per_s) / 2")
  one=$(json_field "$single" pairs_per_s)
  r=$(ratio "$v" "$ceil")
  row cluster "11. cluster throughput, 1024 names on 3 masters from one client: pairs/s" "$v" \
    "redis-benchmark --cluster -P 16 -c 50 EVALSHA ÷ 2 on the same cluster = $ceil" "$r" "≥ 0.9" "$(meets "$r" ">=" 0.9)"
  # what bounds it: the servers' work per pair (relock's acquire + release
  # scripts against two acquires) and the client's CPU per pair
  s=$(json_field "$j" server_us_per_pair) sc=$(json_field "$j" ceiling_server_us_per_pair)
  row cluster "11. the same: servers' CPU µs per pair (all 6 nodes; relock: acquire + release)" "$s" \
    "redis-benchmark: 2 × acquire = $sc" "$(ratio "$s" "$sc")" "" ""
  u=$(json_field "$j" client_us_per_pair) uc=$(json_field "$j" ceiling_client_us_per_pair)
  row cluster "11. the same: client CPU µs per pair (one client, 3 connections; redis-benchmark 50)" "$u" \
    "redis-benchmark: $uc" "$(ratio "$u" "$uc")" "" ""
  row cluster "11. the same, against one node (bench/lock throughput 1024, this run)" "$v" "$one" "$(ratio "$v" "$one")" "" ""
  r50=$(json_field "$j" relock_p50_ms) p50=$(json_field "$j" promotion_p50_ms)
  row cluster "11. kill -9 of a master -> first acquire in its slots by a running client, p50 of 3 (each: $(printf '%s' "$j" | sed -n 's/.*"relock_each_ms":"\([^"]*\)".*/\1/p') ms)" \
    "$r50 ms" "the replica's promotion (kill -9 -> ROLE master), p50 = $p50 ms" "$(ratio "$r50" "$p50")" \
    "<= promotion + 200 ms" "$(meets "$r50" "<=" "$((p50 + 200))")"
}
