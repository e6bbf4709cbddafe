/* The monotonic clock every relock deadline is measured on. */
#ifndef RELOCK_CLOCK_H
#define RELOCK_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t relock__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* There is deliberately no reader of CLOCK_MONOTONIC_COARSE here: it is
 * cheaper, but lags the precise clock by an amount its resolution does not
 * bound (the kernel tick that advances it can come late, as on a busy VM),
 * so a deadline measured from it can end early. */

#endif /* RELOCK_CLOCK_H */
