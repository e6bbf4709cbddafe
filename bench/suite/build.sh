# Sourced by bench/run: the build directory, and make there.
# build_programs: sets build, lock and threads (the programs), tmo (the
# timeout every program runs under) and out (the JSON's path, unless -o).
build_programs() {
  is_build() { [ -f "$1/Makefile" ] && grep -q '^PACKAGE_NAME = relock$' "$1/Makefile"; }
  if [ -n "${RELOCK_BUILD_DIR:-}" ]; then
    build=$RELOCK_BUILD_DIR
  elif is_build .; then
    build=.
  else
    build=$src
    if ! is_build "$src"; then
      say "configuring $src"
      [ -x "$src/configure" ] || (cd "$src" && ./bootstrap) >&2
      (cd "$src" && ./configure -q) >&2
    fi
  fi
  build=$(cd "$build" && pwd)
  say "building in $build"
  # all, not just the programs: the generated sources (BUILT_SOURCES) come first
  jobs=
  [ -n "${MAKEFLAGS:-}" ] || jobs=-j$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
  make -C "$build" --no-print-directory -s $jobs >&2
  lock=$build/bench/lock
  threads=$build/bench/threads
  # no program may hang the suite: each gets two minutes
  tmo=
  command -v timeout >/dev/null && tmo="timeout 120"
  out=${out:-$build/bench/results.json}
}

# build_tls: part tls's build, a second one beside the first, made on first
# use and reused after: hiredis 0.14 has no TLS, so relock is configured
# --with-tls against Debian 13's hiredis 1.2.0, which .ci/hiredis1.sh unpacks
# into a private prefix. All of it lives in $build/_build_tls (git-ignored):
#   hiredis1/  the prefix (fetched once)
#   src/       the sources, copied by make distdir on every run (mtimes kept,
#              so make rebuilds what changed): a source tree configured in
#              place cannot host a second build
#   build/     the build, configured from src/
# Sets tls_build and tls_libdir (the programs need it in LD_LIBRARY_PATH:
# the linker found libhiredis.so.1.1.0 there), and returns 0; or sets
# tls_why (the reason, for the part's rows) and returns 1.
build_tls() {
  tls_dir=$build/_build_tls
  tls_build=$tls_dir/build
  tls_libdir=$tls_dir/hiredis1/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
  mkdir -p "$tls_dir"
  say "hiredis 1.2.0 for the TLS build in $tls_dir/hiredis1 (.ci/hiredis1.sh)"
  if ! sh "$src/.ci/hiredis1.sh" "$tls_dir/hiredis1" >"$tls_dir/hiredis1.log" 2>&1; then
    sed 's/^/  /' "$tls_dir/hiredis1.log" >&2
    tls_why="fetching Debian 13's hiredis 1.2.0 failed (.ci/hiredis1.sh: $(tail -n 1 "$tls_dir/hiredis1.log"))"
    return 1
  fi
  if ! make -C "$build" --no-print-directory -s distdir distdir="$tls_dir/src" >"$tls_dir/distdir.log" 2>&1; then
    sed 's/^/  /' "$tls_dir/distdir.log" >&2
    tls_why="make distdir for the TLS build failed ($(tail -n 1 "$tls_dir/distdir.log"))"
    return 1
  fi
  # PKG_CONFIG_PATH as an argument: config.status keeps it for a re-run
  if ! grep -q '^#define RELOCK_HAVE_TLS 1' "$tls_build/config.h" 2>/dev/null; then
    say "configuring $tls_build --with-tls against hiredis 1.2.0"
    mkdir -p "$tls_build"
    if ! (cd "$tls_build" && LD_LIBRARY_PATH=$tls_libdir ../src/configure -q --with-tls \
      PKG_CONFIG_PATH="$tls_libdir/pkgconfig") >&2; then
      tls_why="configure --with-tls against hiredis 1.2.0 failed (see $tls_build/config.log)"
      return 1
    fi
  fi
  say "building in $tls_build"
  jobs=
  [ -n "${MAKEFLAGS:-}" ] || jobs=-j$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
  # only what the part runs, the generated sources (BUILT_SOURCES) first;
  # the linker finds libhiredis.so.1.1.0 (librelock's) through LD_LIBRARY_PATH
  if ! LD_LIBRARY_PATH=$tls_libdir make -C "$tls_build" --no-print-directory -s src/redis/scripts.h >&2 ||
    ! LD_LIBRARY_PATH=$tls_libdir make -C "$tls_build" --no-print-directory -s $jobs bench/lock tools/relock >&2; then
    tls_why="building the TLS build failed (make in $tls_build)"
    return 1
  fi
}
