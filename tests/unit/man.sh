#!/bin/sh
# The man pages render without a warning: every page of sections 1 and 3
# (tools/relock.1, docs/man/*.3) goes through man(1) and groff with warnings
# on, and any message on stderr or a non-zero status fails it. Then every
# function the public headers export must be named by a section-3 page (its
# NAME line: make install links the name to the page), and relock_error(3)
# must list every code of RELOCK_ERRNO_MAP with its number.
# A missing man or groff fails: ./bootstrap --deps installs them (man-db,
# groff-base), and a check that cannot run must not pass.
#   tests/unit/man.sh [SRCDIR]
# Speaks TAP.
set -u
srcdir=${1:-${srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}}

pages=
for p in "$srcdir"/tools/*.1 "$srcdir"/docs/man/*.1 "$srcdir"/docs/man/*.3; do
  [ -f "$p" ] && pages="$pages $p"
done
# shellcheck disable=SC2086
set -- $pages
echo "1..$(($# + 3))"
. "$(dirname "$0")/../support/tap.sh"

if ! command -v man >/dev/null || ! command -v groff >/dev/null; then
  not_ok "man and groff are installed" \
    "man or groff not found: install the Debian packages man-db and groff-base (./bootstrap --deps does)"
  exit 1
fi
if [ $# -ge 9 ]; then
  ok "$# man pages found (tools/*.1, docs/man/*.3)"
else
  not_ok "at least 9 man pages found (tools/*.1, docs/man/*.3)" "found $#:$pages"
fi

for page in "$@"; do
  name=${page#"$srcdir"/}
  err=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 \
    man --warnings -E UTF-8 -l -Tutf8 -Z "$page" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -eq 0 ] && [ -z "$err" ]; then
    ok "$name renders without warnings"
  else
    not_ok "$name renders without warnings" "man exited with $rc" "$err"
  fi
done

# Every exported function is documented: named on the NAME line of a page.
named=$(for p in "$srcdir"/docs/man/*.3; do [ -f "$p" ] && sh "$srcdir/docs/man/names.sh" "$p"; done | sort -u)
exported=$(grep -h '^RELOCK_EXTERN' "$srcdir"/include/relock/*.h |
  sed 's/(.*//; s/.*[ *]//' | sort -u)
missing=$(printf '%s\n' "$exported" | while read -r f; do
  printf '%s\n' "$named" | grep -qx "$f" || echo "$f"
done)
if [ -n "$exported" ] && [ -z "$missing" ]; then
  ok "all $(printf '%s\n' "$exported" | wc -l) exported functions are named by a section-3 page"
else
  not_ok "every exported function is named by a section-3 page" "missing: $(echo $missing)"
fi

# relock_error(3)'s table has every code of RELOCK_ERRNO_MAP, numbered as there.
codes=$(sed -n 's/^ *XX(\([A-Z_]*\), *-\([0-9]*\),.*/\1 \2/p' "$srcdir/include/relock/error.h")
missing=$(printf '%s\n' "$codes" | while read -r name num; do
  grep -q "^\.BR RELOCK_$name \" (\\\\-$num)\"\$" "$srcdir/docs/man/relock_error.3" || echo "RELOCK_$name($num)"
done)
if [ -n "$codes" ] && [ -z "$missing" ]; then
  ok "relock_error(3) lists all $(printf '%s\n' "$codes" | wc -l) error codes of RELOCK_ERRNO_MAP"
else
  not_ok "relock_error(3) lists every error code of RELOCK_ERRNO_MAP" "missing: $(echo $missing)"
fi
