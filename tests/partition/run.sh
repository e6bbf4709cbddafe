#!/bin/sh
# The partition test in make check (tests/partition/README.md), relock's
# workers only:
#  1. the rows whose settings docs/SAFETY.md calls safe, a random seed
#     (printed, so that a failure replays): fails if relock broke mutual
#     exclusion there and the stale holder's lost callback did not fire
#     within the bound, if a hold another worker acquired the lock during
#     was never told lost (even one its validity check abandoned), if a
#     fenced resource lost an update, or if a worker did no work;
#  2. the canary: asynchronous Sentinel under long isolated-master
#     partitions (seed 12 draws two of 8 s), where two holders must be
#     seen - a harness that cannot see a violation proves nothing.
# Needs root, nftables and python3 (./bootstrap --deps): without them it
# fails, it never skips. PARTITION_SECONDS: each row's nemesis length.
secs=${PARTITION_SECONDS:-20}
rows=${PARTITION_ROWS:-single,sentinel-sync,cluster-sync,redlock}
seed=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
worker="${RELOCK_BUILDDIR:-.}/tests/partition/worker"
cli="${RELOCK_BUILDDIR:-.}/tools/relock"
n=0 failed=0

check() { # what, replay args, args...
  what=$1 replay=$2
  shift 2
  n=$((n + 1))
  out=$(python3 "${RELOCK_SRCDIR:-.}/tests/partition/partition.py" --no-java --relock-worker "$worker" --relock-cli "$cli" "$@" 2>&1)
  rc=$?
  printf '%s\n' "$out" | sed 's/^/# /'
  if [ $rc -eq 0 ]; then
    echo "ok $n - $what"
  else
    echo "not ok $n - $what (replay: tests/partition/partition.py --no-java $replay)"
    failed=$((failed + 1))
  fi
}

check "partitions, seed $seed: no violation where relock claims safety ($rows, $secs s each)" \
  "--rows $rows --seconds $secs --seed $seed --check" --rows "$rows" --seconds "$secs" --seed "$seed" --check
check "the canary: asynchronous Sentinel split by an isolated master shows two holders" \
  "--rows sentinel-async --faults isolate-master --seconds 20 --seed 12 --expect-violations" \
  --rows sentinel-async --faults isolate-master --seconds 20 --seed 12 --expect-violations
echo "1..$n"
[ $failed -eq 0 ]
