# The relock tool as the CLI tests run it, sourced by them. Under make
# check-valgrind relock itself runs under valgrind (RELOCK_CLI_WRAPPER): a
# memory error or leak changes its exit status (99), which the tests see.
relock_bin=${RELOCK:-./tools/relock}
wrapper=${RELOCK_CLI_WRAPPER:-}
relock() { $wrapper "$relock_bin" "$@"; }
# In the background, as one process: $! is relock itself, for kill and wait.
relock_bg() { (exec $wrapper "$relock_bin" "$@") & }
slack=1 # time bounds that only catch hangs grow under valgrind
[ -n "${RELOCK_UNDER_VALGRIND:-}" ] && slack=10
