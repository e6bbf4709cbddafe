#!/bin/sh
# Model-checks the lock protocol (tests/model/lock.pml) and the one-process
# wake-up (tests/model/handoff.pml) with spin. Speaks TAP.
#
# Each check generates the verifier (spin -a) in a private temporary
# directory (never the source tree: make distcheck's is read-only), compiles
# it with cc (-DSAFETY: safety properties only, both models state theirs as
# assertions; -DMEMLIM bounds its memory) and runs it. The new rules must verify exhaustively: no error, search
# complete. Each old rule (and each safeguard taken away) must produce a
# counterexample (an assertion violated: for these, a violation found is the
# pass): a model that finds nothing there is broken, and fails.
#
# Needs spin (Debian package spin) and a C compiler: without them it bails
# out, it never skips. Environment: CC (default cc), MODEL_MEMLIM in MB
# (default 2048), MODEL_KEEP=1 keeps the temporary directory (trails).
set -u
here=$(cd "$(dirname "$0")" && pwd)
cc=${CC:-cc}
memlim=${MODEL_MEMLIM:-2048}

command -v spin >/dev/null 2>&1 || { echo "Bail out! spin not found (Debian: apt-get install spin; ./bootstrap --deps)"; exit 1; }
command -v "${cc%% *}" >/dev/null 2>&1 || { echo "Bail out! C compiler '$cc' not found"; exit 1; }
for m in lock handoff; do
  [ -r "$here/$m.pml" ] || { echo "Bail out! $here/$m.pml not readable"; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/relock-model.XXXXXX") || { echo "Bail out! mktemp failed"; exit 1; }
if [ "${MODEL_KEEP:-}" = 1 ]; then
  echo "# keeping $work"
else
  trap 'rm -rf "$work"' EXIT
fi

# The checks: expectation (safe | unsafe), model, name, cpp flags. [A]..[F]:
# the defect class of README.md a check stands for.
checks() {
  cat <<'EOF'
safe|lock|new rules, 2 owners, watchdog leases: reentrant, lost replies and undo, key vanishing|-DN=2 -DONLY_WD -DLW=2
safe|lock|[A] new rules, 2 owners, fixed and watchdog leases mixed by re-entry|-DN=2 -DLW=2 -DLF=4 -DFMAX=0 -DRETRIES=0
safe|lock|[B] new rules, 2 owners, key vanishing under fixed and watchdog holds, fixed leases checked|-DN=2 -DHMAX=1 -DLW=2 -DLF=4 -DRETRIES=0
safe|lock|[A] new rules, 2 readers of a shared read hold, fixed and watchdog leases|-DN=2 -DREAD -DLW=2 -DLF=4 -DHMAX=1 -DRETRIES=0
safe|lock|new rules, a reader and a writer of a read-write lock, fixed and watchdog leases, key vanishing|-DN=2 -DRW -DLW=2 -DLF=4 -DHMAX=1 -DRETRIES=0
safe|lock|[C][D] new rules, two request slots of one owner: acquisitions, undos, releases, renewals overlap|-DN=2 -DSAME_OWNER -DONLY_WD -DLW=2 -DFMAX=0
safe|lock|[D] new rules, two request slots of one owner, both lease kinds, key vanishing|-DN=2 -DSAME_OWNER -DLW=2 -DLF=4
safe|lock|new rules, 3 owners, one hold each|-DN=3 -DHMAX=1 -DFMAX=0 -DONLY_WD -DLW=2 -DRETRIES=0
safe|lock|old latch with today's first-attempt send time and the new client check|-DN=2 -DONLY_WD -DLW=2 -DOLD_LATCH
unsafe|lock|[A] renewal writes the watchdog lease over a longer fixed one (OLD_RENEW)|-DN=2 -DLW=2 -DLF=4 -DFMAX=0 -DRETRIES=0 -DOLD_RENEW
unsafe|lock|[A] a reader's renewal cuts another reader's fixed lease (OLD_RENEW, read)|-DN=2 -DREAD -DLW=2 -DLF=4 -DHMAX=1 -DRETRIES=0 -DOLD_RENEW
unsafe|lock|[A] a release that leaves holds writes the watchdog lease (OLD_RELEASE_TTL)|-DN=2 -DLW=2 -DLF=4 -DFMAX=0 -DRETRIES=0 -DOLD_RELEASE_TTL
unsafe|lock|[B] a fixed-lease hold never checked (OLD_FIXED_UNCHECKED)|-DN=2 -DHMAX=1 -DLW=2 -DLF=4 -DRETRIES=0 -DOLD_FIXED_UNCHECKED
unsafe|lock|[C] latch expires before the retry or the undo (OLD_LATCH_TTL)|-DN=2 -DONLY_WD -DLW=2 -DOLD_LATCH_TTL
unsafe|lock|[C] undo given up after its retries (OLD_UNDO_GIVES_UP)|-DN=2 -DONLY_WD -DLW=2 -DOLD_UNDO_GIVES_UP
unsafe|lock|[D] two count-changing requests of one owner in flight (OLD_CONCURRENT_ACQ)|-DN=2 -DSAME_OWNER -DONLY_WD -DLW=2 -DFMAX=0 -DOLD_CONCURRENT_ACQ
unsafe|lock|[D] re-entry onto a key that vanished counted on (OLD_REENTRY_VANISHED)|-DN=2 -DONLY_WD -DLW=2 -DOLD_REENTRY_VANISHED -DNO_P5
unsafe|lock|old rule (latch + late reply accepted), 2 owners|-DN=2 -DONLY_WD -DLW=2 -DOLD -DNO_P5
unsafe|lock|old rule, 3 owners|-DN=3 -DHMAX=1 -DFMAX=0 -DONLY_WD -DLW=2 -DRETRIES=0 -DOLD
unsafe|lock|old client alone (late reply accepted)|-DN=2 -DONLY_WD -DLW=2 -DOLD_CLIENT -DNO_P5
unsafe|lock|old latch with per-attempt send time|-DN=2 -DONLY_WD -DLW=2 -DOLD_LATCH -DSTAMP_RETRY
unsafe|lock|re-entry onto a hold past its deadline, without the count rule either (OLD_REENTRY)|-DN=2 -DONLY_WD -DLW=2 -DOLD_REENTRY -DOLD_REENTRY_VANISHED -DNO_P5
unsafe|lock|release without its unlock latch (NO_UNLOCK_LATCH)|-DN=2 -DONLY_WD -DLW=2 -DNO_UNLOCK_LATCH
unsafe|lock|no exemption for a holder whose key vanished (STRICT_FORCE: the limit)|-DN=2 -DONLY_WD -DLW=2 -DSTRICT_FORCE
unsafe|lock|[F] a release with no answer leaves its hold listed and renewed (OLD_RENEW_AFTER_FAILED_RELEASE)|-DN=2 -DONLY_WD -DLW=2 -DOLD_RENEW_AFTER_FAILED_RELEASE
unsafe|lock|[F] a new hold counts one and gives nothing back of Redis's surplus (OLD_ACQ_COUNTS_ONE)|-DN=2 -DONLY_WD -DLW=2 -DOLD_ACQ_COUNTS_ONE
unsafe|lock|[F] a new hold takes Redis's count, the caller's one unlock leaving a hold renewed (ADOPT_REDIS_COUNT)|-DN=2 -DONLY_WD -DLW=2 -DADOPT_REDIS_COUNT
unsafe|lock|[F] the last release answered 'holds remain' is not sent again (NO_LAST_GIVE_BACK)|-DN=2 -DONLY_WD -DLW=2 -DNO_LAST_GIVE_BACK
unsafe|lock|[F] a surplus whose give-back got no answer must be gone once the turn is free too (STRICT_SURPLUS: the limit)|-DN=2 -DONLY_WD -DLW=2 -DSTRICT_SURPLUS
unsafe|lock|[F] a release retried in the background without the owner's turn (RETRY_WITHOUT_TURN)|-DN=2 -DSAME_OWNER -DONLY_WD -DLW=2 -DFMAX=0 -DRETRY_WITHOUT_TURN
unsafe|lock|[F] a surplus given back after the owner's turn is left (GIVE_BACK_WITHOUT_TURN)|-DN=2 -DSAME_OWNER -DONLY_WD -DLW=2 -DFMAX=0 -DGIVE_BACK_WITHOUT_TURN
safe|handoff|[E] new rule: a named process with no waiter passes the wake-up on|
safe|handoff|[E] other new rule: every process arms its fallback on a handed unlock|-DFALLBACK_ALWAYS
unsafe|handoff|[E] a named process without a waiter drops the wake-up (OLD_HANDOFF)|-DOLD_HANDOFF
EOF
}

total=$(checks | wc -l)
jobs=${MODEL_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs" -gt 4 ] && jobs=4

# One check, in $work/$1: writes its TAP line (and diagnostics) to $work/$1/tap.
check() {
  n=$1 want=$2 model=$here/$3.pml name=$4 flags=$5
  dir=$work/$n
  tap=$dir/tap
  # shellcheck disable=SC2086 # flags are words
  if ! (cd "$dir" && spin $flags -a "$model" >spin.out 2>&1); then
    { echo "not ok $n - $name: spin -a failed"; sed 's/^/# /' "$dir/spin.out"; } >"$tap"
    return
  fi
  # shellcheck disable=SC2086 # CC may carry flags
  # A proof explores every state: worth -O2. A counterexample search stops
  # early: -O0 compiles in a fraction of the time.
  opt=-O0
  [ "$want" = safe ] && opt=-O2
  if ! (cd "$dir" && $cc -w $opt -DSAFETY -DMEMLIM="$memlim" -o pan pan.c >cc.out 2>&1); then
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
while IFS='|' read -r want model name flags; do
  n=$((n + 1))
  mkdir "$work/$n"
  check "$n" "$want" "$model" "$name" "$flags" &
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
