/* What a stuck process is doing: its threads' stacks, printed before a
 * test kills it, so that a hang seen once in CI can be read afterwards. */
#ifndef RELOCK_TEST_STACKS_H
#define RELOCK_TEST_STACKS_H

#include <sys/types.h>

/* Prints every thread's backtrace of pid to stdout as TAP comments ("# "),
 * at most max_lines lines, by running gdb in batch mode. Without gdb it
 * says so in one line; it never fails the caller. */
void relock_test_print_stacks(pid_t pid, int max_lines);

#endif /* RELOCK_TEST_STACKS_H */
