#!/bin/sh
# The short chaos soak for make check (about a minute; the long one is
# make chaos-long). Under valgrind it is skipped: the soak's timing bounds
# assume full speed, and its workers are forked copies of a program the rest
# of the suite already checks there.
if [ -n "${RELOCK_UNDER_VALGRIND:-}" ]; then
  echo "1..0 # SKIP the chaos soak does not run under valgrind"
  exit 0
fi
exec ./tests/chaos/chaos --seconds "${CHAOS_SECONDS:-60}"
