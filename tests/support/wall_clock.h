/* A wall clock a test can step: a program linked with wall_clock.c gets its
 * own clock_gettime, gettimeofday and time, which add an offset to
 * CLOCK_REALTIME and its relatives (as an NTP step, a VM resume or an
 * administrator would) and leave the monotonic clocks alone. The executable
 * comes first in symbol lookup, so libev's and libc's own callers bind here
 * too (link the program with -export-dynamic for the shared libraries); no
 * LD_PRELOAD, so it works the same under the sanitizers and valgrind. */
#ifndef RELOCK_TEST_WALL_CLOCK_H
#define RELOCK_TEST_WALL_CLOCK_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

/* Adds ns to the offset (either sign); sets it back to 0. */
void relock_test_wall_step(int64_t ns);
void relock_test_wall_reset(void);
/* Keeps the offset at *where from now on (e.g. in memory shared with the
 * process that steps this one). */
void relock_test_wall_offset_at(_Atomic int64_t *where);
/* The kernel's clock, without the offset. */
int relock_test_kernel_clock_gettime(clockid_t id, struct timespec *ts);

#endif
