#!/bin/sh
# Builds the interop peer (Peer.java on Redisson) into OUT (its classes and
# its dependencies' jars), offline from ~/.m2: ./bootstrap --deps fetched them
# (tests/interop/build.sh --fetch does it again). Prints why when it cannot.
#   tests/interop/build.sh [--fetch] OUT
set -eu
here=$(cd "$(dirname "$0")" && pwd)
offline=-o
[ "${1:-}" = --fetch ] && { offline=; shift; }
out=${1:?usage: build.sh [--fetch] OUT}
command -v mvn >/dev/null || { echo "mvn not found: ./bootstrap --deps installs maven" >&2; exit 1; }
command -v java >/dev/null || { echo "java not found: ./bootstrap --deps installs openjdk-17-jdk-headless" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
# the sources are newer than the build: build again
if [ -f "$out/classes/relock/interop/Peer.class" ] && [ -z "$(find "$here/src" "$here/pom.xml" -newer "$out/classes/relock/interop/Peer.class")" ]; then
  exit 0
fi
mvn -q $offline -B -f "$here/pom.xml" -Drelock.build="$out" compile
