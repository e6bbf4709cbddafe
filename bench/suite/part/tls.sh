# Sourced by bench/run: part tls (bench/run tls), the function part_tls.

# TLS (rediss://): part 1's pair on a server of its own that listens both in
# plaintext and over TLS, against part 1's floor taken over TLS by
# redis-benchmark --tls, and against the same pair in plaintext, all
# interleaved in five rounds like part 1. The pair runs in a second build,
# against hiredis 1.2.0 with TLS (build_tls, in build.sh), both over TLS and
# in plaintext, so that the last row is what TLS alone costs. When that build
# cannot be made (no network for the packages, ...) the rows say why and
# count as missed, never a silent skip.
part_tls() {
  say "8. uncontended latency over TLS, interleaved with redis-benchmark --tls -c 1 and plaintext"
  why=
  if ! command -v openssl >/dev/null; then
    why="no openssl to make the certificates"
  elif ! redis-benchmark --help 2>&1 | grep -q -- --tls; then
    why="this redis-benchmark has no --tls"
  elif ! build_tls; then
    why=$tls_why
  elif ! LD_LIBRARY_PATH=$tls_libdir "$tls_build/tools/relock" --version 2>/dev/null | grep -q '^TLS: yes'; then
    why="the TLS build in $tls_build says it has no TLS (tools/relock --version)"
  fi
  if [ -z "$why" ]; then
    sh "$src/tests/support/tls.sh" "$tmp/tls" >&2
    # the main server stays up (later parts use it); cleanup stops both
    main_port=$port main_pid=$redis_pid main_dir=$redis_dir
    tport=$(free_port)
    # no client certificates (tls-auth-clients no): they cost the handshake
    # only, and there is one per connection. (A redis-server built without
    # TLS does not start: start_redis ends the run, loudly.)
    start_redis --tls-port "$tport" --tls-cert-file "$tmp/tls/server.crt" --tls-key-file "$tmp/tls/server.key" \
      --tls-ca-cert-file "$tmp/tls/ca.crt" --tls-auth-clients no
    trap cleanup EXIT
  fi
  if [ -n "$why" ]; then
    cannot="*** part 8 (tls) CANNOT RUN: $why; its rows count as missed ***"
    say "$cannot"
    row tls "8. over TLS: uncontended lock+unlock pair, p50" "CANNOT RUN: $why" "" "n/a" "≤ 1.15" no
    return 0
  fi
  # the script on this server too (the same SHA as on the main one)
  sha=$(redis-cli -p "$port" SCRIPT LOAD "$(acquire_script)")
  tf= tl= pf= pl=
  for _round in 1 2 3 4 5; do
    tf="$tf $(evalsha_once 4000 --tls -p "$tport" --cacert "$tmp/tls/ca.crt")"
    flush
    j=$(BENCH_TLS_CA=$tmp/tls/ca.crt on_cpu0 $tmo env LD_LIBRARY_PATH="$tls_libdir" "$tls_build/bench/lock" 127.0.0.1 "$tport" latency 4000)
    tl="$tl $(json_field "$j" p50_us):$(json_field "$j" p99_us):$(json_field "$j" mean_us)"
    flush
    pf="$pf $(evalsha_once 4000)"
    flush
    j=$(on_cpu0 $tmo env LD_LIBRARY_PATH="$tls_libdir" "$tls_build/bench/lock" 127.0.0.1 "$port" latency 4000)
    pl="$pl $(json_field "$j" p50_us):$(json_field "$j" p99_us):$(json_field "$j" mean_us)"
    flush
  done
  stop_redis
  # sha= : the main server loads the script again when a later part needs it
  port=$main_port redis_pid=$main_pid redis_dir=$main_dir main_pid= sha=
  # med LIST FIELD: the median of one field (1 p50, 2 p99, 3 mean) of the rounds
  med() { printf '%s\n' $1 | cut -d: -f"$2" | median; }
  raw tls "{\"pairs\":20000,\"tls_pair\":\"$tl\",\"tls_evalsha\":\"$tf\",\"plain_pair\":\"$pl\",\"plain_evalsha\":\"$pf\"}"
  p50=$(med "$tl" 1) f50=$(calc "%.1f" "2 * $(med "$tf" 1)")
  r=$(ratio "$p50" "$f50")
  row tls "8. over TLS: uncontended lock+unlock pair, p50 (median of 5 rounds)" "$p50 µs" \
    "2 × EVALSHA p50 over TLS (redis-benchmark --tls -c 1; both on the server's CPU) = $f50 µs" "$r" "≤ 1.15" "$(meets "$r" "<=" 1.15)"
  # the mean too: redis-benchmark's p50 is the top of an 8 µs bucket
  mean=$(med "$tl" 3) fmean=$(calc "%.1f" "2 * $(med "$tf" 3)")
  row tls "8. over TLS: uncontended lock+unlock pair, mean" "$mean µs" "2 × EVALSHA mean over TLS = $fmean µs" \
    "$(ratio "$mean" "$fmean")" "" ""
  # what TLS costs relock, next to what it costs redis-benchmark
  pp50=$(med "$pl" 1) pf50=$(calc "%.1f" "2 * $(med "$pf" 1)")
  row tls "8. pair p50 over TLS against plaintext, same server (redis-benchmark: TLS $f50 / plaintext $pf50 µs = $(ratio "$f50" "$pf50"))" \
    "$p50 µs" "plaintext pair p50 = $pp50 µs" "$(ratio "$p50" "$pp50")" "" ""
}
