#!/bin/sh
# CI step: the Debian packages of debian/, end to end. From a clean copy of
# the tree it builds librelock4, librelock-dev and relock
# (dpkg-buildpackage -us -uc -b), runs lintian on them (an error fails),
# installs them on this machine (dpkg -i), builds examples/lock_sync.c
# against the installed headers and library through pkg-config (shared, and
# static with pkg-config --static), runs it and the installed /usr/bin/relock
# against a private redis-server, then removes and purges the packages and
# checks that every file they installed is gone. The log has the packages'
# file lists (dpkg -c) and lintian's output.
#
#   sh .ci/packages.sh [TREE]
#
# TREE: a source tree with debian/ to copy (without its .git); by default
# git archive of this checkout's HEAD, so that nothing uncommitted and no
# build product reaches the packages. (A release tarball carries this script
# but not debian/: run it from git.) Needs root or sudo (dpkg -i), the build dependencies
# of debian/control, lintian and redis-server (./bootstrap --deps installs
# them all). Refuses to run when any of the three packages is installed
# already: it would remove them. Prints "ok N - ..." per step and exits 0
# when every step passed, 1 at the first that failed.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
packages="librelock-dev relock librelock4" # the order dpkg -r needs
t0=$(date +%s)

sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo

n=0
ok() { n=$((n + 1)); echo "ok $n - $1 ($(($(date +%s) - t0)) s)"; }
# fail STEP [LOG]: the step's "not ok", the end of its log, and exit 1.
fail() {
  n=$((n + 1))
  echo "not ok $n - $1"
  if [ -n "${2:-}" ] && [ -f "$2" ]; then
    echo "# the last 60 lines of $(basename "$2"):"
    tail -n 60 "$2" | sed 's/^/# /'
  fi
  echo "packages: FAILED at step $n ($1) after $(($(date +%s) - t0)) s"
  exit 1
}

installed() { dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null | grep -qv '^not-installed$'; }

for p in $packages; do
  if installed "$p"; then
    echo "packages: $p is installed on this machine already; this step installs and then removes" >&2
    echo "packages: the three packages: remove them first ($sudo dpkg -P $packages)" >&2
    exit 1
  fi
done
for tool in dpkg-buildpackage lintian redis-server redis-cli pkg-config cc; do
  command -v "$tool" >/dev/null 2>&1 ||
    { echo "packages: $tool not found: ./bootstrap --deps installs what this step needs" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/relock-packages.XXXXXX")
we_installed=
redis_pid=
# On any exit: stop the server, and purge the packages if a failed run left
# them installed, so that the next run finds the machine as this one did.
cleanup() {
  if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null || true; fi
  if [ -n "$we_installed" ]; then $sudo dpkg -P $packages >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "1..9"

# -- 1. a clean copy --------------------------------------------------------
src=$work/relock
mkdir "$src"
if [ $# -gt 0 ]; then
  (cd "$1" && tar --exclude=./.git -cf - .) | tar -xf - -C "$src" || fail "copy of the tree $1"
  ok "copy of the tree $1"
else
  git -C "$top" rev-parse --git-dir >/dev/null 2>&1 ||
    fail "$top is not a git checkout (a release tarball has no debian/): give a tree with debian/"
  git -C "$top" archive --format=tar HEAD | tar -xf - -C "$src" || fail "git archive HEAD of $top"
  [ -z "$(git -C "$top" status --porcelain --untracked-files=no)" ] ||
    echo "# note: $top has uncommitted changes; the packages are built from HEAD without them"
  ok "git archive of HEAD ($(git -C "$top" rev-parse --short HEAD))"
fi

[ -f "$src/debian/control" ] || fail "the copy has no debian/control"

# -- 2. the packages --------------------------------------------------------
jobs=$(nproc 2>/dev/null || echo 2)
if (cd "$src" && dpkg-buildpackage -us -uc -b -j"$jobs") >"$work/build.log" 2>&1; then
  ok "dpkg-buildpackage -us -uc -b"
else
  fail "dpkg-buildpackage -us -uc -b" "$work/build.log"
fi
version=$(cd "$src" && dpkg-parsechangelog -S Version)
arch=$(dpkg-architecture -q DEB_HOST_ARCH)
multiarch=$(dpkg-architecture -q DEB_HOST_MULTIARCH)
changes=$work/relock_${version}_$arch.changes
debs=
for p in librelock4 librelock-dev relock; do
  deb=$work/${p}_${version}_$arch.deb
  [ -f "$deb" ] || fail "dpkg-buildpackage made no $(basename "$deb")" "$work/build.log"
  debs="$debs $deb"
done
for deb in $debs; do
  echo "# --- dpkg -c $(basename "$deb")"
  dpkg -c "$deb" | sed 's/^/#   /'
done

# -- 3. lintian -------------------------------------------------------------
# Errors fail the step; warnings and the rest are printed for the log.
echo "# --- lintian -I --pedantic $(basename "$changes")"
lintian_rc=0
lintian -I --pedantic --fail-on error "$changes" >"$work/lintian.log" 2>&1 || lintian_rc=$?
grep -v 'running with root privileges is not recommended' "$work/lintian.log" | sed 's/^/#   /'
grep -q . "$work/lintian.log" || echo "#   (nothing)"
[ "$lintian_rc" -eq 0 ] || fail "lintian: errors (exit $lintian_rc)"
ok "lintian: no errors"

# -- 4. installed -----------------------------------------------------------
we_installed=1
# shellcheck disable=SC2086
$sudo dpkg -i $debs >"$work/install.log" 2>&1 || fail "dpkg -i of the three packages" "$work/install.log"
lists=$work/lists
mkdir "$lists"
for p in $packages; do
  dpkg -L "$p" >"$lists/$p" || fail "dpkg -L $p"
done
ok "dpkg -i librelock4 librelock-dev relock ($(cat "$lists"/* | wc -l) paths)"

# -- 5. an example against the installed library ---------------------------
# Only the installed headers and library: the example's source alone, no
# include path or library of the tree.
cp "$src/examples/lock_sync.c" "$work/"
cflags=$(pkg-config --cflags relock) && libs=$(pkg-config --libs relock) ||
  fail "pkg-config --cflags --libs relock"
# shellcheck disable=SC2086
cc -Wall -Wextra -Werror -o "$work/lock_sync" "$work/lock_sync.c" $cflags $libs >"$work/cc.log" 2>&1 ||
  fail "cc lock_sync.c \$(pkg-config --cflags --libs relock)" "$work/cc.log"
# (/lib is /usr/lib on a merged /usr: compare the files, not the names.)
linked=$(ldd "$work/lock_sync" | awk '$1 ~ /^librelock\.so/ { print $3 }')
[ -n "$linked" ] && [ "$(readlink -f "$linked")" = "$(readlink -f "/usr/lib/$multiarch/librelock.so.4")" ] ||
  fail "lock_sync loads the packaged /usr/lib/$multiarch/librelock.so.4 (ldd: ${linked:-none})"
# The static library, with what pkg-config --static adds for it.
static_libs=$(pkg-config --static --libs relock | sed 's/-lrelock\b/-l:librelock.a/')
# shellcheck disable=SC2086
cc -Wall -Wextra -Werror -o "$work/lock_sync_static" "$work/lock_sync.c" $cflags $static_libs >"$work/cc.log" 2>&1 ||
  fail "cc lock_sync.c against librelock.a (\$(pkg-config --static --libs relock))" "$work/cc.log"
! ldd "$work/lock_sync_static" | grep -q librelock || fail "lock_sync_static has librelock linked in, not loaded"
ok "lock_sync.c built with pkg-config: shared ($linked) and static"

# -- 6. a private redis-server ---------------------------------------------
# Started here rather than with redis.sh's start_redis, whose EXIT trap
# would replace cleanup's; its free_port picks the port.
. "$src/tests/support/redis.sh"
port=$(free_port)
mkdir "$work/redis"
redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$work/redis" \
  --logfile "$work/redis/redis.log" --daemonize no </dev/null >/dev/null 2>&1 &
redis_pid=$!
for _ in $(seq 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  kill -0 "$redis_pid" 2>/dev/null || break
  sleep 0.05
done
redis-cli -p "$port" ping >/dev/null 2>&1 || fail "redis-server on 127.0.0.1:$port" "$work/redis/redis.log"
url=redis://127.0.0.1:$port
out=$("$work/lock_sync" "$url" 2>&1) && [ "$out" = "counter: 1" ] ||
  fail "lock_sync against $url: wanted 'counter: 1', got: $out"
out=$("$work/lock_sync_static" "$url" 2>&1) && [ "$out" = "counter: 2" ] ||
  fail "lock_sync_static against $url: wanted 'counter: 2', got: $out"
ok "lock_sync (shared, then static) took the lock on redis-server pid $redis_pid, 127.0.0.1:$port"

# -- 7. the installed command ----------------------------------------------
export RELOCK_URL="$url"
out=$(/usr/bin/relock --wait 0 ci:packages -- sh -c 'echo "held by $RELOCK_OWNER"' 2>&1) ||
  fail "relock --wait 0 ci:packages -- ... (exit $?): $out"
case $out in "held by "?*) ;; *) fail "relock ran its command with RELOCK_OWNER set; got: $out" ;; esac
/usr/bin/relock ci:busy -- sleep 2 >"$work/holder.log" 2>&1 &
holder=$!
for _ in $(seq 100); do
  [ "$(redis-cli -p "$port" EXISTS ci:busy)" = 1 ] && break
  sleep 0.05
done
rc=0
/usr/bin/relock --wait 0 ci:busy -- true >"$work/busy.log" 2>&1 || rc=$?
wait "$holder" || fail "relock ci:busy -- sleep 2 (the holder)" "$work/holder.log"
[ "$rc" -eq 75 ] || fail "relock --wait 0 on a held lock exits 75; it exited $rc" "$work/busy.log"
man -w relock >/dev/null 2>&1 && man -w 3 relock_lock_lock_async >/dev/null 2>&1 ||
  fail "man -w relock; man -w 3 relock_lock_lock_async: the installed pages"
ok "/usr/bin/relock: ran a command under the lock, exit 75 on a busy one; man pages found"
kill "$redis_pid" && wait "$redis_pid" 2>/dev/null || true
redis_pid=

# -- 8. removed and purged --------------------------------------------------
# shellcheck disable=SC2086
$sudo dpkg -r $packages >"$work/remove.log" 2>&1 || fail "dpkg -r $packages" "$work/remove.log"
# shellcheck disable=SC2086
$sudo dpkg -P $packages >>"$work/remove.log" 2>&1 || fail "dpkg -P $packages" "$work/remove.log"
we_installed=
for p in $packages; do
  ! installed "$p" || fail "dpkg -P $p: still $(dpkg-query -W -f='${db:Status-Status}' "$p")"
done
ok "dpkg -r, then dpkg -P, of $packages"

# -- 9. nothing left --------------------------------------------------------
# Every file and link the packages had is gone; a directory may stay only
# when another package owns it (/usr/bin, /usr/share/man/man3, ...).
left=$work/left
: >"$left"
sort -u "$lists"/* | while IFS= read -r path; do
  [ "$path" = /. ] && continue
  if [ -d "$path" ] && [ ! -L "$path" ]; then
    dpkg -S "$path" >/dev/null 2>&1 || echo "$path/ (a directory no package owns)" >>"$left"
  elif [ -e "$path" ] || [ -L "$path" ]; then
    echo "$path" >>"$left"
  fi
done
[ ! -s "$left" ] || { sed 's/^/# left behind: /' "$left"; fail "nothing of the packages left on disk"; }
ok "nothing left: all $(sort -u "$lists"/* | wc -l) paths gone (or directories of other packages)"

echo "packages: PASSED, 9 steps in $(($(date +%s) - t0)) s"
