/* Where a client's work runs: embedded or on a loop thread (exec.h). */
#include <config.h>

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/error.h"
#include "loop/exec.h"

/* -- fork detection ---------------------------------------------------------*/

/* Bumped in every child fork() makes: an exec made before it compares
 * unequal. Cheaper than getpid() on every call, and right even when a pid
 * is reused. */
static unsigned fork_generation;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void) { __atomic_add_fetch(&fork_generation, 1, __ATOMIC_RELAXED); }

static void register_atfork(void) { pthread_atfork(NULL, NULL, on_fork_child); }

static unsigned current_generation(void) { return __atomic_load_n(&fork_generation, __ATOMIC_RELAXED); }

int relock__exec_forked(const relock__exec_t *x) { return x->fork_generation != current_generation(); }

/* -- the object -------------------------------------------------------------*/

static relock__exec_t *exec_alloc(void) {
  pthread_once(&atfork_once, register_atfork);
  relock__exec_t *x = calloc(1, sizeof(*x));
  if (x == NULL)
    return NULL;
  x->refs = 1;
  x->fork_generation = current_generation();
  return x;
}

relock__exec_t *relock__exec_embedded(struct ev_loop *loop) {
  relock__exec_t *x = exec_alloc();
  if (x == NULL)
    return NULL;
  x->loop = loop;
  x->thread = pthread_self();
  x->tid = (long)syscall(SYS_gettid);
  return x;
}

relock__exec_t *relock__exec_ref(relock__exec_t *x) {
  __atomic_add_fetch(&x->refs, 1, __ATOMIC_RELAXED);
  return x;
}

void relock__exec_unref(relock__exec_t *x) {
  if (x == NULL || __atomic_sub_fetch(&x->refs, 1, __ATOMIC_ACQ_REL) > 0)
    return;
  if (x->threaded) {
    if (x->loop != NULL) {
      ev_async_stop(x->loop, &x->wake);
      ev_loop_destroy(x->loop);
    }
    pthread_cond_destroy(&x->cond);
    pthread_mutex_destroy(&x->mu);
    free(x->to_wake);
  }
  free(x);
}

/* -- threaded mode ------------------------------------------------------------*/

/* libev calls these around its wait in the kernel: other threads get the
 * mutex exactly while the loop thread has nothing to do. polling says
 * whether a call must wake the loop: once the loop thread is back from the
 * kernel (polling 0, even while it waits for the mutex), it goes round its
 * loop again, and sees the call's watchers and timers, before it sleeps. */
static void flush_wakes(relock__exec_t *x);

static void release_mutex(struct ev_loop *loop) {
  relock__exec_t *x = ev_userdata(loop);
  __atomic_store_n(&x->polling, 1, __ATOMIC_RELAXED); /* read under the mutex: ordered by the unlock */
  flush_wakes(x); /* before the unlock: no wake is left pending on a waiter the mutex lets go */
  pthread_mutex_unlock(&x->mu);
}

static void acquire_mutex(struct ev_loop *loop) {
  relock__exec_t *x = ev_userdata(loop);
  __atomic_store_n(&x->polling, 0, __ATOMIC_RELAXED);
  pthread_mutex_lock(&x->mu);
}

/* A call from another thread changed something (or it is time to stop):
 * returning to the loop is all it takes for libev to see new watchers. */
static void on_wake(struct ev_loop *loop, ev_async *w, int revents) {
  (void)revents;
  relock__exec_t *x = w->data;
  if (x->stopping)
    ev_break(loop, EVBREAK_ALL);
}

/* The loop thread holds a reference of its own: the loop outlives its last
 * iteration even when the thread ends detached. */
static void *run_loop(void *arg) {
  relock__exec_t *x = arg;
  pthread_mutex_lock(&x->mu); /* waits until the creator has finished setting up */
  x->tid = (long)syscall(SYS_gettid);
  while (!x->stopping)
    ev_run(x->loop, 0); /* returns on ev_break (stopping), else never: the wake-up watcher keeps it alive */
  flush_wakes(x); /* of the last iteration, which went to no wait */
  pthread_mutex_unlock(&x->mu);
  relock__exec_unref(x);
  return NULL;
}

static int init_sync(relock__exec_t *x) {
  pthread_mutexattr_t ma;
  pthread_condattr_t ca;
  if (pthread_mutexattr_init(&ma) != 0)
    return -1;
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
  int r = pthread_mutex_init(&x->mu, &ma);
  pthread_mutexattr_destroy(&ma);
  if (r != 0)
    return -1;
  if (pthread_condattr_init(&ca) != 0) {
    pthread_mutex_destroy(&x->mu);
    return -1;
  }
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* timed waits ignore wall-clock steps */
  r = pthread_cond_init(&x->cond, &ca);
  pthread_condattr_destroy(&ca);
  if (r != 0) {
    pthread_mutex_destroy(&x->mu);
    return -1;
  }
  return 0;
}

relock__exec_t *relock__exec_threaded(relock_error_t *err) {
  relock__exec_t *x = exec_alloc();
  if (x == NULL) {
    relock__error_set(err, RELOCK_ENOMEM, "out of memory creating the client's loop");
    return NULL;
  }
  if (init_sync(x) != 0) {
    free(x);
    relock__error_set(err, RELOCK_ENOMEM, "cannot create the client's mutex");
    return NULL;
  }
  x->threaded = 1;
  x->clients = 1;
  relock__list_init(&x->waiters);
  relock__list_init(&x->deferred);
  if ((x->loop = ev_loop_new(EVFLAG_AUTO)) == NULL) {
    relock__exec_unref(x);
    relock__error_set(err, RELOCK_EIO, "cannot create an event loop");
    return NULL;
  }
  ev_set_userdata(x->loop, x);
  ev_set_loop_release_cb(x->loop, release_mutex, acquire_mutex);
  ev_async_init(&x->wake, on_wake);
  x->wake.data = x;
  ev_async_start(x->loop, &x->wake);

  /* The thread starts blocked on the mutex, so x->thread is set before it
   * runs anything. */
  pthread_mutex_lock(&x->mu);
  relock__exec_ref(x); /* the thread's */
  int r = pthread_create(&x->thread, NULL, run_loop, x);
  if (r != 0) {
    pthread_mutex_unlock(&x->mu);
    relock__exec_unref(x);
    relock__exec_unref(x);
    relock__error_set(err, RELOCK_EIO, "cannot start the client's loop thread: %s", strerror(r));
    return NULL;
  }
  x->thread_started = 1;
  pthread_mutex_unlock(&x->mu);
  return x;
}

void relock__exec_attach(relock__exec_t *x) {
  if (!x->threaded)
    return;
  pthread_mutex_lock(&x->mu);
  x->clients++;
  pthread_mutex_unlock(&x->mu);
}

static void wake_all(relock__exec_t *x);

int relock__exec_stop(relock__exec_t *x) {
  if (!x->threaded || !x->thread_started)
    return 1;
  pthread_mutex_lock(&x->mu);
  if (--x->clients > 0) {
    pthread_mutex_unlock(&x->mu);
    return 0;
  }
  x->stopping = 1;
  ev_async_send(x->loop, &x->wake);
  pthread_cond_broadcast(&x->cond); /* a wait still sleeping gives up */
  wake_all(x);
  pthread_mutex_unlock(&x->mu);
  pthread_join(x->thread, NULL);
  x->thread_started = 0;
  return 1;
}

void relock__exec_stop_from_loop_thread(relock__exec_t *x) {
  if (!x->threaded || !x->thread_started || --x->clients > 0)
    return;
  x->stopping = 1;
  x->thread_started = 0;
  pthread_detach(pthread_self());
  pthread_cond_broadcast(&x->cond);
  wake_all(x);
  ev_break(x->loop, EVBREAK_ALL);
}

/* -- calls ----------------------------------------------------------------------*/

/* On a thread other than the loop's: how many holds of threaded execs'
 * mutexes it has (calls nest: a callback may call the library); the exec
 * of its outermost hold when that was a call (relock__exec_enter), whose
 * deferred work runs when the last hold goes; whether that work is
 * running; whether a watcher or timer was started since the last leave. */
static _Thread_local int holds;
static _Thread_local relock__exec_t *calling;
static _Thread_local int running_deferred;
static _Thread_local int changed;

int relock__exec_enter(relock__exec_t *x, relock_error_t *err) {
  if (relock__exec_forked(x))
    return relock__error_set(err, RELOCK_EFORKED,
                             "this client was made before fork(): a child process must make its own");
  if (!x->threaded) {
    if (!relock__exec_on_loop_thread(x))
      return relock__error_set(err, RELOCK_EWRONGTHREAD,
                               "called from thread %ld, another thread than the one running the client's loop "
                               "(thread %ld): a client made on the caller's loop is used from that loop's "
                               "thread only; make it with a NULL loop to call it from any thread",
                               (long)syscall(SYS_gettid), x->tid);
    return 0;
  }
  pthread_mutex_lock(&x->mu);
  if (!relock__exec_on_loop_thread(x) && holds++ == 0)
    calling = x;
  return 0;
}

void relock__exec_changed(void) { changed = 1; }

relock__exec_t *relock__exec_deferring(struct ev_loop *loop) {
  return calling != NULL && calling->loop == loop && !running_deferred ? calling : NULL;
}

void relock__exec_defer(relock__exec_t *x, relock__exec_deferred_t *d) {
  if (relock__list_empty(&d->link))
    relock__list_push_back(&x->deferred, &d->link);
}

void relock__exec_undefer(relock__exec_deferred_t *d) { relock__list_remove(&d->link); }

static void run_deferred(relock__exec_t *x) {
  running_deferred = 1;
  while (!relock__list_empty(&x->deferred)) {
    relock__exec_deferred_t *d = relock__container_of(x->deferred.next, relock__exec_deferred_t, link);
    relock__list_remove(&d->link);
    d->run(d);
  }
  running_deferred = 0;
}

/* Before a hold of x's mutex is let go, on another thread than x's loop
 * thread: the last one runs the deferred work of the call it was. */
static void let_go(relock__exec_t *x) {
  if (holds == 1) {
    if (calling == x)
      run_deferred(x);
    calling = NULL;
  }
  if (holds > 0)
    holds--;
}

/* Lets go of a hold: the last runs the call's deferred work; a watcher or
 * timer started meanwhile wakes the loop thread if it waits in the kernel.
 * Back from there (polling 0), it goes round again and sees it anyway. */
static void release(relock__exec_t *x) {
  if (!relock__exec_on_loop_thread(x)) {
    let_go(x);
    if (changed && __atomic_load_n(&x->polling, __ATOMIC_RELAXED))
      ev_async_send(x->loop, &x->wake);
    changed = 0;
  }
  pthread_mutex_unlock(&x->mu);
}

void relock__exec_leave(relock__exec_t *x) {
  if (x->threaded)
    release(x);
}

void relock__exec_lock(relock__exec_t *x) {
  if (!x->threaded)
    return;
  pthread_mutex_lock(&x->mu);
  if (!relock__exec_on_loop_thread(x) && holds++ == 0)
    calling = NULL; /* not a call: nothing is deferred */
}

void relock__exec_unlock(relock__exec_t *x) {
  if (x->threaded)
    release(x);
}

void relock__exec_broadcast(relock__exec_t *x) {
  if (x->threaded)
    pthread_cond_broadcast(&x->cond);
}

int relock__exec_wait(relock__exec_t *x, uint64_t deadline_ns) {
  if (deadline_ns == 0)
    return pthread_cond_wait(&x->cond, &x->mu);
  struct timespec ts = {(time_t)(deadline_ns / 1000000000u), (long)(deadline_ns % 1000000000u)};
  return pthread_cond_timedwait(&x->cond, &x->mu, &ts);
}

/* -- waiters ------------------------------------------------------------------*/

/* A waiter's word: it waits, and has not gone to sleep in the kernel yet;
 * it sleeps there (a wake must call the kernel); a wake is on its way to the
 * kernel (the waiter must not go yet: the wake still uses the word); it was
 * woken (the waker touches the word no more: the waiter may go, and its
 * stack be reused). */
enum { WAITING = 0, SLEEPING = 1, WAKING = 2, WOKEN = 3 };

void relock__exec_waiter_add(relock__exec_t *x, relock__exec_waiter_t *w, const void *on) {
  w->on = on;
  __atomic_store_n(&w->word, WAITING, __ATOMIC_RELAXED);
  relock__list_push_back(&x->waiters, &w->link);
}

void relock__exec_waiter_remove(relock__exec_waiter_t *w) { relock__list_remove(&w->link); }

/* The kernel is called only for a waiter asleep in it, whose word says
 * WAKING meanwhile; WOKEN, stored last, lets it go. (Its word is on its
 * stack: a wake after it went would hand the kernel reused memory.) */
static void futex_wake(int *word) {
  syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  __atomic_store_n(word, WOKEN, __ATOMIC_RELEASE);
}

/* The loop thread only, which alone touches to_wake, before it lets go of
 * the mutex: so whoever holds the mutex never finds a word WAKING. */
static void flush_wakes(relock__exec_t *x) {
  for (size_t i = 0; i < x->nto_wake; i++)
    futex_wake(x->to_wake[i]);
  x->nto_wake = 0;
}

/* On the loop thread, later in its iteration (flush_wakes: the wakes of
 * one iteration go together); elsewhere, or out of memory, now. */
static void wake_later(relock__exec_t *x, int *word) {
  if (relock__exec_on_loop_thread(x) && !x->stopping) {
    if (x->nto_wake == x->cap_to_wake) {
      size_t cap = x->cap_to_wake > 0 ? 2 * x->cap_to_wake : 16;
      int **p = realloc(x->to_wake, cap * sizeof(*p));
      if (p != NULL) {
        x->to_wake = p;
        x->cap_to_wake = cap;
      }
    }
    if (x->nto_wake < x->cap_to_wake) {
      x->to_wake[x->nto_wake++] = word;
      return;
    }
  }
  futex_wake(word);
}

/* Unlisted first. A waiter not asleep yet is woken by its word alone; one
 * asleep in the kernel is told WAKING, then woken there (futex_wake). */
static void wake_one(relock__exec_t *x, relock__exec_waiter_t *w) {
  int *word = &w->word;
  relock__list_remove(&w->link);
  int seen = __atomic_load_n(word, __ATOMIC_ACQUIRE); /* WAITING or SLEEPING: only wake_one changes it else */
  for (;;) {
    int next = seen == SLEEPING ? WAKING : WOKEN;
    if (__atomic_compare_exchange_n(word, &seen, next, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      if (next == WAKING)
        wake_later(x, word);
      return;
    }
  }
}

void relock__exec_wake(relock__exec_t *x, const void *on) {
  relock__link_t *l = x->waiters.next;
  while (l != &x->waiters) {
    relock__exec_waiter_t *w = relock__container_of(l, relock__exec_waiter_t, link);
    l = l->next;
    if (w->on == on)
      wake_one(x, w);
  }
}

static void wake_all(relock__exec_t *x) {
  while (!relock__list_empty(&x->waiters))
    wake_one(x, relock__container_of(x->waiters.next, relock__exec_waiter_t, link));
}

int relock__exec_waiter_sleep(relock__exec_t *x, relock__exec_waiter_t *w, uint64_t deadline_ns) {
  (void)x;
  int expected = WAITING;
  if (!__atomic_compare_exchange_n(&w->word, &expected, SLEEPING, 0, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE))
    return 0; /* woken before it slept */
  struct timespec ts = {(time_t)(deadline_ns / 1000000000u), (long)(deadline_ns % 1000000000u)};
  for (;;) {
    /* absolute, on CLOCK_MONOTONIC; returns at once if the word changed */
    long r = syscall(SYS_futex, &w->word, FUTEX_WAIT_BITSET_PRIVATE, SLEEPING, deadline_ns != 0 ? &ts : NULL,
                     NULL, FUTEX_BITSET_MATCH_ANY);
    int seen = __atomic_load_n(&w->word, __ATOMIC_ACQUIRE);
    if (seen == WAKING || seen == WOKEN) {
      /* WAKING: the waker is between its call to the kernel and WOKEN,
       * holding the mutex; it needs nothing of this thread to get there */
      while (__atomic_load_n(&w->word, __ATOMIC_ACQUIRE) != WOKEN)
        sched_yield();
      return 0;
    }
    if (r != 0 && errno == ETIMEDOUT)
      return ETIMEDOUT;
  }
}
