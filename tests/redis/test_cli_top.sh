#!/bin/sh
# relock top, and the waiters of status and list --json, against a private
# redis-server. top's full-screen view runs on a pseudo-terminal of a
# private tmux server (its own socket, killed at the end): the test reads
# the screen as a person would (tmux capture-pane) and types the keys.
# Speaks TAP. Run from the build directory (make check does).
set -u
here=$(dirname "$0")
. "$here/../support/redis.sh"
. "$here/../support/cli.sh"
command -v redis-server >/dev/null || { echo "Bail out! cannot run: redis-server not found (./bootstrap --deps)"; exit 1; }
start_redis
export RELOCK_URL="redis://127.0.0.1:$port"
work=$(mktemp -d)
sock="relock-top-$$-$(date +%N)"
tmx() { tmux -L "$sock" -f /dev/null "$@"; }
pids=
cleanup() {
  command -v tmux >/dev/null && tmx kill-server 2>/dev/null
  : >"$work/release"
  for p in $pids; do kill "$p" 2>/dev/null; done
  for p in $pids; do wait "$p" 2>/dev/null; done
  stop_redis
  rm -rf "$work"
}
trap cleanup EXIT

. "$here/../support/tap.sh"
redis() { redis-cli -p "$port" "$@"; }

# until CMD's output is WANT, 10 s at most (more under valgrind)
await() {
  want=$1
  shift
  for _ in $(seq $((200 * slack))); do
    [ "$("$@" 2>/dev/null)" = "$want" ] && return 0
    sleep 0.05
  done
  return 1
}
# a process holding or waiting for a lock with relock run, until $work/release
hold() {
  relock_bg -q "$@" -- sh -c "while [ ! -e '$work/release' ]; do sleep 0.05; done"
  pids="$pids $!"
}
field=3f2a9c4e-0000-4000-8000-000000000001:7

# -- the locks -----------------------------------------------------------------
# top-busy and top-idle: held as Redisson holds (a hash written here; a
# Redisson holder subscribes to nothing); top-busy has 2 relock runs waiting.
# top-run: held by a relock run, which watches its channel for a loss (one
# subscriber), and 1 waiter. top-queue: a fair lock with 3 queued waiters.
redis HSET top-busy "$field" 1 >/dev/null && redis PEXPIRE top-busy 3600000 >/dev/null
redis HSET top-idle "$field" 2 >/dev/null && redis PEXPIRE top-idle 3600000 >/dev/null
hold top-busy
hold top-busy
hold top-run
await 1 redis EXISTS top-run
hold top-run
hold --fair top-queue
await 1 redis EXISTS top-queue
hold --fair top-queue
hold --fair top-queue
hold --fair top-queue
numsub() { redis PUBSUB NUMSUB "redisson_lock__channel:{$1}" | tail -1; }
await 2 numsub top-busy && await 2 numsub top-run && await 3 redis LLEN 'redisson_lock_queue:{top-queue}'
expect "setup: 2 waiters subscribed to top-busy, holder and waiter to top-run, 3 queued for top-queue" 0 $?

# -- status and list --json: waiters, and age_ms null ---------------------------
jexpect() {
  expect "$1" "$2" "$(python3 -c '
import json, sys
L = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
r = eval(sys.argv[2])
print(" ".join(map(str, r)) if isinstance(r, tuple) else r)' "$3" "$4" 2>&1)" "$(cat "$3")"
}
relock status --json top-busy >"$work/out"
jexpect "status --json: waiters, the channel's subscribers; age_ms null (Redis keeps no acquisition time)" \
  "2 None True" "$work/out" "L[0]['waiters'], L[0]['age_ms'], 'age_ms' in L[0]"
relock status --json top-queue >"$work/out"
jexpect "status --json of a fair lock: waiters, its queue's length" "3" "$work/out" "L[0]['waiters']"
relock status --json top-free >"$work/out"
jexpect "status --json of a free lock: 0 waiters" "False 0 None" "$work/out" \
  "L[0]['held'], L[0]['waiters'], L[0]['age_ms']"
relock list --json 'top-*' >"$work/out"
jexpect "list --json: each lock's waiters (a relock run holder is one subscriber itself)" \
  "['top-busy', 'top-idle', 'top-queue', 'top-run'] [2, 0, 3, 2] [None, None, None, None]" "$work/out" \
  "[o['name'] for o in L], [o['waiters'] for o in L], [o['age_ms'] for o in L]"

# -- top, not on a terminal: plain lines ----------------------------------------
relock top -n 2 --interval 200ms 'top-*' >"$work/out" 2>"$work/err"
code=$?
expect "top -n 2 into a pipe: exit 0, two blocks of a header and 4 lines" "0 2 8" \
  "$code $(grep -c '^# .* relock top top-\*: 4 locks$' "$work/out") $(grep -c '^top-' "$work/out")" \
  "$(cat "$work/out" "$work/err")"
expect "each block sorted by waiters: queue (3), busy (2), run (2), idle (0)" \
  "top-queue top-busy top-run top-idle top-queue top-busy top-run top-idle" \
  "$(grep '^top-' "$work/out" | cut -d' ' -f1 | tr '\n' ' ' | sed 's/ $//')" "$(cat "$work/out")"
line() { grep "^$1 " "$work/out" | tail -1; }
expect "the lines say kind, holds, waiters and holders" "1 1 1 1" \
  "$(line top-queue | grep -c 'kind=fair holds=1 .*waiters=3 holders=') \
$(line top-busy | grep -c "kind=lock holds=1 .*waiters=2 holders=$field\$") \
$(line top-idle | grep -c "kind=lock holds=2 .*waiters=0 holders=$field\$") \
$(line top-run | grep -c 'kind=lock holds=1 .*waiters=2 holders=')" "$(cat "$work/out")"
expect "held for: '>=' for a hold already there at top's start" 4 "$(grep '^top-' "$work/out" | tail -4 | grep -c 'held_for=>=')"
relock top --once 'nothing-*' >"$work/out"
expect "top --once of a pattern matching nothing: exit 0, the header alone" "0 1" "$? $(wc -l <"$work/out")"
relock -u "redis://127.0.0.1:$(free_port)" --timeout 300ms top --once >"$work/out" 2>/dev/null
expect "top --once with Redis down: exit 69, the error in the block" "69 1" "$? $(grep -c '^# error: ' "$work/out")"
relock top a b 2>/dev/null
expect "top with two patterns: a usage error" 64 $?
relock top --interval 10ms 2>/dev/null
expect "top --interval below 100ms: a usage error" 64 $?
relock top -n 0 2>/dev/null
expect "top -n 0: a usage error" 64 $?
relock --once status top-busy 2>/dev/null
expect "--once outside top: a usage error" 64 $?
relock top -- true
expect "top -- COMMAND still runs COMMAND holding a lock named top" "0 0" "$? $(redis EXISTS top)"

# -- top on a terminal (tmux) ---------------------------------------------------
# A test that cannot run fails, never skips.
command -v tmux >/dev/null || { echo "Bail out! cannot run: tmux not found (./bootstrap --deps installs it)"; exit 1; }
screen() { tmx capture-pane -p -t top; }
# until the screen has text (a fixed string), 10 s at most
await_screen() {
  for _ in $(seq $((200 * slack))); do
    screen | grep -qF -- "$1" && return 0
    sleep 0.05
  done
  return 1
}
# until a whole line of the screen matches the regular expression $1, 10 s at most
await_line() {
  for _ in $(seq $((200 * slack))); do
    screen | grep -Eqx -- "$1" && return 0
    sleep 0.05
  done
  return 1
}
# until top's screen is gone (it stopped or ended), 10 s at most
await_top_gone() {
  for _ in $(seq $((200 * slack))); do
    screen | grep -q 'HELD FOR' || return 0
    sleep 0.05
  done
  return 1
}
# a clear screen, then top started from the shell, under $1 (the valgrind
# wrapper of make check-valgrind, or nothing)
start_top() {
  tmx send-keys -t top clear Enter
  for _ in $(seq $((200 * slack))); do
    [ "$(screen | grep -c .)" -le 1 ] && break
    sleep 0.05
  done
  tmx send-keys -t top "RELOCK_URL=$RELOCK_URL $1 $(realpath "$relock_bin") top 'top-*'" Enter
  await_screen "top-queue"
}
# the names of the lock lines on the screen, in order
on_screen() { screen | grep -o '^top-[a-z]*' | tr '\n' ' ' | sed 's/ $//'; }

tmx new-session -d -s top -x 160 -y 40 "env PS1='$ ' bash --norc --noprofile" || { echo "Bail out! tmux cannot start"; exit 1; }
tmx send-keys -t top "RELOCK_URL=$RELOCK_URL $wrapper $(realpath "$relock_bin") top 'top-*'; echo \"exit=\$?\"" Enter
await_screen "top-idle"
expect "top shows the locks, sorted by waiters, then age, then name" \
  "top-queue top-busy top-run top-idle" "$(on_screen)" "$(screen)"
row() { screen | grep "^$1 "; }
expect "each row: kind, holder, holds, TTL, held for (>=: already held at start), waiters" "1 1 1 1" \
  "$(row top-queue | grep -Ec '^top-queue +fair +[0-9a-f-]+:[0-9]+ +1 +[0-9.hms]+ +>=[0-9.hms]+ +3$') \
$(row top-busy | grep -Ec "^top-busy +lock +$field +1 +[0-9.hms]+ +>=[0-9.hms]+ +2\$") \
$(row top-idle | grep -Ec "^top-idle +lock +$field +2 +[0-9.hms]+ +>=[0-9.hms]+ +0\$") \
$(row top-run | grep -Ec '^top-run +lock +[0-9a-f-]+:[0-9]+ +1 +[0-9.hms]+ +>=[0-9.hms]+ +2$')" "$(screen)"
expect "a header names the pattern, the count and the sort; the columns are titled" "1 1" \
  "$(screen | grep -c 'relock top top-\*.*4 locks.*sort: waiters') \
$(screen | grep -Ec '^NAME +KIND +HOLDER +HOLDS +TTL +HELD FOR +WAITERS')" "$(screen)"

tmx send-keys -t top n
await_screen "sort: name"
expect "key n: sorted by name" "top-busy top-idle top-queue top-run" "$(on_screen)" "$(screen)"
tmx send-keys -t top r
await_screen "(reversed)"
expect "key r: reversed" "top-run top-queue top-idle top-busy" "$(on_screen)" "$(screen)"

# a lock released while top watches: gone at the next refresh; one taken: "held for" without ">="
redis DEL top-idle >/dev/null
redis HSET top-new "$field" 1 >/dev/null && redis PEXPIRE top-new 3600000 >/dev/null
await_screen "top-new"
expect "refreshed: a released lock gone, a new one shown as first seen (no '>=')" "0 1" \
  "$(screen | grep -c '^top-idle') $(row top-new | grep -Ec "^top-new +lock +$field +1 +[0-9.hms]+ +[0-9.hms]+ +0\$")" \
  "$(screen)"

tmx send-keys -t top q
await_screen "exit=0"
expect "key q: top exits 0, the full screen gone (the shell's own screen back)" "1 0" \
  "$(screen | grep -c '^exit=0$') $(screen | grep -c 'HELD FOR')" "$(screen)"
tmx send-keys -t top "stty -a | grep -o -- '-*icanon\|-*echo ' | tr '\n' ' '; echo" Enter
await_line 'icanon echo *'
expect "and the terminal is restored: canonical mode and echo on" 1 \
  "$(screen | grep -c '^icanon echo *$')" "$(screen)"

# ^Z: the terminal given back while stopped; fg: the screen again. Not
# under valgrind, which does not stop on a SIGTSTP a program raises itself
start_top ""
tmx send-keys -t top C-z
await_top_gone
tmx send-keys -t top "stty -a | grep -o -- '-*icanon\|-*echo ' | tr '\n' ' '; echo" Enter
await_line 'icanon echo *'
expect "^Z: top stops, the terminal given back (canonical mode and echo on, its screen gone)" "1 0" \
  "$(screen | grep -c '^icanon echo *$') $(screen | grep -c 'HELD FOR')" "$(screen)"
tmx send-keys -t top fg Enter
await_screen "HELD FOR"
tmx send-keys -t top n
await_screen "sort: name"
expect "fg: top's screen again, its keys read" "top-busy top-new top-queue top-run" "$(on_screen)" "$(screen)"
tmx send-keys -t top q
await_top_gone
start_top "$wrapper"
tmx send-keys -t top C-c
# an interactive shell drops the rest of a line whose command died of
# SIGINT: $? asked apart, once top's screen is gone
await_top_gone
tmx send-keys -t top 'echo "exit=$?"' Enter
await_line 'exit=130'
tmx send-keys -t top "stty -a | grep -o -- '-*icanon\|-*echo ' | tr '\n' ' '; echo" Enter
await_line 'icanon echo *'
expect "^C: top dies of SIGINT (130) with the terminal restored" "1 1 0" \
  "$(screen | grep -c '^exit=130$') $(screen | grep -c '^icanon echo *$') $(screen | grep -c 'HELD FOR')" "$(screen)"

echo "1..$n"
