# Sourced by bench/run: part waiters (bench/run waiters), the function part_waiters.

part_waiters() {
  measure_rate
  say "5. waiters: 10,000 on 1,000 names"
  j=$($tmo "$lock" 127.0.0.1 "$port" waiters 1000 10)
  raw waiters "$j"
  flush
  ch=$(json_field "$j" client_channels) single=$(json_field "$j" numsub_single)
  ok=no
  [ "$ch" = 1000 ] && [ "$single" = 1000 ] && ok=yes
  row waiters "5. 10,000 waiters on 1,000 names: subscriptions" \
    "$ch channels; PUBSUB NUMSUB = 1 on $single" "1000 names" "$(ratio "$ch" 1000)" "1 per name" "$ok"
  row waiters "5. heap per waiter" "$(json_field "$j" heap_per_waiter_bytes) B" "" "" "" ""
  # 1,000 holder releases + 10,000 acquisitions + 10,000 releases
  floor=$(calc "%.1f" "21000 / $evalsha_rate * 1000")
  t=$(json_field "$j" from_last_release_ms)
  ex=$(json_field "$j" exclusive)
  row waiters "5. last holder's release → all 10,000 acquired (exclusive: $ex)" \
    "$t ms ($(json_field "$j" from_first_release_ms) ms from the first)" \
    "21,000 script calls at the pipelined EVALSHA rate = $floor ms" "$(ratio "$t" "$floor")" "" ""
}
