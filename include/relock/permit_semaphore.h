/* The permit-expirable semaphore, compatible with Redisson's
 * RPermitExpirableSemaphore: each permit has an id and a lease after which
 * it returns to the pool (expiry on the Redis server's clock).
 * relock_permit_semaphore(3). Calls, futures and callbacks follow
 * relock/lock.h's rules. */
#ifndef RELOCK_PERMIT_SEMAPHORE_H
#define RELOCK_PERMIT_SEMAPHORE_H

#include <stdint.h>

#include <relock/client.h>
#include <relock/common.h>
#include <relock/error.h>
#include <relock/future.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct relock_permit_semaphore relock_permit_semaphore_t;

/* A permit id: 32 hex digits and a NUL (Redisson's format). */
#define RELOCK_PERMIT_ID_SIZE 33

/* An object for name (Redisson's getPermitExpirableSemaphore(name)); same
 * rules as relock_semaphore_new. */
RELOCK_EXTERN relock_permit_semaphore_t *relock_permit_semaphore_new(relock_client_t *client, const char *name,
                                                                     relock_error_t *err);
RELOCK_EXTERN void relock_permit_semaphore_free(relock_permit_semaphore_t *s);
RELOCK_EXTERN const char *relock_permit_semaphore_name(const relock_permit_semaphore_t *s);

/* -- asynchronous ----------------------------------------------------------*/

/* Each returns a future, NULL only when out of memory; invalid arguments
 * give a future failed with RELOCK_EINVAL naming the argument. */

/* Takes one permit.
 *   wait_ms  RELOCK_INFINITE: as long as it takes; 0: one try; > 0: at
 *            most that long.
 *   lease_ms RELOCK_INFINITE: the permit never expires; RELOCK_MIN_LEASE_MS
 *            (10 ms, the least a lease may be) or more: it returns to
 *            the pool that long after it was taken.
 * Succeeds with the permit's id (a string, relock_future_string), or with
 * no value (RELOCK_VALUE_NONE) when none was free within the wait. As for
 * a lock, an answer that came back after the lease (less the drift margin)
 * is not trusted: that permit is given back and another tried for. A
 * permit taken on the server by an acquisition that was cancelled, or
 * whose answer was lost, is given back. */
RELOCK_EXTERN relock_future_t *relock_permit_semaphore_acquire_async(relock_permit_semaphore_t *s, int64_t wait_ms,
                                                                     int64_t lease_ms);
/* Gives permit id back (32 hex digits, else RELOCK_EINVAL). Succeeds with
 * a boolean: 1 released, 0 it was not taken (expired, released already,
 * never taken) - Redisson's tryRelease. */
RELOCK_EXTERN relock_future_t *relock_permit_semaphore_release_async(relock_permit_semaphore_t *s, const char *id);
/* Sets the count to permits (>= 0) if none is set: a boolean. */
RELOCK_EXTERN relock_future_t *relock_permit_semaphore_try_set_permits_async(relock_permit_semaphore_t *s,
                                                                             int64_t permits);
/* Adds permits (negative: removes them): the number free afterwards. */
RELOCK_EXTERN relock_future_t *relock_permit_semaphore_add_permits_async(relock_permit_semaphore_t *s,
                                                                         int64_t permits);
/* The number of free permits, expired ones returned to the pool first. */
RELOCK_EXTERN relock_future_t *relock_permit_semaphore_available_async(relock_permit_semaphore_t *s);

/* -- blocking --------------------------------------------------------------*/

/* As relock/semaphore.h's. id receives the permit's id ("" when none was
 * free within the wait). */
RELOCK_EXTERN int relock_permit_semaphore_acquire(relock_permit_semaphore_t *s, int64_t wait_ms, int64_t lease_ms,
                                                  char id[RELOCK_PERMIT_ID_SIZE]);
/* *released (may be NULL) is 1 or 0. */
RELOCK_EXTERN int relock_permit_semaphore_release(relock_permit_semaphore_t *s, const char *id, int *released);
RELOCK_EXTERN int relock_permit_semaphore_try_set_permits(relock_permit_semaphore_t *s, int64_t permits, int *set);
RELOCK_EXTERN int relock_permit_semaphore_available(relock_permit_semaphore_t *s, int64_t *available);
/* *available (may be NULL): the number free afterwards. */
RELOCK_EXTERN int relock_permit_semaphore_add_permits(relock_permit_semaphore_t *s, int64_t permits,
                                                      int64_t *available);

#ifdef __cplusplus
}
#endif
#endif /* RELOCK_PERMIT_SEMAPHORE_H */
