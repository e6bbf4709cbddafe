#!/bin/sh
# The partition test in make check (tests/partition/README.md): a short
# run of the rows whose settings docs/SAFETY.md calls safe, relock's
# workers only, a fixed seed then a random one (printed, so a failure
# replays). It fails if relock broke mutual exclusion there without a
# process pause, if a fenced resource lost an update, or if a worker did
# no work. Needs root and nftables (./bootstrap --deps): without them it
# fails, it never skips. PARTITION_SECONDS sets each row's nemesis length.
secs=${PARTITION_SECONDS:-25}
rows=${PARTITION_ROWS:-single,sentinel-sync,cluster-sync,redlock}
random_seed=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
n=0 failed=0
for seed in 1 "$random_seed"; do
  n=$((n + 1))
  out=$(python3 "${RELOCK_SRCDIR:-.}/tests/partition/partition.py" --rows "$rows" --seconds "$secs" \
    --seed "$seed" --check --no-java --relock-worker "${RELOCK_BUILDDIR:-.}/tests/partition/worker" 2>&1)
  rc=$?
  printf '%s\n' "$out" | sed 's/^/# /'
  if [ $rc -eq 0 ]; then
    echo "ok $n - partitions, seed $seed: no violation where relock claims safety ($rows, $secs s each)"
  else
    echo "not ok $n - partitions, seed $seed (replay: tests/partition/partition.py --rows $rows --seconds $secs --seed $seed --check --no-java)"
    failed=$((failed + 1))
  fi
done
echo "1..$n"
[ $failed -eq 0 ]
