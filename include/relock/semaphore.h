/* The distributed semaphore, compatible with Redisson's RSemaphore: permits
 * that belong to nobody and never expire - whoever took them gives them
 * back. relock_semaphore(3). Calls, futures and callbacks follow
 * relock/lock.h's rules. */
#ifndef RELOCK_SEMAPHORE_H
#define RELOCK_SEMAPHORE_H

#include <stdint.h>

#include <relock/client.h>
#include <relock/common.h>
#include <relock/error.h>
#include <relock/future.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct relock_semaphore relock_semaphore_t;

/* A semaphore object for name (Redisson's getSemaphore(name)): cheap, no
 * connection of its own; the name is copied (any non-empty string). NULL
 * with err set (RELOCK_EINVAL naming the argument, RELOCK_ENOMEM); err may
 * be NULL. */
RELOCK_EXTERN relock_semaphore_t *relock_semaphore_new(relock_client_t *client, const char *name, relock_error_t *err);
/* Frees the object (operations in flight go on to their end). NULL: nothing. */
RELOCK_EXTERN void relock_semaphore_free(relock_semaphore_t *s);
RELOCK_EXTERN const char *relock_semaphore_name(const relock_semaphore_t *s);

/* -- asynchronous ----------------------------------------------------------*/

/* Each returns a future, NULL only when out of memory; invalid arguments
 * give a future failed with RELOCK_EINVAL naming the argument. */

/* Takes permits (>= 1) at once.
 *   wait_ms  RELOCK_INFINITE: as long as it takes (acquire()); 0: one try
 *            (tryAcquire()); > 0: at most that long.
 * Succeeds with a boolean: 1 taken, 0 not within the wait. Cancelling it
 * stops the wait; permits taken on the server meanwhile are given back. */
RELOCK_EXTERN relock_future_t *relock_semaphore_acquire_async(relock_semaphore_t *s, int64_t permits, int64_t wait_ms);
/* Gives permits (>= 1) back. Succeeds with the number free afterwards. */
RELOCK_EXTERN relock_future_t *relock_semaphore_release_async(relock_semaphore_t *s, int64_t permits);
/* Sets the count to permits (>= 0) if none is set. Succeeds with a
 * boolean: 1 set, 0 a count was set already (trySetPermits). */
RELOCK_EXTERN relock_future_t *relock_semaphore_try_set_permits_async(relock_semaphore_t *s, int64_t permits);
/* Adds permits (negative: removes them; the count may go below zero).
 * Succeeds with the number free afterwards (addPermits). */
RELOCK_EXTERN relock_future_t *relock_semaphore_add_permits_async(relock_semaphore_t *s, int64_t permits);
/* Takes every free permit. Succeeds with how many (drainPermits). */
RELOCK_EXTERN relock_future_t *relock_semaphore_drain_permits_async(relock_semaphore_t *s);
/* Succeeds with the number of free permits (availablePermits); 0 when no
 * count is set. */
RELOCK_EXTERN relock_future_t *relock_semaphore_available_async(relock_semaphore_t *s);

/* -- blocking --------------------------------------------------------------*/

/* Each starts the asynchronous call and waits for it (from inside a loop
 * callback: RELOCK_EWOULDBLOCK). Returns 0 or an error; the error's message
 * stays readable through relock_last_error_message. */

/* *acquired (may be NULL) is 1 or 0. */
RELOCK_EXTERN int relock_semaphore_acquire(relock_semaphore_t *s, int64_t permits, int64_t wait_ms, int *acquired);
RELOCK_EXTERN int relock_semaphore_release(relock_semaphore_t *s, int64_t permits);
/* *set (may be NULL) is 1 or 0. */
RELOCK_EXTERN int relock_semaphore_try_set_permits(relock_semaphore_t *s, int64_t permits, int *set);
/* *available (may be NULL). */
RELOCK_EXTERN int relock_semaphore_available(relock_semaphore_t *s, int64_t *available);
/* *available (may be NULL): the number free afterwards. */
RELOCK_EXTERN int relock_semaphore_add_permits(relock_semaphore_t *s, int64_t permits, int64_t *available);
/* *drained (may be NULL): how many were taken. */
RELOCK_EXTERN int relock_semaphore_drain_permits(relock_semaphore_t *s, int64_t *drained);

#ifdef __cplusplus
}
#endif
#endif /* RELOCK_SEMAPHORE_H */
