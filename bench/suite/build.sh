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
