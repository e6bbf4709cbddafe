#!/bin/sh
# The demo (make demo): a throwaway redis-server (temp dir, free loopback
# port, no persistence), relock processes taking turns on one lock, relock
# status, a lost lock stopping its command, and the C examples. It stops
# exactly the server it started. Run from the build directory.
set -eu
. "$(dirname "$0")/../tests/support/redis.sh"
relock=./tools/relock
start_redis
export RELOCK_URL="redis://127.0.0.1:$port"
echo "== a private redis-server, pid $redis_pid, on 127.0.0.1:$port"

echo
echo "== four relock processes contend for the lock 'demo:deploy'; they take turns:"
workers=
for w in 1 2 3 4; do
  "$relock" demo:deploy -- sh -c "echo \"   worker $w: has the lock   (holder \$RELOCK_OWNER)\"; sleep 0.3; echo \"   worker $w: done, releasing\"" &
  workers="$workers $!"
done
for w in $workers; do wait "$w"; done

echo
echo "== relock status, while a job holds the lock:"
"$relock" demo:report -- sleep 1 &
job=$!
until [ "$(redis-cli -p "$port" EXISTS demo:report)" = 1 ]; do sleep 0.05; done
echo "   \$ relock status demo:report"
"$relock" status demo:report | sed 's/^/   /'
echo "   \$ relock --wait 0 demo:report -- true    (busy: exits 75 at once)"
set +e
"$relock" --wait 0 demo:report -- true 2>&1 | sed 's/^/   /'
set -e
wait "$job"

echo
echo "== a lost lock: the key is deleted behind the holder's back; the command is stopped:"
"$relock" --watchdog 900ms --kill-grace 1s demo:lost -- \
  sh -c 'trap "echo \"   command: got SIGTERM, cleaning up\"; exit 0" TERM; echo "   command: working..."; sleep 60 & wait $!' &
job=$!
until [ "$(redis-cli -p "$port" EXISTS demo:lost)" = 1 ]; do sleep 0.05; done
sleep 0.3
echo "   \$ redis-cli DEL demo:lost"
redis-cli -p "$port" DEL demo:lost >/dev/null
set +e
wait "$job" 2>/dev/null
echo "   relock exited with $? (76: lock lost while running)"
set -e

echo
echo "== examples/lock_sync: the blocking C API"
./examples/lock_sync "redis://127.0.0.1:$port" | sed 's/^/   /'
echo
echo "== examples/fenced_storage: a fenced lock's token stops a holder that stalled past its lease"
./examples/fenced_storage "redis://127.0.0.1:$port" | sed 's/^/   /'
echo
echo "== examples/command: Redis commands through futures"
./examples/command "redis://127.0.0.1:$port" | sed 's/^/   /'
echo
echo "== done: stopping redis-server $redis_pid"
