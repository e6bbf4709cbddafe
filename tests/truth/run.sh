#!/bin/sh
# The truth checker in make check: a fixed set of seeds, then one random
# seed (printed, so that a failure replays), about 60 s in all
# (TRUTH_SECONDS: each run's length), then a short run with a real Redisson
# client among the workers, and a short run on each replicated topology:
# Sentinel (SENTINEL FAILOVER and a kill -9 of the master under the
# workers) and Cluster (CLUSTER FAILOVER and a live migration of the truth
# slot), each about 13 s of wall time with its start. A topology that
# cannot start is a failed run (not ok), never a skip. Under valgrind it is skipped, as the chaos soak
# is: its bounds assume full speed, and its workers run code the rest of
# the suite already checks there.
if [ -n "${RELOCK_UNDER_VALGRIND:-}" ]; then
  echo "1..0 # SKIP the truth checker does not run under valgrind"
  exit 0
fi
secs=${TRUTH_SECONDS:-15}
n=0 failed=0
random_seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
for run in "1" "2" "3" "$random_seed" "4 --java 1" "5 --topology sentinel" "6 --topology cluster"; do
  set -- $run
  seed=$1
  shift
  n=$((n + 1))
  len=$secs
  [ $# -gt 0 ] && len=8
  echo "# seed $seed $*"
  out=$(./tests/truth/truth --seconds "$len" --seed "$seed" "$@" 2>&1)
  rc=$?
  printf '%s\n' "$out" | sed 's/^/# /'
  case "$*" in
  *--java*) what="truth checker, seed $seed, $len s, a Redisson worker" ;;
  *--topology*) what="truth checker, seed $seed, $len s, $2 topology" ;;
  *) what="truth checker, seed $seed, $len s" ;;
  esac
  if [ $rc -eq 0 ]; then
    echo "ok $n - $what"
  else
    echo "not ok $n - $what (replay: tests/truth/truth --seconds $len --seed $seed $*)"
    failed=$((failed + 1))
  fi
done
echo "1..$n"
[ $failed -eq 0 ]
