/* What a semaphore and a count-down latch share: a Redis string holding a
 * count, changed by one script of the object's (lua/semaphore_update.lua,
 * lua/latch_update.lua) that a request latch makes idempotent, and read
 * with GET. Both are lock objects (lock_kind.h) of a no_hold kind, so that
 * waiting for permits or for zero is the locks' waiting: pub/sub wake-ups,
 * deadlines, cancel, and giving back what an abandoned try took. */
#ifndef RELOCK__OBJECTS_COUNTER_H
#define RELOCK__OBJECTS_COUNTER_H

#include <stdint.h>

#include <relock/future.h>

#include "objects/lock_impl.h"

/* Runs script (a relock__scripts index) with KEYS the count, its channel
 * and a new request latch, ARGV what, n, the latch's TTL and the publish
 * command. The future succeeds with the script's integer answer (a
 * boolean if boolean); NULL when out of memory. */
relock_future_t *relock__counter_update(relock_lock_t *obj, int script, const char *what, int64_t n, int boolean);

/* The same with a fourth key after the latch, and (if not NULL) a fifth
 * argument after the publish command (the permit-expirable semaphore's
 * permits and a permit id); on_close: a release the client's close waits
 * for (release-on-close); answer_by_ns: 0, or a release retried in the
 * background until answered or then (watchdog/hold.h). */
relock_future_t *relock__counter_update_with(relock_lock_t *obj, int script, const char *what, int64_t n, int boolean,
                                            const char *key4, size_t key4_len, const char *arg5, size_t arg5_len,
                                            int on_close, uint64_t answer_by_ns);

/* The count: GET, 0 when there is none. */
relock_future_t *relock__counter_get(relock_lock_t *obj);

/* A future already failed with RELOCK_EINVAL: "<what> is NULL". */
relock_future_t *relock__counter_null(const char *what);

#endif /* RELOCK__OBJECTS_COUNTER_H */
