/* The reentrant distributed lock, compatible with Redisson's RLock: a Java
 * service using Redisson and a C service using relock can contend for the
 * same lock name and see each other correctly.
 *
 * A lock is held by an *owner*: a 64-bit id the caller chooses per request
 * or task (the blocking calls use the calling thread's id). In Redis the
 * holder is the hash field "<client-id>:<owner>" of the key named like the
 * lock, holding the hold count; unlocks are published on
 * "redisson_lock__channel:{name}".
 *
 * Waiting for a held lock is driven by pub/sub, not polling: a waiter
 * subscribes to the lock's channel and tries again when an unlock is
 * published, or when the holder's lease would have run out. A lock held
 * without a fixed lease (lease_ms = RELOCK_INFINITE) gets the watchdog lease
 * (30 s by default) and is renewed every third of it while held; if it is
 * found lost (its key deleted or expired, or Redis unreachable past the
 * lease), the lost callback says so. */
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

/* The longest fixed lease (about 34 years; Redis must be able to store the
 * expiry). A longer wait counts as RELOCK_INFINITE. */
#define RELOCK_MAX_LEASE_MS (INT64_C(1) << 40)

/* The shortest lease (fixed, or the watchdog-timeout option): 10 ms. A hold
 * is trusted for its lease less a drift margin (1% + 2 ms: Redis's clock
 * may run faster than ours), from the moment its acquisition was sent. A
 * lease within that margin could never be trusted - every answer would be
 * too late, given back and tried again, forever - and one barely above it
 * would be on any round trip of a millisecond. A shorter lease is refused
 * with RELOCK_EINVAL. */
#define RELOCK_MIN_LEASE_MS 10

/* A lock object for name (Redisson's getLock(name)). Cheap: it holds no
 * connection of its own, and several objects for one name see the same lock.
 * The name is copied; it may be any non-empty string without NUL. NULL with
 * err set (RELOCK_EINVAL naming the argument, or RELOCK_ENOMEM) on invalid
 * arguments or out of memory; err may be NULL. */
RELOCK_EXTERN relock_lock_t *relock_lock_new(relock_client_t *client, const char *name, relock_error_t *err);

/* -- the other kinds ---------------------------------------------------------*/

/* Each makes a lock object of another of Redisson's kinds, with the same
 * rules as relock_lock_new; every relock_lock_* call below works on it
 * (acquire, release, force release, the lost and wait callbacks, validity,
 * the blocking calls). Each shares Redis with a Java service using the
 * same Redisson object on the same name. */

/* Redisson's getFairLock(name): waiters get the lock in the order they
 * first found it held, C and Java waiters alike. Redis keeps the queue
 * (LIST "redisson_lock_queue:{name}", ZSET "redisson_lock_timeout:{name}");
 * a release wakes only the waiter at its head, on that waiter's own
 * channel "redisson_lock__channel:{name}:<field>". A waiter that dies
 * leaves the queue within the fair-lock wait timeout (option
 * "fair-lock-wait-timeout", 300 000 ms by default as in Redisson); one that
 * gives up (deadline, cancel) leaves it at once. */
RELOCK_EXTERN relock_lock_t *relock_fair_lock_new(relock_client_t *client, const char *name, relock_error_t *err);

/* Redisson's getReadWriteLock(name).readLock() / .writeLock(): many
 * readers, or one writer, in one hash "name" (field "mode" = "read" or
 * "write"). A writer may also take read holds (downgrade); a reader cannot
 * take the write lock (upgrade): it would wait for itself, so such an
 * acquisition fails at once with RELOCK_EUPGRADE. */
RELOCK_EXTERN relock_lock_t *relock_read_lock_new(relock_client_t *client, const char *name, relock_error_t *err);
RELOCK_EXTERN relock_lock_t *relock_write_lock_new(relock_client_t *client, const char *name, relock_error_t *err);

/* Redisson's getFencedLock(name): a reentrant lock whose every acquisition
 * (re-entries included) also takes a fencing token, from the counter
 * "redisson_lock_token:{name}": strictly increasing per name, across all
 * clients. Its acquisitions' futures succeed with an integer: the token
 * (>= 1), or 0 when not acquired in time. Give the token to storage that
 * rejects writes carrying an older one (examples/fenced_storage.c). */
RELOCK_EXTERN relock_lock_t *relock_fenced_lock_new(relock_client_t *client, const char *name, relock_error_t *err);

/* The fenced lock's latest token (an integer; 0 if none was ever taken). */
RELOCK_EXTERN relock_future_t *relock_fenced_lock_token_async(relock_lock_t *lock);

/* Redisson's getSpinLock(name): the reentrant lock's hash, but no pub/sub
 * at all - a waiter tries again after a back-off (1 ms doubling to 128 ms,
 * jittered), and a release publishes nothing. For setups where pub/sub is
 * unwanted (a proxy without it, ACLs without channels). */
RELOCK_EXTERN relock_lock_t *relock_spin_lock_new(relock_client_t *client, const char *name, relock_error_t *err);

/* Frees the object. Holds taken through it stay held (and renewed) until
 * released through another object for the same name, or until they are
 * lost; operations in flight complete as they would have. */
RELOCK_EXTERN void relock_lock_free(relock_lock_t *lock);

RELOCK_EXTERN const char *relock_lock_name(const relock_lock_t *lock);

/* The hash field naming owner in Redis: "<client-id>:<owner>". Writes at
 * most size bytes (NUL included); returns the length it needs. */
RELOCK_EXTERN size_t relock_lock_field(const relock_lock_t *lock, uint64_t owner, char *buf, size_t size);

/* -- asynchronous ----------------------------------------------------------*/

/* Each returns a future, NULL only when out of memory. Invalid arguments (a
 * NULL lock, a wait or lease out of range) give a future that has already
 * failed with RELOCK_EINVAL and a message naming the argument; for a NULL
 * lock it belongs to no loop (relock_future_wait returns at once). */

/* Acquires (or re-enters) the lock for owner.
 *   wait_ms  RELOCK_INFINITE: wait as long as it takes (Redisson lock());
 *            0: try once (tryLock()); > 0: wait at most that long.
 *   lease_ms RELOCK_INFINITE: the watchdog lease, renewed while held;
 *            RELOCK_MIN_LEASE_MS to RELOCK_MAX_LEASE_MS: a fixed lease,
 *            never renewed.
 * The future succeeds with a boolean: 1 acquired, 0 not acquired in time
 * (not an error). It fails on errors (RELOCK_ESERVER with the server's text
 * for a key of the wrong type, connection errors after retries, ...).
 * Cancelling it stops the wait; if the lock was acquired on the server
 * meanwhile it is released again, never left held. */
RELOCK_EXTERN relock_future_t *relock_lock_lock_async(relock_lock_t *lock, uint64_t owner, int64_t wait_ms,
                                                      int64_t lease_ms);

/* Releases one hold of owner. Succeeds with a boolean: 1 if the lock is now
 * free (waiters are woken), 0 if owner still holds it (reentrant holds
 * remain). Fails with RELOCK_ENOTOWNER if owner does not hold it (never did,
 * or its lease expired), or RELOCK_ELOST if it held it and the lock was lost
 * meanwhile. Retried on connection errors without ever releasing twice. */
RELOCK_EXTERN relock_future_t *relock_lock_unlock_async(relock_lock_t *lock, uint64_t owner);

/* Deletes the lock whoever holds it, and wakes its waiters. Succeeds with a
 * boolean: whether it was held. */
RELOCK_EXTERN relock_future_t *relock_lock_force_unlock_async(relock_lock_t *lock);

/* Queries, each answered by Redis. */
RELOCK_EXTERN relock_future_t *relock_lock_is_locked_async(relock_lock_t *lock);           /* boolean */
RELOCK_EXTERN relock_future_t *relock_lock_is_held_by_thread_async(relock_lock_t *lock, uint64_t owner); /* boolean */
RELOCK_EXTERN relock_future_t *relock_lock_hold_count_async(relock_lock_t *lock, uint64_t owner); /* integer */
/* Integer: milliseconds left, -2 when not locked, -1 when it never expires. */
RELOCK_EXTERN relock_future_t *relock_lock_remaining_ttl_async(relock_lock_t *lock);

/* -- lost locks ------------------------------------------------------------*/

/* Called once per hold found lost: reason is RELOCK_ELOST when Redis said
 * the holder's field is gone (deleted, or expired), RELOCK_ETIMEDOUT when
 * the lease ran out while Redis could not be reached to renew it. message
 * says which, naming the lock and the owner. From then on a release by that
 * owner fails with RELOCK_ELOST (one per hold it had taken, re-entries
 * included), answered at once without asking Redis, which may well be out
 * of reach. */
typedef void (*relock_lost_cb)(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg);

/* Sets (or, with NULL, clears) the callback for holds taken through lock.
 * Returns 0, RELOCK_EINVAL for a NULL lock, RELOCK_ENOMEM (the callback is
 * kept beside the lock object, made when first set: it is then not set),
 * or the error of a call from a thread that may not use the client.
 * (Earlier versions returned nothing: code that ignores the result builds
 * and runs as before.) */
RELOCK_EXTERN int relock_lock_on_lost(relock_lock_t *lock, relock_lost_cb cb, void *arg);

/* Prompt loss detection, for holds taken through lock from now on (on: 1)
 * or none (0; the default). While such a hold is held, lock listens on
 * its unlock channel, where every unlock and force release publishes
 * (Redisson's forceUnlock, relock_lock_force_unlock_async): any message
 * there makes the hold checked at once, and one whose field is gone is
 * reported lost (RELOCK_ELOST) within a round trip, not at the next
 * renewal. A DEL that publishes nothing, or a lease run out, is still found
 * by the renewal. Cost per held lock: one subscription (shared with the
 * name's waiters in this client) and one check per message on its channel;
 * keep it off for clients holding very many locks. Returns 0,
 * RELOCK_EINVAL (NULL, or a semaphore or latch), RELOCK_ENOMEM, or the
 * error of a call from a thread that may not use the client. */
RELOCK_EXTERN int relock_lock_watch_loss(relock_lock_t *lock, int on);

/* -- waiting ----------------------------------------------------------------*/

/* Called on each try of an acquisition through lock that finds the lock
 * held by another owner: owner is the one acquiring, ttl_ms how long the
 * holder's lease has left (-1: it never expires). The acquisition then goes
 * on waiting (a single try completes with 0). It runs on the client's loop
 * and may do anything, cancelling that acquisition or closing the client
 * included. Meant for progress reports (the relock tool's -v). */
typedef void (*relock_wait_cb)(relock_lock_t *lock, uint64_t owner, int64_t ttl_ms, void *arg);

/* Sets (or, with NULL, clears) the callback for acquisitions through lock,
 * those in progress included. Returns 0, RELOCK_EINVAL for a NULL lock,
 * RELOCK_ENOMEM, or the error of a call from a thread that may not use the
 * client. */
RELOCK_EXTERN int relock_lock_on_wait(relock_lock_t *lock, relock_wait_cb cb, void *arg);

/* -- is it still mine? ------------------------------------------------------*/

/* After a stall longer than the lease (a GC-like pause, SIGSTOP, swapping, a
 * VM frozen), code can run before the loss is known. Check before an
 * irreversible side effect; storage that can check a fencing token should
 * be given one instead (docs/SAFETY.md).
 *
 * How long owner's hold is known to be valid from now, in milliseconds,
 * without any network: from the send time of its last confirmed
 * acquisition or renewal, plus the lease, less a drift margin (1% + 2 ms),
 * on the monotonic clock. 0: it must be taken as lost now. Negative: an
 * error - RELOCK_ENOTOWNER when this client has no such hold (never taken,
 * released, or a fixed lease that ran out), RELOCK_ELOST when it was found
 * lost, RELOCK_EINVAL for a NULL lock. */
RELOCK_EXTERN int64_t relock_lock_validity_ms(relock_lock_t *lock, uint64_t owner);

/* Asks Redis now. The future succeeds with a boolean: 1 if owner's hold is
 * still there (a watchdog hold is renewed on the way, so its validity
 * starts again), 0 if not (a watchdog hold is then declared lost, and the
 * lost callback runs). */
RELOCK_EXTERN relock_future_t *relock_lock_validate_async(relock_lock_t *lock, uint64_t owner);

/* -- blocking --------------------------------------------------------------*/

/* The owner id of the calling thread, used by the blocking calls. */
RELOCK_EXTERN uint64_t relock_thread_owner(void);

/* Each starts the asynchronous operation for relock_thread_owner() and waits
 * on its future (running the client's loop). From inside a loop callback
 * they fail with RELOCK_EWOULDBLOCK. */

/* Waits until acquired. Returns 0, or an error: RELOCK_EINTERRUPTED when
 * relock_lock_interrupt stopped the wait (the lock is then not held). */
RELOCK_EXTERN int relock_lock_lock(relock_lock_t *lock, int64_t lease_ms);
/* *acquired (may be NULL) is 1 or 0. Returns 0, or an error. */
RELOCK_EXTERN int relock_lock_try_lock(relock_lock_t *lock, int64_t wait_ms, int64_t lease_ms, int *acquired);
/* Returns 0, RELOCK_ENOTOWNER, RELOCK_ELOST, or another error. */
RELOCK_EXTERN int relock_lock_unlock(relock_lock_t *lock);

/* A fenced lock's relock_lock_lock / relock_lock_try_lock: *token (may be
 * NULL) is the acquisition's token, 0 when not acquired in time. */
RELOCK_EXTERN int relock_fenced_lock_lock(relock_lock_t *lock, int64_t lease_ms, int64_t *token);
RELOCK_EXTERN int relock_fenced_lock_try_lock(relock_lock_t *lock, int64_t wait_ms, int64_t lease_ms, int64_t *token);

/* Stops the blocking acquisitions of lock (relock_lock_lock, and
 * relock_lock_try_lock while it waits) that owner - a thread's
 * relock_thread_owner() - is blocked in: each returns RELOCK_EINTERRUPTED
 * and does not hold the lock (one taken on the server meanwhile is given
 * back). Redisson's lockInterruptibly. An acquisition that has already
 * succeeded is not undone. Returns how many were interrupted, or an error. */
RELOCK_EXTERN int relock_lock_interrupt(relock_lock_t *lock, uint64_t owner);
/* *was_locked (may be NULL) is 1 or 0. */
RELOCK_EXTERN int relock_lock_force_unlock(relock_lock_t *lock, int *was_locked);
RELOCK_EXTERN int relock_lock_is_locked(relock_lock_t *lock, int *locked);
RELOCK_EXTERN int relock_lock_is_held_by_thread(relock_lock_t *lock, int *held);
RELOCK_EXTERN int relock_lock_hold_count(relock_lock_t *lock, int64_t *count);
/* relock_lock_validate_async for the calling thread; *held (may be NULL). */
RELOCK_EXTERN int relock_lock_validate(relock_lock_t *lock, int *held);
/* *ttl_ms (may be NULL) as relock_lock_remaining_ttl_async's value. */
RELOCK_EXTERN int relock_lock_remaining_ttl(relock_lock_t *lock, int64_t *ttl_ms);
/* A fenced lock's latest token (0 if none was ever taken); *token may be
 * NULL. RELOCK_EINVAL for a lock of another kind. */
RELOCK_EXTERN int relock_fenced_lock_token(relock_lock_t *lock, int64_t *token);

#ifdef __cplusplus
}
#endif
#endif /* RELOCK_LOCK_H */
