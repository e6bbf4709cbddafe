#!/bin/sh
# Every file the documentation points to is in the tree: a clone, or the
# tarball, has what the docs name. Checked in README.md, src/README.md,
# docs/*.md and tests/*/README.md, outside fenced code blocks (their paths
# are commands to run):
#   - markdown links [text](target): target must exist relative to the
#     document's folder, and an #anchor (in another document or in this
#     one) must be one of its headings' (URLs are not followed);
#   - `backticked` words that look like paths in the repository - no space,
#     no URL, not absolute, none of the characters of key names and
#     patterns ({}<>*:$...), and either a '/' in them or a name ending in
#     .c, .h, .md, .lua or .sh. Such a word must name a file or folder
#     relative to the top of the tree or to the document's folder, a public
#     header as it is included (`relock/lock.h`: include/relock/lock.h),
#     or, a bare name without '/', some file of that name in the tree.
# What the build or ./bootstrap makes is named by the docs though not kept
# in the tree: $generated lists it.
#
#   tests/unit/doc_links.sh [SRCDIR]
#
# Speaks TAP: one test per document, each missing path a diagnostic with
# the document's line.
set -u
srcdir=${1:-${srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}}
. "$(dirname "$0")/../support/tap.sh"
cd "$srcdir" || exit 1

generated="configure bench/results.json src/redis/scripts.c src/redis/scripts.h"

docs=
for d in README.md src/README.md docs/*.md tests/*/README.md; do
  [ -f "$d" ] && docs="$docs $d"
done
# shellcheck disable=SC2086
set -- $docs
echo "1..$#"

files=$(mktemp)
trap 'rm -f "$files"' EXIT
find . \( -name .git -o -path './_build*' \) -prune -o -type f -print | sed 's|.*/||' | sort -u >"$files"

# The candidates of one document, one a line: LINE TAB link|code TAB TEXT.
candidates() {
  awk '
    /^[ \t]*(```|~~~)/ { fence = !fence; incode = 0; next }
    fence { next }
    /^[ \t]*$/ { incode = 0; next } # a code span ends with its paragraph
    {
      # A code span may go on over a line break (then it has a space: it
      # is no path); the parity of the backticks carries over.
      n = split($0, part, "`")
      for (i = 1; i <= n; i++) {
        if (i > 1) {
          incode = !incode
          if (incode) { start = NR; span = ""; cont = 0 }
          else printf "%d\tcode\t%s\n", start, span
        }
        if (incode) {
          span = span (cont ? " " : "") part[i]
          cont = 1
          continue
        }
        text = part[i]
        while (match(text, /\]\([^)]*\)/)) {
          printf "%d\tlink\t%s\n", NR, substr(text, RSTART + 2, RLENGTH - 3)
          text = substr(text, RSTART + RLENGTH)
        }
      }
    }
  ' "$1"
}

# The anchors of a document's headings, one a line, as GitHub makes them:
# lower case, without punctuation, spaces turned into hyphens.
anchors() {
  awk '
    /^[ \t]*(```|~~~)/ { fence = !fence; next }
    !fence && /^#+[ \t]/ {
      h = tolower($0)
      sub(/^#+[ \t]+/, "", h)
      gsub(/[^a-z0-9 _-]/, "", h)
      gsub(/ /, "-", h)
      print h
    }
  ' "$1"
}

# Whether a backticked word looks like a path in the repository.
looks_like_path() {
  case $1 in
    "" | *[[:space:]]* | *://* | /* | ~* | -* | \#*) return 1 ;;
    .c | .h | .md | .lua | .sh) return 1 ;; # an extension alone
    *[\{\}\<\>\*\?\[\]\$=:@%,\;\"\'\(\)\|\&!]*) return 1 ;;
    */* | *.c | *.h | *.md | *.lua | *.sh) return 0 ;;
  esac
  return 1
}

# Whether PATH, named in DOC, is in the tree.
found() {
  p=${2#./}
  dir=$(dirname "$1")
  for g in $generated; do [ "$p" = "$g" ] && return 0; done
  [ -e "$p" ] || [ -e "$dir/$p" ] || [ -e "include/$p" ] && return 0
  case $p in
    */*) return 1 ;;
  esac
  grep -qxF "$p" "$files"
}

failed=0
for doc in "$@"; do
  missing=
  count=0
  tab=$(printf '\t')
  while IFS="$tab" read -r line kind text; do
    if [ "$kind" = link ]; then
      target=${text%%#*}
      case $target in
        *:*) continue ;; # a URL, mailto:
      esac
      count=$((count + 1))
      file=$doc
      [ -n "$target" ] && file=$(dirname "$doc")/$target
      if [ ! -e "$file" ]; then
        missing="$missing
$doc:$line: link ($target): no such file or folder (a link is relative to the document's folder)"
      elif [ "$target" != "$text" ]; then
        anchor=${text#*#}
        case $file in
          *.md) anchors "$file" | grep -qxF "$anchor" ||
            missing="$missing
$doc:$line: link ($text): $file has no heading for #$anchor" ;;
        esac
      fi
    else
      looks_like_path "$text" || continue
      count=$((count + 1))
      found "$doc" "$text" ||
        missing="$missing
$doc:$line: \`$text\`: no such file or folder in the tree"
    fi
  done <<EOF
$(candidates "$doc")
EOF
  if [ -z "$missing" ]; then
    ok "$doc: the $count paths and links it names are in the tree"
  else
    failed=1
    not_ok "$doc: names $(printf '%s\n' "$missing" | grep -c .) path(s) or anchor(s) not in the tree" "${missing#?}"
  fi
done
exit $failed
