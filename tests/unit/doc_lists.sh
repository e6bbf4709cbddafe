#!/bin/sh
# The lists the docs keep are complete, and name nothing that is not there:
#   - relock(3)'s "The headers and their pages" names every section-3 page
#     of docs/man/ (but itself), and no page that does not exist;
#   - README's "Man pages:" paragraph names relock(1) and every section-3
#     page, and no page that does not exist;
#   - every option of the options table (src/config/options.c, the one
#     place an option exists) has a row in README's options table (the
#     "## Configuration" section) and an entry in relock_options(3)'s
#     OPTIONS, under its name as config.h defines it; and neither documents
#     an option the table does not have.
# A page or an option added without its line in the docs fails here, so a
# reader of the lists sees everything there is.
#
#   tests/unit/doc_lists.sh [SRCDIR]
#
# Speaks TAP: one test per list, each missing or unknown name a diagnostic.
set -u
srcdir=${1:-${srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}}
. "$(dirname "$0")/../support/tap.sh"
cd "$srcdir" || exit 1
echo "1..4"

# sorted, one a line
lines() { tr ' ' '\n' | sed '/^$/d' | sort -u; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/relock-doclists.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# same NAME WANT GOT: WANT and GOT (whitespace-separated names) are the same set
same() {
  printf '%s\n' "$2" | lines >"$tmp/want"
  printf '%s\n' "$3" | lines >"$tmp/got"
  missing=$(comm -23 "$tmp/want" "$tmp/got" | tr '\n' ' ')
  extra=$(comm -13 "$tmp/want" "$tmp/got" | tr '\n' ' ')
  if [ -s "$tmp/want" ] && [ -z "$missing" ] && [ -z "$extra" ]; then
    ok "$1 ($(wc -l <"$tmp/want") names)"
  else
    not_ok "$1" "missing: ${missing:-none}" "names that do not exist: ${extra:-none}"
  fi
}

# The pages there are: relock_x(3) for docs/man/relock_x.3, relock(1).
pages3=$(for p in docs/man/*.3; do b=${p##*/}; echo "${b%.3}(3)"; done)

# 1. relock(3): the .TP entries of its "The headers and their pages".
listed=$(sed -n '/^\.SS The headers and their pages/,/^\.S[SH]/p' docs/man/relock.3 |
  sed -n 's/^\.BR \(relock[a-z_]*\) (\([0-9]\)).*/\1(\2)/p')
same "relock(3) lists every section-3 page" "$(printf '%s\n' "$pages3" | grep -vx 'relock(3)')" "$listed"

# 2. README: the paragraph that starts "Man pages:".
listed=$(awk '/^Man pages:/ { on = 1 } on && /^$/ { exit } on { print }' README.md |
  grep -o 'relock[a-z_]*([0-9])')
same "README's \"Man pages\" paragraph names every page" "relock(1) $pages3" "$listed"

# 3-4. The options: RELOCK_OPT_* of the table's rows in options.c.
table=$(sed -n 's/^ *{\(RELOCK_OPT_[A-Z0-9_]*\), OPT_.*/\1/p' src/config/options.c)
[ -n "$table" ] || { echo "Bail out! no options found in src/config/options.c's table"; exit 1; }
readme=$(awk '/^## / { on = ($0 == "## Configuration") } on && /^### / { on = 0 } on && /^\| `RELOCK_OPT_/ { print }' README.md |
  sed 's/^| \([^|]*\)|.*/\1/' | grep -o 'RELOCK_OPT_[A-Z0-9_]*')
same "README's options table has every option, and only those" "$table" "$readme"
# relock_options(3): ".BR RELOCK_OPT_X \(dqname\(dq, ..." with the name as
# config.h defines it (the man page escapes '-' as '\-').
man=$(sed -n '/^\.SH OPTIONS/,/^\.SH [^O]/p' docs/man/relock_options.3 |
  sed -n 's/^\.BR \(RELOCK_OPT_[A-Z0-9_]*\) " \\(dq\([^\\]*\(\\-[^\\]*\)*\)\\(dq.*/\1=\2/p' | sed 's/\\-/-/g')
defined=$(for o in $table; do
  sed -n "s/^#define $o \"\\([^\"]*\\)\"\$/$o=\\1/p" include/relock/config.h
done)
same "relock_options(3) documents every option under its name, and only those" "$defined" "$man"
