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

/* A permit id: 32 hex digits and a NUL (Redisson's format). A permit this
 * client takes with a lease has an id whose first 16 digits are the
 * client's id's first 16 hex digits (a UUID's, dashes skipped), so that a
 * tool can tell which client holds it. */
#define RELOCK_PERMIT_ID_SIZE 33

/* The lease of a permit that never expires (Redisson's acquire() without a
 * lease): nothing renews or checks it, and a holder that dies keeps it
 * taken for good. */
#define RELOCK_PERMIT_NO_LEASE ((int64_t)-2)

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
 *   lease_ms RELOCK_INFINITE: a watched permit - its lease is the
 *            watchdog timeout, renewed by this client while it holds it
 *            (as a lock's), so that it returns to the pool within that
 *            lease once its holder is gone; RELOCK_MIN_LEASE_MS (10 ms)
 *            or more: it returns to the pool that long after it was
 *            taken; RELOCK_PERMIT_NO_LEASE: it never expires.
 * A permit with a lease (either) is a hold of this client's, as a lock's:
 * one found gone before its lease ends (released by another, deleted, lost
 * in a failover), or whose renewals fail until its lease runs out, is
 * lost - relock_permit_semaphore_on_lost's callback is told, its validity
 * is 0, and its release fails with RELOCK_ELOST. (relock 0.1.0's
 * RELOCK_INFINITE lease was RELOCK_PERMIT_NO_LEASE.)
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
 * never taken) - Redisson's tryRelease; fails with RELOCK_ELOST when it
 * is a permit of this client's found lost. Its renewal stops. */
RELOCK_EXTERN relock_future_t *relock_permit_semaphore_release_async(relock_permit_semaphore_t *s, const char *id);
/* Sets the count to permits (>= 0) if none is set: a boolean. */
RELOCK_EXTERN relock_future_t *relock_permit_semaphore_try_set_permits_async(relock_permit_semaphore_t *s,
                                                                             int64_t permits);
/* Adds permits (negative: removes them): the number free afterwards. */
RELOCK_EXTERN relock_future_t *relock_permit_semaphore_add_permits_async(relock_permit_semaphore_t *s,
                                                                         int64_t permits);
/* The number of free permits, expired ones returned to the pool first. */
RELOCK_EXTERN relock_future_t *relock_permit_semaphore_available_async(relock_permit_semaphore_t *s);

/* -- lost permits ----------------------------------------------------------*/

/* Called on the loop, once per permit with a lease found lost: reason
 * RELOCK_ELOST (it is gone from Redis) or RELOCK_ETIMEDOUT (its lease ran
 * out unrenewed); id is the permit's, message says what happened. */
typedef void (*relock_permit_lost_cb)(relock_permit_semaphore_t *s, const char *id, int reason,
                                      const char *message, void *arg);

/* Sets (NULL: clears) the lost callback for permits taken through s.
 * Returns 0, RELOCK_EINVAL (NULL s), RELOCK_ENOMEM (then not set), or the
 * error of a call from a thread that may not use the client. */
RELOCK_EXTERN int relock_permit_semaphore_on_lost(relock_permit_semaphore_t *s, relock_permit_lost_cb cb, void *arg);

/* How long permit id is known valid from now, in ms, without network (as
 * relock_lock_validity_ms). 0: take it as lost now. Negative:
 * RELOCK_ENOTOWNER (not a permit with a lease this client holds),
 * RELOCK_ELOST, RELOCK_EINVAL. */
RELOCK_EXTERN int64_t relock_permit_semaphore_validity_ms(relock_permit_semaphore_t *s, const char *id);

/* Asks Redis: succeeds with 1 if permit id is still there (a watched one
 * is renewed on the way), 0 if not (it is then declared lost). */
RELOCK_EXTERN relock_future_t *relock_permit_semaphore_validate_async(relock_permit_semaphore_t *s, const char *id);

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
