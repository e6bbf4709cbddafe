/* The reentrant distributed lock, compatible with Redisson's RLock, and
 * its other kinds (fair, read-write, fenced, spin). relock_lock(3),
 * relock_lock_family(3).
 *
 * Common to the calls below: a NULL lock or an argument out of range gives
 * RELOCK_EINVAL naming it (a future already failed, for the _async calls);
 * an _async call returns a future the caller releases, NULL only when out
 * of memory, whose callbacks run on the client's loop. owner is the
 * caller's 64-bit id of a task; the blocking calls use
 * relock_thread_owner(), and from inside a loop callback fail with
 * RELOCK_EWOULDBLOCK (their message: relock_last_error_message). */
#ifndef RELOCK_LOCK_H
#define RELOCK_LOCK_H

#include <stddef.h>
#include <stdint.h>

#include <relock/client.h>
#include <relock/common.h>
#include <relock/error.h>
#include <relock/future.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct relock_lock relock_lock_t;

/* The longest fixed lease, about 34 years; a longer wait counts as
 * RELOCK_INFINITE. */
#define RELOCK_MAX_LEASE_MS (INT64_C(1) << 40)

/* The shortest lease (fixed, or the watchdog-timeout option); a shorter
 * one is refused with RELOCK_EINVAL (relock_lock(3): Leases). */
#define RELOCK_MIN_LEASE_MS 10

/* A lock object for name (copied; non-empty). Cheap: no connection of its
 * own. The caller's: relock_lock_free. NULL with err set (may be NULL):
 * RELOCK_EINVAL, RELOCK_ENOMEM. */
RELOCK_EXTERN relock_lock_t *relock_lock_new(relock_client_t *client, const char *name, relock_error_t *err);

/* -- the other kinds: as relock_lock_new; every relock_lock_* call works on
 * them (relock_lock_family(3)) ----------------------------------------------*/

/* Redisson's getFairLock: waiters served in order. */
RELOCK_EXTERN relock_lock_t *relock_fair_lock_new(relock_client_t *client, const char *name, relock_error_t *err);

/* Redisson's getReadWriteLock(name).readLock() / .writeLock(). A reader
 * taking the write lock fails at once with RELOCK_EUPGRADE. */
RELOCK_EXTERN relock_lock_t *relock_read_lock_new(relock_client_t *client, const char *name, relock_error_t *err);
RELOCK_EXTERN relock_lock_t *relock_write_lock_new(relock_client_t *client, const char *name, relock_error_t *err);

/* Redisson's getFencedLock: each acquisition's future succeeds with its
 * token (an integer >= 1), or 0 when not acquired in time. */
RELOCK_EXTERN relock_lock_t *relock_fenced_lock_new(relock_client_t *client, const char *name, relock_error_t *err);

/* The fenced lock's latest token (an integer; 0 if none was ever taken).
 * RELOCK_EINVAL for a lock of another kind. */
RELOCK_EXTERN relock_future_t *relock_fenced_lock_token_async(relock_lock_t *lock);

/* Redisson's getSpinLock: no pub/sub, waiters back off and retry. */
RELOCK_EXTERN relock_lock_t *relock_spin_lock_new(relock_client_t *client, const char *name, relock_error_t *err);

/* Frees the object. Its holds stay held (and renewed); operations in
 * flight complete. */
RELOCK_EXTERN void relock_lock_free(relock_lock_t *lock);

RELOCK_EXTERN const char *relock_lock_name(const relock_lock_t *lock);

/* owner's hash field, "<client-id>:<owner>", into buf (size bytes, NUL
 * included); returns the length it needs. */
RELOCK_EXTERN size_t relock_lock_field(const relock_lock_t *lock, uint64_t owner, char *buf, size_t size);

/* -- asynchronous ----------------------------------------------------------*/

/* Acquires (or re-enters) the lock for owner.
 *   wait_ms  RELOCK_INFINITE: as long as it takes; 0: one try; > 0: at most.
 *   lease_ms RELOCK_INFINITE: the watchdog lease, renewed while held;
 *            RELOCK_MIN_LEASE_MS to RELOCK_MAX_LEASE_MS: fixed.
 * Succeeds with a boolean: 1 acquired, 0 not in time. Fails on errors
 * (RELOCK_ESERVER, RELOCK_ENOPERM, connection errors after the retries).
 * Cancelling it stops the wait and never leaves the lock held. */
RELOCK_EXTERN relock_future_t *relock_lock_lock_async(relock_lock_t *lock, uint64_t owner, int64_t wait_ms,
                                                      int64_t lease_ms);

/* Releases one hold of owner. Succeeds with a boolean: 1 the lock is free,
 * 0 reentrant holds remain. Fails with RELOCK_ENOTOWNER (not held by
 * owner), RELOCK_ELOST (the hold was lost), or another error. */
RELOCK_EXTERN relock_future_t *relock_lock_unlock_async(relock_lock_t *lock, uint64_t owner);

/* Deletes the lock whoever holds it. Succeeds with a boolean: whether it
 * was held. */
RELOCK_EXTERN relock_future_t *relock_lock_force_unlock_async(relock_lock_t *lock);

/* Queries, each answered by Redis. */
RELOCK_EXTERN relock_future_t *relock_lock_is_locked_async(relock_lock_t *lock); /* boolean */
RELOCK_EXTERN relock_future_t *relock_lock_is_held_by_thread_async(relock_lock_t *lock, uint64_t owner); /* boolean */
RELOCK_EXTERN relock_future_t *relock_lock_hold_count_async(relock_lock_t *lock, uint64_t owner); /* integer */
/* Integer: milliseconds left, -2 when not locked, -1 when it never expires. */
RELOCK_EXTERN relock_future_t *relock_lock_remaining_ttl_async(relock_lock_t *lock);

/* -- lost locks ------------------------------------------------------------*/

/* Called on the loop, once per hold found lost: reason RELOCK_ELOST (its
 * field is gone) or RELOCK_ETIMEDOUT (the lease ran out unrenewed, or a fixed
 * lease could not be confirmed to its end: a check of it answered late);
 * message names the lock and owner. That owner's releases then fail with
 * RELOCK_ELOST. */
typedef void (*relock_lost_cb)(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg);

/* Sets (NULL: clears) the lost callback for holds taken through lock.
 * Returns 0, RELOCK_EINVAL (NULL lock), RELOCK_ENOMEM (then not set), or
 * the error of a call from a thread that may not use the client. */
RELOCK_EXTERN int relock_lock_on_lost(relock_lock_t *lock, relock_lost_cb cb, void *arg);

/* on 1: holds taken through lock from now on listen on its unlock channel,
 * so a force release is reported lost within a round trip (a subscription
 * per held lock); 0, the default: found by the next renewal. Returns 0,
 * RELOCK_EINVAL (NULL, a semaphore or latch), RELOCK_ENOMEM, or the error
 * of a call from a thread that may not use the client. */
RELOCK_EXTERN int relock_lock_watch_loss(relock_lock_t *lock, int on);

/* -- waiting ----------------------------------------------------------------*/

/* Called on the loop on each try that finds the lock held by another
 * owner: ttl_ms is the holder's lease left (-1: never expires). May cancel
 * the acquisition or close the client. */
typedef void (*relock_wait_cb)(relock_lock_t *lock, uint64_t owner, int64_t ttl_ms, void *arg);

/* Sets (NULL: clears) it for acquisitions through lock, those in progress
 * included. Returns as relock_lock_on_lost. */
RELOCK_EXTERN int relock_lock_on_wait(relock_lock_t *lock, relock_wait_cb cb, void *arg);

/* -- is it still mine? ------------------------------------------------------*/

/* How long owner's hold is known valid from now, in ms, without network
 * (lease from its last confirmed send, less a drift margin). 0: take it
 * as lost now. Negative: RELOCK_ENOTOWNER (no such hold), RELOCK_ELOST,
 * RELOCK_EINVAL. Check before an irreversible side effect. */
RELOCK_EXTERN int64_t relock_lock_validity_ms(relock_lock_t *lock, uint64_t owner);

/* Asks Redis: succeeds with 1 if owner's hold is still there (a watchdog
 * hold is renewed on the way), 0 if not (it is then declared lost). */
RELOCK_EXTERN relock_future_t *relock_lock_validate_async(relock_lock_t *lock, uint64_t owner);

/* -- blocking: for relock_thread_owner(); 0 or an error --------------------*/

/* The owner id of the calling thread. */
RELOCK_EXTERN uint64_t relock_thread_owner(void);

/* Waits until acquired; RELOCK_EINTERRUPTED when relock_lock_interrupt
 * stopped it (then not held). */
RELOCK_EXTERN int relock_lock_lock(relock_lock_t *lock, int64_t lease_ms);
/* *acquired (may be NULL) is 1 or 0. */
RELOCK_EXTERN int relock_lock_try_lock(relock_lock_t *lock, int64_t wait_ms, int64_t lease_ms, int *acquired);
/* RELOCK_ENOTOWNER, RELOCK_ELOST, or another error. */
RELOCK_EXTERN int relock_lock_unlock(relock_lock_t *lock);

/* A fenced lock's lock / try_lock: *token (may be NULL) is the token, 0
 * when not acquired in time. RELOCK_EINVAL for another kind. */
RELOCK_EXTERN int relock_fenced_lock_lock(relock_lock_t *lock, int64_t lease_ms, int64_t *token);
RELOCK_EXTERN int relock_fenced_lock_try_lock(relock_lock_t *lock, int64_t wait_ms, int64_t lease_ms, int64_t *token);

/* Stops the blocking acquisitions of lock that owner (a
 * thread's relock_thread_owner()) is waiting in; each returns
 * RELOCK_EINTERRUPTED. Returns how many, or an error. */
RELOCK_EXTERN int relock_lock_interrupt(relock_lock_t *lock, uint64_t owner);
/* *was_locked (may be NULL) is 1 or 0. */
RELOCK_EXTERN int relock_lock_force_unlock(relock_lock_t *lock, int *was_locked);
/* The queries above for the calling thread; each out-argument may be NULL. */
RELOCK_EXTERN int relock_lock_is_locked(relock_lock_t *lock, int *locked);
RELOCK_EXTERN int relock_lock_is_held_by_thread(relock_lock_t *lock, int *held);
RELOCK_EXTERN int relock_lock_hold_count(relock_lock_t *lock, int64_t *count);
RELOCK_EXTERN int relock_lock_validate(relock_lock_t *lock, int *held);
RELOCK_EXTERN int relock_lock_remaining_ttl(relock_lock_t *lock, int64_t *ttl_ms);
/* The fenced lock's latest token (0 if none was ever taken). RELOCK_EINVAL
 * for another kind. */
RELOCK_EXTERN int relock_fenced_lock_token(relock_lock_t *lock, int64_t *token);

#ifdef __cplusplus
}
#endif
#endif /* RELOCK_LOCK_H */
