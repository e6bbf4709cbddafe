#!/bin/sh
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a
# while on a copy of its seed corpus; a crash, leak, timeout or failed
# invariant is a finding.
#   tests/fuzz/run.sh [SECONDS] [TARGET...]    SECONDS per target (default 60);
#                                              TARGETs: url reply cli (default all)
# Prints one line per target and "N passed, N failed". Exit status: 0 no
# finding, 1 a finding or a build failure (the work directory with the crash
# file, the log and the binary to reproduce it is kept and named), 77
# skipped: no clang or no libFuzzer (Debian: clang libclang-rt-14-dev llvm).
# Environment: CLANG (default clang), FUZZ_WORKDIR (work there and keep it,
# e.g. to harvest the grown corpus), FUZZ_FLAGS (more libFuzzer flags).
# Nothing is written into the source tree.
set -u

srcdir=$(cd "$(dirname "$0")/../.." && pwd)
fuzzdir=$srcdir/tests/fuzz
seconds=${1:-60}
[ $# -gt 0 ] && shift
case $seconds in
  '' | *[!0-9]* | 0) echo "usage: $0 [SECONDS] [url|reply|cli...]  (SECONDS > 0)" >&2; exit 2 ;;
esac
targets=${*:-url reply cli}
for t in $targets; do
  case $t in
    url | reply | cli) ;;
    *) echo "$0: unknown target $t: the targets are url, reply and cli" >&2; exit 2 ;;
  esac
done

skip() {
  echo "SKIP fuzzing: $*"
  exit 77
}

# -- the compiler and libFuzzer ----------------------------------------------------
cc=${CLANG:-clang}
command -v "$cc" >/dev/null 2>&1 ||
  skip "$cc not found (Debian: apt-get install clang libclang-rt-14-dev llvm)"
"$cc" --version 2>/dev/null | grep -q clang ||
  skip "$cc is not clang: libFuzzer comes with clang (Debian: apt-get install clang libclang-rt-14-dev llvm)"
version=$("$cc" -dumpversion 2>/dev/null)
major=${version%%.*}

if [ -n "${FUZZ_WORKDIR:-}" ]; then
  work=$FUZZ_WORKDIR
  mkdir -p "$work" || exit 1
  keep=1
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/relock-fuzz.XXXXXX") || exit 1
  keep=0
fi
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

sanitize="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all"
cflags="$sanitize -g -O1 -fno-omit-frame-pointer -Wall -Wextra -Werror"
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; return (int)n & 0; }\n' \
  >"$work/probe.c"
"$cc" $sanitize "$work/probe.c" -o "$work/probe" >"$work/probe.log" 2>&1 ||
  skip "$cc $version cannot link with -fsanitize=fuzzer,address,undefined (Debian: apt-get install libclang-rt-${major:-14}-dev): $(head -n 3 "$work/probe.log" | tr '\n' ' ')"

# A symbolizer for readable stack traces.
if ! command -v llvm-symbolizer >/dev/null 2>&1 && [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
  for s in "/usr/lib/llvm-$major/bin/llvm-symbolizer" /usr/lib/llvm-*/bin/llvm-symbolizer; do
    [ -x "$s" ] && { ASAN_SYMBOLIZER_PATH=$s; export ASAN_SYMBOLIZER_PATH; break; }
  done
fi
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:symbolize=1"
UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1"
export ASAN_OPTIONS UBSAN_OPTIONS

# The library's sources are compiled in directly; none of them needs what
# configure finds, so an empty config.h does.
: >"$work/config.h"
hiredis=$(pkg-config --cflags --libs hiredis 2>/dev/null) || hiredis=-lhiredis
includes="-I$work -I$srcdir/include -I$srcdir/src -I$srcdir/tools -I$fuzzdir"

build() { # TARGET: the binary $work/fuzz_TARGET
  case $1 in
    url) set -- "$1" src/config/url.c src/config/options.c src/base/error.c ;;
    reply) set -- "$1" src/redis/reply.c src/future/future.c src/loop/exec.c src/base/error.c $hiredis -lev ;;
    cli) set -- "$1" tools/args.c tools/duration.c tools/suggest.c ;;
  esac
  t=$1
  shift
  (cd "$srcdir" && "$cc" $cflags $includes "tests/fuzz/fuzz_$t.c" "$@" -o "$work/fuzz_$t") >"$work/build_$t.log" 2>&1
}

# stat NAME LOG: a stat:: line of libFuzzer's final stats
stat() { sed -n "s/^stat::$1: *//p" "$2" | tail -n 1; }

echo "fuzzing with $cc $version for $seconds s per target in $work"
passed=0 failed=0
for t in $targets; do
  log=$work/$t.log
  if ! build "$t"; then
    failed=$((failed + 1)) keep=1
    echo "FAIL $t: build failed ($work/build_$t.log):"
    sed 's/^/    /' "$work/build_$t.log" | head -n 30
    continue
  fi
  rm -rf "$work/corpus/$t"
  mkdir -p "$work/corpus/$t" "$work/artifacts/$t"
  cp "$fuzzdir/corpus/$t"/* "$work/corpus/$t/" 2>/dev/null
  seeds=$(ls "$work/corpus/$t" | wc -l)
  dict=
  [ -f "$fuzzdir/$t.dict" ] && dict=-dict=$fuzzdir/$t.dict
  start=$(date +%s)
  "$work/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -error_exitcode=1 -timeout_exitcode=1 -artifact_prefix="$work/artifacts/$t/" $dict ${FUZZ_FLAGS:-} \
    "$work/corpus/$t" >"$log" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  runs=$(stat number_of_executed_units "$log")
  done_line=$(grep -E '^#[0-9]+[[:space:]]+(DONE|INITED|NEW|REDUCE|pulse)' "$log" | tail -n 1)
  cov=$(echo "$done_line" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
  ft=$(echo "$done_line" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
  corpus=$(ls "$work/corpus/$t" | wc -l)
  if [ $rc -eq 0 ] && grep -q 'DONE' "$log"; then
    passed=$((passed + 1))
    echo "PASS $t: ${took} s, ${runs:-?} runs ($(stat average_exec_per_sec "$log")/s), cov ${cov:-?} ft ${ft:-?}," \
      "corpus $corpus (from $seeds seeds), peak rss $(stat peak_rss_mb "$log") MB"
  else
    failed=$((failed + 1)) keep=1
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    what=$(grep -E -m 1 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|invariant failed|SUMMARY:' "$log")
    echo "FAIL $t: after ${took} s (exit $rc): ${what:-see the log}"
    echo "    crash file: ${artifact:-none written}"
    echo "    log: $log"
    [ -n "$artifact" ] && echo "    reproduce: $work/fuzz_$t $artifact"
    grep -E -A 14 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|invariant failed' "$log" |
      head -n 30 | sed 's/^/    /'
  fi
done
[ "$keep" = 1 ] && echo "work directory kept: $work"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
