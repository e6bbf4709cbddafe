/* The monotonic clock every relock deadline is measured on. */
#ifndef RELOCK__BASE_CLOCK_H
#define RELOCK__BASE_CLOCK_H

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

/* Time arithmetic on the monotonic timeline, signed so that a deadline
 * already passed is a negative distance rather than a wrap to ~584 years. */
#define RELOCK__NS_PER_MS INT64_C(1000000)

/* a - b in nanoseconds (both on the monotonic clock). */
static inline int64_t relock__ns_between(uint64_t a, uint64_t b) { return (int64_t)(a - b); }

/* Whole milliseconds from now until deadline, rounded up; 0 once it passed. */
static inline int64_t relock__ms_until(uint64_t deadline_ns, uint64_t now_ns) {
  int64_t ns = relock__ns_between(deadline_ns, now_ns);
  return ns > 0 ? (ns + RELOCK__NS_PER_MS - 1) / RELOCK__NS_PER_MS : 0;
}

/* now + ms (ms >= 0) as a monotonic deadline. */
static inline uint64_t relock__deadline_after(uint64_t now_ns, int64_t ms) {
  return now_ns + (uint64_t)ms * (uint64_t)RELOCK__NS_PER_MS;
}

#endif /* RELOCK__BASE_CLOCK_H */
