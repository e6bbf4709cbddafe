# Sourced by bench/run: part family (bench/run family), the function part_family.

# 12. Each of Redisson's kinds: its uncontended pair against the two-round-
# trip floor (pinned, as part 1), and its hand-off across 4 processes (200 µs
# outside the lock, as 3b) against the reentrant lock's in this same part.
# The read lock is shared: 4 readers never hand over, so it has no hand-off
# row.
part_family() {
  say "12. the lock family: uncontended pairs and hand-offs per kind"
  for kind in lock fair read write fenced spin; do
    lat=
    for _round in 1 2 3; do
      floor_once 4000
      j=$(BENCH_LOCK_KIND=$kind on_cpu0 $tmo "$lock" 127.0.0.1 "$port" latency 3000)
      lat="$lat $(json_field "$j" p50_us)"
      flush
    done
    p50=$(printf '%s\n' $lat | median)
    raw "family_latency_$kind" "{\"p50_us\":$p50,\"each\":\"$lat\"}"
    f50=$(calc "%.1f" "2 * $floor_p50")
    row family "12. $kind: uncontended lock+unlock pair, p50 (median of 3)" "$p50 µs" "2 × EVALSHA p50 = $f50 µs" \
      "$(ratio "$p50" "$f50")" "" ""
    [ "$kind" = read ] && continue
    redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
    h=$(BENCH_LOCK_KIND=$kind $tmo "$lock" 127.0.0.1 "$port" handoff 4 300 200)
    calls=$(calls_per 1200)
    raw "family_handoff_$kind" "$h"
    flush
    h50=$(json_field "$h" handoff_p50_us)
    if [ "$kind" = lock ]; then
      lock_h50=$h50
      row family "12. lock: 4 procs, 200 µs outside: handoff p50 (the reference below)" "$h50 µs" \
        "3 × EVALSHA p50 = $(calc "%.1f" "3 * $floor_p50") µs" "" "" ""
      continue
    fi
    r=$(ratio "$h50" "$lock_h50") target= met=
    if [ "$kind" = fair ]; then target="≤ 1.5" met=$(meets "$r" "<=" 1.5); fi
    row family "12. $kind: 4 procs, 200 µs outside: handoff p50 (exact counter: $(json_field "$h" exact); calls $calls)" \
      "$h50 µs" "lock's handoff p50 = $lock_h50 µs" "$r" "$target" "$met"
  done
}
