#!/bin/sh
# Unpacks Debian 13's hiredis 1.2.0 (runtime and -dev packages) into a private
# prefix, for building and testing relock against hiredis 1.x on Debian 12.
# Nothing is installed system-wide: apt runs with private lists and cache.
#
#   .ci/hiredis1.sh PREFIX
#   mkdir build && cd build   # a separate build dir; the source tree unconfigured
#   PKG_CONFIG_PATH=PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig /path/to/configure
#   LD_LIBRARY_PATH=PREFIX/usr/lib/x86_64-linux-gnu make check
# (LD_LIBRARY_PATH at build time too: through it the linker finds
# libhiredis.so.1.1.0, needed by librelock.so, when linking the tests.)
#
# Idempotent: a prefix that already holds the library is left as it is.
set -eu
[ $# -eq 1 ] || { echo "usage: $0 PREFIX" >&2; exit 2; }
mkdir -p "$1"
prefix=$(cd "$1" && pwd)
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
libdir=$prefix/usr/lib/$multiarch
pc=$libdir/pkgconfig/hiredis.pc
version=${HIREDIS1_VERSION:-1.2.0-6+b3}

if [ -f "$pc" ] && [ -e "$libdir/libhiredis.so.1.1.0" ] && grep -q "^prefix=$prefix/usr\$" "$pc" \
  && grep -q "^libdir=$libdir\$" "$pc"; then
  echo "hiredis1: $prefix already holds hiredis $(sed -n 's/^Version: //p' "$pc")"
  exit 0
fi

# The same Debian archive the system uses, trixie suite.
mirror=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/* *$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
[ -n "$mirror" ] || mirror=$(sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\(http[^ ]*\/debian\)\/* .*/\2/p' /etc/apt/sources.list 2>/dev/null | head -n 1)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
work=$prefix/.apt
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs"
list=$work/trixie.list
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" > "$list"
echo "hiredis1: apt source: $(cat "$list")"
set -- -o Dir::Etc::sourcelist="$list" -o Dir::Etc::sourceparts=/dev/null \
  -o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache" -o APT::Architecture="$arch"
echo "hiredis1: apt-get update (private lists in $work)"
apt-get "$@" update
echo "hiredis1: apt-get download libhiredis1.1.0=$version libhiredis-dev=$version"
(cd "$work/debs" && apt-get "$@" download "libhiredis1.1.0=$version" "libhiredis-dev=$version")
for deb in "$work"/debs/*.deb; do
  echo "hiredis1: dpkg -x $(basename "$deb") $prefix"
  dpkg -x "$deb" "$prefix"
done

# The .pc files name /usr: point them at the prefix.
for f in "$libdir"/pkgconfig/*.pc; do
  echo "hiredis1: prefix=$prefix/usr in $f"
  sed -i -e "s|^prefix=.*|prefix=$prefix/usr|" -e "s|^libdir=.*|libdir=$libdir|" \
    -e "s|^includedir=/usr/|includedir=\\\${prefix}/|" -e "s|^pkgincludedir=/usr/|pkgincludedir=\\\${prefix}/|" "$f"
done
# The -dev package's libhiredis.so is a relative symlink; make sure it resolves.
[ -e "$libdir/libhiredis.so" ] || ln -sf libhiredis.so.1.1.0 "$libdir/libhiredis.so"
echo "hiredis1: done: PKG_CONFIG_PATH=$libdir/pkgconfig LD_LIBRARY_PATH=$libdir"
