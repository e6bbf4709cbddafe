/* The distributed count-down latch, compatible with Redisson's
 * RCountDownLatch. relock_latch(3). Calls, futures and callbacks follow
 * relock/lock.h's rules. */
#ifndef RELOCK_LATCH_H
#define RELOCK_LATCH_H

#include <stdint.h>

#include <relock/client.h>
#include <relock/common.h>
#include <relock/error.h>
#include <relock/future.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct relock_latch relock_latch_t;

/* A latch object for name (Redisson's getCountDownLatch(name)): cheap, no
 * connection of its own; the name is copied. NULL with err set
 * (RELOCK_EINVAL, RELOCK_ENOMEM); err may be NULL. */
RELOCK_EXTERN relock_latch_t *relock_latch_new(relock_client_t *client, const char *name, relock_error_t *err);
/* Frees the object (operations in flight go on to their end). NULL: nothing. */
RELOCK_EXTERN void relock_latch_free(relock_latch_t *l);
RELOCK_EXTERN const char *relock_latch_name(const relock_latch_t *l);

/* -- asynchronous ----------------------------------------------------------*/

/* Each returns a future, NULL only when out of memory; invalid arguments
 * give a future failed with RELOCK_EINVAL naming the argument. */

/* Sets the count (>= 1) if none is set. Succeeds with a boolean: 1 set, 0 a
 * count is set already (trySetCount). */
RELOCK_EXTERN relock_future_t *relock_latch_try_set_count_async(relock_latch_t *l, int64_t count);
/* Counts down by one; at zero the awaiters are released. Succeeds with the
 * count left (0 once open). */
RELOCK_EXTERN relock_future_t *relock_latch_count_down_async(relock_latch_t *l);
/* Succeeds with the count (0: open, or never set). */
RELOCK_EXTERN relock_future_t *relock_latch_count_async(relock_latch_t *l);
/* Waits until the count is zero.
 *   wait_ms  RELOCK_INFINITE: as long as it takes; 0: check once; > 0: at
 *            most that long.
 * Succeeds with a boolean: 1 open, 0 still closed at the deadline.
 * Cancelling it stops the wait. */
RELOCK_EXTERN relock_future_t *relock_latch_await_async(relock_latch_t *l, int64_t wait_ms);
/* Deletes the count, which opens the latch (its awaiters are released).
 * Succeeds with a boolean: whether a count was set. */
RELOCK_EXTERN relock_future_t *relock_latch_delete_async(relock_latch_t *l);

/* -- blocking --------------------------------------------------------------*/

/* Each waits for its asynchronous call (from inside a loop callback:
 * RELOCK_EWOULDBLOCK). Returns 0 or an error. */
/* *open (may be NULL) is 1 or 0. */
RELOCK_EXTERN int relock_latch_await(relock_latch_t *l, int64_t wait_ms, int *open);
/* *left (may be NULL): the count left. */
RELOCK_EXTERN int relock_latch_count_down(relock_latch_t *l, int64_t *left);
/* *set (may be NULL) is 1 or 0. */
RELOCK_EXTERN int relock_latch_try_set_count(relock_latch_t *l, int64_t count, int *set);
RELOCK_EXTERN int relock_latch_count(relock_latch_t *l, int64_t *count);
/* *deleted (may be NULL) is 1 if a count was set, else 0. */
RELOCK_EXTERN int relock_latch_delete(relock_latch_t *l, int *deleted);

#ifdef __cplusplus
}
#endif
#endif /* RELOCK_LATCH_H */
