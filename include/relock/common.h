/* Definitions every relock header shares: the export marker and the
 * conventions for durations. */
#ifndef RELOCK_COMMON_H
#define RELOCK_COMMON_H

#include <stdint.h>

/* Marks the library's public functions. The library is built with
 * -fvisibility=hidden, so everything not marked stays private. */
#if defined(__GNUC__) || defined(__clang__)
#define RELOCK_EXTERN __attribute__((visibility("default")))
#else
#define RELOCK_EXTERN
#endif

/* Durations are int64_t milliseconds, measured on the monotonic clock.
 * RELOCK_INFINITE (-1) means "no limit" for a wait, and "watchdog lease"
 * (renewed while held) for a lease, as in Redisson. */
#define RELOCK_INFINITE ((int64_t)-1)

#endif /* RELOCK_COMMON_H */
