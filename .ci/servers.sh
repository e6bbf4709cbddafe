#!/bin/sh
# Unpacks the Redis and Valkey servers of other Debian releases into private
# prefixes, so that the server-facing tests run against every server of the
# support matrix (README, "Servers") on a Debian 12 machine. Nothing is
# installed system-wide: apt runs with private lists and cache, and each
# server runs from its own folder.
#
#   .ci/servers.sh DIR SERVER...     SERVER: redis-6.0 redis-8.0 valkey-8.0 valkey-8.1
#   REDIS_SERVER=DIR/SERVER/bin/redis-server PATH=DIR/SERVER/bin:$PATH make check
#
# DIR/SERVER/bin holds redis-server, redis-cli and redis-benchmark: small
# scripts that exec the unpacked binary (a Valkey binary under the Redis
# names, as the tests call it), so that a test's pid is the server's.
# Debian 11's and 12-backports' binaries need no newer C library than
# Debian 12's: they run on the system's loader, with the libraries Debian 12
# lacks (libssl1.1, Lua 5.1) beside them. Debian 13's need its C library:
# they run through Debian 13's own loader with Debian 13's libraries
# unpacked beside them, and nothing of the system's on their path.
#
# Idempotent: a server whose folder is complete is left as it is. Fails
# loudly if a binary has a library it cannot find or does not run.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 DIR SERVER..." >&2; exit 2; }
mkdir -p "$1"
dir=$(cd "$1" && pwd)
shift
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)

# The same Debian archive the system uses.
mirror=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/* *$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
[ -n "$mirror" ] || mirror=$(sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\(http[^ ]*\/debian\)\/* .*/\2/p' /etc/apt/sources.list 2>/dev/null | head -n 1)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian

# One private apt state for every release: updated once per run.
apt_dir=$dir/.apt
apt_ready=
apt_private() {
  set -- -o Dir::Etc::sourcelist="$apt_dir/sources.list" -o Dir::Etc::sourceparts=/dev/null \
    -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache" -o APT::Architecture="$arch" "$@"
  apt-get "$@"
}
apt_update() {
  [ -z "$apt_ready" ] || return 0
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
  : > "$apt_dir/sources.list"
  for suite in bullseye bookworm-backports trixie; do
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" >> "$apt_dir/sources.list"
  done
  echo "servers: apt-get update (private lists in $apt_dir)"
  apt_private -q update
  apt_ready=1
}

# fetch SERVER ROOT PACKAGE=VERSION...: downloads the packages and unpacks
# them into ROOT.
fetch() {
  name=$1 root=$2
  shift 2
  apt_update
  mkdir -p "$dir/$name/debs" "$root"
  echo "servers: $name: apt-get download $*"
  (cd "$dir/$name/debs" && apt_private -q download "$@")
  for deb in "$dir/$name"/debs/*.deb; do dpkg -x "$deb" "$root"; done
}

# wrap SERVER ROOT PROGRAM NAME [LOADER]: DIR/SERVER/bin/NAME runs the
# unpacked ROOT/usr/bin/PROGRAM, through LOADER when given.
wrap() {
  name=$1 root=$2 program=$3 as=$4 loader=${5:-}
  libs=$root/lib/$multiarch:$root/usr/lib/$multiarch
  mkdir -p "$dir/$name/bin"
  # The binary decides what it is from its name (server, sentinel, check
  # tool): a link named as the tests call it keeps that true.
  [ "$as" = "$program" ] || ln -sf "$program" "$root/usr/bin/$as"
  if [ -n "$loader" ]; then
    printf '#!/bin/sh\nexec %s --library-path %s %s "$@"\n' "$loader" "$libs" "$root/usr/bin/$as"
  else
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$libs" "$root/usr/bin/$as"
  fi > "$dir/$name/bin/$as"
  chmod +x "$dir/$name/bin/$as"
}

# check SERVER ROOT PROGRAM [LOADER]: every library resolves, and it runs.
check() {
  name=$1 root=$2 program=$3 loader=${4:-}
  libs=$root/lib/$multiarch:$root/usr/lib/$multiarch
  if [ -n "$loader" ]; then
    out=$("$loader" --library-path "$libs" --list "$root/usr/bin/$program" 2>&1) || true
  else
    out=$(LD_LIBRARY_PATH=$libs ldd "$root/usr/bin/$program" 2>&1) || true
  fi
  if echo "$out" | grep -q 'not found'; then
    echo "servers: $name: $program: libraries missing:" >&2
    echo "$out" | grep 'not found' >&2
    exit 1
  fi
  # Debian 13's binaries must not mix in a library of the system's.
  if [ -n "$loader" ] && echo "$out" | grep '=> /' | grep -qv "=> $root/"; then
    echo "servers: $name: $program: libraries from outside $root:" >&2
    echo "$out" | grep '=> /' | grep -v "=> $root/" >&2
    exit 1
  fi
}

install_server() {
  name=$1
  root=$dir/$name/root
  # The newest package of the release (an exact Debian revision would
  # vanish from the archive with the next security update); its upstream
  # version is checked below.
  case $name in
    redis-6.0)
      suite=bullseye kind=redis loader=
      set -- redis-server/$suite redis-tools/$suite libssl1.1/$suite liblua5.1-0/$suite lua-bitop/$suite lua-cjson/$suite ;;
    redis-8.0)
      suite=trixie kind=redis loader=own
      set -- redis-server/$suite redis-tools/$suite ;;
    valkey-8.0)
      suite=bookworm-backports kind=valkey loader=
      set -- valkey-server/$suite valkey-tools/$suite ;;
    valkey-8.1)
      suite=trixie kind=valkey loader=own
      set -- valkey-server/$suite valkey-tools/$suite ;;
    *) echo "servers: unknown server $name (redis-6.0 redis-8.0 valkey-8.0 valkey-8.1)" >&2; exit 2 ;;
  esac
  # Debian 13's: its C library and every library its binaries link.
  [ -z "$loader" ] || set -- "$@" libc6/trixie libssl3t64/trixie libjemalloc2/trixie liblzf1/trixie \
    libatomic1/trixie libstdc++6/trixie libgcc-s1/trixie libsystemd0/trixie libcap2/trixie zlib1g/trixie libzstd1/trixie
  if [ -x "$dir/$name/bin/redis-server" ] && "$dir/$name/bin/redis-server" --version 2>/dev/null | grep -q " v=${name#*-}\."; then
    echo "servers: $name: $("$dir/$name/bin/redis-server" --version)"
    return
  fi
  rm -rf "$dir/$name"
  fetch "$name" "$root" "$@"
  if [ "$loader" = own ]; then
    loader=$(ls "$root/usr/lib/$multiarch"/ld-linux*.so.* 2>/dev/null | head -n 1)
    [ -n "$loader" ] || { echo "servers: $name: no dynamic loader in $root/usr/lib/$multiarch" >&2; exit 1; }
  fi
  for tool in server cli benchmark; do
    program=$kind-$tool
    [ "$tool" != server ] || program=$kind-check-rdb # the server is the check tool under another name
    check "$name" "$root" "$program" "$loader"
    wrap "$name" "$root" "$kind-$tool" "redis-$tool" "$loader"
  done
  version=$("$dir/$name/bin/redis-server" --version) || { echo "servers: $name: the server does not run" >&2; exit 1; }
  case $version in
    *" v=${name#*-}."*) echo "servers: $name: $version" ;;
    *) echo "servers: $name: $suite now has another version ($version): update .ci/servers.sh and the README's \"Servers\"" >&2
       exit 1 ;;
  esac
}

for server in "$@"; do install_server "$server"; done
