/* The steppable wall clock of tests/support/wall_clock.h. */
#include <config.h>

#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "support/wall_clock.h"

static _Atomic int64_t own_offset_ns;
/* Relaxed is enough: a step need not be seen at once by every thread, only
 * at all. */
static _Atomic(_Atomic int64_t *) offset_ns = &own_offset_ns;

void relock_test_wall_step(int64_t ns) {
  atomic_fetch_add_explicit(atomic_load(&offset_ns), ns, memory_order_relaxed);
}

void relock_test_wall_reset(void) {
  atomic_store_explicit(atomic_load(&offset_ns), 0, memory_order_relaxed);
}

void relock_test_wall_offset_at(_Atomic int64_t *where) {
  atomic_store(&offset_ns, where);
}

static int is_wall_clock(clockid_t id) {
  return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_TAI;
}

/* Asked directly: libc's clock_gettime would find the definition below. */
int relock_test_kernel_clock_gettime(clockid_t id, struct timespec *ts) {
  return (int)syscall(SYS_clock_gettime, id, ts);
}

/* Visible: the build hides every symbol by default, and a hidden definition
 * would bind this program's own calls only, not libev's. */
#define SHIM __attribute__((visibility("default")))

SHIM int clock_gettime(clockid_t id, struct timespec *ts) {
  int r = relock_test_kernel_clock_gettime(id, ts);
  if (r != 0 || !is_wall_clock(id))
    return r;
  int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec +
               atomic_load_explicit(atomic_load(&offset_ns), memory_order_relaxed);
  ts->tv_sec = (time_t)(ns / 1000000000);
  ts->tv_nsec = (long)(ns % 1000000000);
  return 0;
}

SHIM int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
  struct timespec ts;
  int r = clock_gettime(CLOCK_REALTIME, &ts);
  if (r != 0)
    return r;
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = (suseconds_t)(ts.tv_nsec / 1000);
  if (tz != NULL)
    memset(tz, 0, sizeof(struct timezone));
  return 0;
}

SHIM time_t time(time_t *out) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
    return (time_t)-1;
  if (out != NULL)
    *out = ts.tv_sec;
  return ts.tv_sec;
}
