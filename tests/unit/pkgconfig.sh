#!/bin/sh
# relock.pc as a consumer sees it: installs the build into a temporary
# DESTDIR, points pkg-config at the relock.pc installed there (its paths
# moved under DESTDIR, so any --prefix or --libdir works), and checks that
#   - pkg-config --cflags relock names relock's include directory only: no
#     hiredis or libev path leaks into a consumer's CFLAGS;
#   - pkg-config --static --libs relock lists every library librelock needs
#     (with TLS: hiredis_ssl, libssl, libcrypto too);
#   - a program including only <relock/relock.h> compiles against the
#     installed headers and links against the installed library, shared and
#     static (linked, not run);
#   - README's first example and its embedded one (the first ```c block of
#     the top and of "### Embedding in an existing libev loop") compile
#     without a warning and build with the line README gives for each (its
#     `cc ...` after the block, run as written but for the compiler: $CC and
#     a sanitizer build's flags), and run: against a private redis-server
#     (RELOCK_URL) they exit 0 and leave the lock free; with nobody
#     listening they exit non-zero and say why on stderr. A README whose
#     example checks nothing, or whose build line misses a library, fails.
# Run from the build directory (make check does); speaks TAP.
#   MAKE, CC, RELOCK_SANITIZER_CFLAGS  from make check (defaults: make, cc)
set -u
make=${MAKE:-make}
cc=${CC:-cc}
# A sanitizer build's library needs its runtime: the consumer is built with
# the same flags, as a user of that build would have to.
san=${RELOCK_SANITIZER_CFLAGS:-}

echo "1..13"
. "$(dirname "$0")/../support/tap.sh"
. "$(dirname "$0")/../support/redis.sh"
srcdir=${RELOCK_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bail() { echo "Bail out! $*"; exit 1; }

command -v pkg-config >/dev/null || bail "pkg-config not found: install the Debian package pkg-config"

command -v redis-server >/dev/null || bail "cannot run: redis-server not found (./bootstrap --deps)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/relock-pc.XXXXXX") || bail "mktemp failed"
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/dest

# 1. make install DESTDIR=... (all of it, as a packager runs it).
if out=$($make install DESTDIR="$dest" 2>&1); then
  ok "make install DESTDIR=<tmp>"
else
  not_ok "make install DESTDIR=<tmp>" "$(printf '%s\n' "$out" | tail -n 30)"
  exit 1
fi

pc=$(find "$dest" -name relock.pc | head -n 1)
[ -n "$pc" ] || bail "no relock.pc under $dest"
# The installed relock.pc, moved under DESTDIR: its own absolute paths
# (prefix, libdir, ... whatever configure was given) get the DESTDIR prefix;
# everything else (hiredis's -L, say) stays as configure found it.
mkdir "$tmp/pc"
sed "s|^\([A-Za-z_]*\)=/|\1=$dest/|" "$pc" >"$tmp/pc/relock.pc"
# Ours first; the system's .pc files stay visible, so that a Requires on
# hiredis would resolve and show its Cflags below rather than just fail.
PKG_CONFIG_PATH=$tmp/pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_PATH
for q in --cflags --libs "--static --libs"; do
  # shellcheck disable=SC2086
  out=$(pkg-config $q relock 2>&1) || bail "pkg-config $q relock failed: $(echo $out)"
done

# 2. --cflags: -I<includedir> and nothing else.
cflags=$(pkg-config --cflags relock)
bad=
for w in $cflags; do
  case $w in
    *hiredis* | *libev* | */ev | */ev/*) bad="$bad $w" ;;
    -I"$dest"/*) [ -f "${w#-I}/relock/relock.h" ] || bad="$bad $w(no relock/relock.h there)" ;;
    *) bad="$bad $w" ;;
  esac
done
if [ -z "$bad" ] && [ -n "$cflags" ]; then
  ok "pkg-config --cflags relock gives relock's include directory only: $cflags"
else
  not_ok "pkg-config --cflags relock gives relock's include directory only" \
    "got: $cflags" "unexpected:$bad"
fi

# 3. --static --libs: librelock's own dependencies are there for a static link.
libs=$(pkg-config --libs relock)
slibs=$(pkg-config --static --libs relock)
missing=
want="-lrelock -lhiredis -lev -lpthread"
# A build with TLS also needs hiredis_ssl and OpenSSL (config.h says which).
grep -q '^#define RELOCK_HAVE_TLS 1' config.h 2>/dev/null && want="$want -lhiredis_ssl -lssl -lcrypto"
for l in $want; do
  case " $slibs " in *" $l "*) ;; *) missing="$missing $l" ;; esac
done
if [ -z "$missing" ]; then
  ok "pkg-config --static --libs relock: $slibs"
else
  not_ok "pkg-config --static --libs relock lists every dependency" "got: $slibs" "missing:$missing"
fi

# 4-5. A consumer: only <relock/relock.h>, the flags pkg-config gives, and
# -Werror, so a header that needs hiredis or ev.h (or warns) fails here.
cat >"$tmp/consumer.c" <<'EOF'
#include <relock/relock.h>

#include <stdio.h>

int main(void) {
  relock_error_t err;
  relock_client_t *client = relock_client_new(NULL, NULL, &err);
  relock_lock_t *lock;

  if (client == NULL) {
    fprintf(stderr, "%s: %s\n", relock_err_name(err.code), err.message);
    return 1;
  }
  lock = relock_lock_new(client, "consumer", NULL);
  if (lock != NULL && relock_lock_try_lock(lock, 0, RELOCK_INFINITE, NULL) == 0)
    relock_lock_unlock(lock);
  relock_lock_free(lock);
  relock_client_free(client);
  printf("relock %s\n", relock_version_string());
  return 0;
}
EOF
warn="-std=c99 -Wall -Wextra -Werror -pedantic"
# shellcheck disable=SC2086 # word splitting of the flags is intended
if out=$($cc $warn $san $cflags -c "$tmp/consumer.c" -o "$tmp/consumer.o" 2>&1) &&
  out=$($cc $san "$tmp/consumer.o" $libs -o "$tmp/consumer" 2>&1); then
  ok "a consumer compiles against the installed headers and links against the shared library"
else
  not_ok "a consumer compiles against the installed headers and links against the shared library" \
    "$cc $warn $san $cflags ... $libs" "$out"
fi

# Static: librelock.a itself, then the rest as pkg-config --static says.
static_libs=
for w in $slibs; do
  if [ "$w" = -lrelock ]; then
    static_libs="$static_libs -Wl,-Bstatic -lrelock -Wl,-Bdynamic"
  else
    static_libs="$static_libs $w"
  fi
done
if [ -z "$(find "$dest" -name librelock.a)" ]; then
  not_ok "a consumer links against the static library" "no librelock.a installed (configure --disable-static?)"
elif out=$($cc $san "$tmp/consumer.o" $static_libs -o "$tmp/consumer-static" 2>&1); then
  ok "a consumer links against the static library with pkg-config --static --libs"
else
  not_ok "a consumer links against the static library with pkg-config --static --libs" \
    "$cc ... $static_libs" "$out"
fi

# -- README's examples, built as README says and run --------------------------

# readme_code HEADING: the first ```c block under the heading (## or ###)
# HEADING; "" for the top of README, before its first heading.
readme_code() {
  awk -v want="$1" '
    NR == 1 { here = (want == "") }
    /^##+ / { h = $0; sub(/^#+ /, "", h); here = (want != "" && h == want) }
    here && !done && /^```c[[:space:]]*$/ { inside = 1; next }
    inside && /^```/ { inside = 0; done = 1; next }
    inside { print }
  ' "$srcdir/README.md"
}

# readme_build HEADING: the first `cc ...` of the text after that block.
readme_build() {
  awk -v want="$1" '
    NR == 1 { here = (want == "") }
    /^##+ / { h = $0; sub(/^#+ /, "", h); here = (want != "" && h == want) }
    here && /^```/ { inside = !inside; if (!inside) after = 1; next }
    here && after && !inside && match($0, /`cc [^`]*`/) { print substr($0, RSTART + 1, RLENGTH - 2); exit }
  ' "$srcdir/README.md"
}

# example NAME HEADING FILE: writes the example to $tmp/NAME/FILE, checks
# that it compiles without a warning, and builds it with README's line, run
# in $tmp/NAME as written but for its "cc": $cc and the sanitizer's flags.
# Sets $built to its a.out, or leaves it empty.
example() {
  built=
  code=$(readme_code "$2")
  line=$(readme_build "$2")
  if [ -z "$code" ] || [ -z "$line" ]; then
    not_ok "README's $1 example and its build line are found" "code: $(echo "$code" | head -n 1)" "line: $line"
    not_ok "README's $1 example builds with README's line" "(not found)"
    return
  fi
  mkdir "$tmp/$1" && printf '%s\n' "$code" >"$tmp/$1/$3"
  # shellcheck disable=SC2086
  if out=$(cd "$tmp/$1" && $cc $warn $san $cflags -c "$3" -o /dev/null 2>&1); then
    ok "README's $1 example compiles without a warning ($warn)"
  else
    not_ok "README's $1 example compiles without a warning ($warn)" "$out"
  fi
  case $line in
    "cc $3 "*) ;;
    *) not_ok "README's $1 example builds with README's line" "the line does not build $3: $line"; return ;;
  esac
  if out=$(cd "$tmp/$1" && eval "$cc $san ${line#cc }" 2>&1) && [ -x "$tmp/$1/a.out" ]; then
    ok "README's $1 example builds with README's line: $line"
    built=$tmp/$1/a.out
  else
    not_ok "README's $1 example builds with README's line: $line" "$out"
  fi
}

# run_example NAME: runs $built against the private server and with nobody
# listening, from the installed library.
run_example() {
  if [ -z "$built" ]; then
    not_ok "README's $1 example runs against a private redis-server" "(not built)"
    not_ok "README's $1 example fails, saying why, with no Redis to talk to" "(not built)"
    return
  fi
  libpath=$(dirname "$(find "$dest" -name 'librelock.so*' | head -n 1)")
  err=$(RELOCK_URL=redis://127.0.0.1:$port LD_LIBRARY_PATH=$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$built" 2>&1 >/dev/null)
  rc=$?
  # taken and released there, not somewhere else: the release leaves its
  # latch (README: "Redisson compatibility"), and the lock is free
  left=$(redis-cli -p "$port" EXISTS invoices:run)
  latch=$(redis-cli -p "$port" --scan --pattern 'redisson_unlock_latch:{invoices:run}:*' | head -n 1)
  if [ $rc -eq 0 ] && [ -z "$err" ] && [ "$left" = 0 ] && [ -n "$latch" ]; then
    ok "README's $1 example runs against a private redis-server: exit 0, the lock taken and released there"
  else
    not_ok "README's $1 example runs against a private redis-server" "exit $rc (want 0)" "stderr: $err" \
      "invoices:run exists: $left (want 0)" "its release latch: ${latch:-none} (want one)"
  fi
  redis-cli -p "$port" FLUSHALL >/dev/null
  nobody=$(free_port)
  err=$(RELOCK_URL=redis://127.0.0.1:$nobody LD_LIBRARY_PATH=$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$built" 2>&1 >/dev/null)
  rc=$?
  case $err in
    *"127.0.0.1:$nobody"*"refused"*) said=1 ;;
    *) said= ;;
  esac
  if [ $rc -ne 0 ] && [ -n "$said" ]; then
    ok "README's $1 example fails, saying why, with no Redis to talk to: exit $rc, $err"
  else
    not_ok "README's $1 example fails, saying why, with no Redis to talk to" "exit $rc (want non-zero)" \
      "stderr: $err (want the address and \"refused\")"
  fi
}

start_redis
trap 'stop_redis; rm -rf "$tmp"' EXIT
unset RELOCK_URL_FILE # the examples take RELOCK_URL, which run_example sets
example first "" app.c
run_example first
example embedded "Embedding in an existing libev loop" server.c
run_example embedded

[ "$n" -eq 13 ] || bail "ran $n test cases, planned 13"
