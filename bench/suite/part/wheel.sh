# Sourced by bench/run: part wheel (bench/run wheel), the function part_wheel.

part_wheel() {
  say "6. timer wheel against libev's ev_timer"
  $tmo "$build/bench/wheel" -j "$tmp/wheel.json" >/dev/null
  j=$(cat "$tmp/wheel.json")
  raw wheel "$j"
  # one result of the JSON: case name, n -> "wheel ev ratio"
  pick() {
    printf '%s\n' "$j" | sed 's/},{/}\n{/g' | grep -F "\"case\":\"$1\"" | grep -F "\"n\":$2," |
      sed 's/.*"wheel_ops_per_s":\([0-9.]*\),"ev_timer_ops_per_s":\([0-9.]*\),"ratio":\([0-9.]*\).*/\1 \2 \3/'
  }
  for c in "schedule+cancel (request timeouts: cancel oldest)" "schedule+cancel (random pending)" \
    "schedule+cancel (newest: heap's best case)" "schedule+expire"; do
    set -- $(pick "$c" 1000000)
    row wheel "6. timer wheel, 1 M pending: $c, ops/s" "$(calc "%.3g" "$1")" "libev ev_timer $(calc "%.3g" "$2")" \
      "$(calc "%.2f" "$3")" "" ""
  done
}
