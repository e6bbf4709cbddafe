# Sourced by bench/run: part throughput (bench/run throughput), the function part_throughput.

part_throughput() {
  # the reference before, between and after: the server's rate drifts
  rate_once
  say "2. throughput, 64 names"
  t64=$($tmo "$lock" 127.0.0.1 "$port" throughput 64 5)
  flush
  rate_once
  say "2. throughput, 1024 names"
  t1024=$($tmo "$lock" 127.0.0.1 "$port" throughput 1024 5)
  flush
  rate_once
  ref=$(calc "%.0f" "$evalsha_rate / 2")
  for names in 64 1024; do
    if [ "$names" = 64 ]; then j=$t64; else j=$t1024; fi
    raw "throughput_$names" "$j"
    v=$(json_field "$j" pairs_per_s)
    r=$(ratio "$v" "$ref")
    row throughput "2. throughput, $names names from one client: pairs/s" "$v" \
      "redis-benchmark -P 16 -c 50 EVALSHA ÷ 2 = $ref" "$r" "≥ 0.85" "$(meets "$r" ">=" 0.85)"
    row throughput "2. throughput, $names names: CPU busy, client / server" \
      "$(json_field "$j" client_cpu) / $(json_field "$j" server_cpu) cores" "server $evalsha_cpu cores" "" "" ""
  done
}
