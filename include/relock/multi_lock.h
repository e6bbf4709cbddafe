/* Groups of locks taken as one: the multi-lock (Redisson's
 * RedissonMultiLock: all of them) and RedLock (a majority of N independent
 * masters). relock_multi_lock(3).
 *
 * A group owns its locks (any kind of relock/lock.h; all on one libev
 * loop: one client's, embedded clients on one loop, or threaded clients
 * made with relock_client_new_beside) and their lost callbacks. Calls,
 * futures and callbacks follow relock/lock.h's rules. */
#ifndef RELOCK_MULTI_LOCK_H
#define RELOCK_MULTI_LOCK_H

#include <stddef.h>
#include <stdint.h>

#include <relock/common.h>
#include <relock/error.h>
#include <relock/future.h>
#include <relock/lock.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct relock_multi_lock relock_multi_lock_t;

/* A multi-lock / a RedLock over the n (>= 1) locks (the array is copied;
 * the locks are the group's now, the caller's again on failure). For
 * RedLock, the same name on different servers. NULL with err set (may be
 * NULL): RELOCK_EINVAL saying which lock is wrong, RELOCK_ENOMEM. */
RELOCK_EXTERN relock_multi_lock_t *relock_multi_lock_new(relock_lock_t *const *locks, size_t n, relock_error_t *err);
RELOCK_EXTERN relock_multi_lock_t *relock_redlock_new(relock_lock_t *const *locks, size_t n, relock_error_t *err);

/* Frees the group and its locks (holds stay held, as with
 * relock_lock_free). NULL: nothing. */
RELOCK_EXTERN void relock_multi_lock_free(relock_multi_lock_t *m);

/* How many locks, and how many must be held for the group to be. */
RELOCK_EXTERN size_t relock_multi_lock_size(const relock_multi_lock_t *m);
RELOCK_EXTERN size_t relock_multi_lock_quorum(const relock_multi_lock_t *m);

/* -- asynchronous ----------------------------------------------------------*/

/* Acquires the group for owner; wait_ms and lease_ms as for
 * relock_lock_lock_async. Succeeds with a boolean: 1 held, 0 not within
 * the wait. Fails with the first member error when errors alone made the
 * group impossible. Cancelling it gives back whatever was taken. */
RELOCK_EXTERN relock_future_t *relock_multi_lock_lock_async(relock_multi_lock_t *m, uint64_t owner,
                                                            int64_t wait_ms, int64_t lease_ms);

/* Releases owner's latest acquisition on every member it holds. Succeeds
 * with how many were released. Fails with RELOCK_ENOTOWNER, RELOCK_ELOST
 * (members still held are released all the same), or the first member's
 * error when fewer than quorum could be released. */
RELOCK_EXTERN relock_future_t *relock_multi_lock_unlock_async(relock_multi_lock_t *m, uint64_t owner);

/* The per-member results of the last completed acquisition into
 * results[0..size): 1 acquired, 0 held elsewhere, RELOCK_EPENDING, or the
 * member's error. Returns the group's size, or RELOCK_EINVAL. */
RELOCK_EXTERN int relock_multi_lock_results(relock_multi_lock_t *m, int *results, size_t size);

/* As relock_lock_validity_ms, for the group (its quorum-th largest). */
RELOCK_EXTERN int64_t relock_multi_lock_validity_ms(relock_multi_lock_t *m, uint64_t owner);

/* Called on the loop, once, when fewer than quorum members of owner's
 * acquisition remain held; reason as relock_lost_cb's. The members left
 * are released right then: the acquisition holds nothing any more, and
 * its release answers RELOCK_ELOST. */
typedef void (*relock_multi_lost_cb)(relock_multi_lock_t *m, uint64_t owner, int reason, const char *message,
                                     void *arg);
/* Sets (or, with NULL, clears) it. Returns 0, RELOCK_EINVAL for a NULL m,
 * or the error of a call from a thread that may not use the client (as
 * relock_lock_on_lost). */
RELOCK_EXTERN int relock_multi_lock_on_lost(relock_multi_lock_t *m, relock_multi_lost_cb cb, void *arg);

/* -- blocking --------------------------------------------------------------*/

/* For relock_thread_owner(), as relock/lock.h's; 0 or an error. */
RELOCK_EXTERN int relock_multi_lock_lock(relock_multi_lock_t *m, int64_t lease_ms);
/* *acquired (may be NULL) is 1 or 0. */
RELOCK_EXTERN int relock_multi_lock_try_lock(relock_multi_lock_t *m, int64_t wait_ms, int64_t lease_ms,
                                             int *acquired);
RELOCK_EXTERN int relock_multi_lock_unlock(relock_multi_lock_t *m);

#ifdef __cplusplus
}
#endif
#endif /* RELOCK_MULTI_LOCK_H */
