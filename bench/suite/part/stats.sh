# Sourced by bench/run: part stats (bench/run stats), the function part_stats.
# What always-on statistics cost (relock/stats.h): the same programs with
# them on (the default) and off (BENCH_STATISTICS=0, the option
# RELOCK_OPT_STATISTICS), interleaved round by round so that the server's
# drift falls on both alike; ratios on / off (time) or off / on (rates).

# ratio to three places: the differences sought are a few per cent
ratio3() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }'; }

part_stats() {
  say "4. statistics' cost: pair latency, contended handoff, throughput, on and off in turn"
  lat_on= lat_off= hand_on= hand_off= tp_on= tp_off=
  for _round in 1 2 3 4 5; do
    for s in 0 1; do
      j=$(BENCH_STATISTICS=$s on_cpu0 $tmo "$lock" 127.0.0.1 "$port" latency 4000)
      if [ "$s" = 1 ]; then lat_on="$lat_on $(json_field "$j" p50_us)"; else lat_off="$lat_off $(json_field "$j" p50_us)"; fi
      flush
    done
  done
  for _round in 1 2 3; do
    for s in 0 1; do
      j=$(BENCH_STATISTICS=$s $tmo "$lock" 127.0.0.1 "$port" handoff 4 500 0)
      v=$(json_field "$j" acquisitions_per_s)
      if [ "$s" = 1 ]; then hand_on="$hand_on $v"; else hand_off="$hand_off $v"; fi
      flush
      j=$(BENCH_STATISTICS=$s $tmo "$lock" 127.0.0.1 "$port" throughput 64 2)
      v=$(json_field "$j" pairs_per_s)
      if [ "$s" = 1 ]; then tp_on="$tp_on $v"; else tp_off="$tp_off $v"; fi
      flush
    done
  done
  p_on=$(printf '%s\n' $lat_on | median) p_off=$(printf '%s\n' $lat_off | median)
  h_on=$(printf '%s\n' $hand_on | median) h_off=$(printf '%s\n' $hand_off | median)
  t_on=$(printf '%s\n' $tp_on | median) t_off=$(printf '%s\n' $tp_off | median)
  raw stats "{\"pair_p50_on\":\"$lat_on\",\"pair_p50_off\":\"$lat_off\",\"handoff_on\":\"$hand_on\",\"handoff_off\":\"$hand_off\",\"throughput_on\":\"$tp_on\",\"throughput_off\":\"$tp_off\"}"
  r=$(ratio3 "$p_on" "$p_off")
  row stats "4. statistics on: uncontended pair p50 (median of 5 rounds each)" "$p_on µs" \
    "statistics off, same rounds: $p_off µs" "$r" "≤ 1.02" "$(meets "$r" "<=" 1.02)"
  r=$(ratio3 "$h_off" "$h_on")
  row stats "4. statistics on: 4 procs back-to-back, time per acquisition (median of 3)" "$h_on acq/s" \
    "statistics off: $h_off acq/s" "$r" "≤ 1.02" "$(meets "$r" "<=" 1.02)"
  r=$(ratio3 "$t_off" "$t_on")
  row stats "4. statistics on: 64 names from one client, time per pair (median of 3)" "$t_on pairs/s" \
    "statistics off: $t_off pairs/s" "$r" "≤ 1.02" "$(meets "$r" "<=" 1.02)"
  if command -v valgrind >/dev/null; then
    say "4. statistics' cost in client instructions per pair, under callgrind"
    for s in 0 1; do
      for n in 1000 3000; do
        BENCH_STATISTICS=$s $tmo valgrind --tool=callgrind --callgrind-out-file="$tmp/callgrind.stats$s.$n" \
          "$lock" 127.0.0.1 "$port" latency "$n" >/dev/null 2>&1
        flush
      done
    done
    irs() { awk '/^(summary|totals):/ { print $2; exit }' "$tmp/callgrind.stats$1.$2"; }
    on=$(calc "%.0f" "($(irs 1 3000) - $(irs 1 1000)) / 2000")
    off=$(calc "%.0f" "($(irs 0 3000) - $(irs 0 1000)) / 2000")
    r=$(ratio3 "$on" "$off")
    row stats "4. statistics on: client instructions per pair (callgrind; 3000 − 1000 pairs)" "$on" \
      "statistics off: $off" "$r" "≤ 1.02" "$(meets "$r" "<=" 1.02)"
  fi
}
