# Sourced by bench/run: part watchdog (bench/run watchdog), the function part_watchdog.

part_watchdog() {
  for n in 10000 100000; do
    say "4. watchdog, $n locks (watchdog 3 s, renewed every 1 s)"
    j=$($tmo "$build/bench/watchdog" 127.0.0.1 "$port" "$n" 3000 5000)
    raw "watchdog_$n" "$j"
    flush
    label=$(printf '%s' "$n" | sed 's/000$/,000/')
    calls=$(json_field "$j" calls_per_cycle)
    r=$(ratio "$calls" "$((n / 100))")
    row watchdog "4. $label locks: script calls per renewal cycle" "$calls ($(json_field "$j" renewed_per_cycle) renewed)" \
      "1 per 100 locks = $((n / 100))" "$r" "≤ 1" "$(meets "$r" "<=" 1)"
    heap=$(json_field "$j" heap_per_lock_bytes)
    r=$(ratio "$heap" 256)
    row watchdog "4. $label locks: heap per held lock (lock object + hold)" \
      "$(calc "%.0f B (%.0f + %.0f)" "$heap, $(json_field "$j" heap_per_lock_object_bytes), $(json_field "$j" heap_per_hold_bytes)")" \
      "256 B (the target)" "$r" "≤ 1" "$(meets "$r" "<=" 1)"
    row watchdog "4. $label locks: client CPU holding, watchdog 3 s" \
      "$(calc "%.2f %% of a core (%.1f ms per cycle)" "100 * $(json_field "$j" cpu_fraction), $(json_field "$j" cpu_per_cycle_ms)")" \
      "" "" "" ""
    if [ "$n" = 100000 ]; then
      cpu=$(calc "%.3f" "100 * $(json_field "$j" cpu_fraction_default_30s)")
      r=$(ratio "$cpu" 5)
      row watchdog "4. 100,000 locks: client CPU at the default 30 s watchdog (CPU per cycle ÷ 10 s)" \
        "$cpu % of a core" "5 % (the target)" "$r" "≤ 1" "$(meets "$r" "<=" 1)"
    fi
  done
}
