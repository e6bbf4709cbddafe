# Sourced by bench/run: part stats (bench/run stats), the function part_stats.
# What always-on statistics cost (relock/stats.h): the same programs with
# them on (the default) and off (BENCH_STATISTICS=0, the option
# RELOCK_OPT_STATISTICS), round by round in the same run, the order turning
# each round so that no side always runs first. A third side, off again,
# is the control: its ratio to the first off is what the machine's noise
# alone makes of a figure, the bar a cost must clear to be measured at all.
# Ratios are on / off for times; rates are turned into times (off / on).

# one value of FIGURE for SIDE (on, off, off2)
stats_keep() { printf '%s\n' "$3" >>"$tmp/stats.$1.$2"; }
stats_median() { median <"$tmp/stats.$1.$2"; }
stats_all() { tr '\n' ' ' <"$tmp/stats.$1.$2"; }

# ratio to three places: the differences sought are a few per cent
ratio3() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }'; }

# FIGURE TITLE UNIT time|rate: the row of on against off, and the control's
stats_rows() {
  on=$(stats_median "$1" on) off=$(stats_median "$1" off) off2=$(stats_median "$1" off2)
  if [ "$4" = time ]; then r=$(ratio3 "$on" "$off") n=$(ratio3 "$off2" "$off"); else r=$(ratio3 "$off" "$on") n=$(ratio3 "$off" "$off2"); fi
  row stats "4. statistics on: $2" "$on $3" "statistics off, same rounds: $off $3" "$r" "≤ 1.02" "$(meets "$r" "<=" 1.02)"
  row stats "4. control, off against off: $2" "$off2 $3" "statistics off: $off $3" "$n" "(the noise)" ""
  raw "stats_$1" "{\"on\":\"$(stats_all "$1" on)\",\"off\":\"$(stats_all "$1" off)\",\"off2\":\"$(stats_all "$1" off2)\"}"
}

part_stats() {
  say "4. statistics' cost: on, off and off again, round by round"
  rm -f "$tmp"/stats.*
  for round in 1 2 3 4 5 6; do
    case $((round % 3)) in 1) order="off on off2" ;; 2) order="on off2 off" ;; *) order="off2 off on" ;; esac
    for side in $order; do
      s=0
      [ "$side" = on ] && s=1
      j=$(BENCH_STATISTICS=$s on_cpu0 $tmo "$lock" 127.0.0.1 "$port" latency 4000)
      stats_keep pair "$side" "$(json_field "$j" p50_us)"
      flush
      j=$(BENCH_STATISTICS=$s $tmo "$lock" 127.0.0.1 "$port" handoff 4 500 200)
      stats_keep handoff "$side" "$(json_field "$j" handoff_p50_us)"
      flush
      j=$(BENCH_STATISTICS=$s $tmo "$lock" 127.0.0.1 "$port" handoff 4 500 0)
      stats_keep backtoback "$side" "$(json_field "$j" acquisitions_per_s)"
      flush
      j=$(BENCH_STATISTICS=$s $tmo "$lock" 127.0.0.1 "$port" throughput 64 2)
      stats_keep throughput "$side" "$(json_field "$j" pairs_per_s)"
      flush
    done
  done
  stats_rows pair "uncontended lock+unlock pair p50 (median of 6 rounds)" µs time
  stats_rows handoff "4 procs, 200 µs apart: handoff p50, release → next holder (median of 6)" µs time
  stats_rows backtoback "4 procs back-to-back: time per acquisition (median of 6)" acq/s rate
  stats_rows throughput "64 names from one client: time per pair (median of 6)" pairs/s rate
  # the one figure without noise: the client's own instructions
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
  else
    row stats "4. statistics on: client instructions per pair (callgrind)" "CANNOT RUN: valgrind not found" "" "n/a" \
      "" no
  fi
}
