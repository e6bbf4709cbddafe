# Sourced by bench/run: part latency (bench/run latency), the function part_latency.

part_latency() {
  # five rounds, each a floor then relock, 4,000 pairs each: medians of both
  say "1. uncontended latency, interleaved with redis-benchmark -c 1"
  lat=
  for _round in 1 2 3 4 5; do
    floor_once 4000
    j=$(on_cpu0 $tmo "$lock" 127.0.0.1 "$port" latency 4000)
    lat="$lat $(json_field "$j" p50_us):$(json_field "$j" p99_us):$(json_field "$j" mean_us)"
    flush
  done
  p50=$(printf '%s\n' $lat | cut -d: -f1 | median)
  p99=$(printf '%s\n' $lat | cut -d: -f2 | median)
  mean=$(printf '%s\n' $lat | cut -d: -f3 | median)
  raw latency "{\"pairs\":20000,\"p50_us\":$p50,\"p99_us\":$p99,\"mean_us\":$mean,\"each\":\"$lat\"}"
  f50=$(calc "%.1f" "2 * $floor_p50") f99=$(calc "%.1f" "2 * $floor_p99")
  r=$(ratio "$p50" "$f50")
  row latency "1. uncontended lock+unlock pair, p50 (median of 5 rounds)" "$p50 µs" \
    "2 × EVALSHA p50 (redis-benchmark -c 1; both on the server's CPU) = $f50 µs" "$r" "≤ 1.15" "$(meets "$r" "<=" 1.15)"
  row latency "1. uncontended lock+unlock pair, p99" "$p99 µs" "2 × EVALSHA p99 = $f99 µs" "$(ratio "$p99" "$f99")" "" ""
  # redis-benchmark's percentiles come from a histogram with 8 µs buckets at
  # this size (its p50 is a bucket's top); its mean is exact
  fmean=$(calc "%.1f" "2 * $floor_mean")
  row latency "1. uncontended lock+unlock pair, mean" "$mean µs" "2 × EVALSHA mean = $fmean µs" \
    "$(ratio "$mean" "$fmean")" "" ""
  callgrind_row
}

# The client's instructions per uncontended lock+unlock pair (the server
# excluded: another process), counted by callgrind - repeatable where the
# timings of this machine are not. Two runs, 1000 and 3000 measured pairs
# (each after the same 1000 warm-up pairs): the difference over 2000 pairs
# leaves out start-up and shutdown.
callgrind_row() {
  if ! command -v valgrind >/dev/null; then
    row latency "1. client instructions per uncontended lock+unlock pair (callgrind)" \
      "CANNOT RUN: valgrind not found" "" "n/a" "" no
    return
  fi
  say "1. instructions per pair, under callgrind"
  for n in 1000 3000; do
    $tmo valgrind --tool=callgrind --callgrind-out-file="$tmp/callgrind.$n" \
      "$lock" 127.0.0.1 "$port" latency "$n" >/dev/null 2>&1
    flush
  done
  ir() { awk '/^(summary|totals):/ { print $2; exit }' "$tmp/callgrind.$1"; }
  i1=$(ir 1000) i3=$(ir 3000)
  per=$(calc "%.0f" "($i3 - $i1) / 2000")
  raw callgrind "{\"ir_1000\":$i1,\"ir_3000\":$i3,\"ir_per_pair\":$per}"
  row latency "1. client instructions per uncontended lock+unlock pair (callgrind; 3000 − 1000 pairs)" "$per" \
    "" "" "" ""
}
