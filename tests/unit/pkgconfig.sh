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
#     static (linked, not run).
# Run from the build directory (make check does); speaks TAP.
#   MAKE, CC, RELOCK_SANITIZER_CFLAGS  from make check (defaults: make, cc)
set -u
make=${MAKE:-make}
cc=${CC:-cc}
# A sanitizer build's library needs its runtime: the consumer is built with
# the same flags, as a user of that build would have to.
san=${RELOCK_SANITIZER_CFLAGS:-}

echo "1..5"
. "$(dirname "$0")/../support/tap.sh"
bail() { echo "Bail out! $*"; exit 1; }

command -v pkg-config >/dev/null || bail "pkg-config not found: install the Debian package pkg-config"

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
[ "$n" -eq 5 ] || bail "ran $n test cases, planned 5"
