#!/bin/sh
# relock --semaphore N (the permit-expirable semaphore, watched permits) and
# --rsemaphore N (Redisson's RSemaphore) against private redis-servers:
# a dead relock's permit comes back, a lost permit stops the command, no
# more than N commands run at once (counted by the commands themselves),
# also across a restart of a persistent Redis; status and list show the
# permits; and as docs/ACL.md's user with its semaphore add-on (the line
# read from that page), both run, wait and renew. Speaks TAP. Run from the
# build directory (make check does).
set -u
here=$(dirname "$0")
. "$here/../support/redis.sh"
. "$here/../support/cli.sh"
command -v redis-server >/dev/null || { echo "Bail out! cannot run: redis-server not found (./bootstrap --deps)"; exit 1; }
command -v flock >/dev/null || { echo "Bail out! cannot run: flock (util-linux) not found"; exit 1; }
start_redis
export RELOCK_URL="redis://127.0.0.1:$port"
work=$(mktemp -d)
persistent_pid=
persistent_dir=
stop_persistent() {
  [ -n "$persistent_pid" ] && kill "$persistent_pid" 2>/dev/null && wait "$persistent_pid" 2>/dev/null
  persistent_pid=
}
trap 'stop_persistent; stop_redis; rm -rf "$work"' EXIT

. "$here/../support/tap.sh"
now_ms() { date +%s%3N; }
redis() { redis-cli -p "$port" "$@"; }

# The watchdog's lease for the runs below: short, so that a dead relock's
# permit comes back soon (renewed every third of it).
wd=1s
wd_ms=1000

# until_file FILE...: until each exists, 10 s at most (x slack)
until_file() {
  for f in "$@"; do
    for _ in $(seq $((200 * slack))); do [ -e "$f" ] && break; sleep 0.05; done
    [ -e "$f" ] || return 1
  done
}

# A command that holds until told (the file $1 exists), 20 s at most; on
# SIGTERM it notes it ($1.term) and exits 0. It first notes its permit's id
# in $1.id and that it runs ($1.up).
holder_cmd() {
  echo "trap 'echo TERM >\"$1.term\"; exit 0' TERM; echo \"\$RELOCK_PERMIT\" >\"$1.id\"; : >\"$1.up\";" \
    "i=0; while [ ! -e '$1' ] && [ \$i -lt 400 ]; do sleep 0.05; i=\$((i + 1)); done"
}

# The counting command: the number of commands running at once, kept in
# $work/$1.n under flock; the most ever seen in $work/$1.max. Each holds
# for a while between the two counts.
count_cmd() {
  c="$work/$1"
  echo "flock '$c.lock' sh -c 'n=\$((\$(cat \"$c.n\") + 1)); echo \$n >\"$c.n\";" \
    "[ \$n -gt \$(cat \"$c.max\") ] && echo \$n >\"$c.max\"; :';" \
    "sleep ${2:-0.3};" \
    "flock '$c.lock' sh -c 'echo \$((\$(cat \"$c.n\") - 1)) >\"$c.n\"'"
}
count_init() { echo 0 >"$work/$1.n"; echo 0 >"$work/$1.max"; }

# zrem_permit KEY ID: removes the permit ID (32 hex digits; the member is
# the 16 bytes they spell) from KEY, as another client deleting it would.
zrem_permit() {
  redis EVAL "local b = ARGV[1]:gsub('..', function(h) return string.char(tonumber(h, 16)) end)
              return redis.call('zrem', KEYS[1], b)" 1 "$1" "$2"
}

# -- (a) a relock killed by SIGKILL: its permit comes back ---------------------

relock_bg -q --watchdog $wd --semaphore 1 s-kill -- sh -c "$(holder_cmd "$work/kill")"
victim=$!
until_file "$work/kill.up"
t0=$(now_ms)
kill -KILL "$victim"
wait "$victim" 2>/dev/null
relock -q --watchdog $wd --semaphore 1 -w $((10 * slack))s s-kill -- true
code=$?
took=$(($(now_ms) - t0))
# within the watchdog's lease, and some time for the waiter to try again
expect "SIGKILL of a relock holding the only permit: the permit is free again within the watchdog lease" \
  "0 in-time" "$code $([ "$took" -le $((wd_ms + 1000 * slack)) ] && echo in-time || echo "late ${took}ms")"
expect "and the command of the killed relock was stopped (--orphan-signal)" "TERM" "$(cat "$work/kill.term" 2>/dev/null)"
expect "all permits back, none left in {s-kill}:timeout" "1 0" "$(redis GET s-kill) $(redis ZCARD '{s-kill}:timeout')"

# -- (b) a permit deleted under a running command: stopped, 76 ------------------

relock_bg -q --watchdog $wd --semaphore 2 s-del -- sh -c "$(holder_cmd "$work/del1")" 2>"$work/del1.err"
d1=$!
relock_bg -q --watchdog $wd --semaphore 2 s-del -- sh -c "$(holder_cmd "$work/del2")" 2>"$work/del2.err"
d2=$!
until_file "$work/del1.up" "$work/del2.up"
removed=$(zrem_permit '{s-del}:timeout' "$(cat "$work/del1.id")")
t0=$(now_ms)
wait "$d1"
c1=$?
took=$(($(now_ms) - t0))
: >"$work/del2"
wait "$d2"
c2=$?
expect "ZREM of one permit: its command is stopped (SIGTERM) and relock exits 76; the other runs on (0)" \
  "1 76 TERM 0 none" "$removed $c1 $(cat "$work/del1.term" 2>/dev/null) $c2 $(cat "$work/del2.term" 2>/dev/null || echo none)" \
  "$(cat "$work/del1.err" "$work/del2.err")"
expect "within a renewal period" "in-time" "$([ "$took" -le $((wd_ms + 1000 * slack)) ] && echo in-time || echo "late ${took}ms")"

relock_bg -q --watchdog $wd --semaphore 1 s-del2 -- sh -c "$(holder_cmd "$work/del3")" 2>"$work/del3.err"
d3=$!
until_file "$work/del3.up"
redis DEL '{s-del2}:timeout' >/dev/null
wait "$d3"
expect "DEL {NAME}:timeout under a running command: stopped, exit 76" "76 TERM" \
  "$? $(cat "$work/del3.term" 2>/dev/null)" "$(cat "$work/del3.err")"
grep -q "lost" "$work/del3.err"
expect "and relock says the permit was lost" 0 $? "$(cat "$work/del3.err")"

# --lease with --semaphore: a fixed lease, never renewed; its end stops the command
relock_bg -q --semaphore 1 --lease 700ms s-lease -- sh -c "$(holder_cmd "$work/lease")" 2>"$work/lease.err"
l1=$!
until_file "$work/lease.up"
wait "$l1"
expect "--semaphore with --lease: the permit's lease ends, the command is stopped, exit 76" "76 TERM" \
  "$? $(cat "$work/lease.term" 2>/dev/null)" "$(cat "$work/lease.err")"
relock -q --semaphore 1 -w $((5 * slack))s s-lease -- true
expect "and the permit is free again" 0 $?

# -- (c) N + 1 concurrent runs: never more than N at once -------------------------

# One relock holding a permit dies first: with its permit back, the
# runs after it use both; without, only one at a time would run.
relock_bg -q --watchdog $wd --semaphore 2 s-conc -- sh -c "$(holder_cmd "$work/conc-dead")"
victim=$!
until_file "$work/conc-dead.up"
kill -KILL "$victim"
wait "$victim" 2>/dev/null
count_init conc
pids=
for i in 1 2 3; do
  relock_bg -q --watchdog $wd --semaphore 2 -w $((30 * slack))s s-conc -- sh -c "$(count_cmd conc 0.5)"
  pids="$pids $!"
done
codes=
for p in $pids; do wait "$p"; codes="$codes$?"; done
expect "3 concurrent runs on 2 permits (one taken by a relock killed before): at most 2 commands at once, and 2" \
  "000 2 0" "$codes $(cat "$work/conc.max") $(cat "$work/conc.n")"

count_init conc6
pids=
for i in 1 2 3 4 5 6; do
  relock_bg -q --watchdog $wd --semaphore 2 -w $((30 * slack))s s-conc6 -- sh -c "$(count_cmd conc6 0.2)"
  pids="$pids $!"
done
codes=
for p in $pids; do wait "$p"; codes="$codes$?"; done
expect "6 concurrent runs on 2 permits: at most 2 commands at once" "000000 2 2 0" \
  "$codes $(cat "$work/conc6.max") $(redis GET s-conc6) $(redis EXISTS '{s-conc6}:timeout')"

# -- (d) across a restart of a persistent Redis ------------------------------------

persistent_dir="$work/aof"
mkdir "$persistent_dir"
pport=$(free_port)
start_persistent() {
  redis-server --bind 127.0.0.1 --port "$pport" --save '' --appendonly yes --appendfsync always \
    --dir "$persistent_dir" --logfile "$persistent_dir/redis.log" --daemonize no </dev/null >/dev/null 2>&1 &
  persistent_pid=$!
  for _ in $(seq 200); do
    redis-cli -p "$pport" ping >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  return 1
}
start_persistent || { echo "Bail out! cannot start a persistent redis-server on port $pport"; exit 1; }
purl="redis://127.0.0.1:$pport"
count_init restart
rm -f "$work/restart-go"
# Each is counted while it holds, until the restart is over (the go file)
# or 20 s, or SIGTERM; each notes its relock's pid.
c="$work/restart"
restart_cmd="echo \$PPID >>'$c.holders';
  flock '$c.lock' sh -c 'n=\$((\$(cat \"$c.n\") + 1)); echo \$n >\"$c.n\"; [ \$n -gt \$(cat \"$c.max\") ] && echo \$n >\"$c.max\"; :';
  down() { flock '$c.lock' sh -c 'echo \$((\$(cat \"$c.n\") - 1)) >\"$c.n\"'; };
  trap 'down; exit 0' TERM;
  i=0; while [ ! -e '$work/restart-go' ] && [ \$i -lt 400 ]; do sleep 0.05; i=\$((i + 1)); done; down"
pids=
for i in 1 2 3; do
  relock_bg -q -u "$purl" --watchdog 2s --semaphore 2 -w $((30 * slack))s s-restart -- sh -c "$restart_cmd" \
    2>>"$work/restart.err"
  pids="$pids $!"
done
# One of the two holding is killed while Redis is down: its permit,
# persisted, must come back after the restart.
for _ in $(seq $((200 * slack))); do [ "$(wc -l 2>/dev/null <"$c.holders")" = 2 ] && break; sleep 0.05; done
held=$(redis-cli -p "$pport" ZCARD '{s-restart}:timeout')
kill "$persistent_pid"
wait "$persistent_pid"
persistent_pid=
kill -KILL "$(head -n 1 "$c.holders")"
start_persistent || { echo "Bail out! cannot restart the persistent redis-server on port $pport"; exit 1; }
after=$(redis-cli -p "$pport" ZCARD '{s-restart}:timeout')
: >"$work/restart-go"
codes=
for p in $pids; do wait "$p" 2>/dev/null; codes="$codes $?"; done
expect "restart: 2 permits held before, persisted across it; 3 commands ran" "2 2 3" "$held $after $(wc -l <"$c.holders")"
# the killed one 137; the others end their command (0) or lost their
# permit in the restart and were stopped (76): never more than 2 at once
ok_codes=yes
for c in $codes; do case "$c" in 0 | 76 | 137) ;; *) ok_codes="no: $codes" ;; esac; done
expect "restart: never more than 2 commands at once; each run ends 0, 76 or killed" "2 0 yes" \
  "$(cat "$work/restart.max") $(cat "$work/restart.n") $ok_codes" "$(cat "$work/restart.err")"
# Permits come back: two runs at once, each waiting for the other
rm -f "$work/both1" "$work/both2"
relock_bg -q -u "$purl" --watchdog 2s --semaphore 2 -w $((10 * slack))s s-restart -- \
  sh -c ": >'$work/both1'; i=0; while [ ! -e '$work/both2' ] && [ \$i -lt 200 ]; do sleep 0.05; i=\$((i + 1)); done; [ -e '$work/both2' ]"
b1=$!
relock_bg -q -u "$purl" --watchdog 2s --semaphore 2 -w $((10 * slack))s s-restart -- \
  sh -c ": >'$work/both2'; i=0; while [ ! -e '$work/both1' ] && [ \$i -lt 200 ]; do sleep 0.05; i=\$((i + 1)); done; [ -e '$work/both1' ]"
b2=$!
wait "$b1"; r1=$?; wait "$b2"; r2=$?
expect "restart: both permits come back (two runs hold them at once afterwards)" "0 0" "$r1 $r2"
stop_persistent

# -- (e) --rsemaphore: Redisson's RSemaphore, as before --------------------------

rm -f "$work/rs"
relock_bg -q --rsemaphore 2 s-rs -- sh -c "$(holder_cmd "$work/rs")"
r1p=$!
relock_bg -q --semaphore 2 s-rs -- sh -c "$(holder_cmd "$work/rs")"
r2p=$!
until_file "$work/rs.up"
for _ in $(seq 100); do [ "$(redis GET s-rs)" = 0 ] && break; sleep 0.05; done
relock -q --rsemaphore 2 -w 0 s-rs -- true
b1=$?
relock -q --semaphore 2 -w 0 s-rs -- true
b2=$?
: >"$work/rs"
wait "$r1p"; c1=$?; wait "$r2p"; c2=$?
expect "--rsemaphore and --semaphore share NAME's count: both busy when each holds one of 2" \
  "75 75 0 0 2 0" "$b1 $b2 $c1 $c2 $(redis GET s-rs) $(redis EXISTS '{s-rs}:timeout')"
relock -q --rsemaphore 3 s-rs -- sh -c 'test -z "${RELOCK_PERMIT:-}"'
expect "--rsemaphore: runs (the count set already), no permit id" "0 2" "$? $(redis GET s-rs)"
relock -q --rsemaphore 2 --lease 1s s-rs -- true 2>"$work/err"
expect "--rsemaphore with --lease: a usage error" "64 yes" "$? $(grep -q 'no lease' "$work/err" && echo yes)"
relock -q --rsemaphore 2 --semaphore 2 s-rs -- true 2>"$work/err"
expect "--rsemaphore and --semaphore together: a usage error" "64 yes" "$? $(grep -q 'one layout' "$work/err" && echo yes)"
relock -q --rsemaphore 2 status s-rs 2>"$work/err"
expect "--rsemaphore is for running a command" 64 $?

# -- (f) status, list and --json show the permits ---------------------------------

rm -f "$work/st"
relock_bg -q --watchdog 5s --semaphore 3 s-st -- sh -c "$(holder_cmd "$work/st")"
st=$!
until_file "$work/st.up"
id=$(cat "$work/st.id")
holder=$(echo "$id" | cut -c1-16)
# a permit that never expires (Redisson's acquire() without a lease)
never=00112233445566778899aabbccddeeff
redis EVAL "local b = ARGV[1]:gsub('..', function(h) return string.char(tonumber(h, 16)) end)
            redis.call('decr', KEYS[1]) return redis.call('zadd', KEYS[2], 922337203685477, b)" \
  2 s-st '{s-st}:timeout' "$never" >/dev/null
relock status s-st >"$work/status"
code=$?
expect "status of a semaphore: its free count, each permit's id, holder and TTL" "0 yes yes yes" \
  "$code $(grep -qx "s-st: a semaphore, 1 permit free, 2 taken with an id:" "$work/status" && echo yes)$(
    grep -Eq "^s-st: permit $id held by $holder, expires in [0-9]+ ms$" "$work/status" && echo " yes")$(
    grep -qx "s-st: permit $never held by 0011223344556677, never expires" "$work/status" && echo " yes")" \
  "$(cat "$work/status")"
case "$id" in [0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]*) idok=yes ;; *) idok="no: $id" ;; esac
expect "the command has its permit's id in RELOCK_PERMIT (32 hex digits)" "yes 32" "$idok ${#id}"
ttl=$(sed -n "s/^s-st: permit $id held by $holder, expires in \([0-9]*\) ms$/\1/p" "$work/status")
expect "its TTL is within the watchdog's lease (5 s)" yes "$([ -n "$ttl" ] && [ "$ttl" -le 5000 ] && echo yes)" "$ttl"
relock status --json s-st >"$work/json"
expect "status --json of a semaphore" 0 $?
grep -Eq "^\\{\"name\":\"s-st\",\"semaphore\":true,\"held\":true,\"free\":1,\"permits\":\\[.*\\],\"waiters\":[0-9]+,\"age_ms\":null,\"format\":\"redisson\"\\}$" "$work/json" &&
  grep -Eq "\\{\"id\":\"$id\",\"holder\":\"$holder\",\"ttl_ms\":[0-9]+\\}" "$work/json" &&
  grep -q "{\"id\":\"$never\",\"holder\":\"0011223344556677\",\"ttl_ms\":null,\"never\":true}" "$work/json"
expect "and shows the count, both permits (the one that never expires with ttl_ms null), waiters and age_ms null" 0 $? "$(cat "$work/json")"
if command -v python3 >/dev/null; then
  python3 -c 'import json, sys; json.loads(sys.stdin.read())' <"$work/json"
  expect "status --json is JSON" 0 $?
fi
relock list --json 's-*' >"$work/list"
code=$?
expect "list shows the semaphore with permits taken (and no free lock or semaphore)" "0 1" \
  "$code $(grep -c '"name":"s-st","semaphore":true' "$work/list")" "$(cat "$work/list")"
: >"$work/st"
wait "$st"
redis DEL '{s-st}:timeout' >/dev/null # the permit that never expires, given back by hand
redis INCR s-st >/dev/null
relock status s-st >"$work/status"
expect "status of a semaphore with no permit taken: exit 1" "1 s-st: a semaphore, 3 permits free, 0 taken with an id" \
  "$? $(cat "$work/status")"
# A name with a hash tag keeps it: its permits are in "NAME:timeout"
rm -f "$work/tag"
relock_bg -q --watchdog 5s --semaphore 2 's-{tag}' -- sh -c "$(holder_cmd "$work/tag")"
tg=$!
until_file "$work/tag.up"
relock status 's-{tag}' >"$work/status"
code=$?
expect "status of a semaphore named with a hash tag: its permit from NAME:timeout" "0 1 1 yes" \
  "$code $(redis ZCARD 's-{tag}:timeout') $(redis GET 's-{tag}') $(
    grep -Eq "^s-\{tag\}: permit $(cat "$work/tag.id") held by [0-9a-f]{16}, expires in [0-9]+ ms$" "$work/status" &&
    echo yes)" "$(cat "$work/status")"
: >"$work/tag"
wait "$tg"

# release --force deletes a lock whoever holds it; a semaphore's count
# deleted would be set to N again by the next run while permits are taken
relock release --force s-st 2>"$work/err"
expect "release --force on a semaphore: refused (65), its count kept" "65 3 yes" \
  "$? $(redis GET s-st) $(grep -q 'not a lock' "$work/err" && echo yes)" "$(cat "$work/err")"
redis SET s-str hello >/dev/null
relock status s-str 2>"$work/err"
expect "status of a string that is no count: not a lock (65)" 65 $? "$(cat "$work/err")"


# -- least privilege: the ACL user of docs/ACL.md with its semaphore add-on ----

acl_doc="$here/../../docs/ACL.md"
# before Redis 6.2, the page's lines for it (no '&' rules: its section
# "Redis 6.0" has the base line and the semaphore add-on's, no other)
acl_base=$(acl_doc_for_server "$acl_doc" | grep '^ACL SETUSER relock reset ' | sed 's/>CHANGE-ME/>pw/')
if [ "$(redis_version)" -lt 60200 ]; then
  acl_sem=$(acl_doc_for_server "$acl_doc" | grep '^ACL SETUSER relock +')
else
  # the add-on line of the section "Add-on for semaphores", and no other
  acl_sem=$(sed -n '/^### Add-on for semaphores/,/^### /p' "$acl_doc" | grep '^ACL SETUSER relock +')
fi
acl_url="redis://relock:pw@127.0.0.1:$port"
set -f # the rules hold '*': words, not globs
redis $acl_base >"$work/out"
expect "the documented ACL user can be made" OK "$(cat "$work/out")"
set +f
relock -u "$acl_url" -q --semaphore 1 app:acl-sem -- true 2>"$work/err"
code=$?
grep -q NOPERM "$work/err"
expect "as the ACL user without the semaphore add-on: --semaphore refused (69, NOPERM)" "69 0" "$code $?" \
  "$(cat "$work/err")"
set -f
redis $acl_sem >"$work/out"
expect "the semaphore add-on is one line the server takes" "OK 1" "$(cat "$work/out") $(printf '%s\n' "$acl_sem" | wc -l)"
set +f
# held across renewals: three leases of the watchdog's
relock -u "$acl_url" -q --watchdog $wd --semaphore 1 app:acl-sem -- sleep 3
expect "with the add-on: --semaphore runs a command through the watchdog's renewals" "0 1" "$? $(redis GET app:acl-sem)"
rm -f "$work/acl"
relock_bg -u "$acl_url" -q --watchdog $wd --semaphore 1 app:acl-sem -- sh -c "$(holder_cmd "$work/acl")"
acl_holder=$!
until_file "$work/acl.up"
relock_bg -u "$acl_url" -q --wait 20s --semaphore 1 app:acl-sem -- true
acl_waiter=$!
for _ in $(seq $((200 * slack))); do
  [ "$(redis PUBSUB NUMSUB 'redisson_sc:{app:acl-sem}' | tail -1)" = 1 ] && break
  sleep 0.05
done
expect "with the add-on: a second --semaphore waits on the channel" 1 \
  "$(redis PUBSUB NUMSUB 'redisson_sc:{app:acl-sem}' | tail -1)"
: >"$work/acl"
wait "$acl_holder"
code=$?
wait "$acl_waiter"
expect "with the add-on: the holder releases, the waiter runs" "0 0 1" "$code $? $(redis GET app:acl-sem)"
relock -u "$acl_url" -q --rsemaphore 1 app:acl-rsem -- true
expect "with the add-on: --rsemaphore runs a command" "0 1" "$? $(redis GET app:acl-rsem)"

echo "1..$n"
