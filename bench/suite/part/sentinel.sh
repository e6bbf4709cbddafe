# Sourced by bench/run: part sentinel (bench/run sentinel), the function part_sentinel.

# Sentinel (part 10): kill -9 of the master, then the first acquisition by a
# relock client that was running all along, on the new master, against
# Sentinel's own promotion in the same failovers (kill -9 -> the first
# +switch-master). bench/sentinel starts and stops (by pid) a topology of
# its own: a master, two replicas, three sentinels. Target: relock within
# 200 ms of the promotion (p50 of 5 failovers).
part_sentinel() {
  say "10. sentinel: kill -9 of the master -> first acquisition on the new master (5 failovers)"
  if ! j=$($tmo "$build/bench/sentinel" 5); then
    cannot="*** part 10 (sentinel) CANNOT RUN: bench/sentinel failed (see above); its rows count as missed ***"
    say "$cannot"
    row sentinel "10. kill -9 of the master -> first acquire on the new master, p50" "CANNOT RUN" "" "n/a" "<= promotion + 200 ms" no
    return 0
  fi
  raw sentinel "$j"
  r50=$(json_field "$j" relock_p50_ms) s50=$(json_field "$j" switch_p50_ms)
  row sentinel "10. kill -9 of the master -> first acquire by a running client on the new master, p50 of 5 (each: $(printf '%s' "$j" | sed -n 's/.*"relock_each_ms":"\([^"]*\)".*/\1/p') ms)" \
    "$r50 ms" "Sentinel's promotion, kill -9 -> +switch-master, p50 = $s50 ms" "$(ratio "$r50" "$s50")" \
    "<= promotion + 200 ms" "$(meets "$r50" "<=" "$((s50 + 200))")"
}
