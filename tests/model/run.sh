#!/bin/sh
# Model-checks the lock protocol (tests/model/lock.pml) with spin. Speaks TAP.
#
# Each check generates the verifier (spin -a) in a private temporary
# directory (never the source tree: make distcheck's is read-only), compiles
# it with cc (-DSAFETY: safety properties only; -DMEMLIM bounds its memory)
# and runs it. The new rule must verify exhaustively: no error, search
# complete. Each old rule (and each safeguard taken away) must produce a
# counterexample: a model that finds nothing there is broken, and fails.
#
# Needs spin (Debian package spin) and a C compiler: without them it bails
# out, it never skips. Environment: CC (default cc), MODEL_MEMLIM in MB
# (default 2048), MODEL_KEEP=1 keeps the temporary directory (trails).
set -u
here=$(cd "$(dirname "$0")" && pwd)
model=$here/lock.pml
cc=${CC:-cc}
memlim=${MODEL_MEMLIM:-2048}

command -v spin >/dev/null 2>&1 || { echo "Bail out! spin not found (Debian: apt-get install spin; ./bootstrap --deps)"; exit 1; }
command -v "${cc%% *}" >/dev/null 2>&1 || { echo "Bail out! C compiler '$cc' not found"; exit 1; }
[ -r "$model" ] || { echo "Bail out! $model not readable"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/relock-model.XXXXXX") || { echo "Bail out! mktemp failed"; exit 1; }
if [ "${MODEL_KEEP:-}" = 1 ]; then
  echo "# keeping $work"
else
  trap 'rm -rf "$work"' EXIT
fi

# The checks: expectation (safe | unsafe), name, cpp flags.
checks() {
  cat <<'EOF'
safe|new rule, 2 clients (reentrant, force release)|-DN=2
safe|new rule, 3 clients (one hold each, no force release)|-DN=3 -DHMAX=1 -DFMAX=0
safe|new rule, 3 clients (one hold each, force release, lease 2)|-DN=3 -DHMAX=1 -DLEASE=2
unsafe|old rule (latch + late reply accepted), 2 clients: violation found|-DN=2 -DOLD
unsafe|old rule, 3 clients: violation found|-DN=3 -DHMAX=1 -DFMAX=0 -DOLD
unsafe|old client alone (late reply accepted): violation found|-DN=2 -DOLD_CLIENT
unsafe|old latch with per-attempt send time: violation found|-DN=2 -DOLD_LATCH -DSTAMP_RETRY
safe|old latch with today's first-attempt send time and the new client check|-DN=2 -DOLD_LATCH
unsafe|reentry onto a hold past its deadline (renewal_acquired today): violation found|-DN=2 -DOLD_REENTRY
unsafe|release without its unlock latch: violation found|-DN=2 -DNO_UNLOCK_LATCH
unsafe|force release overlaps the old holder until its deadline (known limit)|-DN=2 -DSTRICT_FORCE
EOF
}

total=$(checks | wc -l)
jobs=${MODEL_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs" -gt 4 ] && jobs=4

# One check, in $work/$1: writes its TAP line (and diagnostics) to $work/$1/tap.
check() {
  n=$1 want=$2 name=$3 flags=$4
  dir=$work/$n
  tap=$dir/tap
  # shellcheck disable=SC2086 # flags are words
  if ! (cd "$dir" && spin $flags -a "$model" >spin.out 2>&1); then
    { echo "not ok $n - $name: spin -a failed"; sed 's/^/# /' "$dir/spin.out"; } >"$tap"
    return
  fi
  # shellcheck disable=SC2086 # CC may carry flags
  if ! (cd "$dir" && $cc -w -O2 -DSAFETY -DMEMLIM="$memlim" -o pan pan.c >cc.out 2>&1); then
    { echo "not ok $n - $name: cc failed"; sed 's/^/# /' "$dir/cc.out" | head -n 20; } >"$tap"
    return
  fi
  (cd "$dir" && ./pan -m4000000 >pan.out 2>&1)
  out=$dir/pan.out
  errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$out" | head -n 1)
  states=$(sed -n 's/^ *\([0-9][0-9.e+]*\) states, stored.*/\1/p' "$out" | head -n 1)
  depth=$(sed -n 's/.*depth reached \([0-9][0-9]*\).*/\1/p' "$out" | head -n 1)
  secs=$(sed -n 's/^pan: elapsed time \([0-9.e+-]*\) seconds.*/\1/p' "$out" | head -n 1)
  stats="$states states, depth $depth, ${secs:-?} s"
  if [ -z "$errors" ]; then
    { echo "not ok $n - $name: pan gave no result"; sed 's/^/# /' "$out" | head -n 30; } >"$tap"
  elif [ "$want" = safe ]; then
    if [ "$errors" -eq 0 ] && ! grep -q 'Search not completed' "$out"; then
      echo "ok $n - $name: no violation ($stats)" >"$tap"
    else
      { echo "not ok $n - $name: expected no violation ($errors errors; $stats)"
        grep -E 'assertion violated|Search not completed|max search depth|MEMLIM|out of memory' "$out" | sed 's/^/# /'; } >"$tap"
    fi
  elif [ "$errors" -ge 1 ] && grep -q 'assertion violated' "$out"; then
    echo "ok $n - $name ($stats, trail depth $(sed -n 's/.*(at depth \([0-9]*\)).*/\1/p' "$out" | head -n 1))" >"$tap"
  else
    echo "not ok $n - $name: no counterexample found ($stats): the model no longer catches it" >"$tap"
  fi
}

echo "1..$total"
echo "# $(spin -V 2>&1 | head -n 1); $jobs checks at a time"
n=0
running=0
checks >"$work/checks"
while IFS='|' read -r want name flags; do
  n=$((n + 1))
  mkdir "$work/$n"
  check "$n" "$want" "$name" "$flags" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait
    running=0
  fi
done <"$work/checks"
wait

status=0
n=0
while [ "$n" -lt "$total" ]; do
  n=$((n + 1))
  if [ -s "$work/$n/tap" ]; then
    cat "$work/$n/tap"
    grep -q '^not ok' "$work/$n/tap" && status=1
  else
    echo "not ok $n - check $n left no result"
    status=1
  fi
done
exit $status
