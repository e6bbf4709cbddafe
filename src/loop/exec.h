/* Where a client's work runs: its libev loop, and which threads may touch it.
 *
 * Embedded: the caller's loop, run by the caller. Every call must come from
 * the thread that made the client (the loop's thread); a call from another
 * thread is refused with RELOCK_EWRONGTHREAD, never run.
 *
 * Threaded: a loop of the library's own, run all the time by a thread the
 * library starts, so renewals, pings and reconnects go on whatever the
 * user's threads do. Any thread may call. The loop thread holds the exec's
 * mutex except while it waits in the kernel for I/O or a timer (libev's
 * release/acquire hooks), so a call from another thread takes the mutex,
 * does its work on the loop's structures directly, and wakes the loop
 * (ev_async) to look at what changed; wake-ups are coalesced, so many calls
 * cost one. A thread waiting for a future sleeps on a word of its own
 * (relock__exec_waiter_t, a futex), not on the mutex: the future's
 * completion wakes that thread alone, and it reads the outcome without
 * taking the mutex back.
 *
 * After fork() the child must not use the parent's client: its loop thread
 * did not survive the fork, and the connections are shared with the parent.
 * Every entry refuses in the child with RELOCK_EFORKED.
 *
 * An exec is reference-counted: the client holds one, every future of the
 * client another, so that a thread waking from a wait after the client was
 * freed still finds its mutex. */
#ifndef RELOCK__LOOP_EXEC_H
#define RELOCK__LOOP_EXEC_H

#include <pthread.h>
#include <stdint.h>

#include <ev.h>

#include <relock/error.h>

#include "base/list.h"

typedef struct relock__exec relock__exec_t;

struct relock__exec {
  struct ev_loop *loop;
  int threaded;
  pthread_t thread;         /* the loop's thread */
  long tid;                 /* its kernel id, for messages */
  unsigned fork_generation; /* relock__exec_forked: the process's, at creation */
  int refs;                 /* atomic */
  /* threaded mode only */
  pthread_mutex_t mu;       /* recursive: a callback may call the library */
  pthread_cond_t cond;      /* broadcast when a client's close has finished, or on stop */
  ev_async wake;
  relock__link_t waiters;   /* relock__exec_waiter_t asleep on a future of this exec */
  relock__link_t deferred;  /* relock__exec_deferred_t due at the end of the current call */
  int **to_wake;            /* loop thread: words of waiters woken, the kernel still to tell */
  size_t nto_wake, cap_to_wake;
  int polling;              /* atomic: the loop thread is (about to be) in its wait in the kernel */
  int stopping;
  int thread_started;
  int clients;              /* the clients running on it (relock__exec_attach); the last stops the thread */
};

/* An exec for the caller's loop, owned by the calling thread. NULL when out
 * of memory. */
relock__exec_t *relock__exec_embedded(struct ev_loop *loop);

/* A loop of its own and a thread that runs it (started at once). NULL with
 * err set when the loop or the thread cannot be made. */
relock__exec_t *relock__exec_threaded(relock_error_t *err);

relock__exec_t *relock__exec_ref(relock__exec_t *x);

/* Drops a reference; the last one frees the exec (and, threaded, its loop:
 * relock__exec_stop must have joined the thread first). */
void relock__exec_unref(relock__exec_t *x);

/* Threaded: one more client runs on x (relock_client_new_beside); a new
 * exec counts its first. */
void relock__exec_attach(relock__exec_t *x);

/* Threaded: a client leaves x; the last to leave stops the loop thread and
 * joins it (the caller must not hold the mutex, and must not be the loop
 * thread). Returns 1 when the thread is stopped (or there is none:
 * embedded), 0 when other clients keep it running. */
int relock__exec_stop(relock__exec_t *x);

/* Threaded, on the loop thread (in a callback): a client leaves x; if it
 * was the last, the loop ends once the callback returns, and the thread
 * with it, detached (nobody joins it). */
void relock__exec_stop_from_loop_thread(relock__exec_t *x);

/* Non-zero when the calling thread is the loop's. */
static inline int relock__exec_on_loop_thread(const relock__exec_t *x) {
  return pthread_equal(pthread_self(), x->thread);
}

/* Non-zero in a child forked after the exec was made. */
int relock__exec_forked(const relock__exec_t *x);

/* Starts a call into the library: 0 (then relock__exec_leave must follow),
 * RELOCK_EWRONGTHREAD (embedded, from a thread that is not the loop's) or
 * RELOCK_EFORKED, with err (may be NULL) saying so. Threaded, it takes the
 * mutex. */
int relock__exec_enter(relock__exec_t *x, relock_error_t *err);

/* Ends a call: threaded, from another thread than the loop's, runs the
 * work deferred to it (relock__exec_defer), wakes the loop if the call
 * started a watcher or a timer (relock__exec_changed) while the loop thread
 * waits in the kernel, and lets go of the mutex. */
void relock__exec_leave(relock__exec_t *x);

/* Whoever starts a watcher or (re)arms a timer on a loop says so: a call
 * from another thread than a threaded exec's loop thread then wakes the
 * loop at its end, else not (the loop thread would not see the change until
 * something else woke it). Stopping a watcher needs no wake-up. */
void relock__exec_changed(void);

/* Work a call from another thread than the loop's defers to its end,
 * where it runs on that thread, the mutex still held: a connection's
 * writes, so that the calling thread sends its commands itself (all the
 * call's commands at once) rather than waking the loop thread to. Init
 * with relock__exec_deferred_init. */
typedef struct relock__exec_deferred {
  relock__link_t link; /* in x->deferred while due */
  void (*run)(struct relock__exec_deferred *d);
} relock__exec_deferred_t;

static inline void relock__exec_deferred_init(relock__exec_deferred_t *d, void (*run)(relock__exec_deferred_t *d)) {
  relock__list_init(&d->link);
  d->run = run;
}

/* The threaded exec of loop when the calling thread is inside a call on it
 * (relock__exec_enter) and is not its loop thread, outside deferred work;
 * else NULL: the work must be done (or its watcher started) now. */
relock__exec_t *relock__exec_deferring(struct ev_loop *loop);

/* The mutex held: d runs at the end of the current call (once, however
 * often it is deferred); relock__exec_undefer takes it back (a no-op when
 * it is not due). */
void relock__exec_defer(relock__exec_t *x, relock__exec_deferred_t *d);
void relock__exec_undefer(relock__exec_deferred_t *d);

/* Threaded: takes / lets go of the mutex (reads and future bookkeeping;
 * the loop is woken only as relock__exec_leave would). Embedded: nothing. */
void relock__exec_lock(relock__exec_t *x);
void relock__exec_unlock(relock__exec_t *x);

/* Threaded: wakes every thread waiting on a future of this exec (the
 * caller holds the mutex). */
void relock__exec_broadcast(relock__exec_t *x);

/* Threaded: waits for a broadcast, the mutex held once by the caller;
 * deadline_ns 0 = no limit (monotonic). Returns 0, or ETIMEDOUT. */
int relock__exec_wait(relock__exec_t *x, uint64_t deadline_ns);

/* A thread waiting for one thing of a threaded exec (a future), asleep
 * outside the mutex, woken alone by relock__exec_wake(x, on). */
typedef struct relock__exec_waiter {
  relock__link_t link; /* in x->waiters while it waits */
  const void *on;      /* what it waits for */
  int word;            /* atomic futex word: WAITING, SLEEPING, WAKING or WOKEN (exec.c) */
} relock__exec_waiter_t;

/* The mutex held: w waits for on from now on. */
void relock__exec_waiter_add(relock__exec_t *x, relock__exec_waiter_t *w, const void *on);

/* The mutex NOT held: returns once w was woken (0) or at deadline_ns
 * (monotonic; 0 = none: ETIMEDOUT). Then w may still be listed:
 * relock__exec_waiter_remove under the mutex. */
int relock__exec_waiter_sleep(relock__exec_t *x, relock__exec_waiter_t *w, uint64_t deadline_ns);

/* The mutex held: w waits no more (whether it was woken or not). */
void relock__exec_waiter_remove(relock__exec_waiter_t *w);

/* The mutex held: wakes (and unlists) every waiter waiting for on. On the
 * loop thread, a waiter asleep in the kernel is told once the loop thread
 * lets go of the mutex (before it waits for I/O): woken earlier, it would
 * take the CPU from the loop thread only to block on the mutex. */
void relock__exec_wake(relock__exec_t *x, const void *on);

#endif /* RELOCK__LOOP_EXEC_H */
