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

# -- process management (issue 14) ----------------------------------------------

# gone PID: the process has ended (absent, or a zombie nobody reaped yet)
gone() { [ ! -e "/proc/$1" ] || [ "$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)" = Z ]; }
# wait_gone PID MS: until gone, MS at most
wait_gone() {
  for _ in $(seq $(($2 / 50))); do gone "$1" && return 0; sleep 0.05; done
  gone "$1"
}
# wait_bounded PID MS: wait for a background relock, killing it (status 124)
# if it is still running after MS: a hang fails the test instead of the run
wait_bounded() {
  wait_gone "$1" "$2" || { kill -KILL "$1"; wait "$1"; return 124; }
  wait "$1"
}
# wait_file FILE: until it exists and is not empty, 10 s at most
wait_file() {
  for _ in $(seq 200); do [ -s "$1" ] && return 0; sleep 0.05; done
  return 1
}

t0=$(now_ms)
relock_bg -q --lease 700ms --kill-grace 2s lease -- sh -c 'trap "exit 0" TERM; while :; do sleep 0.02; done' \
  >/dev/null 2>"$work/lease-err" # (before the fix the command outlived relock: not on the TAP pipe)
wait_bounded $! $((5000 * slack))
code=$?
took=$(($(now_ms) - t0))
expect "a fixed lease that runs out stops the command like a lost lock: exit 76" "76 in-time" \
  "$code $([ "$took" -ge 650 ] && [ "$took" -lt $((3000 * slack)) ] && echo in-time || echo ${took}ms)" \
  "$(cat "$work/lease-err")"
grep -q "fixed lease" "$work/lease-err"
expect "and says the fixed lease ran out" 0 $? "$(cat "$work/lease-err")"

relock -q --lease 10s lease2 -- true
expect "a fixed lease longer than the command: the command's status" "0 0" "$? $(redis EXISTS lease2)"

rm -f "$work/member"
relock_bg -q --watchdog 900ms --kill-grace 500ms group -- \
  sh -c "trap '' TERM; sleep 100 & echo \$! >'$work/member'; trap - TERM; while :; do sleep 0.02; done" >/dev/null 2>&1
pid=$!
wait_file "$work/member"
member=$(cat "$work/member")
wait_held group
redis DEL group >/dev/null
wait_bounded "$pid" $((5000 * slack))
code=$?
wait_gone "$member" $((1000 * slack))
expect "the group leader exits on SIGTERM, a member ignores it: killed after the grace" "76 gone" \
  "$code $(gone "$member" && echo gone || echo running)"
kill -KILL "$member" 2>/dev/null

rm -f "$work/orphan-pid" "$work/orphan-sig"
relock_bg -q orphan -- sh -c "echo \$\$ >'$work/orphan-pid'; trap 'echo TERM >\"$work/orphan-sig\"; exit 0' TERM; while :; do sleep 0.02; done"
pid=$!
wait_file "$work/orphan-pid"
cpid=$(cat "$work/orphan-pid")
kill -KILL "$pid"
wait "$pid"
wait_gone "$cpid" $((2000 * slack))
expect "relock killed (SIGKILL): the command gets SIGTERM and ends" "gone TERM" \
  "$(gone "$cpid" && echo gone || echo running) $(cat "$work/orphan-sig" 2>/dev/null)"
kill -KILL "$cpid" 2>/dev/null

rm -f "$work/orphan-pid"
relock_bg -q --orphan-signal KILL orphan2 -- sh -c "echo \$\$ >'$work/orphan-pid'; trap '' TERM; while :; do sleep 0.02; done"
pid=$!
wait_file "$work/orphan-pid"
cpid=$(cat "$work/orphan-pid")
kill -KILL "$pid"
wait "$pid"
wait_gone "$cpid" $((2000 * slack))
expect "--orphan-signal KILL: a command ignoring SIGTERM ends too" gone "$(gone "$cpid" && echo gone || echo running)"
kill -KILL "$cpid" 2>/dev/null

relock --orphan-signal 9 -q orphan3 -- true
expect "--orphan-signal takes a number" 0 $?
relock --orphan-signal BOGUS orphan3 -- true 2>"$work/err"
code=$?
grep -q 'invalid --orphan-signal "BOGUS"' "$work/err"
expect "--orphan-signal with an unknown signal is a usage error, naming the option" "64 0" "$code $?" "$(cat "$work/err")"

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
