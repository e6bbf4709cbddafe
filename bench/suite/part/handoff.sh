# Sourced by bench/run: part handoff (bench/run handoff), the function part_handoff.

part_handoff() {
  say "reference: EVALSHA latency, redis-benchmark -c 1"
  floor_once 10000
  $pinning && cross_floor
  say "3a. contended handoff, back-to-back"
  redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
  a=$($tmo "$lock" 127.0.0.1 "$port" handoff 4 500 0)
  calls_a=$(calls_per 2000)
  raw handoff_back_to_back "$a"
  flush
  say "3b. contended handoff, 200 µs outside the lock"
  redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
  b=$($tmo "$lock" 127.0.0.1 "$port" handoff 4 500 200)
  calls_b=$(calls_per 2000)
  raw handoff_200us "$b"
  flush
  floor_once 10000
  v=$(json_field "$a" acquisitions_per_s)
  r=$(ratio "$v" 4000)
  row handoff "3a. 4 procs × 500 sections, one name, back-to-back: acquisitions/s" "$v" "4000 (the target)" \
    "$r" "≥ 1" "$(meets "$r" ">=" 1)"
  # a section is 4 calls in a row (acquire, GET, SET, release): at the floor
  # round trip, one holder cannot do more sections than this
  ceiling=$(calc "%.0f" "1000000 / (4 * $floor_p50)")
  row handoff "3a. back-to-back: acquisitions/s against the round-trip ceiling" "$v" \
    "1 section per 4 × EVALSHA p50 = $ceiling" "$(ratio "$v" "$ceiling")" "" ""
  if [ -n "$cross_p50" ]; then
    # the processes are not pinned: most round trips cross CPUs, ~3x dearer here
    cross_ceiling=$(calc "%.0f" "1000000 / (4 * $cross_p50)")
    row handoff "3a. back-to-back: acquisitions/s against the ceiling across CPUs" "$v" \
      "1 section per 4 × EVALSHA p50, client and server on different CPUs = $cross_ceiling" \
      "$(ratio "$v" "$cross_ceiling")" "" ""
  fi
  row handoff "3a. back-to-back: owner switches" "$(json_field "$a" owner_switches) of 2000" "" "" \
    "not fair, like RLock" ""
  row handoff "3a. back-to-back: wait p99 / max" \
    "$(calc "%.1f / %.1f ms" "$(json_field "$a" wait_p99_us) / 1000, $(json_field "$a" wait_max_us) / 1000")" "" "" "" ""
  ea=$(json_field "$a" exact) eb=$(json_field "$b" exact)
  ok=no
  [ "$ea" = true ] && [ "$eb" = true ] && ok=yes
  row handoff "3. final counter exact (GET/SET under the lock)" "$(json_field "$a" counter), $(json_field "$b" counter)" \
    "2000, 2000" "" "exact" "$ok"
  floor3=$(calc "%.1f" "3 * $floor_p50")
  h50=$(json_field "$b" handoff_p50_us)
  r=$(ratio "$h50" "$floor3")
  row handoff "3b. 200 µs outside the lock: handoff p50 (release → next holder)" "$h50 µs" \
    "3 × EVALSHA p50 = $floor3 µs" "$r" "≤ 1.5" "$(meets "$r" "<=" 1.5)"
  if [ -n "$cross_p50" ]; then
    cross3=$(calc "%.1f" "3 * $cross_p50")
    row handoff "3b. handoff p50 against round trips across CPUs" "$h50 µs" \
      "3 × EVALSHA p50, client and server on different CPUs = $cross3 µs" "$(ratio "$h50" "$cross3")" "" ""
  fi
  row handoff "3b. handoff p99" "$(json_field "$b" handoff_p99_us) µs" \
    "3 × EVALSHA p99 = $(calc "%.1f" "3 * $floor_p99") µs" "" "" ""
  n=$(json_field "$b" handoffs)
  r=$(ratio "$n" 2000)
  row handoff "3b. acquisitions that are real handoffs" "$n of 2000" "" "$r" "> 0.5" "$(meets "$r" ">" 0.5)"
  row handoff "3. per acquisition: lock script calls / SUBSCRIBEs (3a; 3b)" "$calls_a; $calls_b" \
    "2 / 0 (one acquire, one release)" "" "" ""
  # the herd: the tries are the script calls less the one release; each
  # unlock wakes one process (lua/lock_release.lua), whose try races the
  # releaser's own next one (unfair, as Redisson): one of the two loses
  for part in "a:$calls_a" "b:$calls_b"; do
    c=${part#*:}
    t=$(calc "%.2f" "${c%% /*} - 1") s=${c##*/ }
    r=$(ratio "$t" 1.5)
    row handoff "3${part%%:*}. acquire tries per acquisition (script calls less the release)" "$t" \
      "1.5 (the target; 1: no try in vain)" "$r" "≤ 1" "$(meets "$r" "<=" 1)"
    r=$(ratio "$s" 0.05)
    row handoff "3${part%%:*}. SUBSCRIBEs per acquisition" "$s" "0.05 (the target)" "$r" "≤ 1" "$(meets "$r" "<=" 1)"
  done
  # a hold watched for prompt loss (relock_lock_watch_loss), force-released
  # by another client: until its lost callback, against the next renewal
  say "3c. a watched hold force-released by another client: until its lost callback"
  j=$($tmo "$lock" 127.0.0.1 "$port" lossnotice 500)
  raw loss_notice "$j"
  flush
  l50=$(json_field "$j" p50_us)
  r=$(calc "%.2f" "$l50 / 1000")
  row handoff "3c. watched hold: a foreign force release -> lost callback, p50 / p99 (500 rounds)" \
    "$l50 / $(json_field "$j" p99_us) µs" "unwatched: the next renewal, up to 10 000 ms (watchdog 30 s / 3)" "" \
    "≤ 50 ms" "$(meets "$r" "<=" 50)"
}
