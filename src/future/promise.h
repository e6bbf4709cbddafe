/* The write side of a future (Redisson's RPromise), private to the library.
 *
 * Operations create a future with relock__future_new, keep the reference it
 * comes with while they may still complete it, and complete it with one of
 * the try-functions below. A try-function returns 1 if it completed the
 * future and 0 if the future had already completed (it was cancelled, say),
 * in which case nothing changes and the caller keeps what it passed in. */
#ifndef RELOCK__FUTURE_PROMISE_H
#define RELOCK__FUTURE_PROMISE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <relock/future.h>

#include "loop/exec.h"

/* A pending future of exec (the client's loop and threads; NULL for a
 * future nobody will wait on) with one reference. NULL when out of memory. */
relock_future_t *relock__future_new(relock__exec_t *exec);

/* Starts a public call on exec (relock__exec_enter): 0 when the caller may
 * go on (relock__exec_leave must follow), else non-zero with *refused the
 * future to return - already failed with RELOCK_EWRONGTHREAD or
 * RELOCK_EFORKED (NULL when out of memory). */
int relock__future_enter(relock__exec_t *exec, relock_future_t **refused);


int relock__future_succeed(relock_future_t *f);
int relock__future_succeed_bool(relock_future_t *f, int value);
int relock__future_succeed_int(relock_future_t *f, int64_t value);
/* Copies len bytes of s. If the copy cannot be allocated the future fails
 * with RELOCK_ENOMEM instead (and 1 is returned: it did complete). */
int relock__future_succeed_string(relock_future_t *f, const char *s, size_t len);
/* On success the future owns ptr and calls dtor(ptr) (if not NULL) when it
 * is freed. On 0 the caller still owns ptr. */
int relock__future_succeed_ptr(relock_future_t *f, void *ptr, void (*dtor)(void *));

/* Fails the future with err (< 0) and a printf-style message; fmt NULL means
 * "use relock_strerror(err)". */
int relock__future_fail(relock_future_t *f, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int relock__future_vfail(relock_future_t *f, int err, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* A future of exec (NULL: of none, as for a call without a client) that
 * has already failed with err and a printf-style message: what a public
 * operation returns for invalid arguments. NULL only when out of memory.
 * Waiting on it returns at once; callbacks added to it run at once. */
relock_future_t *relock__future_failed(relock__exec_t *exec, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The destructor a succeeded PTR future was given (NULL for any other
 * future), so that a reader can tell what kind of object the pointer is. */
void (*relock__future_ptr_dtor(const relock_future_t *f))(void *);

/* Called once, when the future is cancelled while pending, before its
 * callbacks run. The operation undoes itself there. Setting NULL clears it. */
typedef void (*relock__cancel_fn)(relock_future_t *f, void *arg);
void relock__future_set_cancel(relock_future_t *f, relock__cancel_fn fn, void *arg);

/* Non-zero while the calling thread is inside a future callback. Blocking
 * calls use it to refuse to re-enter the loop. */
int relock__in_future_callback(void);

/* Non-zero where waiting on a future of exec would stop or re-enter the
 * work that completes it: inside a future callback; threaded, on the loop
 * thread; embedded, inside one of the loop's callbacks. */
int relock__future_would_block(relock__exec_t *exec);

#endif /* RELOCK__FUTURE_PROMISE_H */
