/* Groups of locks taken as one: the multi-lock (Redisson's RedissonMultiLock,
 * all of them) and RedLock (the Redlock algorithm over N independent Redis
 * masters, a majority of them).
 *
 * A group is made of lock objects (relock_lock_new and the other kinds of
 * relock/lock.h; not semaphores or latches, whose acquisitions take no
 * hold), possibly of different clients on different Redis servers. The
 * group owns them from then on: relock_multi_lock_free frees them, and
 * each lock's lost callback is the group's. All of them must run on one
 * libev loop: locks of one client, of embedded clients made on the same
 * loop, or of threaded clients made beside one another
 * (relock_client_new_beside: one loop thread for all of them).
 *
 * Acquisition, for owner (as relock_lock_lock_async):
 *   1. One try on every member at once (in parallel, not one after the
 *      other as Redisson does), each with the group's lease.
 *   2. The group is held once quorum members are (all for a multi-lock,
 *      n/2 + 1 for RedLock) and, for each, its validity (relock_lock_validity_ms:
 *      lease - time since its try was sent - (1% of the lease + 2 ms)) is
 *      still positive; it completes as soon as that is known, or known
 *      impossible, without waiting for the slowest node. A member that
 *      answers "acquired" after a successful group completed is kept (and
 *      released with the group); after a failed one it is given back.
 *   3. Failed: every member taken is given back. RedLock then tries again
 *      after a random 50-250 ms, until the wait runs out. A multi-lock that
 *      found a member held by someone else then takes its members one by
 *      one, each waiting as long as the group may, in one global order (by
 *      name, then by position): two multi-locks over the same names never
 *      wait for each other in a cycle, so they cannot deadlock.
 *
 * While held with the watchdog lease (RELOCK_INFINITE) every member is
 * renewed on its own; the group is lost - its lost callback runs, once -
 * when fewer than quorum members remain held (for a multi-lock: when any
 * member is lost). Its validity is the quorum-th largest of its held
 * members' validities: for RedLock, how long a majority is known to hold. */
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

/* A multi-lock / a RedLock over the n (>= 1) locks of the array (copied;
 * the locks themselves are the group's now; on failure they stay the
 * caller's). NULL with err
 * set (RELOCK_EINVAL saying which lock is wrong: NULL, twice in the array,
 * in another group, not a lock, on another loop; RELOCK_ENOMEM); err may be
 * NULL. For RedLock, give each lock the same name on a different server. */
RELOCK_EXTERN relock_multi_lock_t *relock_multi_lock_new(relock_lock_t *const *locks, size_t n, relock_error_t *err);
RELOCK_EXTERN relock_multi_lock_t *relock_redlock_new(relock_lock_t *const *locks, size_t n, relock_error_t *err);

/* Frees the group and its locks (holds stay held, as relock_lock_free
 * says; acquisitions in flight go on to their end). NULL: nothing. */
RELOCK_EXTERN void relock_multi_lock_free(relock_multi_lock_t *m);

/* How many locks, and how many must be held for the group to be. */
RELOCK_EXTERN size_t relock_multi_lock_size(const relock_multi_lock_t *m);
RELOCK_EXTERN size_t relock_multi_lock_quorum(const relock_multi_lock_t *m);

/* -- asynchronous ----------------------------------------------------------*/

/* Acquires the group for owner; wait_ms and lease_ms as for
 * relock_lock_lock_async (a fixed lease must also cover the time the
 * acquisition takes: members whose lease ran out meanwhile do not count).
 * Succeeds with a boolean: 1 held, 0 not within the wait. Fails when
 * member errors alone made the group impossible, with the first error
 * (for a multi-lock: any member's error), naming the lock. Cancelling it
 * gives back whatever was taken. */
RELOCK_EXTERN relock_future_t *relock_multi_lock_lock_async(relock_multi_lock_t *m, uint64_t owner,
                                                            int64_t wait_ms, int64_t lease_ms);

/* Releases owner's latest acquisition of the group (re-entries count, as
 * for a lock) on every member it holds. Succeeds with how many members
 * were released (a member whose answer is still out when the release
 * starts is given back when it comes, and not counted). Fails with
 * RELOCK_ENOTOWNER if owner holds no acquisition of it, RELOCK_ELOST if
 * the group was reported lost (the members still held are released all
 * the same), or the first member's error when fewer than quorum members
 * could be released. */
RELOCK_EXTERN relock_future_t *relock_multi_lock_unlock_async(relock_multi_lock_t *m, uint64_t owner);

/* The per-member results of the acquisition through m that completed
 * last (read them in its completion callback when several owners acquire
 * through m at once): into results[i] (i < size, up to n), 1 acquired, 0
 * held by someone else (or not tried), RELOCK_EPENDING no answer yet (a
 * held group's late answers fill it in as they come; a failed group's
 * tries still out are cancelled), another negative value the member's
 * error. Returns how many members the group has, or RELOCK_EINVAL. */
RELOCK_EXTERN int relock_multi_lock_results(relock_multi_lock_t *m, int *results, size_t size);

/* How long owner's latest acquisition of the group is known to be valid,
 * in milliseconds (see above; 0: take it as lost now). Negative: an error,
 * as relock_lock_validity_ms's (RELOCK_ENOTOWNER, RELOCK_ELOST). */
RELOCK_EXTERN int64_t relock_multi_lock_validity_ms(relock_multi_lock_t *m, uint64_t owner);

/* Called once when an acquisition of owner is lost: fewer than quorum of
 * its members remain held. reason is the member's (RELOCK_ELOST or
 * RELOCK_ETIMEDOUT, relock_lost_cb) whose loss broke the quorum; message
 * names the group's locks lost. Runs on the loop, like relock_lost_cb. */
typedef void (*relock_multi_lost_cb)(relock_multi_lock_t *m, uint64_t owner, int reason, const char *message,
                                     void *arg);
/* Sets (or, with NULL, clears) it. Returns 0, RELOCK_EINVAL for a NULL m,
 * or the error of a call from a thread that may not use the client (as
 * relock_lock_on_lost). */
RELOCK_EXTERN int relock_multi_lock_on_lost(relock_multi_lock_t *m, relock_multi_lost_cb cb, void *arg);

/* -- blocking --------------------------------------------------------------*/

/* For relock_thread_owner(), waiting on the future (relock/lock.h). */
RELOCK_EXTERN int relock_multi_lock_lock(relock_multi_lock_t *m, int64_t lease_ms);
/* *acquired (may be NULL) is 1 or 0. */
RELOCK_EXTERN int relock_multi_lock_try_lock(relock_multi_lock_t *m, int64_t wait_ms, int64_t lease_ms,
                                             int *acquired);
RELOCK_EXTERN int relock_multi_lock_unlock(relock_multi_lock_t *m);

#ifdef __cplusplus
}
#endif
#endif /* RELOCK_MULTI_LOCK_H */
