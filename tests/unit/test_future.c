/* Unit tests of futures on a real libev loop: exactly-once completion,
 * callback order, cancellation, reference counting, wait, combinators. */
#include <config.h>

#include <string.h>

#include <ev.h>

#include <relock/relock.h>

#include "base/clock.h"
#include "future/promise.h"
#include "loop/exec.h"
#include "support/test.h"

/* -- helpers ----------------------------------------------------------------*/

typedef struct {
  int calls;
  int order[16];
  int norder;
} trace_t;

typedef struct {
  trace_t *trace;
  int id;
} tag_t;

static void record(relock_future_t *f, void *arg) {
  (void)f;
  tag_t *tag = arg;
  tag->trace->calls++;
  if (tag->trace->norder < 16)
    tag->trace->order[tag->trace->norder++] = tag->id;
}

static void count(relock_future_t *f, void *arg) {
  (void)f;
  (*(int *)arg)++;
}

static int dtor_calls;
static void counting_dtor(void *p) {
  dtor_calls++;
  free(p);
}

/* Completes a future from a loop timer: the way operations really do it. */
typedef struct {
  ev_timer timer;
  relock_future_t *future;
  int err; /* 0: succeed with int 42 */
} completer_t;

static void on_completer(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  completer_t *c = w->data;
  if (c->err == 0)
    relock__future_succeed_int(c->future, 42);
  else
    relock__future_fail(c->future, c->err, "completer failed with %d", c->err);
  relock_future_release(c->future);
}

static void complete_later(struct ev_loop *loop, completer_t *c, relock_future_t *f, double after, int err) {
  c->future = relock_future_retain(f);
  c->err = err;
  ev_timer_init(&c->timer, on_completer, after, 0.0);
  c->timer.data = c;
  /* libev counts a timer from the loop's cached time, which is as old as
   * the loop's last iteration (its creation, here): without the update a
   * slow start (valgrind) makes the timer fire before `after` has passed
   * since now. */
  ev_now_update(loop);
  ev_timer_start(loop, &c->timer);
}

static double elapsed_ms(uint64_t since_ns) { return (double)(relock__now_ns() - since_ns) / 1e6; }

/* -- exactly once -----------------------------------------------------------*/

static void test_completes_exactly_once(void **state) {
  (void)state;
  int calls = 0;
  relock_future_t *f = relock__future_new(NULL);
  assert_non_null(f);
  assert_int_equal(relock_future_state(f), RELOCK_FUTURE_PENDING);
  assert_int_equal(relock_future_error(f), RELOCK_EPENDING);
  assert_false(relock_future_is_done(f));
  assert_int_equal(relock_future_on_done(f, count, &calls), 0);

  assert_int_equal(relock__future_succeed_int(f, 7), 1);
  assert_int_equal(calls, 1);
  assert_int_equal(relock__future_succeed_int(f, 8), 0);
  assert_int_equal(relock__future_fail(f, RELOCK_ESERVER, "late"), 0);
  assert_int_equal(relock__future_succeed(f), 0);
  assert_int_equal(relock_future_cancel(f), 0);
  assert_int_equal(calls, 1);
  assert_int_equal(relock_future_state(f), RELOCK_FUTURE_SUCCEEDED);
  assert_int_equal(relock_future_int(f), 7);
  assert_int_equal(relock_future_error(f), 0);
  assert_string_equal(relock_future_message(f), "success");
  relock_future_release(f);
}

static void test_failure_after_failure_is_refused(void **state) {
  (void)state;
  relock_future_t *f = relock__future_new(NULL);
  assert_int_equal(relock__future_fail(f, RELOCK_ESERVER, "WRONGTYPE %s", "bad key"), 1);
  assert_int_equal(relock__future_fail(f, RELOCK_ETIMEDOUT, NULL), 0);
  assert_int_equal(relock_future_state(f), RELOCK_FUTURE_FAILED);
  assert_int_equal(relock_future_error(f), RELOCK_ESERVER);
  assert_string_equal(relock_future_message(f), "WRONGTYPE bad key");
  assert_int_equal(relock_future_value_type(f), RELOCK_VALUE_NONE);
  relock_future_release(f);

  f = relock__future_new(NULL);
  assert_int_equal(relock__future_fail(f, RELOCK_ECONNLOST, NULL), 1);
  assert_string_equal(relock_future_message(f), relock_strerror(RELOCK_ECONNLOST));
  relock_future_release(f);
}

/* -- values -----------------------------------------------------------------*/

static void test_values(void **state) {
  (void)state;
  relock_future_t *f = relock__future_new(NULL);
  relock__future_succeed_bool(f, 5);
  assert_int_equal(relock_future_value_type(f), RELOCK_VALUE_BOOL);
  assert_int_equal(relock_future_bool(f), 1);
  assert_int_equal(relock_future_int(f), 0); /* wrong type reads as zero */
  relock_future_release(f);

  f = relock__future_new(NULL);
  relock__future_succeed_int(f, INT64_MIN);
  assert_int_equal(relock_future_value_type(f), RELOCK_VALUE_INT);
  assert_true(relock_future_int(f) == INT64_MIN);
  assert_null(relock_future_string(f, NULL));
  relock_future_release(f);

  f = relock__future_new(NULL);
  char bytes[] = {'a', '\0', 'b'};
  relock__future_succeed_string(f, bytes, sizeof bytes);
  size_t len = 0;
  const char *s = relock_future_string(f, &len);
  assert_int_equal(len, 3);
  assert_memory_equal(s, bytes, 3);
  assert_int_equal(s[3], '\0');
  relock_future_release(f);

  f = relock__future_new(NULL);
  relock__future_succeed(f);
  assert_int_equal(relock_future_value_type(f), RELOCK_VALUE_NONE);
  relock_future_release(f);
}

static void test_ptr_value_owned_by_future(void **state) {
  (void)state;
  dtor_calls = 0;
  relock_future_t *f = relock__future_new(NULL);
  int *p = malloc(sizeof(int));
  assert_int_equal(relock__future_succeed_ptr(f, p, counting_dtor), 1);
  assert_ptr_equal(relock_future_ptr(f), p);

  /* refused: the caller keeps ownership and the destructor is not called */
  int *q = malloc(sizeof(int));
  assert_int_equal(relock__future_succeed_ptr(f, q, counting_dtor), 0);
  free(q);
  assert_int_equal(dtor_calls, 0);

  relock_future_retain(f);
  relock_future_release(f);
  assert_int_equal(dtor_calls, 0);
  relock_future_release(f);
  assert_int_equal(dtor_calls, 1);
}

/* -- callbacks --------------------------------------------------------------*/

static void test_callbacks_in_registration_order(void **state) {
  (void)state;
  trace_t trace = {0};
  tag_t tags[5] = {{&trace, 1}, {&trace, 2}, {&trace, 3}, {&trace, 4}, {&trace, 5}};
  relock_future_t *f = relock__future_new(NULL);
  for (int i = 0; i < 3; i++)
    assert_int_equal(relock_future_on_done(f, record, &tags[i]), 0);
  assert_int_equal(trace.calls, 0);
  relock__future_succeed(f);
  assert_int_equal(trace.calls, 3);

  /* added after completion: runs at once, in place */
  assert_int_equal(relock_future_on_done(f, record, &tags[3]), 0);
  assert_int_equal(trace.calls, 4);
  assert_int_equal(relock_future_on_done(f, record, &tags[4]), 0);
  assert_int_equal(trace.calls, 5);
  int expect[] = {1, 2, 3, 4, 5};
  assert_memory_equal(trace.order, expect, sizeof expect);
  relock_future_release(f);
}

typedef struct {
  trace_t *trace;
  tag_t *late;
  int added_ran_before_return;
} adder_t;

static void add_during_dispatch(relock_future_t *f, void *arg) {
  adder_t *a = arg;
  int before = a->trace->calls;
  assert_int_equal(relock_future_on_done(f, record, a->late), 0);
  /* queued behind the callbacks registered before it, not run re-entrantly */
  a->added_ran_before_return = a->trace->calls != before;
}

static void test_callback_added_during_dispatch_runs_after_queued_ones(void **state) {
  (void)state;
  trace_t trace = {0};
  tag_t first = {&trace, 1}, second = {&trace, 2}, late = {&trace, 3};
  adder_t adder = {&trace, &late, -1};
  relock_future_t *f = relock__future_new(NULL);
  relock_future_on_done(f, record, &first);
  relock_future_on_done(f, add_during_dispatch, &adder);
  relock_future_on_done(f, record, &second);
  relock__future_succeed(f);
  assert_int_equal(adder.added_ran_before_return, 0);
  assert_int_equal(trace.calls, 3);
  int expect[] = {1, 2, 3};
  assert_memory_equal(trace.order, expect, sizeof expect);
  relock_future_release(f);
}

static void release_in_callback(relock_future_t *f, void *arg) {
  (*(int *)arg)++;
  relock_future_release(f);
}

static void test_callback_may_release_last_reference(void **state) {
  (void)state;
  int calls = 0;
  relock_future_t *f = relock__future_new(NULL);
  relock_future_on_done(f, release_in_callback, &calls);
  relock_future_on_done(f, count, &calls); /* still runs: dispatch holds a reference */
  relock__future_succeed_string(f, "x", 1);
  assert_int_equal(calls, 2);
  /* f is gone now; valgrind and ASan check that nothing touched it */
}

static void complete_other(relock_future_t *f, void *arg) {
  (void)f;
  relock__future_succeed_int(arg, 99);
}

static void test_callback_completes_other_futures(void **state) {
  (void)state;
  relock_future_t *a = relock__future_new(NULL);
  relock_future_t *b = relock__future_new(NULL);
  relock_future_t *c = relock__future_new(NULL);
  int c_calls = 0;
  relock_future_on_done(a, complete_other, b);
  relock_future_on_done(b, complete_other, c);
  relock_future_on_done(c, count, &c_calls);
  relock__future_succeed(a);
  assert_int_equal(relock_future_int(b), 99);
  assert_int_equal(relock_future_int(c), 99);
  assert_int_equal(c_calls, 1);
  relock_future_release(a);
  relock_future_release(b);
  relock_future_release(c);
}

/* -- cancel -----------------------------------------------------------------*/

typedef struct {
  int hook_calls;
  int callbacks_seen_at_hook;
  int callbacks;
  relock_future_t *op_ref; /* the operation's own reference */
} operation_t;

static void op_cancel_hook(relock_future_t *f, void *arg) {
  operation_t *op = arg;
  op->hook_calls++;
  op->callbacks_seen_at_hook = op->callbacks;
  assert_int_equal(relock_future_state(f), RELOCK_FUTURE_CANCELLED);
  relock_future_release(op->op_ref); /* the operation lets go */
  op->op_ref = NULL;
}

static void op_callback(relock_future_t *f, void *arg) {
  operation_t *op = arg;
  op->callbacks++;
  assert_int_equal(relock_future_error(f), RELOCK_ECANCELED);
}

static void test_cancel_runs_hook_then_callbacks(void **state) {
  (void)state;
  operation_t op = {0};
  relock_future_t *f = relock__future_new(NULL);
  op.op_ref = relock_future_retain(f);
  relock__future_set_cancel(f, op_cancel_hook, &op);
  relock_future_on_done(f, op_callback, &op);

  assert_int_equal(relock_future_cancel(f), 1);
  assert_int_equal(op.hook_calls, 1);
  assert_int_equal(op.callbacks_seen_at_hook, 0);
  assert_int_equal(op.callbacks, 1);
  assert_int_equal(relock_future_state(f), RELOCK_FUTURE_CANCELLED);
  assert_int_equal(relock_future_error(f), RELOCK_ECANCELED);
  assert_string_equal(relock_future_message(f), relock_strerror(RELOCK_ECANCELED));

  /* the race an operation meets: its reply arrives after the cancel */
  assert_int_equal(relock__future_succeed_bool(f, 1), 0);
  assert_int_equal(relock_future_cancel(f), 0);
  assert_int_equal(op.hook_calls, 1);
  assert_int_equal(op.callbacks, 1);
  relock_future_release(f);
}

static void test_completion_disarms_cancel_hook(void **state) {
  (void)state;
  operation_t op = {0};
  relock_future_t *f = relock__future_new(NULL);
  relock__future_set_cancel(f, op_cancel_hook, &op);
  relock__future_succeed(f);
  assert_int_equal(relock_future_cancel(f), 0);
  assert_int_equal(op.hook_calls, 0);
  relock_future_release(f);
}

static void cancel_other(relock_future_t *f, void *arg) {
  (void)f;
  assert_int_equal(relock_future_cancel(arg), 1);
}

static void test_cancel_from_another_callback(void **state) {
  (void)state;
  relock_future_t *a = relock__future_new(NULL);
  relock_future_t *b = relock__future_new(NULL);
  int b_calls = 0;
  relock_future_on_done(a, cancel_other, b);
  relock_future_on_done(b, count, &b_calls);
  relock__future_fail(a, RELOCK_ETIMEDOUT, NULL);
  assert_int_equal(b_calls, 1);
  assert_int_equal(relock_future_state(b), RELOCK_FUTURE_CANCELLED);
  relock_future_release(a);
  relock_future_release(b);
}

/* -- reference counting -----------------------------------------------------*/

static void test_caller_releases_while_pending(void **state) {
  (void)state;
  struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
  relock__exec_t *exec = relock__exec_embedded(loop);
  int calls = 0;
  completer_t completer;
  relock_future_t *f = relock__future_new(exec);
  complete_later(loop, &completer, f, 0.001, 0); /* the operation's reference */
  relock_future_on_done(f, count, &calls);
  relock_future_release(f); /* the caller loses interest */
  ev_run(loop, 0);
  assert_int_equal(calls, 1); /* callbacks still ran; the future is freed after */
  relock__exec_unref(exec);
  ev_loop_destroy(loop);
}

static void test_retain_release_balance(void **state) {
  (void)state;
  dtor_calls = 0;
  relock_future_t *f = relock__future_new(NULL);
  for (int i = 0; i < 100; i++)
    assert_ptr_equal(relock_future_retain(f), f);
  relock__future_succeed_ptr(f, malloc(1), counting_dtor);
  for (int i = 0; i < 100; i++)
    relock_future_release(f);
  assert_int_equal(dtor_calls, 0);
  relock_future_release(f);
  assert_int_equal(dtor_calls, 1);
}

static void test_null_arguments(void **state) {
  (void)state;
  assert_null(relock_future_retain(NULL));
  relock_future_release(NULL);
  assert_int_equal(relock_future_cancel(NULL), 0);
  assert_int_equal(relock_future_on_done(NULL, count, NULL), RELOCK_EINVAL);
  assert_int_equal(relock_future_wait(NULL, 0), RELOCK_EINVAL);
  assert_int_equal(relock_future_error(NULL), RELOCK_EINVAL);
  assert_int_equal(relock_future_state(NULL), RELOCK_FUTURE_FAILED);
  assert_non_null(relock_future_message(NULL));
  relock_future_t *f = relock__future_new(NULL);
  assert_int_equal(relock_future_on_done(f, NULL, NULL), RELOCK_EINVAL);
  assert_int_equal(relock_future_wait(f, -2), RELOCK_EINVAL);
  relock_future_release(f);
}

/* -- wait -------------------------------------------------------------------*/

/* A loop, and the exec (embedded: this thread's) its futures belong to. */
typedef struct {
  struct ev_loop *loop;
  relock__exec_t *exec;
} loop_fixture_t;

static int loop_setup(void **state) {
  loop_fixture_t *fx = calloc(1, sizeof(*fx));
  fx->loop = ev_loop_new(EVFLAG_AUTO);
  fx->exec = fx->loop != NULL ? relock__exec_embedded(fx->loop) : NULL;
  *state = fx;
  return fx->exec == NULL;
}

static int loop_teardown(void **state) {
  loop_fixture_t *fx = *state;
  relock__exec_unref(fx->exec);
  ev_loop_destroy(fx->loop);
  free(fx);
  return 0;
}

static void test_wait_until_completed(void **state) {
  loop_fixture_t *fx = *state;
  completer_t completer;
  relock_future_t *f = relock__future_new(fx->exec);
  complete_later(fx->loop, &completer, f, 0.02, 0);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(relock_future_wait(f, RELOCK_INFINITE), 0);
  assert_true(elapsed_ms(t0) >= 19.0);
  assert_int_equal(relock_future_int(f), 42);
  /* a completed future returns at once, whatever the timeout */
  assert_int_equal(relock_future_wait(f, 0), 0);
  relock_future_release(f);
}

static void test_wait_returns_failure_code(void **state) {
  loop_fixture_t *fx = *state;
  completer_t completer;
  relock_future_t *f = relock__future_new(fx->exec);
  complete_later(fx->loop, &completer, f, 0.001, RELOCK_ECONNLOST);
  assert_int_equal(relock_future_wait(f, 5000), RELOCK_ECONNLOST);
  assert_string_equal(relock_future_message(f), "completer failed with -6");
  relock_future_release(f);
}

static void test_wait_timeout_leaves_future_pending(void **state) {
  loop_fixture_t *fx = *state;
  completer_t completer;
  relock_future_t *f = relock__future_new(fx->exec);
  complete_later(fx->loop, &completer, f, 10.0, 0); /* keeps the loop alive */
  uint64_t t0 = relock__now_ns();
  assert_int_equal(relock_future_wait(f, 50), RELOCK_EPENDING);
  double waited = elapsed_ms(t0);
  assert_true(waited >= 49.0); /* libev rounds to its own clock: allow 1 ms */
  assert_true(waited < 2000.0);
  assert_int_equal(relock_future_state(f), RELOCK_FUTURE_PENDING);
  /* the operation still completes it later */
  ev_timer_stop(fx->loop, &completer.timer);
  on_completer(fx->loop, &completer.timer, 0);
  assert_int_equal(relock_future_wait(f, 0), 0);
  relock_future_release(f);
}

static void test_wait_with_nothing_on_the_loop_does_not_hang(void **state) {
  loop_fixture_t *fx = *state;
  relock_future_t *f = relock__future_new(fx->exec);
  assert_int_equal(relock_future_wait(f, RELOCK_INFINITE), RELOCK_EPENDING);
  relock_future_release(f);
  f = relock__future_new(NULL);
  assert_int_equal(relock_future_wait(f, RELOCK_INFINITE), RELOCK_EPENDING);
  relock_future_release(f);
}

static void tick(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  (*(int *)w->data)++;
}

static void test_wait_keeps_other_watchers_running(void **state) {
  loop_fixture_t *fx = *state;
  int ticks = 0;
  ev_timer other;
  ev_timer_init(&other, tick, 0.001, 0.001);
  other.data = &ticks;
  ev_timer_start(fx->loop, &other);
  completer_t completer;
  relock_future_t *f = relock__future_new(fx->exec);
  complete_later(fx->loop, &completer, f, 0.05, 0);
  assert_int_equal(relock_future_wait(f, 5000), 0);
  ev_timer_stop(fx->loop, &other);
  assert_true(ticks >= 5);
  relock_future_release(f);
}

static void test_wait_cancelled(void **state) {
  loop_fixture_t *fx = *state;
  relock_future_t *f = relock__future_new(fx->exec);
  relock_future_cancel(f);
  assert_int_equal(relock_future_wait(f, RELOCK_INFINITE), RELOCK_ECANCELED);
  relock_future_release(f);
}

typedef struct {
  relock_future_t *target;
  int result;
  int ran;
} waiter_t;

static void wait_in_future_callback(relock_future_t *f, void *arg) {
  (void)f;
  waiter_t *w = arg;
  w->ran = 1;
  w->result = relock_future_wait(w->target, 1000);
}

static void test_wait_inside_future_callback_would_block(void **state) {
  loop_fixture_t *fx = *state;
  relock_future_t *outer = relock__future_new(fx->exec);
  relock_future_t *target = relock__future_new(fx->exec);
  waiter_t w = {target, 0, 0};
  relock_future_on_done(outer, wait_in_future_callback, &w);
  relock__future_succeed(outer); /* outside any loop callback */
  assert_int_equal(w.ran, 1);
  assert_int_equal(w.result, RELOCK_EWOULDBLOCK);
  assert_int_equal(relock_future_state(target), RELOCK_FUTURE_PENDING);

  /* but a future that is already complete can be read from anywhere */
  relock__future_succeed_int(target, 3);
  relock_future_t *outer2 = relock__future_new(fx->exec);
  w.ran = 0;
  relock_future_on_done(outer2, wait_in_future_callback, &w);
  relock__future_succeed(outer2);
  assert_int_equal(w.ran, 1);
  assert_int_equal(w.result, 0);
  relock_future_release(outer);
  relock_future_release(outer2);
  relock_future_release(target);
}

static void wait_in_loop_callback(struct ev_loop *loop, ev_timer *t, int revents) {
  (void)loop;
  (void)revents;
  waiter_t *w = t->data;
  w->ran = 1;
  w->result = relock_future_wait(w->target, 1000);
}

static void test_wait_inside_loop_callback_would_block(void **state) {
  loop_fixture_t *fx = *state;
  relock_future_t *target = relock__future_new(fx->exec);
  waiter_t w = {target, 0, 0};
  ev_timer t;
  ev_timer_init(&t, wait_in_loop_callback, 0.001, 0.0);
  t.data = &w;
  ev_timer_start(fx->loop, &t);
  ev_run(fx->loop, 0);
  assert_int_equal(w.ran, 1);
  assert_int_equal(w.result, RELOCK_EWOULDBLOCK);
  relock_future_release(target);
}

/* -- combinators ------------------------------------------------------------*/

static void make_futures(relock_future_t **fs, size_t n, relock__exec_t *exec) {
  for (size_t i = 0; i < n; i++)
    fs[i] = relock__future_new(exec);
}

static void release_futures(relock_future_t **fs, size_t n) {
  for (size_t i = 0; i < n; i++)
    relock_future_release(fs[i]);
}

static void test_all_succeeds_when_every_input_succeeds(void **state) {
  (void)state;
  relock_future_t *in[3];
  make_futures(in, 3, NULL);
  relock_error_t err = {.code = 1};
  relock_future_t *all = relock_future_all(in, 3, &err);
  assert_non_null(all);
  assert_int_equal(err.code, 0);
  relock__future_succeed(in[2]);
  relock__future_succeed(in[0]);
  assert_false(relock_future_is_done(all));
  relock__future_succeed(in[1]);
  assert_int_equal(relock_future_state(all), RELOCK_FUTURE_SUCCEEDED);
  assert_int_equal(relock_future_int(all), 3);
  release_futures(in, 3);
  relock_future_release(all);
}

static void test_all_fails_with_first_failure_after_all_complete(void **state) {
  (void)state;
  relock_future_t *in[3];
  make_futures(in, 3, NULL);
  relock_future_t *all = relock_future_all(in, 3, NULL);
  relock__future_fail(in[1], RELOCK_ESERVER, "first failure");
  assert_false(relock_future_is_done(all)); /* in[0] and in[2] still run */
  relock__future_fail(in[0], RELOCK_ETIMEDOUT, "second failure");
  relock__future_succeed(in[2]);
  assert_int_equal(relock_future_state(all), RELOCK_FUTURE_FAILED);
  assert_int_equal(relock_future_error(all), RELOCK_ESERVER);
  assert_string_equal(relock_future_message(all), "first failure");
  release_futures(in, 3);
  relock_future_release(all);
}

static void test_all_cancel_cancels_pending_inputs(void **state) {
  (void)state;
  relock_future_t *in[3];
  make_futures(in, 3, NULL);
  relock__future_succeed(in[0]);
  relock_future_t *all = relock_future_all(in, 3, NULL);
  assert_int_equal(relock_future_cancel(all), 1);
  assert_int_equal(relock_future_state(all), RELOCK_FUTURE_CANCELLED);
  assert_int_equal(relock_future_state(in[0]), RELOCK_FUTURE_SUCCEEDED);
  assert_int_equal(relock_future_state(in[1]), RELOCK_FUTURE_CANCELLED);
  assert_int_equal(relock_future_state(in[2]), RELOCK_FUTURE_CANCELLED);
  release_futures(in, 3);
  relock_future_release(all);
}

static void test_all_of_completed_inputs_completes_at_once(void **state) {
  (void)state;
  relock_future_t *in[2];
  make_futures(in, 2, NULL);
  relock__future_succeed(in[0]);
  relock_future_cancel(in[1]);
  relock_future_t *all = relock_future_all(in, 2, NULL);
  assert_int_equal(relock_future_state(all), RELOCK_FUTURE_FAILED);
  assert_int_equal(relock_future_error(all), RELOCK_ECANCELED);
  release_futures(in, 2);
  relock_future_release(all);
}

static void test_any_succeeds_with_first_success_index(void **state) {
  (void)state;
  relock_future_t *in[3];
  make_futures(in, 3, NULL);
  relock_future_t *any = relock_future_any(in, 3, NULL);
  release_futures(in, 3); /* the combinator keeps its own references */
  relock__future_fail(in[0], RELOCK_ETIMEDOUT, NULL);
  assert_false(relock_future_is_done(any));
  relock__future_succeed(in[2]);
  assert_int_equal(relock_future_state(any), RELOCK_FUTURE_SUCCEEDED);
  assert_int_equal(relock_future_int(any), 2);
  relock__future_succeed(in[1]); /* frees the last input; valgrind checks */
  relock_future_release(any);
}

static void test_any_fails_when_all_fail(void **state) {
  (void)state;
  relock_future_t *in[2];
  make_futures(in, 2, NULL);
  relock_future_t *any = relock_future_any(in, 2, NULL);
  relock__future_fail(in[1], RELOCK_ECONNREFUSED, "refused by %s", "server");
  relock_future_cancel(in[0]);
  assert_int_equal(relock_future_state(any), RELOCK_FUTURE_FAILED);
  assert_int_equal(relock_future_error(any), RELOCK_ECONNREFUSED);
  assert_string_equal(relock_future_message(any), "refused by server");
  release_futures(in, 2);
  relock_future_release(any);
}

static void test_combinator_released_early_still_settles(void **state) {
  (void)state;
  relock_future_t *in[2];
  make_futures(in, 2, NULL);
  relock_future_t *all = relock_future_all(in, 2, NULL);
  relock_future_release(all);
  relock__future_succeed(in[0]);
  relock__future_succeed(in[1]);
  release_futures(in, 2); /* no leak, no use-after-free */
}

static void test_combinator_waits_on_loop(void **state) {
  loop_fixture_t *fx = *state;
  relock_future_t *in[2];
  completer_t c0, c1;
  make_futures(in, 2, fx->exec);
  complete_later(fx->loop, &c0, in[0], 0.01, 0);
  complete_later(fx->loop, &c1, in[1], 0.02, 0);
  relock_future_t *all = relock_future_all(in, 2, NULL);
  assert_ptr_equal(relock_future_loop(all), fx->loop);
  assert_int_equal(relock_future_wait(all, 5000), 0);
  assert_int_equal(relock_future_int(all), 2);
  release_futures(in, 2);
  relock_future_release(all);
}

static void test_combinator_invalid_arguments(void **state) {
  loop_fixture_t *fx = *state;
  relock_error_t err = {0};
  relock_future_t *in[2] = {relock__future_new(fx->exec), relock__future_new(NULL)};
  assert_null(relock_future_all(in, 0, &err));
  assert_int_equal(err.code, RELOCK_EINVAL);
  assert_string_equal(err.message, "n must be >= 1");
  assert_null(relock_future_any(NULL, 2, &err));
  assert_int_equal(err.code, RELOCK_EINVAL);
  assert_string_equal(err.message, "futures is NULL");
  err.code = 0;
  assert_null(relock_future_all(in, 2, &err)); /* two different loops */
  assert_int_equal(err.code, RELOCK_EINVAL);
  assert_string_equal(err.message, "futures[1] belongs to another loop than the futures before it");
  relock_future_t *with_null[2] = {in[0], NULL};
  assert_null(relock_future_any(with_null, 2, NULL));
  release_futures(in, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_completes_exactly_once),
      cmocka_unit_test(test_failure_after_failure_is_refused),
      cmocka_unit_test(test_values),
      cmocka_unit_test(test_ptr_value_owned_by_future),
      cmocka_unit_test(test_callbacks_in_registration_order),
      cmocka_unit_test(test_callback_added_during_dispatch_runs_after_queued_ones),
      cmocka_unit_test(test_callback_may_release_last_reference),
      cmocka_unit_test(test_callback_completes_other_futures),
      cmocka_unit_test(test_cancel_runs_hook_then_callbacks),
      cmocka_unit_test(test_completion_disarms_cancel_hook),
      cmocka_unit_test(test_cancel_from_another_callback),
      cmocka_unit_test(test_caller_releases_while_pending),
      cmocka_unit_test(test_retain_release_balance),
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test_setup_teardown(test_wait_until_completed, loop_setup, loop_teardown),
      cmocka_unit_test_setup_teardown(test_wait_returns_failure_code, loop_setup, loop_teardown),
      cmocka_unit_test_setup_teardown(test_wait_timeout_leaves_future_pending, loop_setup, loop_teardown),
      cmocka_unit_test_setup_teardown(test_wait_with_nothing_on_the_loop_does_not_hang, loop_setup,
                                      loop_teardown),
      cmocka_unit_test_setup_teardown(test_wait_keeps_other_watchers_running, loop_setup, loop_teardown),
      cmocka_unit_test_setup_teardown(test_wait_cancelled, loop_setup, loop_teardown),
      cmocka_unit_test_setup_teardown(test_wait_inside_future_callback_would_block, loop_setup,
                                      loop_teardown),
      cmocka_unit_test_setup_teardown(test_wait_inside_loop_callback_would_block, loop_setup,
                                      loop_teardown),
      cmocka_unit_test(test_all_succeeds_when_every_input_succeeds),
      cmocka_unit_test(test_all_fails_with_first_failure_after_all_complete),
      cmocka_unit_test(test_all_cancel_cancels_pending_inputs),
      cmocka_unit_test(test_all_of_completed_inputs_completes_at_once),
      cmocka_unit_test(test_any_succeeds_with_first_success_index),
      cmocka_unit_test(test_any_fails_when_all_fail),
      cmocka_unit_test(test_combinator_released_early_still_settles),
      cmocka_unit_test_setup_teardown(test_combinator_waits_on_loop, loop_setup, loop_teardown),
      cmocka_unit_test_setup_teardown(test_combinator_invalid_arguments, loop_setup, loop_teardown),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("future", tests, NULL, NULL);
}
