#!/bin/sh
# The library's layering, checked on its sources (src/README.md): every
# folder of src/ is a layer, and a file may include headers of its own layer
# and of the layers below it only, never above. Within a layer the modules
# (a .c and the .h of the same name count as one) must not include each
# other in a cycle. hiredis is seen in src/redis/ only: no other file
# includes its headers or names its types. Public headers include only
# public headers; the CLI and the examples use only the public API.
#
#   tests/unit/layers.sh [SRCDIR]
#
# Prints TAP: every violation, with its file and line, then "not ok" and
# exit 1 if there is one.
set -u
srcdir=${1:-${srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}}
cd "$srcdir" || exit 1

edges=$(mktemp)
trap 'rm -f "$edges" "$edges.err"' EXIT

# The layers, lowest first.
layers="base loop future config redis watchdog client objects"

rank() { # LAYER: its position in $layers, or nothing if it is not one
  i=0
  for l in $layers; do
    [ "$l" = "$1" ] && { echo $i; return; }
    i=$((i + 1))
  done
}

violation() { echo "layers: $*"; }

check() {

# Every folder of src/ must be a known layer (a new one is added above).
for d in src/*/; do
  d=${d#src/}
  d=${d%/}
  [ -n "$(rank "$d")" ] || violation "src/$d/: not a layer (add it to \$layers in $0, in its place)"
done
for f in src/*.c src/*.h; do
  [ -e "$f" ] && violation "$f: outside every layer (move it into the folder of its layer)"
done

# 1. No include points up.
for f in src/*/*.c src/*/*.h; do
  [ -e "$f" ] || continue
  layer=${f#src/}
  layer=${layer%%/*}
  me=$(rank "$layer")
  module=${f%.*}
  grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | while IFS= read -r line; do
    n=${line%%:*}
    target=$(echo "$line" | sed 's/.*include[[:space:]]*"\([^"]*\)".*/\1/')
    case $target in
      */*) ;;
      *) [ -e "src/$layer/$target" ] && target=$layer/$target ;;
    esac
    tl=${target%%/*}
    r=$(rank "$tl")
    if [ -z "$r" ]; then
      case $target in
        redis/scripts.h) ;; # generated into the build directory
        *) [ "$target" = "${target#*/}" ] || violation "$f:$n: includes \"$target\", which is in no layer" ;;
      esac
      continue
    fi
    [ "$r" -le "$me" ] || violation "$f:$n: includes \"$target\": layer $tl is above $layer"
    [ "$tl" = "$layer" ] && echo "$module src/${target%.*}" >>"$edges"
  done
done

# 2. No cycle between the modules of a layer (tsort reports a loop).
if [ -s "$edges" ]; then
  awk '$1 != $2' "$edges" | tsort >/dev/null 2>"$edges.err" ||
    violation "modules include each other in a cycle: $(tr '\n' ' ' <"$edges.err")"
  rm -f "$edges.err"
fi

# 3. hiredis below src/redis/ only.
hiredis='#[[:space:]]*include[[:space:]]*<hiredis|redisReply|redisAsyncContext|redisContext|redisReader|REDIS_REPLY_|REDIS_OK|REDIS_ERR'
for f in src/*/*.c src/*/*.h include/relock/*.h; do
  case $f in src/redis/*) continue ;; esac
  grep -nE "$hiredis" "$f" | while IFS= read -r line; do
    violation "$f:${line%%:*}: hiredis outside src/redis/: ${line#*:}"
  done
done

# 3b. ...nor through a header: a header of src/redis/ that brings hiredis in
#     (directly or through another) is included from src/redis/ only.
leaky=$(grep -l '^[[:space:]]*#[[:space:]]*include[[:space:]]*<hiredis' src/redis/*.h 2>/dev/null | sed 's|^src/||')
while :; do
  more=$leaky
  for h in src/redis/*.h; do
    for l in $leaky; do
      grep -q "include[[:space:]]*\"\($l\|${l#redis/}\)\"" "$h" && more="$more ${h#src/}"
    done
  done
  more=$(echo $more | tr ' ' '\n' | sort -u | tr '\n' ' ')
  [ "$more" = "$(echo $leaky | tr ' ' '\n' | sort -u | tr '\n' ' ')" ] && break
  leaky=$more
done
for h in $leaky; do
  for f in src/*/*.c src/*/*.h; do
    case $f in src/redis/*) continue ;; esac
    grep -n "include[[:space:]]*\"$h\"" "$f" | while IFS= read -r line; do
      violation "$f:${line%%:*}: includes \"$h\", which brings hiredis in"
    done
  done
done

# 4. Public headers include public headers (and the C library) only.
for f in include/relock/*.h; do
  grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"|^[[:space:]]*#[[:space:]]*include[[:space:]]*<(ev|hiredis)' "$f" |
    while IFS= read -r line; do
      violation "$f:${line%%:*}: a public header includes a private one: ${line#*:}"
    done
done

# 5. The CLI and the examples use the public API only.
for f in tools/*.c tools/*.h examples/*.c; do
  [ -e "$f" ] || continue
  grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | while IFS= read -r line; do
    target=$(echo "$line" | sed 's/.*include[[:space:]]*"\([^"]*\)".*/\1/')
    [ -e "$(dirname "$f")/$target" ] || violation "$f:${line%%:*}: includes \"$target\", not part of the public API"
  done
done

}

# The checks report by printing (their loops run in subshells): any line
# printed is a violation.
# TAP, like every test of the suite: one test case; the violations as
# diagnostics.
report=$(check)
echo "1..1"
if [ -n "$report" ]; then
  echo "$report" | sed 's/^/# /'
  echo "not ok 1 - layering of src/: $(echo "$report" | wc -l) violation(s)"
  exit 1
fi
echo "ok 1 - layering of src/: no include points up, no cycle, hiredis in src/redis/ only ($layers)"
