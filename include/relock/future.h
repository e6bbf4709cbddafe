/* Futures: the result of every relock operation (Redisson's RFuture).
 *
 * An operation returns a future in the pending state. It completes exactly
 * once: succeeded (with a value), failed (with an error code and a message),
 * or cancelled. Completion callbacks run in the order they were added; one
 * added after completion runs at once. Futures are reference counted: the
 * operation keeps its own reference while it may still complete the future,
 * so the caller can release its reference at any time.
 *
 * Threading: a future belongs to its client's loop.
 *   - Threaded client (made with a NULL loop): any thread may call anything
 *     on a future. It completes on the client's loop thread - or, when
 *     cancelled (relock_future_cancel, relock_lock_interrupt), in the
 *     cancelling thread - and its callbacks run where it completes (one
 *     added after completion runs at once, in the adding thread), with the
 *     client's lock held: a callback must not block, and may call the
 *     library. relock_future_wait from any other
 *     thread sleeps until the loop thread completes the future.
 *   - Embedded client (made on the caller's loop): every call must be made on
 *     the thread that runs that loop; relock_future_wait runs the loop. */
#ifndef RELOCK_FUTURE_H
#define RELOCK_FUTURE_H

#include <stddef.h>
#include <stdint.h>

#include <relock/common.h>
#include <relock/error.h>

struct ev_loop;

#ifdef __cplusplus
extern "C" {
#endif

typedef struct relock_future relock_future_t;

typedef enum relock_future_state {
  RELOCK_FUTURE_PENDING = 0,
  RELOCK_FUTURE_SUCCEEDED,
  RELOCK_FUTURE_FAILED,
  RELOCK_FUTURE_CANCELLED
} relock_future_state_t;

/* What a succeeded future carries. */
typedef enum relock_value_type {
  RELOCK_VALUE_NONE = 0,
  RELOCK_VALUE_BOOL,
  RELOCK_VALUE_INT,
  RELOCK_VALUE_STRING,
  RELOCK_VALUE_PTR
} relock_value_type_t;

typedef void (*relock_future_cb)(relock_future_t *future, void *arg);

/* -- reading ---------------------------------------------------------------*/

RELOCK_EXTERN relock_future_state_t relock_future_state(const relock_future_t *future);

/* Non-zero once the future has completed, whatever the outcome. */
RELOCK_EXTERN int relock_future_is_done(const relock_future_t *future);

/* 0 if the future succeeded; its error code if it failed; RELOCK_ECANCELED
 * if it was cancelled; RELOCK_EPENDING while it is still pending. */
RELOCK_EXTERN int relock_future_error(const relock_future_t *future);

/* A message for the outcome: the failure's own message (for a server error,
 * the server's text) or relock_strerror() of the code. Never NULL. Valid
 * while the caller holds a reference. */
RELOCK_EXTERN const char *relock_future_message(const relock_future_t *future);

/* The value of a succeeded future; RELOCK_VALUE_NONE in any other state. */
RELOCK_EXTERN relock_value_type_t relock_future_value_type(const relock_future_t *future);

/* Typed accessors. Each returns 0 / NULL when the value is of another type. */
RELOCK_EXTERN int relock_future_bool(const relock_future_t *future);
RELOCK_EXTERN int64_t relock_future_int(const relock_future_t *future);
/* NUL-terminated (the string may also contain NULs: *len tells its length). */
RELOCK_EXTERN const char *relock_future_string(const relock_future_t *future, size_t *len);
RELOCK_EXTERN void *relock_future_ptr(const relock_future_t *future);

/* The loop the future belongs to (NULL for a future made without one). */
RELOCK_EXTERN struct ev_loop *relock_future_loop(const relock_future_t *future);

/* -- reacting --------------------------------------------------------------*/

/* Calls cb(future, arg) once the future completes, after every callback
 * added before it. On an already completed future it runs at once (or, while
 * the future is delivering its callbacks, right after those already queued):
 * in the calling thread, inside this call, a threaded client's lock held.
 * Closing or freeing the client from any callback, this one included,
 * works: relock_client_free returns at once, and the client is freed once
 * it is down (relock_client(3), Lifetimes).
 * A callback may release the future, add callbacks and complete or cancel
 * other futures. Returns 0, or RELOCK_EINVAL / RELOCK_ENOMEM /
 * RELOCK_EWRONGTHREAD (an embedded client's future, from another thread) /
 * RELOCK_EFORKED, in which case cb will never be called. */
RELOCK_EXTERN int relock_future_on_done(relock_future_t *future, relock_future_cb cb, void *arg);

/* Cancels a pending future: it completes as cancelled (its callbacks run) and
 * the operation behind it is told, so that it can undo what it started.
 * Returns 1 if this call cancelled it, 0 if it had already completed (or
 * the call was refused: an embedded client's future, from another thread). */
RELOCK_EXTERN int relock_future_cancel(relock_future_t *future);

/* Runs the future's loop until the future completes or timeout_ms passes
 * (RELOCK_INFINITE: no limit); the loop's other watchers keep running.
 * On a threaded client's future, from any thread but the loop's, it sleeps
 * instead while the loop thread works, woken alone when the future completes.
 * Returns the outcome as relock_future_error() does once it completed, or
 *   RELOCK_EPENDING     the timeout passed, or nothing left on the loop could
 *                       ever complete the future (it stays pending);
 *   RELOCK_EWOULDBLOCK  called from inside a callback of this loop (or of a
 *                       future), or on a threaded client's loop thread,
 *                       where blocking would stop the work it waits for;
 *   RELOCK_EWRONGTHREAD an embedded client's future, from another thread;
 *   RELOCK_EFORKED      in a child forked after the client was made;
 *   RELOCK_EINVAL       NULL future, or timeout_ms < -1. */
RELOCK_EXTERN int relock_future_wait(relock_future_t *future, int64_t timeout_ms);

/* -- ownership -------------------------------------------------------------*/

/* Adds a reference; returns future. */
RELOCK_EXTERN relock_future_t *relock_future_retain(relock_future_t *future);

/* Drops a reference; the last one frees the future and its value. Releasing
 * NULL does nothing. Releasing more often than retained is a bug, caught by an
 * assertion in debug builds. */
RELOCK_EXTERN void relock_future_release(relock_future_t *future);

/* -- combinators -----------------------------------------------------------*/

/* A future that completes once every one of the n futures has completed:
 * succeeded (value: n, an integer) if all succeeded, otherwise failed with
 * the error and message of the first one to fail (RELOCK_ECANCELED for a
 * cancelled one). Cancelling it cancels the inputs still pending.
 * All inputs must belong to the same loop (a completed future of no loop,
 * such as one refused for invalid arguments, goes with any); n >= 1. The
 * inputs are retained until they complete, so the caller may release them.
 * Returns NULL with err set (RELOCK_EINVAL and what is wrong, or
 * RELOCK_ENOMEM) on invalid arguments or out of memory; err may be NULL. */
RELOCK_EXTERN relock_future_t *relock_future_all(relock_future_t *const *futures, size_t n, relock_error_t *err);

/* A future that succeeds as soon as one of the n futures succeeds (value: the
 * index of that future, an integer), and fails once all of them have failed
 * or been cancelled, with the error and message of the first failure.
 * Cancelling it cancels the inputs still pending. Same rules as _all. */
RELOCK_EXTERN relock_future_t *relock_future_any(relock_future_t *const *futures, size_t n, relock_error_t *err);

#ifdef __cplusplus
}
#endif
#endif /* RELOCK_FUTURE_H */
