#!/bin/sh
# examples/metrics_server against a private redis-server, scraped by real
# HTTP clients: curl, and tests/redis/http_probe.py for what curl cannot do
# (a request a byte at a time, a silent connection, many at once, a slow
# reader). Known lock work is done through it, then its exposition is
# parsed with Debian's prometheus_client and the counts checked exactly.
# Under make check-valgrind the server runs under valgrind (the CLI's
# wrapper): a memory error or a leak changes its exit status. Speaks TAP.
# Run from the build directory (make check does).
set -u
here=$(dirname "$0")
. "$here/../support/redis.sh"
. "$here/../support/cli.sh"
command -v redis-server >/dev/null || { echo "Bail out! cannot run: redis-server not found (./bootstrap --deps)"; exit 1; }
command -v curl >/dev/null || { echo "Bail out! cannot run: curl not found (./bootstrap --deps)"; exit 1; }
# /usr/bin/python3, not the python3 on PATH: that may be another Python (a
# pyenv shim, a virtualenv) that does not see Debian's python3-prometheus-client.
py=/usr/bin/python3
probe() { "$py" "$here/http_probe.py" "$@"; }
"$py" -c 'import prometheus_client.parser' 2>/dev/null ||
  { echo "Bail out! cannot run: $py lacks prometheus_client (./bootstrap --deps: python3-prometheus-client)"; exit 1; }

start_redis
export RELOCK_URL="redis://127.0.0.1:$port"
unset RELOCK_URL_FILE
work=$(mktemp -d)
server_pid=
stop_server() {
  [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  server_pid=
}
trap 'stop_server; stop_redis; rm -rf "$work"' EXIT

. "$here/../support/tap.sh"
now_ms() { date +%s%3N; }
redis() { redis-cli -p "$port" "$@"; }
bin=./examples/metrics_server

# start_server OUT ARGS...: metrics_server in the background (server_pid),
# its stdout in OUT; sets http_port from the line it prints, or fails.
start_server() {
  out=$1
  shift
  (exec $wrapper "$bin" --listen 127.0.0.1:0 "$@" >"$out" 2>"$out.err") &
  server_pid=$!
  for _ in $(seq $((200 * slack))); do
    http_port=$(sed -n 's/^metrics_server: listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$out")
    [ -n "$http_port" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  return 1
}

# post NAME [QUERY]: POST /lock/NAME; prints the body's line and the status code
post() {
  _code=$(curl -s -X POST -o "$work/post.$1" -w '%{http_code}' "http://127.0.0.1:$http_port/lock/$1${2:+?$2}")
  echo "$(cat "$work/post.$1") $_code"
}

# scrape FILE: GET /metrics into FILE; prints the status code and the content type
scrape() { curl -s -o "$1" -w '%{http_code} %{content_type}' "http://127.0.0.1:$http_port/metrics"; }

# value FILE SAMPLE: one sample's value (labels sorted, service and pad left out), or "none"
value() { awk -v s="$2" '$1 == s { v = $2 } END { print v == "" ? "none" : v }' "$1.samples"; }

# The label every sample carries, long enough that the exposition outgrows
# the server's first buffer (16 KiB) and the socket buffers.
pad=$(printf '%03000d' 0 | tr 0 p)
read_timeout_ms=$((2000 * slack))

# -- starting -------------------------------------------------------------------

if start_server "$work/out" --read-timeout "$read_timeout_ms" --labels "service=\"test\",pad=\"$pad\""; then
  ok "metrics_server --listen 127.0.0.1:0 prints the port it chose on stdout ($http_port)"
else
  not_ok "metrics_server --listen 127.0.0.1:0 prints the port it chose on stdout" "$(cat "$work/out" "$work/out.err")"
  echo "Bail out! no server to test"
  exit 1
fi

got=$(scrape "$work/m0")
expect "GET /metrics: 200 with Prometheus's text content type" "200 text/plain; version=0.0.4; charset=utf-8" "$got"

# -- known work: 5 acquisitions, one busy, one that times out, one that waits -----

codes=
for i in 1 2 3 4 5; do codes="$codes $(post m-free | sed 's/.* //')"; done
expect "5 POST /lock/m-free: each acquired and released" " 200 200 200 200 200" "$codes"
expect "and the lock is free after" 0 "$(redis EXISTS m-free)"

# m-held is held by another client (a Redisson-format hold) for the next minute
redis HSET m-held "other-client:1" 1 >/dev/null
redis PEXPIRE m-held 60000 >/dev/null
expect "POST /lock/m-held (one try) on a held lock: 409" "m-held: not acquired within 0 ms 409" "$(post m-held)"
t0=$(now_ms)
got=$(post m-held wait=300)
took=$(($(now_ms) - t0))
expect "POST /lock/m-held?wait=300 on a held lock: 409 after 300 ms" "m-held: not acquired within 300 ms 409 in-time" \
  "$got $([ "$took" -ge 300 ] && [ "$took" -lt $((3000 * slack)) ] && echo in-time || echo "${took}ms")"

# m-wait is held by relock(1) until told to stop; a POST waits for it
relock_bg -q m-wait -- sh -c "while [ ! -e '$work/release' ]; do sleep 0.05; done"
holder=$!
for _ in $(seq $((100 * slack))); do [ "$(redis EXISTS m-wait)" = 1 ] && break; sleep 0.05; done
(post m-wait "wait=$((5000 * slack))" >"$work/waiter") &
waiter=$!
sleep "$(awk "BEGIN { print 0.5 * $slack }")" # its first try finds m-wait held
: >"$work/release"
wait "$holder"
wait "$waiter"
expect "POST /lock/m-wait?wait=... waits for relock(1) to release, then acquires" "m-wait: acquired and released 200" \
  "$(cat "$work/waiter")"

# -- the exposition, parsed -------------------------------------------------------

got=$(scrape "$work/m1")
expect "GET /metrics after the work: 200" "200 text/plain; version=0.0.4; charset=utf-8" "$got"
size=$(wc -c <"$work/m1")
expect "the exposition outgrew the server's first buffer (16 KiB) and came whole" "yes" \
  "$([ "$size" -gt 100000 ] && echo yes || echo "$size bytes")"
if probe samples "$work/m1" service=test pad="$pad" >"$work/m1.samples"; then
  ok "prometheus_client parses it; every sample has --labels' labels ($(wc -l <"$work/m1.samples") samples)"
else
  not_ok "prometheus_client parses it; every sample has --labels' labels" "$(cat "$work/m1.samples")"
fi
got=$(probe histograms "$work/m1")
case $got in
  *" histograms consistent") [ "${got%% *}" -ge 3 ] && ok "its histograms: $got" || not_ok "its histograms" "$got (want 3 or more)" ;;
  *) not_ok "its histograms are consistent" "$got" ;;
esac

acq='relock_acquisitions_total{kind="lock",outcome='
expect "acquired: the 5, and the one that waited" 6 "$(value "$work/m1" "${acq}\"acquired\"}")"
expect "busy: the one try" 1 "$(value "$work/m1" "${acq}\"busy\"}")"
expect "timed out: the one that waited 300 ms" 1 "$(value "$work/m1" "${acq}\"timed_out\"}")"
expect "cancelled and failed: none" "0 0" \
  "$(value "$work/m1" "${acq}\"cancelled\"}") $(value "$work/m1" "${acq}\"failed\"}")"
expect "waited: the one that timed out, and the one that waited" 2 \
  "$(value "$work/m1" 'relock_acquisitions_waited_total{kind="lock"}')"
expect "tries: 8 acquisitions ended, 6 of them after one try" "8 6" \
  "$(value "$work/m1" 'relock_acquire_tries_count{kind="lock"}') $(value "$work/m1" 'relock_acquire_tries_bucket{kind="lock",le="1"}')"
expect "started: the 8" 8 "$(value "$work/m1" 'relock_acquisitions_started_total{kind="lock"}')"
expect "the wait histogram counts the 6 acquired" 6 "$(value "$work/m1" 'relock_acquire_wait_seconds_count{kind="lock"}')"
expect "the hold histogram counts the 6 holds" 6 "$(value "$work/m1" 'relock_hold_seconds_count{kind="lock"}')"
expect "released: the 6" 6 "$(value "$work/m1" 'relock_releases_total{kind="lock"}')"
expect "no other kind is shown" "" \
  "$(grep 'kind="' "$work/m1.samples" | grep -v 'kind="lock"' | head -n 3)"
commands=$(value "$work/m1" 'relock_commands_total{}')
expect "no command errors or failures" "0 0" \
  "$(value "$work/m1" 'relock_command_errors_total{}') $(value "$work/m1" 'relock_command_failures_total{}')"
expect "the command time histogram counts every command answered" "$commands" \
  "$(value "$work/m1" 'relock_command_seconds_count{}')"

# -- HTTP ---------------------------------------------------------------------------

url="http://127.0.0.1:$http_port"
expect "GET /other: 404" 404 "$(curl -s -o /dev/null -w '%{http_code}' "$url/other")"
expect "POST /metrics: 405, allowing GET and HEAD" "405 GET, HEAD" \
  "$(curl -s -D "$work/h" -o /dev/null -w '%{http_code}' -X POST "$url/metrics") $(tr -d '\r' <"$work/h" | sed -n 's/^Allow: //p')"
expect "GET /lock/x: 405, allowing POST" "405 POST" \
  "$(curl -s -D "$work/h" -o /dev/null -w '%{http_code}' "$url/lock/x") $(tr -d '\r' <"$work/h" | sed -n 's/^Allow: //p')"
expect "HEAD /metrics: 200, a length, no body" "200 0 yes" \
  "$(curl -s -I -o "$work/h" -w '%{http_code} %{size_download}' "$url/metrics") $(grep -qi '^Content-Length: [1-9]' "$work/h" && echo yes)"
expect "a bad lock name: 400" 400 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$url/lock/a%20b")"
expect "a bad wait: 400" 400 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$url/lock/x?wait=soon")"
expect "a request that is not HTTP: 400" "HTTP/1.1 400 Bad Request" "$(probe raw "$http_port" 'HELLO\r\n\r\n')"
expect "a header line without a colon: 400" "HTTP/1.1 400 Bad Request" \
  "$(probe raw "$http_port" 'GET /metrics HTTP/1.1\r\nHost test\r\n\r\n')"
expect "a request head over 8 KiB: 431" "HTTP/1.1 431 Request Header Fields Too Large" "$(probe oversize "$http_port" 9000)"
expect "a request that arrives a byte at a time: served whole" "HTTP/1.1 200 OK whole" "$(probe trickle "$http_port" 5)"
expect "an HTTP/1.0 request with bare newlines and a body: answered" "HTTP/1.1 404 Not Found" \
  "$(probe raw "$http_port" 'POST /x HTTP/1.0\nContent-Length: 5\n\nhello')"
expect "100 connections at once, requests interleaved: every one served whole" "100 x HTTP/1.1 200 OK whole" \
  "$(probe many "$http_port" 100)"
got=$(probe slow_reader "$http_port")
expect "a peer with a small window that reads late and slowly gets it whole" "HTTP/1.1 200 OK whole" "${got%%,*}"

# A connection that says nothing does not hold up the others, and gets 408
# after the read timeout.
(probe silent "$http_port" "$work/silent.ready" >"$work/silent") &
silent=$!
for _ in $(seq 100); do [ -e "$work/silent.ready" ] && break; sleep 0.02; done
t0=$(now_ms)
got=$(scrape "$work/m2")
took=$(($(now_ms) - t0))
expect "a scrape beside a silent connection is served before that one's timeout" "200 in-time" \
  "${got%% *} $([ "$took" -lt "$read_timeout_ms" ] && echo in-time || echo "${took}ms")"
wait "$silent"
got=$(cat "$work/silent")
took=$(echo "$got" | sed -n 's/.* after \([0-9]*\) ms$/\1/p')
expect "the silent connection gets 408 after the read timeout ($read_timeout_ms ms)" "HTTP/1.1 408 Request Timeout in-time" \
  "${got% after*} $([ "${took:-0}" -ge $((read_timeout_ms - 100)) ] && [ "${took:-0}" -lt $((read_timeout_ms * 3)) ] && echo in-time || echo "${took}ms")"

# -- stopping -------------------------------------------------------------------------

kill -TERM "$server_pid"
wait "$server_pid"
code=$?
server_pid=
expect "SIGTERM: it exits 0 (under valgrind: no error, no leak)" 0 "$code" "$(cat "$work/out.err")"

# -- --work ------------------------------------------------------------------------------

if start_server "$work/w" --work m-work --every 50; then
  url="http://127.0.0.1:$http_port"
  sleep $((slack)).5
  scrape "$work/w1" >/dev/null
  probe samples "$work/w1" >"$work/w1.samples"
  a=$(value "$work/w1" "${acq}\"acquired\"}")
  r=$(value "$work/w1" 'relock_releases_total{kind="lock"}')
  expect "--work m-work --every 50: it takes and releases m-work over and over" "yes" \
    "$([ "$a" != none ] && [ "$a" -ge 5 ] && [ "$r" -ge $((a - 1)) ] && [ "$r" -le "$a" ] && echo yes || echo "acquired $a, released $r")"
  # a POST that waits for a lock held elsewhere: the first signal waits
  # for it, the second stops it
  redis HSET m-slow "other-client:1" 1 >/dev/null
  redis PEXPIRE m-slow 600000 >/dev/null
  (post m-slow wait=60000 >"$work/slow") &
  slow=$!
  sleep "$(awk "BEGIN { print 0.3 * $slack }")"
  kill -INT "$server_pid"
  sleep "$(awk "BEGIN { print 0.3 * $slack }")"
  expect "SIGINT with a POST waiting for its lock: it waits for it (and serves no more)" "running 000" \
    "$(kill -0 "$server_pid" 2>/dev/null && echo running || echo gone) $(curl -s -o /dev/null -w '%{http_code}' "$url/metrics")"
  kill -TERM "$server_pid"
  wait "$server_pid"
  code=$?
  server_pid=
  wait "$slow"
  expect "a second signal stops the wait: the POST gets 503, and it exits 0, the work's lock released" \
    "503 0 0" "$(sed 's/.* //' "$work/slow") $code $(redis EXISTS m-work)" "$(cat "$work/slow" "$work/w.err")"
else
  not_ok "--work m-work: starts" "$(cat "$work/w" "$work/w.err")"
fi

echo "1..$n"
