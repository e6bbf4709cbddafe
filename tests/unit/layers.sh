#!/bin/sh
# The library's layering, checked on its sources (src/README.md): every
# folder of src/ is a layer, and a file may include headers of its own layer
# and of the layers below it only, never above. Within a layer the modules
# (a .c and the .h of the same name count as one) must not depend on each
# other in a cycle, through includes or through calls: a .c that calls a
# function (or names a variable) that another .c of its layer defines
# depends on that module, and of two modules the lower must not know the
# upper. hiredis is seen in src/redis/ only: no other file includes its
# headers or names its types. Public headers include only
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
work=$(mktemp -d)
trap 'rm -rf "$edges" "$work"' EXIT

# The layers, lowest first.
layers="base stats loop future config redis watchdog client objects"

rank() { # LAYER: its position in $layers, or nothing if it is not one
  i=0
  for l in $layers; do
    [ "$l" = "$1" ] && { echo $i; return; }
    i=$((i + 1))
  done
}

violation() { echo "layers: $*"; }

# The awk programs of checks 2 and 3 (POSIX awk: mawk, gawk, busybox).

# C source with its comments and the contents of its string and character
# literals blanked out, line for line: a name in a comment or in a message
# is no call.
strip='
{
  line = $0; out = ""
  while (line != "") {
    if (incomment) {
      if (!(i = index(line, "*/"))) break
      line = substr(line, i + 2); out = out " "; incomment = 0
      continue
    }
    if (!match(line, /\/\*|\/\/|["\047]/)) { out = out line; break }
    out = out substr(line, 1, RSTART - 1); tok = substr(line, RSTART, RLENGTH); line = substr(line, RSTART + RLENGTH)
    if (tok == "//") break
    if (tok == "/*") { incomment = 1; continue }
    while (line != "" && (d = substr(line, 1, 1)) != tok) line = substr(line, d == "\\" ? 3 : 2)
    out = out tok tok; line = substr(line, 2)
  }
  print out
}'

# The names a stripped .c defines at file scope, one a line: FILE SCOPE
# NAME, SCOPE static or global. A definition is what comes before a "{" at
# brace depth 0 with a "(" in it (a function) or an "=" (data), or before a
# ";" with neither (data); prototypes, typedefs, externs, struct, union and
# enum bodies and the preprocessor define nothing.
definitions='
function emit(decl, kind,   name, scope) {
  gsub(/__attribute__[ \t]*\(\([^()]*(\([^()]*\)[^()]*)*\)\)/, " ", decl)
  if (decl ~ /(^|[^A-Za-z0-9_])(typedef|extern)([^A-Za-z0-9_]|$)/) return
  if (decl ~ /^[ \t]*(struct|union|enum)[ \t]+[A-Za-z0-9_]+[ \t]*$/) return
  scope = decl ~ /(^|[^A-Za-z0-9_])static([^A-Za-z0-9_]|$)/ ? "static" : "global"
  if (kind == "function") {
    # the name is before the first "(" that opens no "(*" (a function
    # that returns a function pointer: void (*name(args))(void *))
    if (!match(decl, /[A-Za-z_][A-Za-z0-9_]*[ \t]*\([ \t]*[^* \t]/)) return
    decl = substr(decl, RSTART, RLENGTH)
    sub(/[ \t]*\(.*/, "", decl)
  } else {
    sub(/=.*/, "", decl)
    if (decl ~ /\(/) return
    gsub(/\[[^]]*\]/, "", decl)
  }
  if (!match(decl, /[A-Za-z_][A-Za-z0-9_]*[ \t]*$/)) return
  name = substr(decl, RSTART, RLENGTH)
  sub(/[ \t]+$/, "", name)
  print FILENAME, scope, name
}
FNR == 1 { depth = 0; decl = ""; body = ""; cont = 0 }
cont || /^[ \t]*#/ { cont = /\\$/; next }
{
  line = $0
  while (match(line, /[{};]/)) {
    c = substr(line, RSTART, 1)
    if (depth == 0) decl = decl " " substr(line, 1, RSTART - 1)
    line = substr(line, RSTART + 1)
    if (c == "{") {
      if (depth++ == 0 && body == "") {
        body = decl ~ /=/ ? "data" : decl ~ /\(/ ? "function" : "type"
        if (body != "type") emit(decl, body)
      }
    } else if (c == "}") {
      if (--depth == 0 && body == "function") { decl = ""; body = "" }
    } else if (depth == 0) {
      if (body == "") emit(decl, "data")
      decl = ""; body = ""
    }
  }
  if (depth == 0) decl = decl " " line
}'

# The call edges: reads the definitions, then the stripped .c files; for
# each .c, the names it uses that another .c of its layer defines. One
# line per pair: MODULE MODULE FILE calls NAMES (FILE).
calls='
FILENAME == "defs" {
  if ($2 == "global") where[$3] = $1
  else local[$1, $3] = 1
  next
}
FNR == 1 { me = FILENAME; layer = me; sub(/\/[^\/]*$/, "", layer) }
{
  line = $0
  gsub(/[^A-Za-z0-9_]+/, " ", line)
  n = split(line, word, " ")
  for (i = 1; i <= n; i++) {
    w = word[i]
    if (!(w in where) || (me, w) in local || (me, w) in seen) continue
    seen[me, w] = 1
    f = where[w]
    l = f; sub(/\/[^\/]*$/, "", l)
    if (f == me || l != layer) continue
    if ((me, f) in names) {
      names[me, f] = names[me, f] ", " w
    } else {
      pair[++npairs] = me SUBSEP f
      names[me, f] = w
    }
  }
}
END {
  for (p = 1; p <= npairs; p++) {
    split(pair[p], ab, SUBSEP)
    a = ab[1]; sub(/\.c$/, "", a)
    b = ab[2]; sub(/\.c$/, "", b)
    print a, b, ab[1] " calls " names[ab[1], ab[2]] " (" ab[2] ")"
  }
}'

# The cycles among the modules: reads the edges (FROM TO WHY), finds the
# strongly connected components (Tarjan) and prints each of more than one
# module with the edges inside it and why each is there.
cycles='
function connect(v,   i, w) {
  ix[v] = low[v] = next_ix++
  stack[++sp] = v; onstack[v] = 1
  for (i = 1; i <= nout[v]; i++) {
    w = out[v, i]
    if (!(w in ix)) {
      connect(w)
      if (low[w] < low[v]) low[v] = low[w]
    } else if (onstack[w] && ix[w] < low[v]) {
      low[v] = ix[w]
    }
  }
  if (low[v] == ix[v]) {
    ncomp++
    do {
      w = stack[sp--]; onstack[w] = 0; comp[w] = ncomp; size[ncomp]++
    } while (w != v)
  }
}
$1 != $2 {
  why = $0; sub(/^[^ ]+ +[^ ]+ +/, "", why)
  if (!(($1, $2) in because)) {
    out[$1, ++nout[$1]] = $2
    from[++nedges] = $1; to[nedges] = $2
    because[$1, $2] = why
  } else {
    because[$1, $2] = because[$1, $2] "; " why
  }
  if (!($1 in known)) { known[$1] = 1; node[++nnodes] = $1 }
  if (!($2 in known)) { known[$2] = 1; node[++nnodes] = $2 }
}
END {
  for (i = 1; i <= nnodes; i++)
    if (!(node[i] in ix)) connect(node[i])
  for (c = 1; c <= ncomp; c++) {
    if (size[c] < 2) continue
    members = ""
    for (i = 1; i <= nnodes; i++)
      if (comp[node[i]] == c) members = members (members == "" ? "" : ", ") node[i]
    print "layers: modules depend on each other in a cycle (includes and calls): " members
    for (e = 1; e <= nedges; e++)
      if (comp[from[e]] == c && comp[to[e]] == c)
        print "layers:   " from[e] " -> " to[e] ": " because[from[e], to[e]]
  }
}'

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
    [ "$tl" = "$layer" ] && echo "$module src/${target%.*} $f:$n includes \"$target\"" >>"$edges"
  done
done

# 2. Calls between the modules of a layer: a .c that names a function or a
#    variable another .c of its layer defines (not static) depends on that
#    module as if it included it. Found in the sources (the check runs from
#    the tree, whatever the build): comments and literals blanked out, the
#    definitions at file scope (brace depth 0) collected, then every .c's
#    identifiers looked up among those of its layer. Headers only declare:
#    a shared *_impl.h names the functions of several .c files, and knows
#    none of them.
for f in src/*/*.c; do
  [ -e "$f" ] || continue
  mkdir -p "$work/${f%/*}"
  awk "$strip" "$f" >"$work/$f"
done
(cd "$work" && awk "$definitions" src/*/*.c) >"$work/defs"
(cd "$work" && awk "$calls" defs src/*/*.c) | sort >>"$edges"

# 3. No cycle between the modules of a layer, through includes and calls:
#    each strongly connected component of more than one module is one
#    cycle, printed with the edges that make it.
awk "$cycles" "$edges"

# 4. hiredis below src/redis/ only.
hiredis='#[[:space:]]*include[[:space:]]*<hiredis|redisReply|redisAsyncContext|redisContext|redisReader|REDIS_REPLY_|REDIS_OK|REDIS_ERR'
for f in src/*/*.c src/*/*.h include/relock/*.h; do
  case $f in src/redis/*) continue ;; esac
  grep -nE "$hiredis" "$f" | while IFS= read -r line; do
    violation "$f:${line%%:*}: hiredis outside src/redis/: ${line#*:}"
  done
done

# 4b. ...nor through a header: a header of src/redis/ that brings hiredis in
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

# 5. Public headers include public headers (and the C library) only.
for f in include/relock/*.h; do
  grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"|^[[:space:]]*#[[:space:]]*include[[:space:]]*<(ev|hiredis)' "$f" |
    while IFS= read -r line; do
      violation "$f:${line%%:*}: a public header includes a private one: ${line#*:}"
    done
done

# 6. The CLI and the examples use the public API only.
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
# (Lines indented after "layers: " detail the violation above them.)
report=$(check)
echo "1..1"
if [ -n "$report" ]; then
  echo "$report" | sed 's/^/# /'
  echo "not ok 1 - layering of src/: $(echo "$report" | grep -c '^layers: [^ ]') violation(s)"
  exit 1
fi
echo "ok 1 - layering of src/: no include points up, no cycle of includes or calls, hiredis in src/redis/ only ($layers)"
