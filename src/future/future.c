/* Futures and their write side (promise.h): completion exactly once,
 * callbacks in order, cancellation, wait, reference counting, combinators. */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include <relock/error.h>
#include <relock/future.h>

#include "base/clock.h"
#include "base/error.h"
#include "future/promise.h"
#include "loop/exec.h"

/* Refuses a call: NULL, with err (which may be NULL) saying why. */
#define invalid(err, ...) (relock__error_set((err), RELOCK_EINVAL, __VA_ARGS__), (relock_future_t *)NULL)

#define FUTURE_MAGIC 0x46757475u /* "Futu" */
#define FUTURE_DEAD 0xdeadf00du

typedef struct callback {
  relock_future_cb fn;
  void *arg;
  struct callback *next;
} callback_t;

/* Threaded, the outcome is read without the mutex: state is written last
 * (release) and read first (acquire), and once it is not PENDING, err, msg
 * and the value never change again until the future is freed. refs is
 * atomic: a reference can be dropped without the mutex, except the last
 * when freeing needs it (callbacks left, a value with a destructor). */
struct relock_future {
  relock__exec_t *exec;     /* a reference; NULL for a future of no client */
  int refs;                 /* atomic */
  unsigned magic; /* catches use of a released future in debug builds */
  relock_future_state_t state; /* atomic */
  int has_waiters;          /* a thread may be asleep on it (relock__exec_waiter_t) */
  int err;
  char *msg;
  relock_value_type_t vtype;
  union {
    int b;
    int64_t i;
    struct {
      char *s;
      size_t len;
    } str;
    struct {
      void *p;
      void (*dtor)(void *);
    } ptr;
  } v;
  relock__cancel_fn cancel_fn;
  void *cancel_arg;
  /* Callbacks wait in a FIFO. Most futures get exactly one, so the first
   * node lives inline and costs no allocation. */
  callback_t inline_cb;
  int inline_cb_used;
  callback_t *head;
  callback_t *tail;
  int dispatching;
};

static relock_future_state_t state_of(const relock_future_t *f) {
  return __atomic_load_n(&f->state, __ATOMIC_ACQUIRE);
}

/* How deep the calling thread is in callbacks (base/error.h: an event's
 * counts too, issue 46); see wait(). */
#define callback_depth relock__callback_depth

int relock__in_future_callback(void) { return callback_depth > 0; }

int relock__future_would_block(relock__exec_t *exec) {
  if (callback_depth > 0)
    return 1;
  if (exec == NULL)
    return 0;
  /* Threaded, the loop thread must never block; embedded, running the loop
   * from inside one of its callbacks would re-enter it. */
  if (!relock__exec_on_loop_thread(exec))
    return 0; /* threaded: it sleeps until the loop thread is done; embedded: refused anyway */
  return exec->threaded || ev_depth(exec->loop) > 0;
}

/* A future is shared between the loop thread, which completes it, and the
 * threads that wait on it, read it and release it (threaded mode). What
 * may run callbacks or an operation's undo takes the exec's mutex; reading
 * an outcome and dropping a reference do not (struct relock_future). */
/* Starts a call that may complete or release f (a cancel hook, a callback
 * run at once): it goes through an exec pinned by a reference of its own,
 * never through f afterwards. Like relock__exec_enter: the embedded loop's
 * thread only, the loop woken after a call from another thread. Returns
 * the error of a refused call, with *pinned NULL. */
static int enter_pinned(const relock_future_t *f, relock__exec_t **pinned) {
  assert(f->magic == FUTURE_MAGIC && "relock_future_t used after its last release"); /* as in lock() */
  relock__exec_t *x = f->exec;
  *pinned = NULL;
  if (x == NULL)
    return 0;
  int r = relock__exec_enter(relock__exec_ref(x), NULL);
  if (r != 0) {
    relock__exec_unref(x);
    return r;
  }
  *pinned = x;
  return 0;
}

static void leave_pinned(relock__exec_t *x) {
  if (x != NULL) {
    relock__exec_leave(x);
    relock__exec_unref(x);
  }
}

static void check(const relock_future_t *f) {
  (void)f;
  assert(f->magic == FUTURE_MAGIC && "relock_future_t used after its last release");
  assert(__atomic_load_n(&f->refs, __ATOMIC_RELAXED) > 0);
}

relock_future_t *relock__future_new(relock__exec_t *exec) {
  relock_future_t *f = calloc(1, sizeof(*f));
  if (f == NULL)
    return NULL;
  f->exec = exec != NULL ? relock__exec_ref(exec) : NULL;
  f->refs = 1;
  f->magic = FUTURE_MAGIC;
  f->state = RELOCK_FUTURE_PENDING;
  f->err = RELOCK_EPENDING;
  return f;
}

/* -- ownership --------------------------------------------------------------*/

relock_future_t *relock_future_retain(relock_future_t *f) {
  if (f == NULL)
    return NULL;
  check(f);
  __atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED); /* the caller holds one: f cannot go meanwhile */
  return f;
}

static void free_value(relock_future_t *f) {
  if (f->vtype == RELOCK_VALUE_STRING)
    free(f->v.str.s);
  else if (f->vtype == RELOCK_VALUE_PTR && f->v.ptr.dtor != NULL)
    f->v.ptr.dtor(f->v.ptr.p);
  f->vtype = RELOCK_VALUE_NONE;
}

static void future_free(relock_future_t *f);

void relock_future_release(relock_future_t *f) {
  if (f == NULL)
    return;
  check(f);
  relock__exec_t *exec = f->exec;
  if (__atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL) > 0)
    return;
  /* The last reference: nobody else can reach f. The mutex only guards
   * what freeing may run: callbacks left unrun, a value's destructor. */
  int guarded = exec != NULL && (f->head != NULL || (f->vtype == RELOCK_VALUE_PTR && f->v.ptr.dtor != NULL));
  /* In a forked child no other thread can reach it, and the mutex may have
   * been held at the fork by one the child lacks: never waited for. */
  if (guarded && relock__exec_forked(exec))
    guarded = 0;
  if (guarded)
    relock__exec_lock(exec);
  future_free(f);
  if (guarded)
    relock__exec_unlock(exec);
  if (exec != NULL) /* after the unlock: this may have been the exec's last reference */
    relock__exec_unref(exec);
}

static void future_free(relock_future_t *f) {
  /* Callbacks of a future nobody can complete any more are dropped: the
   * operation holds a reference for as long as it may complete it. */
  while (f->head != NULL) {
    callback_t *cb = f->head;
    f->head = cb->next;
    if (cb != &f->inline_cb)
      free(cb);
  }
  free_value(f);
  free(f->msg);
  f->magic = FUTURE_DEAD;
  free(f);
}

/* -- callbacks --------------------------------------------------------------*/

static void run_callback(relock_future_t *f, relock_future_cb fn, void *arg) {
  callback_depth++;
  fn(f, arg);
  callback_depth--;
}

/* Runs the queued callbacks in order, including those they add. */
static void dispatch(relock_future_t *f) {
  relock_future_retain(f); /* a callback may drop the last outside reference */
  f->dispatching = 1;
  while (f->head != NULL) {
    callback_t *cb = f->head;
    relock_future_cb fn = cb->fn;
    void *arg = cb->arg;
    f->head = cb->next;
    if (f->head == NULL)
      f->tail = NULL;
    if (cb == &f->inline_cb)
      f->inline_cb_used = 0;
    else
      free(cb);
    run_callback(f, fn, arg);
  }
  f->dispatching = 0;
  relock_future_release(f);
}

static int on_done(relock_future_t *f, relock_future_cb fn, void *arg);

int relock_future_on_done(relock_future_t *f, relock_future_cb fn, void *arg) {
  if (f == NULL || fn == NULL)
    return RELOCK_EINVAL;
  relock__exec_t *x;
  int r = enter_pinned(f, &x); /* a callback run at once may release f */
  if (r != 0)
    return r;
  r = on_done(f, fn, arg);
  leave_pinned(x);
  return r;
}

static int on_done(relock_future_t *f, relock_future_cb fn, void *arg) {
  check(f);
  if (state_of(f) != RELOCK_FUTURE_PENDING && !f->dispatching) {
    relock_future_retain(f);
    run_callback(f, fn, arg);
    relock_future_release(f);
    return RELOCK_OK;
  }
  callback_t *cb;
  if (!f->inline_cb_used) {
    cb = &f->inline_cb;
    f->inline_cb_used = 1;
  } else if ((cb = malloc(sizeof(*cb))) == NULL) {
    return RELOCK_ENOMEM;
  }
  cb->fn = fn;
  cb->arg = arg;
  cb->next = NULL;
  if (f->tail != NULL)
    f->tail->next = cb;
  else
    f->head = cb;
  f->tail = cb;
  return RELOCK_OK;
}

/* -- completing -------------------------------------------------------------*/

/* Wakes the threads asleep on f (threaded): each its own, no other. */
static void wake_waiters(relock_future_t *f) {
  if (f->has_waiters) {
    f->has_waiters = 0;
    relock__exec_wake(f->exec, f);
  }
}

/* Moves a pending future to its final state; the caller has set the value. */
static void complete(relock_future_t *f, relock_future_state_t state, int err) {
  f->err = err;
  f->cancel_fn = NULL;
  f->cancel_arg = NULL;
  __atomic_store_n(&f->state, state, __ATOMIC_RELEASE); /* last: the outcome is readable without the mutex */
  wake_waiters(f);
  dispatch(f);
}

static int pending(relock_future_t *f) {
  check(f);
  return state_of(f) == RELOCK_FUTURE_PENDING;
}

int relock__future_succeed(relock_future_t *f) {
  if (!pending(f))
    return 0;
  complete(f, RELOCK_FUTURE_SUCCEEDED, RELOCK_OK);
  return 1;
}

int relock__future_succeed_bool(relock_future_t *f, int value) {
  if (!pending(f))
    return 0;
  f->vtype = RELOCK_VALUE_BOOL;
  f->v.b = value != 0;
  complete(f, RELOCK_FUTURE_SUCCEEDED, RELOCK_OK);
  return 1;
}

int relock__future_succeed_int(relock_future_t *f, int64_t value) {
  if (!pending(f))
    return 0;
  f->vtype = RELOCK_VALUE_INT;
  f->v.i = value;
  complete(f, RELOCK_FUTURE_SUCCEEDED, RELOCK_OK);
  return 1;
}

int relock__future_succeed_string(relock_future_t *f, const char *s, size_t len) {
  if (!pending(f))
    return 0;
  char *copy = malloc(len + 1);
  if (copy == NULL)
    return relock__future_fail(f, RELOCK_ENOMEM, "out of memory copying a %zu-byte result", len);
  if (len > 0)
    memcpy(copy, s, len);
  copy[len] = '\0';
  f->vtype = RELOCK_VALUE_STRING;
  f->v.str.s = copy;
  f->v.str.len = len;
  complete(f, RELOCK_FUTURE_SUCCEEDED, RELOCK_OK);
  return 1;
}

int relock__future_succeed_ptr(relock_future_t *f, void *ptr, void (*dtor)(void *)) {
  if (!pending(f))
    return 0;
  f->vtype = RELOCK_VALUE_PTR;
  f->v.ptr.p = ptr;
  f->v.ptr.dtor = dtor;
  complete(f, RELOCK_FUTURE_SUCCEEDED, RELOCK_OK);
  return 1;
}

int relock__future_vfail(relock_future_t *f, int err, const char *fmt, va_list ap) {
  if (!pending(f))
    return 0;
  assert(err < 0);
  if (err >= 0)
    err = RELOCK_EINVAL; /* a failure must carry an error; never report success */
  if (fmt != NULL) {
    /* Without memory for the message, relock_strerror still describes it. */
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n >= 0 && (f->msg = malloc((size_t)n + 1)) != NULL)
      vsnprintf(f->msg, (size_t)n + 1, fmt, ap);
  }
  complete(f, RELOCK_FUTURE_FAILED, err);
  return 1;
}

int relock__future_fail(relock_future_t *f, int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = relock__future_vfail(f, err, fmt, ap);
  va_end(ap);
  return r;
}

relock_future_t *relock__future_failed(relock__exec_t *exec, int err, const char *fmt, ...) {
  relock_future_t *f = relock__future_new(exec);
  if (f == NULL)
    return NULL;
  va_list ap;
  va_start(ap, fmt);
  relock__future_vfail(f, err, fmt, ap); /* no callback yet: nothing runs */
  va_end(ap);
  return f;
}

void relock__future_set_cancel(relock_future_t *f, relock__cancel_fn fn, void *arg) {
  check(f);
  f->cancel_fn = fn;
  f->cancel_arg = arg;
}

static int cancel(relock_future_t *f);

int relock_future_cancel(relock_future_t *f) {
  if (f == NULL)
    return 0;
  /* The operation's undo touches the loop's watchers: from another thread
   * the loop is woken to see them (an embedded loop's may not be touched
   * from another thread at all). The hook or a callback may drop f's last
   * reference. */
  relock__exec_t *x;
  if (enter_pinned(f, &x) != 0)
    return 0;
  int r = cancel(f);
  leave_pinned(x);
  return r;
}

static int cancel(relock_future_t *f) {
  if (!pending(f))
    return 0;
  relock__cancel_fn fn = f->cancel_fn;
  void *arg = f->cancel_arg;
  relock_future_retain(f); /* the hook may drop the operation's reference */
  f->err = RELOCK_ECANCELED;
  __atomic_store_n(&f->state, RELOCK_FUTURE_CANCELLED, __ATOMIC_RELEASE);
  f->cancel_fn = NULL;
  f->cancel_arg = NULL;
  /* The operation undoes itself before anyone hears of the cancellation, so
   * a callback already sees it stopped. */
  if (fn != NULL)
    fn(f, arg);
  /* A thread blocked on f wakes now: the undo may send nothing whose reply
   * would wake it (relock_lock_interrupt of one of two waiters hung so). */
  wake_waiters(f);
  dispatch(f);
  relock_future_release(f);
  return 1;
}

/* -- reading ----------------------------------------------------------------*/

/* No mutex: the state is atomic, and what a completed future holds does
 * not change (struct relock_future). */
relock_future_state_t relock_future_state(const relock_future_t *f) {
  if (f == NULL)
    return RELOCK_FUTURE_FAILED;
  check(f);
  return state_of(f);
}

int relock_future_is_done(const relock_future_t *f) {
  return relock_future_state(f) != RELOCK_FUTURE_PENDING;
}

int relock_future_error(const relock_future_t *f) {
  if (f == NULL)
    return RELOCK_EINVAL;
  check(f);
  return state_of(f) == RELOCK_FUTURE_PENDING ? RELOCK_EPENDING : f->err;
}

const char *relock_future_message(const relock_future_t *f) {
  if (f != NULL && f->msg != NULL)
    return f->msg;
  return relock_strerror(relock_future_error(f));
}

relock_value_type_t relock_future_value_type(const relock_future_t *f) {
  if (f == NULL)
    return RELOCK_VALUE_NONE;
  check(f);
  /* set once, before the state: stable once read done */
  return state_of(f) == RELOCK_FUTURE_PENDING ? RELOCK_VALUE_NONE : f->vtype;
}

int relock_future_bool(const relock_future_t *f) {
  return relock_future_value_type(f) == RELOCK_VALUE_BOOL ? f->v.b : 0;
}

int64_t relock_future_int(const relock_future_t *f) {
  return relock_future_value_type(f) == RELOCK_VALUE_INT ? f->v.i : 0;
}

const char *relock_future_string(const relock_future_t *f, size_t *len) {
  int is_string = relock_future_value_type(f) == RELOCK_VALUE_STRING;
  if (len != NULL)
    *len = is_string ? f->v.str.len : 0;
  return is_string ? f->v.str.s : NULL;
}

void *relock_future_ptr(const relock_future_t *f) {
  return relock_future_value_type(f) == RELOCK_VALUE_PTR ? f->v.ptr.p : NULL;
}

void (*relock__future_ptr_dtor(const relock_future_t *f))(void *) {
  return relock_future_value_type(f) == RELOCK_VALUE_PTR ? f->v.ptr.dtor : NULL;
}

struct ev_loop *relock_future_loop(const relock_future_t *f) {
  if (f == NULL)
    return NULL;
  check(f);
  return f->exec != NULL ? f->exec->loop : NULL;
}

int relock__future_enter(relock__exec_t *exec, relock_future_t **refused) {
  relock_error_t err;
  if (relock__exec_enter(exec, &err) == 0)
    return 0;
  /* Of no exec: the refusing thread may not touch the loop's. */
  *refused = relock__future_failed(NULL, err.code, "%s", err.message);
  return 1;
}

/* -- waiting ----------------------------------------------------------------*/

static void on_wait_deadline(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  *(int *)w->data = 1;
}

/* Threaded: sleeps while the loop thread does the work, on a word of its
 * own that f's completion sets (exec.h); woken so, it reads the outcome
 * without the mutex. The mutex is taken back only to give up: at the
 * deadline, or when the loop thread stops. */
static int wait_threaded(relock_future_t *f, int64_t timeout_ms) {
  relock__exec_t *exec = f->exec;
  uint64_t deadline = timeout_ms == RELOCK_INFINITE ? 0 : relock__deadline_after(relock__now_ns(), timeout_ms);
  relock_future_retain(f);
  relock__exec_lock(exec);
  while (state_of(f) == RELOCK_FUTURE_PENDING && !exec->stopping) {
    relock__exec_waiter_t w;
    relock__exec_waiter_add(exec, &w, f);
    f->has_waiters = 1;
    relock__exec_unlock(exec);
    int r = relock__exec_waiter_sleep(exec, &w, deadline);
    if (r == 0 && state_of(f) != RELOCK_FUTURE_PENDING)
      goto done; /* woken by the completion, which unlisted w */
    relock__exec_lock(exec);
    relock__exec_waiter_remove(&w); /* when not woken */
    if (r == ETIMEDOUT)
      break;
  }
  relock__exec_unlock(exec);
done:;
  int r = state_of(f) == RELOCK_FUTURE_PENDING ? RELOCK_EPENDING : f->err;
  relock_future_release(f);
  return r;
}

/* Embedded: runs the loop (on its own thread) until the future completes. */
static int wait_embedded(relock_future_t *f, int64_t timeout_ms) {
  struct ev_loop *loop = f->exec->loop;
  relock_future_retain(f);
  int timed_out = 0;
  ev_timer deadline;
  if (timeout_ms != RELOCK_INFINITE) {
    ev_timer_init(&deadline, on_wait_deadline, (double)timeout_ms / 1000.0, 0.0);
    deadline.data = &timed_out;
    ev_now_update(loop); /* measure the timeout from now, not the last iteration */
    ev_timer_start(loop, &deadline);
  }
  while (state_of(f) == RELOCK_FUTURE_PENDING && !timed_out) {
    /* ev_run returns 0 when no active watcher is left: then nothing can ever
     * complete the future, and waiting on would hang forever. */
    if (!ev_run(loop, EVRUN_ONCE))
      break;
  }
  if (timeout_ms != RELOCK_INFINITE)
    ev_timer_stop(loop, &deadline);
  int r = state_of(f) == RELOCK_FUTURE_PENDING ? RELOCK_EPENDING : f->err;
  relock_future_release(f);
  return r;
}

int relock_future_wait(relock_future_t *f, int64_t timeout_ms) {
  if (f == NULL || timeout_ms < RELOCK_INFINITE)
    return RELOCK_EINVAL;
  relock_future_state_t state = relock_future_state(f);
  if (state != RELOCK_FUTURE_PENDING)
    return relock_future_error(f);
  relock__exec_t *exec = f->exec;
  if (exec == NULL)
    return RELOCK_EPENDING;
  if (relock__exec_forked(exec))
    return RELOCK_EFORKED;
  if (!exec->threaded && !relock__exec_on_loop_thread(exec))
    return RELOCK_EWRONGTHREAD;
  /* Blocking the loop thread, or running the loop from inside one of its
   * callbacks (or a future's), would stop or re-enter the very work that
   * completes the future. */
  if (relock__future_would_block(exec))
    return RELOCK_EWOULDBLOCK;
  return exec->threaded ? wait_threaded(f, timeout_ms) : wait_embedded(f, timeout_ms);
}

/* -- combinators ------------------------------------------------------------*/

typedef struct combinator combinator_t;

typedef struct combinator_input {
  combinator_t *c;
  relock_future_t *future; /* NULL once it has reported */
  size_t index;
} combinator_input_t;

struct combinator {
  relock_future_t *out;
  int is_all;
  size_t n;
  size_t unsettled; /* inputs yet to report, plus guards held while iterating */
  int first_err;    /* of the first input that did not succeed; 0 while none */
  char *first_msg;
  combinator_input_t inputs[];
};

static void combinator_finish(combinator_t *c) {
  if (c->first_err == 0 && c->is_all)
    relock__future_succeed_int(c->out, (int64_t)c->n);
  else if (c->first_err != 0)
    relock__future_fail(c->out, c->first_err, c->first_msg ? "%s" : NULL, c->first_msg);
  relock_future_release(c->out);
  free(c->first_msg);
  free(c);
}

static void combinator_unref(combinator_t *c) {
  if (--c->unsettled == 0)
    combinator_finish(c);
}

static void on_input_done(relock_future_t *f, void *arg) {
  combinator_input_t *in = arg;
  combinator_t *c = in->c;
  in->future = NULL;
  if (relock_future_state(f) == RELOCK_FUTURE_SUCCEEDED) {
    if (!c->is_all)
      relock__future_succeed_int(c->out, (int64_t)in->index);
  } else if (c->first_err == 0) {
    c->first_err = relock_future_error(f);
    c->first_msg = strdup(relock_future_message(f)); /* NULL: strerror serves */
  }
  relock_future_release(f);
  combinator_unref(c);
}

static void on_combinator_cancel(relock_future_t *out, void *arg) {
  (void)out;
  combinator_t *c = arg;
  c->unsettled++; /* an input's report may otherwise free c mid-loop */
  for (size_t i = 0; i < c->n; i++)
    if (c->inputs[i].future != NULL)
      relock_future_cancel(c->inputs[i].future);
  combinator_unref(c);
}

static relock_future_t *combine_locked(relock_future_t *const *futures, size_t n, int is_all, relock__exec_t *exec,
                                       relock_error_t *err);

static relock_future_t *combine(relock_future_t *const *futures, size_t n, int is_all, relock_error_t *err) {
  if (futures == NULL)
    return invalid(err, "futures is NULL");
  if (n == 0)
    return invalid(err, "n must be >= 1");
  /* A completed future of no loop (an operation refused at once, say) goes
   * with any loop: it will never need one. */
  relock__exec_t *exec = NULL;
  int have_exec = 0;
  for (size_t i = 0; i < n; i++) {
    if (futures[i] == NULL)
      return invalid(err, "futures[%zu] is NULL", i);
    relock__exec_t *x = futures[i]->exec;
    if (x == NULL && relock_future_is_done(futures[i]))
      continue;
    if (have_exec && x != exec)
      return invalid(err, "futures[%zu] belongs to another loop than the futures before it", i);
    exec = x;
    have_exec = 1;
  }
  if (exec != NULL && relock__exec_forked(exec)) { /* its mutex may be held by a thread the child lacks (issue 46) */
    relock__error_set(err, RELOCK_EFORKED, "the futures belong to a client made before fork(): a child process "
                                           "must make its own");
    return NULL;
  }
  if (exec != NULL)
    relock__exec_lock(exec);
  relock_future_t *out = combine_locked(futures, n, is_all, exec, err);
  if (exec != NULL)
    relock__exec_unlock(exec);
  return out;
}

static relock_future_t *combine_locked(relock_future_t *const *futures, size_t n, int is_all, relock__exec_t *exec,
                                       relock_error_t *err) {

  combinator_t *c = calloc(1, sizeof(*c) + n * sizeof(c->inputs[0]));
  relock_future_t *out = c != NULL ? relock__future_new(exec) : NULL;
  if (out == NULL) {
    free(c);
    relock__error_set(err, RELOCK_ENOMEM, "out of memory combining %zu futures", n);
    return NULL;
  }
  c->out = relock_future_retain(out); /* c's own reference, until it finishes */
  c->is_all = is_all;
  c->n = n;
  c->unsettled = n + 1; /* the guard keeps c alive while registering */
  relock__future_set_cancel(out, on_combinator_cancel, c);

  size_t i;
  for (i = 0; i < n; i++) {
    c->inputs[i] = (combinator_input_t){c, relock_future_retain(futures[i]), i};
    if (relock_future_on_done(futures[i], on_input_done, &c->inputs[i]) != RELOCK_OK)
      break;
  }
  if (i < n) {
    /* Out of memory part-way: the inputs already registered will still
     * report to c; the rest never will. */
    relock__future_fail(out, RELOCK_ENOMEM, "out of memory combining %zu futures", n);
    for (size_t j = i; j < n; j++) {
      relock_future_release(c->inputs[j].future);
      c->inputs[j].future = NULL;
    }
    c->unsettled -= n - i;
    combinator_unref(c);
    relock_future_release(out);
    relock__error_set(err, RELOCK_ENOMEM, "out of memory combining %zu futures", n);
    return NULL;
  }
  combinator_unref(c);
  relock__error_set(err, RELOCK_OK, NULL);
  return out;
}

relock_future_t *relock_future_all(relock_future_t *const *futures, size_t n, relock_error_t *err) {
  return combine(futures, n, 1, err);
}

relock_future_t *relock_future_any(relock_future_t *const *futures, size_t n, relock_error_t *err) {
  return combine(futures, n, 0, err);
}
