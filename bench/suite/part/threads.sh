# Sourced by bench/run: part threads (bench/run threads), the function part_threads.

# Threaded mode (bench/threads): a client made without a loop, called from
# several threads, against the same work done asynchronously by one thread
# on a client embedded in the program's loop, measured in this run.
part_threads() {
  # 7.1 the reference is part 2's figure, bench/lock throughput 64 (one
  # thread, 64 async chains), taken again here before and after the threaded
  # runs, since the server's rate drifts within a minute: their mean
  say "7. threads: reference, async throughput, 64 names, one thread (bench/lock)"
  ra=$($tmo "$lock" 127.0.0.1 "$port" throughput 64 5)
  flush
  say "7. threads: 8 threads x 8 of 64 names, blocking lock+unlock"
  tb=$($tmo "$threads" 127.0.0.1 "$port" pairs 8 64 5 blocking)
  flush
  say "7. threads: 8 threads x 8 of 64 names, 8 acquisitions in flight each"
  tw=$($tmo "$threads" 127.0.0.1 "$port" pairs 8 64 5 async)
  flush
  say "7. threads: reference again"
  rb=$($tmo "$lock" 127.0.0.1 "$port" throughput 64 5)
  flush
  raw threads_reference_before "$ra"
  raw threads_reference_after "$rb"
  raw threads_pairs_blocking "$tb"
  raw threads_pairs_async "$tw"
  r0=$(json_field "$ra" pairs_per_s) r1=$(json_field "$rb" pairs_per_s)
  ref=$(calc "%.0f" "($r0 + $r1) / 2")
  v=$(json_field "$tb" pairs_per_s)
  r=$(ratio "$v" "$ref")
  row threads "7. threaded, 8 threads × 8 of 64 names, blocking lock+unlock: pairs/s" "$v" \
    "async, one thread, 64 names (part 2's bench/lock throughput 64), before / after: $r0 / $r1, mean $ref" \
    "$r" "≥ 0.85" "$(meets "$r" ">=" 0.85)"
  v=$(json_field "$tw" pairs_per_s)
  row threads "7. threaded, 8 threads × 8 names, each thread's 8 acquisitions then releases in flight (async + wait): pairs/s" \
    "$v" "the same mean = $ref" "$(ratio "$v" "$ref")" "" ""
  row threads "7. threaded, 8 threads, blocking: CPU busy, client / server" \
    "$(json_field "$tb" client_cpu) / $(json_field "$tb" server_cpu) cores" \
    "one thread: $(json_field "$ra" client_cpu) / $(json_field "$ra" server_cpu), $(json_field "$rb" client_cpu) / $(json_field "$rb" server_cpu) cores" "" "" ""
  # every thread's, the loop thread's included (getrusage); a blocking call
  # from a thread that sleeps while Redis answers costs that thread at least
  # one, so a pair (two calls) two
  v=$(json_field "$tb" context_switches_per_pair)
  row threads "7. threaded, 8 threads, blocking: context switches per pair, the whole process" "$v" \
    "8 threads, async + wait: $(json_field "$tw" context_switches_per_pair)" "" "≤ 2" "$(meets "$v" "<=" 2)"

  # 7.2 4 owners on one name: 4 threads of one threaded client (blocking),
  # then 4 async owners of one embedded client on one thread, in each run
  say "7. threads: 4 threads on one name, back-to-back (then 4 async owners on one loop)"
  a=$($tmo "$threads" 127.0.0.1 "$port" contend 4 500 0)
  flush
  say "7. threads: 4 threads on one name, 200 µs asleep outside the lock"
  b=$($tmo "$threads" 127.0.0.1 "$port" contend 4 500 200)
  flush
  raw threads_contend_back_to_back "$a"
  raw threads_contend_200us "$b"
  v=$(json_field "$a" threaded_acquisitions_per_s) e=$(json_field "$a" embedded_acquisitions_per_s)
  row threads "7. threaded, 4 threads × 500 sections on one name, back-to-back: acquisitions/s" "$v" \
    "4 async owners on one embedded client, one thread = $e" "$(ratio "$v" "$e")" "" ""
  row threads "7. back-to-back: owner switches, threaded; embedded" \
    "$(json_field "$a" threaded_owner_switches) of 2000" "$(json_field "$a" embedded_owner_switches) of 2000" "" "" ""
  v=$(json_field "$b" threaded_handoff_p50_us) e=$(json_field "$b" embedded_handoff_p50_us)
  row threads "7. threaded, 4 threads, 200 µs asleep outside the lock: handoff p50 (release in A → B holds)" "$v µs" \
    "4 async owners on one embedded client (the pause an ev_timer) = $e µs" "$(ratio "$v" "$e")" "" ""
  row threads "7. 200 µs apart: handoff p99; real handoffs" \
    "$(json_field "$b" threaded_handoff_p99_us) µs; $(json_field "$b" threaded_handoffs) of 2000" \
    "$(json_field "$b" embedded_handoff_p99_us) µs; $(json_field "$b" embedded_handoffs) of 2000" "" "" ""
  ok=no
  [ "$(json_field "$a" exact)" = true ] && [ "$(json_field "$b" exact)" = true ] && ok=yes
  row threads "7. final counters exact (Redis GET/SET and memory, under the lock; threaded, embedded)" \
    "$(json_field "$a" threaded_counter)/$(json_field "$a" threaded_memory_counter), $(json_field "$b" threaded_counter)/$(json_field "$b" threaded_memory_counter)" \
    "$(json_field "$a" embedded_counter)/$(json_field "$a" embedded_memory_counter), $(json_field "$b" embedded_counter)/$(json_field "$b" embedded_memory_counter)" \
    "" "2000 each" "$ok"

  # 7.3 a blocking call from another thread than the loop's, against the same
  # command chained on an embedded client's loop: the difference is the
  # crossing (wake the loop thread, then the caller). Pinned to the server's
  # CPU, like part 1.
  say "7. threads: cross-thread call overhead, is_locked"
  o=$(on_cpu0 $tmo "$threads" 127.0.0.1 "$port" overhead 2000 5)
  raw threads_overhead "$o"
  v=$(json_field "$o" threaded_p50_us) e=$(json_field "$o" embedded_p50_us)
  row threads "7. cross-thread call: blocking is_locked from a non-loop thread, p50 (the difference: the crossing)" \
    "$v µs (+$(json_field "$o" overhead_p50_us) µs)" \
    "is_locked_async chained on an embedded client's loop, p50 = $e µs (both on the server's CPU)" "$(ratio "$v" "$e")" "" ""
}
