# Sourced by bench/run: part redisson (bench/run redisson), the function part_redisson.

# 14. Redisson itself, side by side (issue 20): the same workloads on the
# same server in the same run, relock's bench/lock and bench/watchdog next to
# Redisson's tests/interop Bench.java (Redisson from ~/.m2, pinned in
# tests/interop/pom.xml; the JVM's default heap, a quarter of the RAM, holds
# Redisson's 100,000 locks in about 100 MB): the uncontended pair (one
# thread, both unpinned), 64 names in flight (Redisson's async API), 4
# contenders on one name (relock: processes; Redisson: 4 clients of their
# own in one JVM, after 250 sections each of JIT warm-up) back to back and
# with 200 µs outside the lock (the handoff: a release to another waiting
# holder's acquisition, as part 3b), and 100,000 locks held with the
# watchdog. relock / Redisson ratios; the goal: relock ahead on every row.
#
# The watchdog at 3 s (part 4's, renewed every second) is more than Redisson
# keeps up with at 100,000 locks taken 4096 in flight, as bench/watchdog
# takes them: here it lost most of them while they were being taken (the
# last row says how many it still held). Its renewal sends a cycle's batches
# of 100 one after the other, each once the one before is answered, on the
# connections the acquisitions keep busy. So its figures per cycle come from
# a second run at its default, 30 s (renewed every 10 s, nothing lost),
# against relock's at 3 s: relock's CPU and calls per cycle are the same at
# 30 s (bench/watchdog 100000 30000 35000: 103 ms and 1000 per cycle, against
# 101 ms and 1000 at 3 s), and a relock run at 30 s would add half a minute.
part_redisson() {
  say "14. Redisson side by side: building its runner (tests/interop/build.sh)"
  peer=$build/tests/interop/peer
  if ! why=$(sh "$src/tests/interop/build.sh" "$peer" 2>&1 >/dev/null); then
    row redisson "14. Redisson side by side" "CANNOT RUN: ${why:-the Java runner did not build}" "" "n/a" "" no
    return
  fi
  # a failed run prints nothing (its rows say CANNOT RUN), without ending the suite
  jb() {
    $tmo java -cp "$peer/classes:$peer/lib/*" relock.interop.Bench "redis://127.0.0.1:$port" "$@" 2>>"$tmp/redisson.err" ||
      say "Redisson's runner failed ($?): $*"
  }
  redisson_cannot() { row redisson "14. $1" "CANNOT RUN: Redisson's runner failed ($(tail -n 1 "$tmp/redisson.err" 2>/dev/null))" "" "n/a" "" no; }
  say "14. uncontended pair: relock, Redisson"
  rl=$($tmo "$lock" 127.0.0.1 "$port" latency 4000)
  flush
  jl=$(jb latency 4000)
  flush
  say "14. 64 names in flight: relock, Redisson"
  rt=$($tmo "$lock" 127.0.0.1 "$port" throughput 64 3)
  flush
  jt=$(jb throughput 64 3)
  flush
  say "14. 4 contenders back to back: relock, Redisson"
  rh=$($tmo "$lock" 127.0.0.1 "$port" handoff 4 500 0)
  flush
  jh=$(jb handoff 4 500 0)
  flush
  say "14. 4 contenders, 200 µs outside the lock: relock, Redisson"
  rh2=$($tmo "$lock" 127.0.0.1 "$port" handoff 4 500 200)
  flush
  jh2=$(jb handoff 4 500 200)
  flush
  say "14. 100,000 held locks, watchdog 3 s: relock, Redisson; Redisson at its default 30 s"
  rw=$($tmo "$build/bench/watchdog" 127.0.0.1 "$port" 100000 3000 5000)
  flush
  jw3=$(jb watchdog 100000 3000 5)
  flush
  jw30=$(jb watchdog 100000 30000 60)
  flush
  raw redisson "{\"relock_latency\":$rl,\"redisson_latency\":${jl:-null},\"relock_throughput\":$rt,\"redisson_throughput\":${jt:-null},\"relock_handoff\":$rh,\"redisson_handoff\":${jh:-null},\"relock_handoff_200us\":$rh2,\"redisson_handoff_200us\":${jh2:-null},\"relock_watchdog_3s\":$rw,\"redisson_watchdog_3s\":${jw3:-null},\"redisson_watchdog_30s\":${jw30:-null}}"
  if [ -z "$jl" ] || [ -z "$jt" ] || [ -z "$jh" ]; then
    redisson_cannot "Redisson side by side: pair, 64 names, back to back"
  else
    for f in p50_us p99_us; do
      a=$(json_field "$rl" $f) b=$(json_field "$jl" $f) r=$(ratio "$(json_field "$rl" $f)" "$(json_field "$jl" $f)")
      row redisson "14. uncontended lock+unlock pair, ${f%_us} (4000 pairs, one thread)" "$a µs" "Redisson $b µs" \
        "$r" "≤ 1" "$(meets "$r" "<=" 1)"
    done
    a=$(json_field "$rt" pairs_per_s) b=$(json_field "$jt" pairs_per_s) r=$(ratio "$a" "$b")
    row redisson "14. 64 names in flight: pairs/s" "$a" "Redisson (async API) $b" "$r" "≥ 1" "$(meets "$r" ">=" 1)"
    a=$(json_field "$rh" acquisitions_per_s) b=$(json_field "$jh" acquisitions_per_s) r=$(ratio "$a" "$b")
    row redisson "14. 4 contenders, one name, back to back: acquisitions/s (owner switches of 2000: relock $(json_field "$rh" owner_switches), Redisson $(json_field "$jh" owner_switches))" \
      "$a" "Redisson $b" "$r" "≥ 1" "$(meets "$r" ">=" 1)"
  fi
  if [ -z "$jh2" ]; then
    redisson_cannot "4 contenders, 200 µs outside the lock: handoff"
  else
    a=$(json_field "$rh2" handoff_p50_us) b=$(json_field "$jh2" handoff_p50_us) r=$(ratio "$a" "$b")
    row redisson "14. 4 contenders, one name, 200 µs outside the lock: handoff p50, release → another waiting holder (handoffs of 2000: relock $(json_field "$rh2" handoffs), Redisson $(json_field "$jh2" handoffs))" \
      "$a µs" "Redisson $b µs" "$r" "≤ 1" "$(meets "$r" "<=" 1)"
    a=$(json_field "$rh2" handoff_p99_us) b=$(json_field "$jh2" handoff_p99_us)
    row redisson "14. 200 µs outside the lock: handoff p99" "$a µs" "Redisson $b µs" "$(ratio "$a" "$b")" "" ""
  fi
  if [ -z "$jw30" ]; then
    redisson_cannot "100,000 held locks (Redisson's watchdog at 30 s)"
  else
    a=$(json_field "$rw" calls_per_cycle) b=$(json_field "$jw30" calls_per_cycle) r=$(ratio "$a" "$b")
    row redisson "14. 100,000 held locks: script calls per renewal cycle (relock: watchdog 3 s; Redisson: its default 30 s)" \
      "$a" "Redisson $b (EVALSHA + EVAL, INFO commandstats)" "$r" "≤ 1" "$(meets "$r" "<=" 1)"
    a=$(json_field "$rw" heap_per_lock_bytes) b=$(json_field "$jw30" heap_per_lock_bytes) r=$(ratio "$a" "$b")
    row redisson "14. 100,000 held locks: heap per held lock (lock object + hold)" \
      "$(calc "%.0f B (%.0f + %.0f; " "$a, $(json_field "$rw" heap_per_lock_object_bytes), $(json_field "$rw" heap_per_hold_bytes)")$(printf '%s' "$rw" | sed -n 's/.*"heap_source":"\([^"]*\)".*/\1/p'))" \
      "Redisson $(calc "%.0f B (%.0f + %.0f; Java heap after System.gc())" "$b, $(json_field "$jw30" heap_per_lock_object_bytes), $(json_field "$jw30" heap_per_hold_bytes)")" \
      "$r" "≤ 1" "$(meets "$r" "<=" 1)"
    # both as CPU per cycle ÷ 10 s (the default cycle); Redisson's cycle is
    # 10 s plus its batches' time, so its measured share is a little lower
    a=$(json_field "$rw" cpu_fraction_default_30s) b=$(json_field "$jw30" cpu_fraction_default_30s) r=$(ratio "$a" "$b")
    row redisson "14. 100,000 held locks: client CPU at the default 30 s watchdog (CPU per cycle ÷ 10 s)" \
      "$(calc "%.2f %% of a core (%.1f ms per cycle)" "100 * $a, $(json_field "$rw" cpu_per_cycle_ms)")" \
      "Redisson $(calc "%.2f %% (%.1f ms per cycle; measured over its %.1f s: %.2f %%)" "100 * $b, $(json_field "$jw30" cpu_per_cycle_ms), $(json_field "$jw30" span_s), 100 * $(json_field "$jw30" cpu_fraction)")" \
      "$r" "≤ 1" "$(meets "$r" "<=" 1)"
  fi
  if [ -z "$jw3" ]; then
    redisson_cannot "100,000 held locks (Redisson's watchdog at 3 s)"
  else
    held=$((100000 - $(json_field "$rw" lost)))
    ok=no
    [ "$held" = 100000 ] && ok=yes
    row redisson "14. 100,000 locks taken 4096 in flight, watchdog 3 s: still held after the hold" \
      "$held" "Redisson $(json_field "$jw3" held_at_end)" "" "all" "$ok"
  fi
}
