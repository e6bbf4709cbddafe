#!/bin/sh
# Integration tests of the relock command against a private redis-server.
# Speaks TAP. Run from the build directory (make check does).
set -u
here=$(dirname "$0")
. "$here/../support/redis.sh"
# Under make check-valgrind, relock itself runs under valgrind: a memory
# error or leak changes its exit status (99), which the tests see.
relock_bin=${RELOCK:-./tools/relock}
wrapper=${RELOCK_CLI_WRAPPER:-}
relock() { $wrapper "$relock_bin" "$@"; }
# In the background, as one process: $! is relock itself, for kill and wait.
relock_bg() { (exec $wrapper "$relock_bin" "$@") & }
slack=1 # time bounds that only catch hangs grow under valgrind
[ -n "${RELOCK_UNDER_VALGRIND:-}" ] && slack=10
command -v redis-server >/dev/null || { echo "1..0 # SKIP redis-server not found"; exit 0; }
start_redis
export RELOCK_URL="redis://127.0.0.1:$port"
work=$(mktemp -d)
trap 'stop_redis; rm -rf "$work"' EXIT

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
  n=$((n + 1))
  echo "not ok $n - $1"
  shift
  for line in "$@"; do echo "# $line"; done
}
# expect NAME WANT GOT [DIAGNOSTICS...]
expect() {
  if [ "$2" = "$3" ]; then ok "$1"; else
    name=$1 want=$2 got=$3
    shift 3
    not_ok "$name" "wanted: $want" "got: $got" "$@"
  fi
}
now_ms() { date +%s%3N; }
redis() { redis-cli -p "$port" "$@"; }

# wait_held NAME: until a lock exists (another process is taking it), 5 s at most
wait_held() {
  for _ in $(seq 100); do
    [ "$(redis EXISTS "$1")" = 1 ] && return 0
    sleep 0.05
  done
  return 1
}

# -- running a command ---------------------------------------------------------

relock t-env -- sh -c 'test "$RELOCK_NAME" = t-env && case "$RELOCK_OWNER" in ?*:[0-9]*) exit 7;; esac; exit 1'
expect "the command runs with RELOCK_NAME and RELOCK_OWNER; its status passes through" 7 $?

relock t-ok -- true
expect "status 0 only when the command exited 0" 0 $?

relock t-sig -- sh -c 'kill -KILL $$'
expect "a command killed by SIGKILL gives 128+9" 137 $?

relock -q t-none -- /nonexistent/command 2>"$work/err"
expect "a command that does not exist gives 127" 127 $?

expect "the lock is released when the command ends" 0 "$(redis EXISTS t-env)"

relock t-args -- printf '%s|' -a --b 'c d' >"$work/out"
expect "the command's own options and arguments are its own (no shell)" "-a|--b|c d|" "$(cat "$work/out")"

# -- mutual exclusion --------------------------------------------------------

: >"$work/log"
pids=
for i in 1 2 3 4 5 6; do
  relock_bg -q mx -- sh -c "echo '$i start' >>'$work/log'; sleep 0.05; echo '$i stop' >>'$work/log'"
  pids="$pids $!"
done
codes=
for p in $pids; do wait "$p"; codes="$codes$?"; done
pairs=$(awk 'NR % 2 == 1 { who = $1; if ($2 != "start") bad++ } NR % 2 == 0 { if ($1 != who || $2 != "stop") bad++ }
             END { print (NR == 12 && bad == 0) ? "exclusive" : "interleaved" }' "$work/log")
expect "6 concurrent relock runs never interleave" "exclusive 000000" "$pairs $codes" "$(tr '\n' ' ' <"$work/log")"

# -- busy and waiting ---------------------------------------------------------

# The holder holds until told to stop (a file), however slow the checks
# below run (under valgrind each relock run takes seconds).
relock_bg -q held -- sh -c "while [ ! -e '$work/release' ]; do sleep 0.05; done"
holder=$!
wait_held held
t0=$(now_ms)
relock -q -w 0 held -- true
code=$?
took=$(($(now_ms) - t0))
expect "--wait 0 on a held lock: busy at once" "75 fast" "$code $([ "$took" -lt $((1000 * slack)) ] && echo fast || echo slow:${took}ms)"

t0=$(now_ms)
relock -q --wait 300ms held -- true
code=$?
took=$(($(now_ms) - t0))
expect "--wait 300ms on a held lock: busy after 300 ms" "75 in-time" \
  "$code $([ "$took" -ge 300 ] && [ "$took" -lt $((2000 * slack)) ] && echo in-time || echo ${took}ms)"

relock status held >"$work/status"
grep -q "held by [0-9a-f-]*:[0-9][0-9]*, hold count 1, expires in" "$work/status"
expect "status shows the holder of a lock held by another process" 0 $? "$(cat "$work/status")"

: >"$work/release"
t0=$(now_ms)
relock -q -w 10s held -- true
code=$?
took=$(($(now_ms) - t0))
wait "$holder"
expect "a waiting relock runs as soon as the holder ends" "0 in-time" \
  "$code $([ "$took" -lt $((5000 * slack)) ] && echo in-time || echo ${took}ms)"

# -- signals --------------------------------------------------------------------

relock_bg -q sigterm -- sh -c "trap 'echo got TERM >>\"$work/sig\"; exit 0' TERM; : >\"$work/started\"; while :; do sleep 0.02; done"
pid=$!
for _ in $(seq 200); do [ -e "$work/started" ] && break; sleep 0.05; done # the command runs
kill -TERM "$pid"
wait "$pid"
code=$?
expect "SIGTERM to relock reaches the command, whose status is relock's" "0 got TERM" "$code $(cat "$work/sig" 2>/dev/null)"
expect "and the lock is released" 0 "$(redis EXISTS sigterm)"

relock_bg -q held2 -- sleep 5
holder=$!
wait_held held2
relock_bg -q held2 -- true
waiter=$!
for _ in $(seq 100); do # until the waiter is waiting: subscribed to the unlock channel
  [ "$(redis PUBSUB NUMSUB 'redisson_lock__channel:{held2}' | tail -n 1)" = 1 ] && break
  sleep 0.05
done
kill -INT "$waiter"
wait "$waiter"
expect "SIGINT while waiting cancels the wait" 130 $?
kill -TERM "$holder"
wait "$holder"

# -- losing the lock ----------------------------------------------------------

relock_bg -q --watchdog 600ms --kill-grace 2s lost -- sh -c 'trap "exit 0" TERM; while :; do sleep 0.02; done' \
  2>"$work/lost-err"
pid=$!
wait_held lost
t0=$(now_ms)
redis DEL lost >/dev/null
wait "$pid"
code=$?
took=$(($(now_ms) - t0))
expect "a lost lock (key deleted) stops the command: exit 76" "76 in-time" \
  "$code $([ "$took" -lt $((2000 * slack)) ] && echo in-time || echo ${took}ms)" "$(cat "$work/lost-err")"
grep -q "lock lost lost" "$work/lost-err"
expect "and says so" 0 $? "$(cat "$work/lost-err")"

relock_bg -q --watchdog 600ms --kill-grace 300ms lost2 -- sh -c 'trap "" TERM; while :; do sleep 0.02; done' 2>/dev/null
pid=$!
wait_held lost2
redis DEL lost2 >/dev/null
wait "$pid"
expect "a command ignoring SIGTERM is killed after the grace period" 76 $?

relock_bg -q --watchdog 600ms forced -- sh -c 'trap "exit 0" TERM; while :; do sleep 0.02; done' 2>/dev/null
pid=$!
wait_held forced
relock release --force forced >"$work/rel" 2>&1
code=$?
wait "$pid"
expect "release --force on a lock held by another process; its holder is told" "0 76" "$code $?" "$(cat "$work/rel")"

# -- Redisson-held locks --------------------------------------------------------

redis HSET jlock "3f2a9c4e-0000-4000-8000-000000000001:42" 1 >/dev/null
redis PEXPIRE jlock 30000 >/dev/null
relock status jlock >"$work/status"
grep -q "held by 3f2a9c4e-0000-4000-8000-000000000001:42, hold count 1" "$work/status"
expect "status reads a lock held through Redisson" 0 $? "$(cat "$work/status")"
relock -q -w 0 jlock -- true
expect "and relock does not take it" 75 $?
relock -q release --force jlock
expect "release --force deletes it" "0 0" "$? $(redis EXISTS jlock)"
relock status jlock >"$work/status"
expect "status of a free lock" "jlock: free" "$(cat "$work/status")"

# -- errors --------------------------------------------------------------------

t0=$(now_ms)
relock -u "redis://127.0.0.1:$(free_port)" --timeout 300ms down -- true 2>"$work/err"
code=$?
took=$(($(now_ms) - t0))
expect "Redis down at start: exit 69, quickly" "69 in-time" \
  "$code $([ "$took" -lt $((3000 * slack)) ] && echo in-time || echo ${took}ms)"
grep -qi "refused" "$work/err"
expect "with the reason" 0 $? "$(cat "$work/err")"

# A refused connection is known at once: no waiting for timeouts or retries.
down=$(free_port)
took_ms() { echo $(($(now_ms) - $1)); }
within() { [ "$1" -lt "$2" ] && echo fast || echo "slow:${1}ms"; }
t0=$(now_ms)
relock -u "redis://127.0.0.1:$down" refused -- true 2>"$work/err"
code=$?
expect "a refused connection fails at once: exit 69 within 200 ms" "69 fast" \
  "$code $(within "$(took_ms "$t0")" $((200 * slack)))" "$(cat "$work/err")"
grep -q "127.0.0.1:$down: Connection refused" "$work/err"
expect "naming host:port and the system's error" 0 $? "$(cat "$work/err")"
t0=$(now_ms)
relock -u "redis://127.0.0.1:$down" status refused 2>"$work/err"
code=$?
expect "status on a refused connection: exit 69 within 200 ms" "69 fast" \
  "$code $(within "$(took_ms "$t0")" $((200 * slack)))" "$(cat "$work/err")"
grep -q "127.0.0.1:$down: Connection refused" "$work/err"
expect "naming host:port and the system's error" 0 $? "$(cat "$work/err")"

# --wait asks to wait for Redis too: retried until the wait ends, saying so.
t0=$(now_ms)
relock -u "redis://127.0.0.1:$down" --wait 2s refused -- true 2>"$work/err"
code=$?
took=$(took_ms "$t0")
expect "--wait 2s on a refused connection: retried, exit 69 after 2 s" "69 in-time" \
  "$code $([ "$took" -ge 2000 ] && [ "$took" -lt $((2000 + 1000 * slack)) ] && echo in-time || echo ${took}ms)" \
  "$(cat "$work/err")"
progress=$(grep -c "127.0.0.1:$down: Connection refused; retrying until the wait ends ([0-9.]* s left)" "$work/err")
expect "with progress on stderr about once a second" "yes" \
  "$([ "$progress" -ge 2 ] && [ "$progress" -le 3 ] && echo yes || echo "$progress lines")" "$(cat "$work/err")"
relock -q -u "redis://127.0.0.1:$down" --wait 300ms refused -- true 2>"$work/err"
expect "-q: no progress, only the final error" "69 0 1" \
  "$? $(grep -c retrying "$work/err") $(grep -c "Connection refused" "$work/err")" "$(cat "$work/err")"

late=$(free_port)
relock_bg -u "redis://127.0.0.1:$late" --wait $((10 * slack))s late -- sh -c "echo ran >'$work/late'" 2>"$work/late-err"
pid=$!
sleep 1 # refused meanwhile
redis-server --bind 127.0.0.1 --port "$late" --save '' --appendonly no --dir "$work" --daemonize no \
  </dev/null >/dev/null 2>&1 &
late_redis=$!
wait "$pid"
code=$?
kill "$late_redis"
wait "$late_redis"
expect "a server that starts listening during the wait: the command runs" "0 ran" \
  "$code $(cat "$work/late" 2>/dev/null)" "$(cat "$work/late-err")"

relock --wait xyz name -- true 2>"$work/err"
expect "a bad duration is a usage error" "64" "$?"
grep -q 'invalid --wait "xyz"' "$work/err"
expect "naming the option" 0 $? "$(cat "$work/err")"

relock 2>/dev/null
expect "no NAME is a usage error" 64 $?
relock name -- 2>/dev/null
expect "no COMMAND is a usage error" 64 $?
relock release name 2>/dev/null
expect "release without --force is a usage error" 64 $?
relock --bogus name -- true 2>/dev/null
expect "an unknown option is a usage error" 64 $?
relock -u "http://x" name -- true 2>"$work/err"
expect "a bad URL is a usage error" 64 $?
RELOCK_URL="redis://:hunter2@127.0.0.1:1" relock --timeout 200ms name -- true 2>"$work/err"
code=$?
grep -q hunter2 "$work/err"
expect "a password never appears in messages" "69 1" "$code $?"
echo "redis://127.0.0.1:$port" >"$work/url"
RELOCK_URL= relock --url-file "$work/url" -q t-file -- true
expect "--url-file reads the URL" 0 $?

relock --help >"$work/help"
grep -q "76 lock lost" "$work/help"
expect "--help is short and lists the exit codes" "0 yes" "$? $([ "$(wc -l <"$work/help")" -lt 30 ] && echo yes)"
relock --version | grep -q "^relock [0-9]"
expect "--version" 0 $?

echo "1..$n"
