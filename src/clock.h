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

#endif /* RELOCK_CLOCK_H */
