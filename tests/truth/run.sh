#!/bin/sh
# The truth checker in make check: a fixed set of seeds, then one random
# seed (printed, so that a failure replays), about 60 s in all
# (TRUTH_SECONDS: each run's length). Under valgrind it is skipped, as the
# chaos soak is: its bounds assume full speed, and its workers run code
# the rest of the suite already checks there.
if [ -n "${RELOCK_UNDER_VALGRIND:-}" ]; then
  echo "1..0 # SKIP the truth checker does not run under valgrind"
  exit 0
fi
secs=${TRUTH_SECONDS:-15}
n=0 failed=0
for seed in 1 2 3 random; do
  if [ "$seed" = random ]; then
    seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
  fi
  n=$((n + 1))
  echo "# seed $seed"
  out=$(./tests/truth/truth --seconds "$secs" --seed "$seed" 2>&1)
  rc=$?
  printf '%s\n' "$out" | sed 's/^/# /'
  if [ $rc -eq 0 ]; then
    echo "ok $n - truth checker, seed $seed, $secs s"
  else
    echo "not ok $n - truth checker, seed $seed, $secs s (replay: tests/truth/truth --seconds $secs --seed $seed)"
    failed=$((failed + 1))
  fi
done
echo "1..$n"
[ $failed -eq 0 ]
