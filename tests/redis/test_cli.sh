#!/bin/sh
# Integration tests of the relock command against a private redis-server.
# Speaks TAP. Run from the build directory (make check does).
set -u
here=$(dirname "$0")
. "$here/../support/redis.sh"
. "$here/../support/cli.sh"
command -v redis-server >/dev/null || { echo "Bail out! cannot run: redis-server not found (./bootstrap --deps)"; exit 1; }
start_redis
export RELOCK_URL="redis://127.0.0.1:$port"
work=$(mktemp -d)
trap 'stop_redis; rm -rf "$work"' EXIT

. "$here/../support/tap.sh"
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

relock -w 1500ms held -- true 2>"$work/err"
code=$?
grep -c "^relock: waiting for lock held, held by [0-9a-f-]*:$holder (hold count 1), expires in [0-9]* ms$" \
  "$work/err" >"$work/count"
expect "after 1 s without the lock, relock says once who holds it" "75 1" "$code $(cat "$work/count")" \
  "$(cat "$work/err")"
relock -w 500ms held -- true 2>"$work/err"
expect "not before" "75 0" "$? $(grep -c "waiting for lock" "$work/err")" "$(cat "$work/err")"
relock -q -w 1500ms held -- true 2>"$work/err"
expect "nor with -q" "75 " "$? $(cat "$work/err")"
# a read-write lock's hash starts with its mode: the holder named is its
# first holder, never "mode"
relock_bg -q --read rwheld -- sh -c "while [ ! -e '$work/release' ]; do sleep 0.05; done"
reader=$!
wait_held rwheld
relock --write -w 1500ms rwheld -- true 2>"$work/err"
code=$?
grep -c "^relock: waiting for lock rwheld, held by [0-9a-f-]*:$reader (hold count 1), expires in [0-9]* ms$" \
  "$work/err" >"$work/count"
expect "a write lock waiting behind a reader names the reader, not the mode" "75 1" "$code $(cat "$work/count")" \
  "$(cat "$work/err")"
relock -v -w 1s held -- true 2>"$work/err"
code=$?
# at least the first try, and the try once subscribed to the unlock channel
tries=$(grep -c "^relock: lock held is held, its lease ends in [0-9]* ms: waiting$" "$work/err")
expect "-v shows each try that finds the lock held" "75 yes" "$code $([ "$tries" -ge 2 ] && echo yes)" \
  "$(cat "$work/err")"

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
# until the waiter is waiting: subscribed to the unlock channel, as the
# holder is (relock watches its hold for a force release)
for _ in $(seq 100); do
  [ "$(redis PUBSUB NUMSUB 'redisson_lock__channel:{held2}' | tail -n 1)" = 2 ] && break
  sleep 0.05
done
kill -INT "$waiter"
wait "$waiter"
expect "SIGINT while waiting cancels the wait" 130 $?
kill -TERM "$holder"
wait "$holder"

# leftover NAME: the fields of NAME held by no live process ("" if none)
leftover() {
  redis HKEYS "$1" | while read -r field; do
    [ -n "$field" ] && ! kill -0 "${field##*:}" 2>/dev/null && echo "$field"
  done
}
# rand_ms N: a random number in [0, N]
rand_ms() { echo $(($(od -An -N2 -tu2 /dev/urandom) % ($1 + 1))); }

# A signal to a waiting relock at a random moment around the holder's
# release (50 ms before to 50 ms after): whatever it hits - the wait, the
# acquire in flight, the acquisition just made - once both have exited the
# lock is free, never left to a dead process.
runs=50 # under valgrind the offsets mean little, and each run takes seconds
[ -n "${RELOCK_UNDER_VALGRIND:-}" ] && runs=10
bad= codes=
for i in $(seq $runs); do
  rm -f "$work/go"
  relock_bg -q race -- sh -c "while [ ! -e '$work/go' ]; do sleep 0.01; done"
  holder=$!
  wait_held race
  relock_bg -q race -- true
  waiter=$!
  for _ in $(seq 100); do # until the waiter is waiting (subscribed, as the watching holder is)
    [ "$(redis PUBSUB NUMSUB 'redisson_lock__channel:{race}' | tail -n 1)" = 2 ] && break
    sleep 0.01
  done
  sig=INT
  [ $((i % 2)) = 0 ] && sig=TERM
  off=$(($(rand_ms 100) - 50))
  if [ "$off" -lt 0 ]; then
    kill -$sig "$waiter"
    sleep "$(printf '0.%03d' $((-off)))"
    : >"$work/go"
  else
    : >"$work/go"
    sleep "$(printf '0.%03d' "$off")"
    kill -$sig "$waiter"
  fi
  wait "$waiter"
  codes="$codes $?"
  wait "$holder"
  left=$(leftover race)
  if [ -n "$left" ]; then
    bad="$bad run$i:$sig@${off}ms:$left"
    redis DEL race >/dev/null
  fi
done
expect "a signal to a waiter around the holder's release never leaves the lock to a dead process ($runs runs)" "" \
  "$bad" "exit codes:$codes"

# The same with the waiter's try surely in flight: another holder's lease
# runs out while Redis is stopped, so the waiter's try at that moment waits
# for Redis; the signal comes meanwhile, and Redis, resumed, takes the lock
# for the waiter. Its relock must give it back before it exits.
bad= codes=
for i in $(seq 10); do
  redis HSET race2 "dead-holder:999999999" 1 >/dev/null
  redis PEXPIRE race2 300 >/dev/null
  relock_bg -q race2 -- true
  waiter=$!
  sleep 0.25 # the waiter tries again when the lease ends (at 300 ms)
  kill -STOP "$redis_pid"
  sleep 0.1
  kill -INT "$waiter"
  sleep "$(printf '0.%03d' "$(rand_ms 50)")"
  kill -CONT "$redis_pid"
  wait "$waiter"
  codes="$codes $?"
  left=$(leftover race2)
  if [ -n "$left" ]; then
    bad="$bad run$i:$left"
    redis DEL race2 >/dev/null
  fi
done
expect "a signal while the waiter's try is in flight leaves no lock behind (10 runs)" "" "$bad" "exit codes:$codes"

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

# the same at the default watchdog (renewed every 10 s): the holder hears the
# force release on the lock's channel and stops its command at once
relock_bg -q forced2 -- sh -c 'trap "exit 0" TERM; while :; do sleep 0.02; done' 2>/dev/null
pid=$!
wait_held forced2
for _ in $(seq 100); do # the holder listens
  [ "$(redis PUBSUB NUMSUB 'redisson_lock__channel:{forced2}' | tail -n 1)" = 1 ] && break
  sleep 0.01
done
t0=$(now_ms)
relock release --force forced2 >/dev/null 2>&1
wait "$pid"
code=$?
took=$(($(now_ms) - t0))
expect "a force release stops the holder's command at once, not at the next renewal (10 s)" "76 prompt" \
  "$code $([ "$took" -lt $((2000 * slack)) ] && echo prompt || echo slow:${took}ms)"

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

# A hold is lost like any other whatever its lease (fixed or the watchdog's)
# and kind: its command is stopped with 76 within the renewal cycle (a third
# of the watchdog timeout) when its key is deleted, and at once when relock
# force-releases it (the holder hears it). Before, a fixed-lease hold was
# never checked: its command ran on until the lease ended (20 s), with the
# lock free for others; and the fair and spin locks' force releases were
# heard only at the next renewal (10 s here).

# listened CHANNEL: until someone listens on it (the holder's loss watch), 1 s at most
listened() {
  for _ in $(seq 100); do
    [ "$(redis PUBSUB NUMSUB "$1" | tail -n 1)" = 1 ] && return 0
    sleep 0.01
  done
  return 1
}

# lose_hold HOW KIND LEASE: holds a lock of KIND (a kind option, or "") with
# LEASE ("--lease 20s", or "": the watchdog's), takes it away (HOW: del, or
# force: relock release --force) and prints relock's exit code and how long
# after the loss it came, in ms (124: still running after 5 s)
lose_hold() {
  how=$1 kind=$2 lease=$3
  name="lose-$how$kind${lease:+-fixed}"
  watchdog=
  [ "$how" = del ] && watchdog="--watchdog 600ms"
  relock_bg -q $kind $lease $watchdog "$name" -- sleep 30 2>/dev/null
  pid=$!
  wait_held "$name"
  case $kind in --read|--write) channel="redisson_rwlock:{$name}" ;; *) channel="redisson_lock__channel:{$name}" ;; esac
  listened "$channel"
  t0=$(now_ms)
  if [ "$how" = del ]; then redis DEL "$name" >/dev/null; else relock -q $kind release --force "$name"; fi
  wait_bounded "$pid" $((5000 * slack))
  code=$?
  echo "$code $(($(now_ms) - t0))"
}

late=
for kind in "" --fair --read --write --fenced --spin; do
  for lease in "--lease 20s" ""; do
    got=$(lose_hold force "$kind" "$lease")
    code=${got% *} took=${got#* }
    [ "$code $([ "$took" -lt $((1000 * slack)) ] && echo prompt)" = "76 prompt" ] ||
      late="$late${late:+, }${kind:-reentrant} ${lease:-watchdog}: exit $code after $took ms"
  done
done
expect "a force release stops the holder's command at once: every kind, fixed lease or watchdog" "" "$late"

late=
for kind in "" --fair --read --write --fenced --spin; do
  got=$(lose_hold del "$kind" "--lease 20s")
  code=${got% *} took=${got#* }
  [ "$code $([ "$took" -lt $((1000 * slack)) ] && echo in-time)" = "76 in-time" ] ||
    late="$late${late:+, }${kind:-reentrant}: exit $code after $took ms"
done
expect "a fixed-lease hold deleted: exit 76 at the next check (200 ms), not when its lease ends" "" "$late"

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

# -- relock's own output never stops it (issue 33 item 9) -------------------------

# stderr a pipe nobody reads any more: the loss's message raised SIGPIPE,
# which killed relock (141) before it stopped the command's group; only
# the leader got the orphan signal and the rest ran on without the lock.
rm -f "$work/pipe-member"
mkfifo "$work/pipe"
cat "$work/pipe" >/dev/null &
reader=$!
relock_bg -q pipe -- sh -c "sleep 100 & echo \$! >'$work/pipe-member'; while :; do sleep 0.02; done" 2>"$work/pipe"
pid=$!
wait_file "$work/pipe-member"
member=$(cat "$work/pipe-member")
kill "$reader"
wait "$reader" 2>/dev/null # "Terminated"
listened "redisson_lock__channel:{pipe}"
relock -q release --force pipe
wait_bounded "$pid" $((5000 * slack))
code=$?
wait_gone "$member" $((1000 * slack))
expect "stderr a closed pipe: a lost lock still stops every member of the group, exit 76" "76 gone" \
  "$code $(gone "$member" && echo gone || echo running)"
kill -KILL "$member" 2>/dev/null
relock -q sigpipe -- grep '^SigIgn:' /proc/self/status >"$work/out"
expect "the command gets SIGPIPE's default back (relock ignores it)" 0 \
  "$(( (0x$(awk '{print $2}' "$work/out") >> 12) & 1 ))" "$(cat "$work/out")"

# -- the command's leader exits before its group (issue 33 item 10) ---------------

# As flock(1) keeps its lock while the descriptor lives, relock keeps the
# lock (renewing it) until every process the command started is gone: its
# process group, and what left it (setsid). Before, the leader's exit
# released the lock at once and a second relock ran beside the rest.

# subscribers CHANNEL N: until N clients listen on it, 5 s at most
subscribers() {
  for _ in $(seq 500); do
    [ "$(redis PUBSUB NUMSUB "$1" | tail -n 1)" = "$2" ] && return 0
    sleep 0.01
  done
  return 1
}

# after_leader NAME HOW: runs a relock on NAME whose command starts a member
# (HOW: "" in its group, "setsid" in a session of its own) that runs until
# $work/NAME-go exists, then exits 3 at once; returns once the leader has
# exited. Sets pid (relock's) and member.
after_leader() {
  rm -f "$work/$1-go" "$work/$1-member" "$work/$1-leader"
  relock_bg -q "$1" -- sh -c "$2 sh -c 'while [ ! -e \"$work/$1-go\" ]; do sleep 0.02; done' & echo \$! >'$work/$1-member'; echo \$\$ >'$work/$1-leader'; exit 3" 2>/dev/null
  pid=$!
  wait_file "$work/$1-leader"
  member=$(cat "$work/$1-member")
  wait_gone "$(cat "$work/$1-leader")" $((2000 * slack))
}

for how in "" setsid; do
  name=bg${how:+-$how}
  after_leader "$name" "$how"
  relock -q -w 0 "$name" -- true
  expect "the leader exited, a member ${how:-of its group} runs on: the lock stays held" "75 1" "$? $(redis EXISTS "$name")"
  # a second relock waits for the member, then runs
  relock_bg -q -w $((20 * slack))s "$name" -- sh -c "kill -0 $member 2>/dev/null && echo beside || echo after" \
    >"$work/$name-second"
  second=$!
  subscribers "redisson_lock__channel:{$name}" 2 # the holder's loss watch, and the waiter
  : >"$work/$name-go"
  wait_bounded "$second" $((5000 * slack))
  code2=$?
  wait_bounded "$pid" $((5000 * slack))
  expect "and a waiting relock runs once that member has ended; the first exits with the leader's status" \
    "3 0 after" "$? $code2 $(cat "$work/$name-second")"
done

# a loss after the leader exited stops the members, as before it
after_leader bg-lost setsid
leader_pid=$pid
setsid_member=$member
after_leader bg-lost2 ""
listened "redisson_lock__channel:{bg-lost2}"
listened "redisson_lock__channel:{bg-lost}"
relock -q release --force bg-lost2
relock -q release --force bg-lost
wait_bounded "$pid" $((5000 * slack))
code=$?
wait_bounded "$leader_pid" $((5000 * slack))
code2=$?
wait_gone "$member" $((1000 * slack))
wait_gone "$setsid_member" $((1000 * slack))
expect "the leader exited and the lock is lost: every member is stopped (group, setsid), exit 76" \
  "76 76 gone gone" "$code $code2 $(gone "$member" && echo gone || echo running) $(gone "$setsid_member" && echo gone || echo running)"
kill -KILL "$member" "$setsid_member" 2>/dev/null

# after the leader exited: a signal to relock reaches the members; a fixed
# lease that runs out stops them
after_leader bg-sig ""
kill -TERM "$pid"
wait_bounded "$pid" $((5000 * slack))
code=$?
wait_gone "$member" $((1000 * slack))
expect "the leader exited: SIGTERM to relock reaches the member; the lock is released, the leader's status" \
  "3 gone 0" "$code $(gone "$member" && echo gone || echo running) $(redis EXISTS bg-sig)"
kill -KILL "$member" 2>/dev/null
rm -f "$work/bg-lease-member"
relock_bg -q --lease 700ms bg-lease -- sh -c "sleep 100 & echo \$! >'$work/bg-lease-member'; exit 0" 2>/dev/null
pid=$!
wait_file "$work/bg-lease-member"
member=$(cat "$work/bg-lease-member")
wait_bounded "$pid" $((5000 * slack))
code=$?
wait_gone "$member" $((1000 * slack))
expect "the leader exited: a fixed lease that runs out stops the member, exit 76" "76 gone" \
  "$code $(gone "$member" && echo gone || echo running)"
kill -KILL "$member" 2>/dev/null

# a loss while the leader runs reaches a daemon it started (setsid, a child
# of the leader, not of relock) at once too, not at the end of the grace;
# the leader takes its time to end, so the daemon is not relock's child yet
rm -f "$work/bg-tree-member" "$work/bg-tree-sig"
relock_bg -q --kill-grace 30s bg-tree -- sh -c "setsid sh -c 'trap \"echo TERM >\\\"$work/bg-tree-sig\\\"; exit 0\" TERM; while :; do sleep 0.02; done' & echo \$! >'$work/bg-tree-member'; trap 'sleep 0.3; exit 0' TERM; while :; do sleep 0.02; done" 2>/dev/null
pid=$!
wait_file "$work/bg-tree-member"
member=$(cat "$work/bg-tree-member")
listened "redisson_lock__channel:{bg-tree}"
relock -q release --force bg-tree
wait_bounded "$pid" $((5000 * slack))
code=$?
wait_gone "$member" $((1000 * slack))
expect "a loss: a daemon the command started gets SIGTERM with the group, exit 76 before the grace" \
  "76 gone TERM" "$code $(gone "$member" && echo gone || echo running) $(cat "$work/bg-tree-sig" 2>/dev/null)"
kill -KILL "$member" 2>/dev/null

# -- library options (-o) --------------------------------------------------------
relock -o bogus=1 opt1 -- true 2>"$work/err"
code=$?
grep -q 'unknown option "bogus"' "$work/err"
expect "-o with an unknown option is a usage error, naming it" "64 0" "$code $?" "$(cat "$work/err")"
relock -o min-replicas-acked opt1 -- true 2>"$work/err"
expect "-o without =VALUE is a usage error" 64 $? "$(cat "$work/err")"
# Redis Cluster settings: refused before any connection, so no cluster needed
relock -o cluster-nodes=127.0.0.1:7000,,127.0.0.1:7001 opt1 -- true 2>"$work/err"
code=$?
grep -q 'empty entry in the cluster-nodes list' "$work/err"
expect "-o cluster-nodes with an empty entry is a usage error, saying so" "64 0" "$code $?" "$(cat "$work/err")"
relock -o cluster-nodes=127.0.0.1:7000 -o db=1 opt1 -- true 2>"$work/err"
code=$?
grep -q 'Redis Cluster has only database 0' "$work/err"
expect "-o cluster-nodes with db 1 is a usage error, saying why" "64 0" "$code $?" "$(cat "$work/err")"
relock -u "redis+cluster://127.0.0.1:7000,127.0.0.1:7001/2" opt1 -- true 2>"$work/err"
code=$?
grep -q 'Redis Cluster has only database 0' "$work/err"
expect "a redis+cluster:// URL with a database is a usage error, saying why" "64 0" "$code $?" "$(cat "$work/err")"
# this server has no replica: a lock that must be on one cannot be had
relock -o min-replicas-acked=1 -o min-replicas-timeout=100ms opt1 -- true 2>"$work/err"
code=$?
grep -q 'acknowledged by only 0 of 1 replicas' "$work/err"
expect "-o min-replicas-acked=1 without a replica: exit 69, saying why; nothing held" "69 0 0" \
  "$code $? $(redis EXISTS opt1)" "$(cat "$work/err")"

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

# a read-write lock held through Redisson: the "mode" field, a writer's ":write"
redis HSET jrw mode write "3f2a9c4e-0000-4000-8000-000000000001:42:write" 1 \
  "3f2a9c4e-0000-4000-8000-000000000001:42" 2 >/dev/null
relock status jrw >"$work/status"
expect "status reads a read-write lock: its mode and both holds" 0 \
  "$(grep -c -e '^jrw: a read-write lock, in write mode$' -e 'held by 3f2a9c4e-0000-4000-8000-000000000001:42:write, hold count 1' \
    -e 'held by 3f2a9c4e-0000-4000-8000-000000000001:42, hold count 2' "$work/status" | grep -qx 3; echo $?)" "$(cat "$work/status")"
relock status --json jrw >"$work/status"
grep -q '"owner":42,"hold_count":1,"write":true}' "$work/status" &&
  grep -q '"owner":42,"hold_count":2}' "$work/status" && grep -q '\],"mode":"write","ttl_ms"' "$work/status"
expect "status --json: the writer marked, the mode given" 0 $? "$(cat "$work/status")"

# -- the lock family: --fair, --read/--write, --fenced, --spin ----------------

relock --fenced t-fenced -- sh -c 'echo "$RELOCK_TOKEN"' >"$work/t1"
relock --fenced t-fenced -- sh -c 'echo "$RELOCK_TOKEN"' >"$work/t2"
expect "--fenced: the command gets the lock's token in RELOCK_TOKEN, increasing" "1 2 2" \
  "$(cat "$work/t1") $(cat "$work/t2") $(redis GET "redisson_lock_token:{t-fenced}")"

rm -f "$work/rw-go" # the reader holds until told: under valgrind each run below takes seconds
relock_bg -q --read t-rw -- sh -c "while [ ! -e '$work/rw-go' ]; do sleep 0.05; done"
pid=$!
wait_held t-rw
relock -q --read -w 0 t-rw -- true
r1=$?
relock -q --write -w 0 t-rw -- true
r2=$?
: >"$work/rw-go"
wait "$pid"
expect "--read: readers share the lock, a writer is refused meanwhile" "0 75" "$r1 $r2"
relock --write t-rw -- sh -c 'echo "$RELOCK_OWNER $(redis-cli -p '"$port"' HGET t-rw mode)"' >"$work/owner"
case $(cat "$work/owner") in *:[0-9]*:write" write") ok=0 ;; *) ok=1 ;; esac
expect "--write: the writer's field ends in :write, the hash is in write mode" 0 "$ok" "$(cat "$work/owner")"

: >"$work/fair"
rm -f "$work/fair-go"
relock_bg -q --fair t-fair -- sh -c "while [ ! -e '$work/fair-go' ]; do sleep 0.05; done"
holder=$!
wait_held t-fair
pids=
for i in 1 2 3; do
  relock_bg -q --fair t-fair -- sh -c "echo $i >>'$work/fair'"
  pids="$pids $!"
  for _ in $(seq $((100 * slack))); do [ "$(redis LLEN "redisson_lock_queue:{t-fair}")" = "$i" ] && break; sleep 0.05; done
done
: >"$work/fair-go"
wait "$holder"
for p in $pids; do wait "$p"; done
expect "--fair: waiters get the lock in the order they came" "1 2 3" "$(tr '\n' ' ' <"$work/fair" | sed 's/ $//')"

rm -f "$work/spin-go"
relock_bg -q --spin t-spin -- sh -c "while [ ! -e '$work/spin-go' ]; do sleep 0.05; done; sleep 0.3"
pid=$!
wait_held t-spin
relock -q --spin -w 0 t-spin -- true
r1=$?
: >"$work/spin-go" # released about 0.3 s from now: the waiter below backs off meanwhile
t0=$(now_ms)
relock -q --spin -w 5s t-spin -- true
r2=$?
took=$(($(now_ms) - t0))
wait "$pid"
expect "--spin: busy while held, then acquired by back-off (no pub/sub)" "75 0 in-time" \
  "$r1 $r2 $([ "$took" -lt $((2000 * slack)) ] && echo in-time || echo "late ${took}ms")"

relock -q --read --write t-both -- true 2>"$work/err"
expect "two kinds at once: a usage error" "64 yes" "$? $(grep -q 'a lock is of one kind' "$work/err" && echo yes)"

# -- the semaphore and the count-down latch -------------------------------------

# Two of two permits held until told (a file): a third run is busy, then
# runs once one is given back; the permits all come back.
rm -f "$work/sem-go"
relock_bg -q --semaphore 2 t-sem -- sh -c "while [ ! -e '$work/sem-go' ]; do sleep 0.05; done"
s1=$!
relock_bg -q --semaphore 2 t-sem -- sh -c "while [ ! -e '$work/sem-go' ]; do sleep 0.05; done"
s2=$!
for _ in $(seq 100); do [ "$(redis GET t-sem)" = 0 ] && break; sleep 0.05; done
relock -q --semaphore 2 -w 0 t-sem -- true
r1=$?
relock_bg -q --semaphore 2 -w 10s t-sem -- sh -c "echo ran >'$work/sem-third'"
s3=$!
sleep 0.2
r2=$([ -e "$work/sem-third" ] && echo early || echo waiting)
: >"$work/sem-go"
wait "$s1"; c1=$?; wait "$s2"; c2=$?; wait "$s3"; c3=$?
expect "--semaphore 2: a third run is busy, then runs when a permit comes back; all come back" \
  "75 waiting 0 0 0 ran 2" "$r1 $r2 $c1 $c2 $c3 $(cat "$work/sem-third" 2>/dev/null) $(redis GET t-sem)"
relock -q --semaphore 5 t-sem -- true
expect "--semaphore: the first to come sets the count; later ones use it" "0 2" "$? $(redis GET t-sem)"

relock -q --semaphore 0 t-sem -- true 2>"$work/err"
expect "--semaphore 0: a usage error" "64 yes" "$? $(grep -q 'whole number' "$work/err" && echo yes)"
relock -q --semaphore 2 --fair t-sem -- true 2>"$work/err"
expect "--semaphore with a lock kind: a usage error" 64 $?
relock -q --rsemaphore 2 --lease 1s t-sem -- true 2>"$work/err"
expect "--rsemaphore with --lease: a usage error (--semaphore's permits have one: test_cli_semaphore.sh)" "64 yes" \
  "$? $(grep -q 'no lease' "$work/err" && echo yes)"

relock latch t-latch set 2
r1=$?
relock -q latch t-latch set 5
r2=$?
relock -q -w 0 latch t-latch await
r3=$?
relock_bg -q -w 10s latch t-latch await
waiter=$!
out1=$(relock latch t-latch down)
out2=$(relock latch t-latch count)
out3=$(relock latch t-latch down)
wait "$waiter"
r4=$?
expect "latch: set, set again, await closed, down, count, down, await opened" "0 1 75 1 1 0 0 0" \
  "$r1 $r2 $r3 $out1 $out2 $out3 $r4 $(redis EXISTS t-latch)"
relock latch t-latch set zero 2>"$work/err"
expect "latch set needs a number" "64 yes" "$? $(grep -q 'whole number' "$work/err" && echo yes)"

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

# A server that takes connections and never answers (stopped): --timeout
# (default 3 s) bounds the wait for it, and the error comes within it - not
# after the library's own connect timeout (5 s), nor after a re-send.
hung=$(free_port)
redis-server --bind 127.0.0.1 --port "$hung" --save '' --appendonly no --dir "$work" --daemonize no \
  </dev/null >/dev/null 2>&1 &
hung_redis=$!
for _ in $(seq 100); do redis-cli -p "$hung" PING >/dev/null 2>&1 && break; sleep 0.05; done
kill -STOP "$hung_redis"
for timeout in 1s 3s; do
  ms=${timeout%s}000
  opt="--timeout $timeout"
  [ "$timeout" = 3s ] && opt= # the default
  for mode in run list; do
    case $mode in
      run) set -- hung -- true ;;
      list) set -- list 'hung*' ;;
    esac
    t0=$(now_ms)
    # shellcheck disable=SC2086
    relock -u "redis://127.0.0.1:$hung" $opt "$@" 2>"$work/err"
    code=$?
    took=$(took_ms "$t0")
    expect "$mode on a server that never answers, ${opt:-no --timeout}: exit 69 after $ms ms (+ 500)" "69 in-time" \
      "$code $([ "$took" -ge "$ms" ] && [ "$took" -lt $((ms + 500 * slack)) ] && echo in-time || echo ${took}ms)" \
      "$(cat "$work/err")"
  done
done
kill -CONT "$hung_redis"
kill "$hung_redis"
wait "$hung_redis"

relock --wait xyz name -- true 2>"$work/err"
expect "a bad duration is a usage error" "64" "$?"
grep -q 'invalid --wait "xyz"' "$work/err"
expect "naming the option" 0 $? "$(cat "$work/err")"

# A lease within the drift margin (1% + 2 ms) could never be trusted:
# relock would try again forever. Refused at once, saying why.
relock_bg --lease 2ms tiny -- true 2>"$work/err"
wait_bounded $! $((5000 * slack))
expect "--lease 2ms is a usage error at once, saying why" "64 yes 0" \
  "$? $(grep -q -- '--lease 2ms is too short: a lease must be at least 10ms' "$work/err" && echo yes) $(redis EXISTS tiny)" \
  "$(cat "$work/err")"
relock_bg --lease 9ms tiny -- true 2>/dev/null
wait_bounded $! $((5000 * slack))
expect "--lease 9ms too" 64 $?
relock_bg --watchdog 9ms tiny -- true 2>"$work/err"
wait_bounded $! $((5000 * slack))
expect "--watchdog 9ms too" "64 yes" "$? $(grep -q -- 'at least 10ms' "$work/err" && echo yes)" "$(cat "$work/err")"
relock -q --lease 10ms tiny -- true 2>/dev/null
code=$?
expect "--lease 10ms is allowed (the command ran, or its lease ran out first)" yes \
  "$([ $code = 0 ] || [ $code = 76 ] && echo yes)" "exit $code"

relock 2>/dev/null
expect "no NAME is a usage error" 64 $?
relock name -- 2>/dev/null
expect "no COMMAND is a usage error" 64 $?
relock release name 2>/dev/null
expect "release without --force is a usage error" 64 $?
relock --bogus name -- true 2>/dev/null
expect "an unknown option is a usage error" 64 $?

# -- a typo is no lock name (issue 33 item 8) ----------------------------------

# Running a command needs NAME -- COMMAND: without the --, a misspelt
# subcommand ("statsu") was a lock name and the next word a command run
# holding it. Now a usage error, suggesting the subcommand meant.
typo() { # typo WANT-SUGGESTION ARG...: exit code, whether the command ran, the suggestion
  want=$1
  shift
  rm -f "$work/typo-ran"
  relock "$@" 2>"$work/err"
  echo "$? $([ -e "$work/typo-ran" ] && echo ran || echo not-run) $(grep -c "did you mean 'relock $want'" "$work/err")"
}
bad=
for t in "status|statsu" "status|Status" "status|stauts" "list|lsit" "list|ls" "release --force|force-unlock" \
  "release --force|unlock" "release --force|relase" "latch|lacth" "--help|help"; do
  got=$(typo "${t%%|*}" "${t#*|}" touch "$work/typo-ran")
  [ "$got" = "64 not-run 1" ] || bad="$bad${bad:+; }relock ${t#*|} touch ...: $got ($(cat "$work/err"))"
done
expect "a word close to a subcommand is a usage error suggesting it; nothing runs" "" "$bad"
got=$(typo x nightly touch "$work/typo-ran")
grep -q "relock NAME -- COMMAND" "$work/err"
expect "NAME COMMAND without -- is a usage error showing the form" "64 not-run 0 0" "$got $?" "$(cat "$work/err")"
rm -f "$work/typo-ran"
relock -q status s-typo -- touch "$work/typo-ran" 2>"$work/err"
expect "a subcommand with extra words is a usage error, not a lock named status" "64 not-run" \
  "$? $([ -e "$work/typo-ran" ] && echo ran || echo not-run)" "$(cat "$work/err")"
rm -f "$work/typo-ran"
relock -q statsu -- touch "$work/typo-ran"
expect "with -- the name is taken as written (a lock may be named so)" "0 ran 0" \
  "$? $([ -e "$work/typo-ran" ] && echo ran || echo not-run) $(redis EXISTS statsu)"

relock -u "http://x" name -- true 2>"$work/err"
expect "a bad URL is a usage error" 64 $?
RELOCK_URL="redis://:hunter2@127.0.0.1:1" relock --timeout 200ms name -- true 2>"$work/err"
code=$?
grep -q hunter2 "$work/err"
expect "a password never appears in messages" "69 1" "$code $?"
echo "redis://127.0.0.1:$port" >"$work/url"
RELOCK_URL= relock --url-file "$work/url" -q t-file -- true
expect "--url-file reads the URL" 0 $?
# A file that gives no URL is an error, never the default server
: >"$work/url-empty"
relock --url-file "$work/url-empty" t-file -- true 2>"$work/err"
expect "--url-file of an empty file: exit 64, saying so" "64 relock: $work/url-empty: empty" "$? $(cat "$work/err")"
printf '\nredis://127.0.0.1:%s\n' "$port" >"$work/url-blank"
relock --url-file "$work/url-blank" t-file -- true 2>"$work/err"
expect "--url-file whose first line is blank: exit 64, saying so" \
  "64 relock: $work/url-blank: first line is blank (the URL goes there)" "$? $(cat "$work/err")"
printf ' \t\r\n' >"$work/url-blank"
relock --url-file "$work/url-blank" status t-file 2>"$work/err"
expect "--url-file whose first line is white space: the same" \
  "64 relock: $work/url-blank: first line is blank (the URL goes there)" "$? $(cat "$work/err")"

relock --help >"$work/help"
grep -q "76 lock lost" "$work/help"
expect "--help is short and lists the exit codes" "0 yes" "$? $([ "$(wc -l <"$work/help")" -lt 30 ] && echo yes)"
relock --version | grep -q "^relock [0-9]"
expect "--version" 0 $?

# -- status and list: exit statuses and --json (issue 14 item 8) ---------------

# jexpect NAME WANT FILE EXPR: EXPR, in Python, over L (the JSON objects of
# FILE's lines, each line one object) prints WANT. Without python3 (which
# ./bootstrap --deps installs) each check fails: never a silent skip.
jexpect() {
  if ! command -v python3 >/dev/null; then
    not_ok "$1" "python3 not found: ./bootstrap --deps installs it"
    return
  fi
  expect "$1" "$2" "$(python3 -c '
import json, sys
L = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
r = eval(sys.argv[2])
print(" ".join(map(str, r)) if isinstance(r, tuple) else r)' "$3" "$4" 2>&1)" "$(cat "$3")"
}

relock status s-free >"$work/out"
expect "status of a free lock exits 1" "1 s-free: free" "$? $(cat "$work/out")"
relock status --json s-free >"$work/out"
expect "status --json of a free lock exits 1" 1 $?
jexpect "and prints one object: not held, no holders, no ttl, no waiters, no age, no format" \
  "[{'name': 's-free', 'held': False, 'holders': [], 'ttl_ms': -1, 'waiters': 0, 'age_ms': None, 'format': None}]" \
  "$work/out" "L"

redis HSET s-held "3f2a9c4e-0000-4000-8000-000000000001:42" 2 >/dev/null
redis PEXPIRE s-held 30000 >/dev/null
relock status s-held >"$work/out"
code=$?
grep -q "^s-held: held by 3f2a9c4e-0000-4000-8000-000000000001:42, hold count 2, expires in [0-9]* ms$" "$work/out"
expect "status of a held lock exits 0, in text as before" "0 0" "$code $?" "$(cat "$work/out")"
relock status s-held --json >"$work/out"
expect "status NAME --json of a held lock exits 0" 0 $?
jexpect "with the holder (client id, numeric owner, hold count 2), the ttl and the format" \
  "s-held True [{'client_id': '3f2a9c4e-0000-4000-8000-000000000001', 'owner': 42, 'hold_count': 2}] True redisson" \
  "$work/out" "L[0]['name'], L[0]['held'], L[0]['holders'], 0 < L[0]['ttl_ms'] <= 30000, L[0]['format']"

relock -q status s-held >"$work/out"
expect "status -q prints nothing; its exit status tells" "0 0" "$? $(wc -c <"$work/out")"

redis HSET s-forever "id:with:colons:thread-7" 1 >/dev/null
relock --json status s-forever >"$work/out"
jexpect "--json before status; client id up to the last ':', a non-numeric owner is a string; no expiry is -1" \
  "[{'client_id': 'id:with:colons', 'owner': 'thread-7', 'hold_count': 1}] -1" "$work/out" \
  "L[0]['holders'], L[0]['ttl_ms']"

odd=$(printf 'q"b\\s\nt\001\351\303\251|')
redis HSET "$odd" "$odd:7" 1 >/dev/null
relock status --json "$odd" >"$work/out"
expect "a name with quotes, backslash, newline, control and non-UTF-8 bytes: held" 0 $?
expect "is printed on one line" 1 "$(wc -l <"$work/out")"
jexpect "escaped as JSON (a byte that is not UTF-8 as \\u00XX)" \
  "True True" "$work/out" \
  "L[0]['name'] == 'q\"b\\\\s\\nt\\x01\\xe9\\u00e9|', L[0]['holders'][0]['client_id'] == L[0]['name']"
relock status "$odd" >"$work/out"
expect "and in text, control bytes are escaped" 1 "$(wc -l <"$work/out")" "$(cat "$work/out")"

relock_bg -q s-cli -- sh -c "while [ ! -e '$work/s-release' ]; do sleep 0.05; done"
holder=$!
wait_held s-cli
relock status --json s-cli >"$work/out"
jexpect "a lock held by relock: its client id is a UUID, its owner relock's pid" \
  "True True 1 redisson" "$work/out" \
  "__import__('re').fullmatch('[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}', L[0]['holders'][0]['client_id']) is not None, L[0]['holders'][0]['owner'] == $holder, L[0]['holders'][0]['hold_count'], L[0]['format']"
: >"$work/s-release"
wait "$holder"

redis SET s-str hello >/dev/null
relock status s-str >"$work/out" 2>"$work/err"
expect "status of a string key: exit 65, nothing on stdout" "65 0" "$? $(wc -c <"$work/out")"
expect "saying it is not a lock" "relock: s-str is not a lock (a Redis string)" "$(cat "$work/err")"
redis RPUSH s-list a >/dev/null
relock status --json s-list 2>"$work/err"
expect "status of a list key: exit 65" "65 relock: s-list is not a lock (a Redis list)" "$? $(cat "$work/err")"
redis HSET s-hash "id:1" one >/dev/null
relock status s-hash 2>"$work/err"
code=$?
grep -q "^relock: s-hash is not a lock (a Redis hash" "$work/err"
expect "status of a hash whose values are not hold counts: exit 65" "65 0" "$code $?" "$(cat "$work/err")"
redis HSET s-hash2 "nocolon" 1 >/dev/null
relock status s-hash2 2>/dev/null
expect "nor whose fields are not <client-id>:<owner>" 65 $?
relock --wait 0 s-str -- touch "$work/ran-on-string" 2>"$work/err"
expect "a command on a name that holds a string: exit 65, not run" "65 not-run" \
  "$? $([ -e "$work/ran-on-string" ] && echo ran || echo not-run)" "$(cat "$work/err")"
expect "saying so once, in the user's words" \
  "relock: cannot acquire lock s-str: 's-str' holds a Redis string, not a lock" "$(cat "$work/err")"
redis HSET s-cli-rw mode read 00000000-0000-4000-8000-000000000000:1 1 >/dev/null
relock --wait 0 s-cli-rw -- true 2>"$work/err"
expect "a plain lock on a read-write lock's hash: exit 65, its kind named" "65 1" \
  "$? $(grep -c 'read-write\|read lock\|another kind' "$work/err")" "$(cat "$work/err")"

relock -u "redis://127.0.0.1:$(free_port)" --timeout 300ms status s-held 2>/dev/null
expect "status with Redis down: exit 69" 69 $?
relock -u "redis://127.0.0.1:$(free_port)" --timeout 300ms list 's*' 2>/dev/null
expect "list with Redis down: exit 69" 69 $?
relock --json s-x -- true 2>/dev/null
expect "--json with a command is a usage error" 64 $?
relock status 2>/dev/null
expect "status without NAME is a usage error" 64 $?
relock list 2>/dev/null
expect "list without PATTERN is a usage error" 64 $?

for l in l-c l-a l-b; do redis HSET "$l" "3f2a9c4e-0000-4000-8000-000000000001:1" 1 >/dev/null; done
redis HSET l-a "3f2a9c4e-0000-4000-8000-000000000001:1" 3 >/dev/null
redis PEXPIRE l-b 60000 >/dev/null
redis SET l-string x >/dev/null
redis HSET l-map field value >/dev/null
redis ZADD l-zset 1 x >/dev/null
relock list 'l-*' >"$work/out"
code=$?
expect "list PATTERN: exit 0, one line per lock, sorted, non-locks skipped" "0 l-a l-b l-c" \
  "$code $(cut -d: -f1 "$work/out" | tr '\n' ' ' | sed 's/ $//')" "$(cat "$work/out")"
relock list --json 'l-*' >"$work/out"
jexpect "list --json: one object per line" \
  "['l-a', 'l-b', 'l-c'] [3, 1, 1] [-1, True, -1]" "$work/out" \
  "[o['name'] for o in L], [o['holders'][0]['hold_count'] for o in L], [L[0]['ttl_ms'], L[1]['ttl_ms'] > 0, L[2]['ttl_ms']]"
relock list 'nothing-*' >"$work/out"
expect "list of a pattern matching no lock: exit 1, nothing printed" "1 0" "$? $(wc -c <"$work/out")"
relock list 'l-[sm]*' >"$work/out"
expect "list of a pattern matching only non-locks: exit 1" "1 0" "$? $(wc -c <"$work/out")"

i=0
while [ $i -lt 2500 ]; do echo "HSET many:$i c:1 1"; i=$((i + 1)); done | redis >/dev/null
relock list 'many:*' >"$work/out"
code=$?
expect "list walks the whole SCAN (2500 locks), each once, sorted" "0 2500 2500 sorted" \
  "$code $(wc -l <"$work/out") $(sort -u "$work/out" | wc -l) $(sed 's/: held by .*//' "$work/out" | LC_ALL=C sort -c && echo sorted)"

relock --help | grep -q "list"
expect "--help mentions list" 0 $?

# TLS: rediss:// against a redis-server with --tls-port, certificates made by
# tests/support/tls.sh; a build without TLS must say so instead.
if relock --version | grep -qx "TLS: yes"; then
  sh "$here/../support/tls.sh" "$work/tls"
  tport=$(free_port)
  redis-server --port 0 --tls-port "$tport" --bind 127.0.0.1 --save '' --appendonly no --dir "$work/tls" \
    --tls-cert-file "$work/tls/server.crt" --tls-key-file "$work/tls/server.key" \
    --tls-ca-cert-file "$work/tls/ca.crt" --tls-auth-clients no --logfile "$work/tls/redis.log" </dev/null >/dev/null 2>&1 &
  tls_pid=$!
  trap 'kill "$tls_pid" 2>/dev/null; stop_redis; rm -rf "$work"' EXIT
  for _ in $(seq 100); do grep -q "Ready to accept" "$work/tls/redis.log" 2>/dev/null && break; sleep 0.05; done
  RELOCK_URL="rediss://localhost:$tport" relock --tls-ca "$work/tls/ca.crt" t-tls -- true
  expect "rediss:// with --tls-ca: the command runs holding the lock" 0 $?
  RELOCK_URL="rediss://127.0.0.1:$tport" relock -q --timeout 2s t-tls -- true 2>"$work/err"
  code=$?
  grep -q "certificate" "$work/err"
  expect "rediss:// with a CA that did not sign the server's certificate: exit 69, naming the certificate" \
    "69 0" "$code $?" "$(cat "$work/err")"
  RELOCK_URL="redis://127.0.0.1:$tport" relock --tls-insecure t-tls -- true 2>"$work/err"
  code=$?
  grep -q "WARNING: --tls-insecure" "$work/err"
  expect "--tls-insecure turns TLS on, connects unverified, and warns" "0 0" "$code $?" "$(cat "$work/err")"
  kill "$tls_pid"
  wait "$tls_pid" 2>/dev/null
else
  relock --tls-ca /nonexistent/ca.crt t-tls -- true 2>"$work/err"
  code=$?
  grep -q "this build has no TLS support" "$work/err"
  expect "a build without TLS: --tls-ca is a usage error saying so" "64 0" "$code $?" "$(cat "$work/err")"
  RELOCK_URL="rediss://127.0.0.1:$port" relock t-tls -- true 2>"$work/err"
  code=$?
  grep -q "this build has no TLS support" "$work/err"
  expect "a build without TLS: rediss:// is a usage error saying so" "64 0" "$code $?" "$(cat "$work/err")"
fi

# -- least privilege: the ACL user of docs/ACL.md (issue 15) ----------------------

acl_doc="$here/../../docs/ACL.md"
# before Redis 6.2, the page's lines for it (no '&' rules)
acl_base=$(acl_doc_for_server "$acl_doc" | grep '^ACL SETUSER relock reset ' | sed 's/>CHANGE-ME/>pw/')
acl_addons=$(grep '^ACL SETUSER relock +type' "$acl_doc")
set -f # the rules hold '*': words, not globs
redis $acl_base >"$work/out"
expect "the documented ACL user can be made" OK "$(cat "$work/out")"
set +f
acl_url="redis://relock:pw@127.0.0.1:$port"
relock -u "$acl_url" app:cli -- sh -c 'exit 3'
expect "as the documented ACL user: a command runs holding the lock" 3 $?
relock -u "$acl_url" --wait 5s app:cli -- sh -c 'sleep 0.3' &
acl_holder=$!
wait_held app:cli
relock -u "$acl_url" --wait 5s app:cli -- true
expect "as the ACL user: a second relock waits (pub/sub) and runs" 0 $?
wait "$acl_holder"
relock -u "$acl_url" other:cli -- true 2>"$work/err"
code=$?
grep -q "NOPERM" "$work/err"
expect "as the ACL user: a lock outside its key pattern: exit 69, NOPERM" "69 0" "$code $?" "$(cat "$work/err")"
relock -u "$acl_url" status app:cli >"$work/out" 2>"$work/err"
code=$?
grep -q "NOPERM.*'type'" "$work/err"
expect "status without the status add-ons: exit 69 and the server's NOPERM" "69 0" "$code $?" "$(cat "$work/err")"
relock -u "$acl_url" list 'app:*' >"$work/out" 2>"$work/err"
code=$?
grep -q "NOPERM.*'scan'" "$work/err"
expect "list without SCAN: exit 69 and the server's NOPERM" "69 0" "$code $?" "$(cat "$work/err")"
set -f
redis $acl_addons >/dev/null
set +f
redis HSET app:held "3f2a9c4e-0000-4000-8000-000000000001:1" 1 >/dev/null
relock -u "$acl_url" status app:held >/dev/null
expect "with the add-ons: status works" 0 $?
relock -u "$acl_url" list 'app:*' >"$work/out"
expect "with the add-ons: list works" "0 app:held" "$? $(cut -d: -f1,2 "$work/out")"
relock -u "$acl_url" -q release --force app:held
expect "release --force works with the base rules" "0 0" "$? $(redis EXISTS app:held)"

# -- a password never shows (issue 15) -------------------------------------------

secret=s3cretpw
for url in "redis://u:$secret@127.0.0.1:BADPORT" "redis://u:$secret@127.0.0.1:$port/BADDB" \
  "redis://u:$secret@127.0.0.1:99999" "redis://u:$secret/x@127.0.0.1" "redis://$secret@127.0.0.1" \
  "redis+cluster://u:$secret@127.0.0.1:$port/1" "redis+cluster://127.0.0.1?password=$secret&db=3"; do
  relock -u "$url" x -- true >"$work/out" 2>&1
  code=$?
  grep -q "$secret" "$work/out"
  expect "a malformed URL with a password: exit 64, the password not shown ($url)" "64 1" "$code $?" "$(cat "$work/out")"
done
relock --ur="redis://u:$secret@127.0.0.1:$port" x -- true >"$work/out" 2>&1
code=$?
grep -q "$secret" "$work/out"
expect "an ambiguous option's value is not echoed" "64 1" "$code $?" "$(cat "$work/out")"
echo "redis://u:$secret@127.0.0.1:BADPORT" >"$work/url-bad"
RELOCK_URL= relock --url-file "$work/url-bad" x -- true >"$work/out" 2>&1
code=$?
grep -q "$secret" "$work/out"
expect "--url-file with a malformed URL: exit 64, the password not shown" "64 1" "$code $?" "$(cat "$work/out")"

redis CONFIG SET requirepass the-right-one >/dev/null
redis() { redis-cli -p "$port" --no-auth-warning -a the-right-one "$@"; }
for mode in run status list; do
  case $mode in
  run) set -- pw-lock -- true ;;
  status) set -- status pw-lock ;;
  list) set -- list 'pw-*' ;;
  esac
  relock -v -u "redis://:$secret@127.0.0.1:$port" "$@" >"$work/out" 2>&1
  code=$?
  grep -q "$secret" "$work/out"
  expect "a wrong password ($mode -v): exit 69, the password not shown" "69 1" "$code $?" "$(cat "$work/out")"
  RELOCK_URL="redis://default:$secret@127.0.0.1:$port" relock -v "$@" >"$work/out" 2>&1
  code=$?
  grep -q "$secret" "$work/out"
  expect "a wrong password in RELOCK_URL ($mode -v): exit 69, not shown" "69 1" "$code $?" "$(cat "$work/out")"
done
echo "redis://:the-right-one@127.0.0.1:$port" >"$work/url-pw"
RELOCK_URL= relock -v --url-file "$work/url-pw" pw-lock -- true >"$work/out" 2>&1
code=$?
grep -q "the-right-one" "$work/out"
expect "--url-file with the right password: runs, the password not shown" "0 1" "$code $?" "$(cat "$work/out")"
RELOCK_URL= relock --url-file "$work/url-pw" status pw-lock >"$work/out" 2>&1
code=$?
grep -q "the-right-one" "$work/out"
expect "status through --url-file with a password: free (1), not shown" "1 1" "$code $?" "$(cat "$work/out")"
RELOCK_URL="redis://:the-right-one@127.0.0.1:$port" relock -v pw-lock -- true >"$work/out" 2>&1
code=$?
grep -q "the-right-one" "$work/out"
expect "RELOCK_URL with the right password: runs, not shown" "0 1" "$code $?" "$(cat "$work/out")"
# back to no password for what follows
redis CONFIG SET requirepass "" >/dev/null
redis() { redis-cli -p "$port" "$@"; }

# -- Redis gone (last: these stop the server) ----------------------------------

# Redis goes away while the command runs: the lease runs out unrenewed, the
# lock is lost (76), not a Redis error (69).
relock_bg -q --watchdog 600ms --kill-grace 10s gone -- sh -c 'trap "exit 0" TERM; while :; do sleep 0.02; done' \
  2>"$work/gone-err"
pid=$!
wait_held gone
stop_redis
wait "$pid"
expect "Redis gone while the command runs: the lease runs out, exit 76" 76 $? "$(cat "$work/gone-err")"
start_redis
export RELOCK_URL="redis://127.0.0.1:$port"
trap 'stop_redis; rm -rf "$work"' EXIT # start_redis set its own

# The lock is lost (key deleted), and Redis goes away before the command
# has ended: relock still knows the loss, and says so with 76, not with
# Redis's unreachability (69).
rm -f "$work/go"
relock_bg -q --watchdog 600ms --kill-grace 10s lostdown -- \
  sh -c "trap 'while [ ! -e \"$work/go\" ]; do sleep 0.02; done; exit 0' TERM; while :; do sleep 0.02; done" \
  2>"$work/lostdown-err"
pid=$!
wait_held lostdown
redis DEL lostdown >/dev/null
for _ in $(seq 200); do grep -q "lost" "$work/lostdown-err" && break; sleep 0.02; done
stop_redis
: >"$work/go"
wait "$pid"
expect "a lost lock with Redis gone afterwards: still exit 76" 76 $? "$(cat "$work/lostdown-err")"

echo "1..$n"
