#!/bin/sh
# The truth checker's own test: can it fail? Each mutant is one small,
# plausible bug put into the library (a perl substitution on a distinctive
# fragment of one file) in a scratch copy of the built tree - never this
# tree - built, and run through the runs of tests/truth/run.sh (its seeds:
# 1, 2, 3, a random one, 4 with a Redisson worker). Per mutant it prints how
# many runs caught it and how many seconds into each run. Not part of make
# check (it takes a while); `make mutants` runs it with MUTANTS_ARGS.
#
#   tests/truth/mutants.sh [-n RUNS] [-r LIST] [-c REV] [-m NAME,NAME...] [-s SEED] [-k] [-l]
#     -n RUNS  the first RUNS of run.sh's runs (default 5: the single-node
#              ones; 6 and 7 are run.sh's Sentinel and Cluster runs)
#     -r LIST  these of run.sh's runs only, e.g. -r 6,7 (the topologies)
#     -c REV   run the checker (tests/truth/*) of git revision REV instead of
#              the working tree's (e.g. -c 6a2b6a4: a table of the old one)
#     -m LIST  only these mutants ("none", the tree as it is, is the control)
#     -s SEED  run.sh's random run's seed (default: a random one, printed)
#     -k       keep the scratch tree and the logs (printed)
#     -l       list the mutants and exit
#     -t       only check that every mutant still applies (no build, no run)
#   TRUTH_SECONDS: each run's length (15, as run.sh's)
#
# A mutant whose fragment is not found exactly once fails loudly (the source
# moves: rewrite the mutant) and counts as "STALE", never as caught.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
runs=5 rev= only= seed= keep=0 list=0 try=0 pick=
while getopts n:r:c:m:s:klt opt; do
  case $opt in
  n) runs=$OPTARG ;;
  r) pick=$(printf '%s' "$OPTARG" | tr ',' ' ') ;;
  c) rev=$OPTARG ;;
  m) only=$OPTARG ;;
  s) seed=$OPTARG ;;
  k) keep=1 ;;
  l) list=1 ;;
  t) try=1 ;;
  *) sed -n '2,25p' "$0" >&2; exit 2 ;;
  esac
done
secs=${TRUTH_SECONDS:-15}
[ -n "$seed" ] || seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')

# name | file | perl code run on the file's whole text (must return how many
# places it changed: exactly 1) | the bug
mutants() {
  m none '' '' 'no mutant: the tree as it is (the control: must pass)'
  m untold-loss src/watchdog/hold.c \
    's/(  mark_lost\(l, hold\);\n)  notify_lost\(l, hold, reason\);\n/$1  (void)reason;\n/g' \
    'a loss marked but never told (declare_lost: no lost callback)'
  m untold-timeout src/watchdog/hold.c \
    's/\n    notify_lost\(l, hold, RELOCK_ETIMEDOUT\);\n/\n/g' \
    'a watchdog hold past its deadline marked lost, never told'
  m renew-ignores-gone src/watchdog/renewal.c \
    's/return b->check \? v == -2 : v != 1;/return b->check ? v == -2 : 0;/g' \
    'a renewal that ignores "gone" (answered_gone)'
  m retry-ignores-latch lua/lock_acquire.lua \
    "s/if redis.call\('exists', KEYS\[2\]\) == 1 then -- a repeat/if false then -- a repeat/g" \
    'a retried acquisition that ignores its latch (counted twice)'
  m late-acquired src/objects/lock_acquire.c \
    's/if \(took_ms >= valid_ms\) \{/if (0 && took_ms >= valid_ms) {/g' \
    'a late answer (past lease less margin) reported "acquired"'
  m permit-renew-vanished lua/lock_renew.lua \
    's/(if not expiry or expiry <= now then\n    return )0/${1}1/g' \
    'a permit renewal that answers "renewed" for a vanished permit'
  m release-no-publish lua/lock_release.lua \
    "s/  if ARGV\[5\] ~= '' then\n/  if false then\n/g" \
    'a release that publishes nothing (waiters not woken)'
  m reentry-after-loss src/watchdog/hold.c \
    's/(static int earlier_holds_gone\([^{]*\{\n  if \()hold == NULL \|\| !relock__hold_held\(hold\) \|\| count <= 0 \|\| count > hold->count\)/${1}1 || count < 0)/g' \
    'the wave-3 fix reverted: a re-entry after the key vanished counts on the lost holds'
  m turns-reverted src/objects/lock_turn.c \
    's/  if \(!t->busy\) \{\n    t->busy = 1;/  if (1) {\n    t->busy = 1;/g' \
    'the wave-3 fix reverted: an owner'"'"'s requests on a lock no longer go one at a time'
  m release-no-owner-check lua/lock_release.lua \
    "s/if redis.call\('hexists', KEYS\[1\], ARGV\[3\]\) == 0 then\n  return nil\nend\n//g" \
    'a release without the owner check'
  m undo-ignores-latch lua/lock_acquire_undo.lua \
    "s/if redis.call\('del', KEYS\[3\]\) == 0 or /if redis.call('del', KEYS[3]) < 0 or /g" \
    'an undo that ignores its latch (gives back a hold it did not take)'
  m acquire-validity-from-answer src/watchdog/hold.c \
    's/uint64_t deadline = relock__deadline_after\(sent_ns, lease_ms/uint64_t deadline = relock__deadline_after(sent_ns ? relock__now_ns() : 0, lease_ms/g' \
    'an acquisition'"'"'s validity counted from the answer, not the send'
  m renewal-validity-from-answer src/watchdog/hold.c \
    's/relock__deadline_after\(sent_ns, l->watchdog_ms - /relock__deadline_after(relock__now_ns(), l->watchdog_ms - /g' \
    'a renewal'"'"'s validity counted from the answer, not the send'
  m token-not-incremented lua/fenced_lock_acquire.lua \
    "s/local token = redis.call\('incr', KEYS\[3\]\)/local token = tonumber(redis.call('get', KEYS[3]) or '1')/g" \
    'a fenced lock whose token is not incremented (not monotonic across owners)'
  m semaphore-ignores-count lua/semaphore_acquire.lua \
    "s/if tonumber\(redis.call\('get', KEYS\[1\]\) or '0'\) < want then/if false then/g" \
    'a semaphore acquisition that ignores the count'
  m release-decrements-nothing lua/lock_release.lua \
    "s/if redis.call\('hincrby', KEYS\[1\], ARGV\[3\], -1\) > 0 then/if redis.call('hincrby', KEYS[1], ARGV[3], 0) > 1 then/g" \
    'a partial release that leaves the count (answers "remains": the field is never freed)'
  m renew-short-lease src/watchdog/renewal.c \
    's/relock__decimal\(lease, r->ledger->watchdog_ms\)/relock__decimal(lease, r->ledger->watchdog_ms \/ 2)/g' \
    'renewals that ask Redis for half the lease the holder believes'
  m no-let-go src/watchdog/hold.c \
    's/      let_go\(l, hold\);\n/      (void)let_go;\n/g' \
    'the old rule: a hold whose last release was asked stays renewed while its release is unanswered'
  m surplus-kept src/objects/lock.c \
    's/  if \(surplus > 0\) \/\* given back/  if (0) \/* given back/g' \
    'a surplus an acquisition'"'"'s answer shows is kept (not given back)'
}

if [ "$list" = 1 ]; then
  m() { printf '%-30s %-28s %s\n' "$1" "${2:--}" "$4"; }
  mutants
  exit 0
fi

if [ "$try" = 1 ]; then
  t=$(mktemp -d "${TMPDIR:-/tmp}/relock-mutants.XXXXXX")
  stale=0
  m() {
    [ -n "$2" ] || return 0
    mkdir -p "$t/$(dirname "$2")"
    cp "$top/$2" "$t/$2" 2>/dev/null || { echo "STALE $1: $2 is gone"; stale=$((stale + 1)); return; }
    if apply_in "$t" "$2" "$3"; then echo "ok    $1 ($2)"; else echo "STALE $1 ($2)"; stale=$((stale + 1)); fi
    cp "$top/$2" "$t/$2"
  }
fi

apply_in() { # dir file code -> 0 when exactly one place changed
  perl -e '
    my ($file, $code) = @ARGV;
    open my $in, "<", $file or die "mutant: cannot read $file: $!\n";
    local $/; $_ = <$in>; close $in;
    my $n = eval $code;
    die "mutant: bad substitution: $@" if $@;
    $n = 0 if $n eq "";
    if ($n != 1) { print STDERR "mutant: the edit changes $n places of $file, not one\n"; exit 1 }
    open my $out, ">", $file or die; print $out $_; close $out;' "$1/$2" "$3"
}

if [ "$try" = 1 ]; then
  mutants
  rm -rf "$t"
  [ "$stale" -eq 0 ] || { echo "mutants: $stale mutants no longer apply" >&2; exit 1; }
  exit 0
fi

# The runs of run.sh (kept in step with it: its seeds, the random one fixed here).
run_spec() {
  case $1 in
  1) echo "1" ;; 2) echo "2" ;; 3) echo "3" ;; 4) echo "$seed" ;; 5) echo "4 --java 1" ;;
  6) echo "5 --topology sentinel" ;; 7) echo "6 --topology cluster" ;;
  *) echo "$((1000 + $1))" ;;
  esac
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/relock-mutants.XXXXXX")
tree=$tmp/tree
logs=$tmp/logs
mkdir -p "$logs"
cleanup() { [ "$keep" = 1 ] || rm -rf "$tmp"; }
trap cleanup EXIT INT TERM
[ -f "$top/Makefile" ] || { echo "mutants: $top is not configured (./bootstrap && ./configure && make)" >&2; exit 2; }
echo "# scratch copy of $top in $tree" >&2
cp -a "$top" "$tree" || exit 2
if [ -n "$rev" ]; then
  for f in $(git -C "$top" ls-tree --name-only "$rev" tests/truth/); do
    case $f in *.c|*.h) git -C "$top" show "$rev:$f" >"$tree/$f" || exit 2 ;; esac
  done
  checker="tests/truth of $(git -C "$top" rev-parse --short "$rev")"
else
  checker="tests/truth of the working tree"
fi
build() { (cd "$tree" && make -j2 tests/truth/truth >"$logs/build${1:+.$1}.log" 2>&1); }
build || { echo "mutants: the scratch tree does not build (see $logs/build.log)" >&2; keep=1; exit 2; }

apply() { apply_in "$tree" "$1" "$2"; }

[ -n "$pick" ] || pick=$(seq 1 "$runs")
runs=$(echo $pick | wc -w)
echo "# checker: $checker; runs $(echo $pick) of run.sh's (1 2 3 $seed '4 --java 1' '5 --topology sentinel' '6 --topology cluster'; $secs s, 8 s those with options); $(date -u +%H:%M) UTC"
printf '%-30s %-7s %s\n' "mutant" "caught" "per run: seconds into the run when caught (- : not caught)"
total=0 allcaught=0
m() {
  name=$1 file=$2 code=$3
  if [ -n "$only" ] && ! printf ',%s,' "$only" | grep -q ",$name,"; then return; fi
  if [ -n "$file" ]; then
    cp "$tree/$file" "$tmp/orig" || { printf '%-30s STALE   %s is gone\n' "$name" "$file"; return; }
    if ! apply "$file" "$code" 2>"$logs/$name.apply"; then
      printf '%-30s STALE   %s (%s)\n' "$name" "$(cat "$logs/$name.apply")" "$file"
      echo "mutants: MUTANT $name NO LONGER APPLIES to $file: rewrite it" >&2
      return
    fi
    if ! build "$name"; then
      printf '%-30s NOBUILD (see %s)\n' "$name" "$logs/build.$name.log"
      cp "$tmp/orig" "$tree/$file"
      return
    fi
  fi
  caught=0 times=
  for i in $pick; do
    set -- $(run_spec $i)
    s=$1
    shift
    len=$secs
    [ $# -gt 0 ] && len=8
    log=$logs/$name.$i.log
    (cd "$tree" && RELOCK_SRCDIR=$tree RELOCK_BUILDDIR=$tree ./tests/truth/truth --seconds "$len" --seed "$s" "$@" 2>&1;
     echo "exit $?") | perl -MTime::HiRes=time -ne 'BEGIN { $t0 = time } printf "%7.2f %s", time - $t0, $_' >"$log"
    rc=$(sed -n 's/^ *[0-9.]* exit //p' "$log")
    if grep -q 'Bail out' "$log"; then
      times="$times n/a"
    elif [ "$rc" != 0 ]; then
      caught=$((caught + 1))
      at=$(grep -m1 -E '# VIOLATION|^ *[0-9.]+ not ok' "$log" | awk '{print $1}')
      kind=$(grep -m1 -o -E 'VIOLATION at [0-9]+ ms[^:]*: .{0,90}|not ok [0-9]+ - .{0,40}' "$log" | sed 's/VIOLATION at [0-9]* ms[^:]*: //')
      times="$times ${at:-end}"
      echo "$name run $i: $kind" >>"$logs/kinds"
    else
      times="$times -"
    fi
  done
  printf '%-30s %d/%-5d%s\n' "$name" "$caught" "$runs" "$times"
  if [ -n "$file" ]; then
    cp "$tmp/orig" "$tree/$file" && touch "$tree/$file"
    total=$((total + 1))
    [ "$caught" -eq "$runs" ] && allcaught=$((allcaught + 1))
  fi
}
mutants
echo "# $allcaught of $total mutants caught by every run; $(date -u +%H:%M) UTC"
if [ -f "$logs/kinds" ]; then
  echo "# what caught them (first violation or failed check of each caught run):"
  sed 's/^/#   /' "$logs/kinds"
fi
[ "$keep" = 1 ] && echo "# logs kept in $logs, the scratch tree in $tree"
exit 0
