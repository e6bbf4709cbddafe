/* Tests of the hashed-wheel timer (src/loop/wheel.c), on a real libev loop and
 * the real monotonic clock. Lower bounds on time are exact (a timer never
 * fires early); upper bounds are generous, for a loaded machine and for
 * valgrind. */
#include "support/test.h"

#include <ev.h>

#include <relock/error.h>

#include "base/clock.h"
#include "loop/wheel.h"

#define MS INT64_C(1000000)

/* How late a timer may fire on a loaded machine, beyond its tick. */
static uint64_t slack_ns(void) { return (uint64_t)(relock_test_under_valgrind() ? 5000 : 300) * MS; }

static void busy_wait_ms(int64_t ms) {
  uint64_t end = relock__now_ns() + (uint64_t)(ms * MS);
  while (relock__now_ns() < end)
    ;
}

/* Deterministic pseudo-random numbers, so a failure can be replayed. */
static uint32_t next_random(uint32_t *state) {
  *state = *state * 1664525u + 1013904223u;
  return *state >> 8;
}

/* -- probes: timers that record when and how they were called back -------- */

typedef struct probe probe_t;

typedef struct log {
  relock__wheel_t *wheel;
  int fired;      /* callbacks so far, all probes */
  int *sequence;  /* probe indices in callback order (may be NULL) */
  int cap;
} log_t;

struct probe {
  relock__timer_t timer;
  log_t *log;
  int index;
  int64_t timeout_ms;
  uint64_t started_ns; /* clock read just before the start */
  uint64_t fired_ns;
  int calls;
  int status;
  int order;                 /* position in the log, -1 until called */
  void (*hook)(probe_t *p);  /* runs inside the callback, after recording */
  void *ctx;
};

static void probe_cb(relock__timer_t *timer, int status, void *arg) {
  probe_t *p = relock__container_of(timer, probe_t, timer);
  log_t *log = arg;
  assert_ptr_equal(log, p->log);
  assert_false(relock__timer_pending(timer));
  p->fired_ns = relock__now_ns();
  p->calls++;
  p->status = status;
  p->order = log->fired;
  if (log->sequence != NULL && log->fired < log->cap)
    log->sequence[log->fired] = p->index;
  log->fired++;
  if (p->hook != NULL)
    p->hook(p);
}

static void probe_init(probe_t *p, log_t *log, int index) {
  *p = (probe_t){.log = log, .index = index, .order = -1};
  relock__timer_init(&p->timer, probe_cb, log);
}

/* The rule behind "never early", checked where it is decided rather than
 * when the loop happens to wake: the tick a timer is due in does not begin
 * before its timeout has passed since the start on the precise clock.
 * started_ns was read before the start, so it is no later than the wheel's
 * own reading. */
static void assert_deadline_not_early(const probe_t *p, const relock__wheel_t *wheel) {
  uint64_t due_ns = wheel->origin_ns + p->timer.deadline * wheel->tick_ns;
  uint64_t end_ns = p->started_ns + (uint64_t)p->timeout_ms * MS;
  if (due_ns < end_ns)
    fail_msg("timer %d (%lld ms) is due in a tick that begins %.3f ms before its timeout ends", p->index,
             (long long)p->timeout_ms, (double)(end_ns - due_ns) / 1e6);
}

static int probe_start(probe_t *p, relock__wheel_t *wheel, int64_t timeout_ms) {
  p->timeout_ms = timeout_ms;
  p->started_ns = relock__now_ns();
  int r = relock__timer_start(wheel, &p->timer, timeout_ms);
  if (r == 0)
    assert_deadline_not_early(p, wheel);
  return r;
}

/* Fired exactly once, with status 0, not before its timeout and not much
 * after it. */
static void assert_fired_on_time(const probe_t *p, const relock__wheel_t *wheel) {
  assert_int_equal(p->calls, 1);
  assert_int_equal(p->status, 0);
  uint64_t min = (uint64_t)(p->timeout_ms * MS);
  assert_in_range(p->fired_ns - p->started_ns, min, min + wheel->tick_ns + slack_ns());
}

/* -- the loop --------------------------------------------------------------- */

static void on_guard(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  *(int *)w->data = 1;
}

/* Runs the loop until *counter reaches target. A guard ev_timer bounds the
 * wait, so a timer that never fires fails the test instead of hanging it. */
static void run_until(struct ev_loop *loop, const int *counter, int target) {
  int expired = 0;
  ev_timer guard;
  ev_timer_init(&guard, on_guard, relock_test_under_valgrind() ? 120.0 : 30.0, 0.0);
  guard.data = &expired;
  ev_timer_start(loop, &guard);
  while (*counter < target && !expired)
    ev_run(loop, EVRUN_ONCE);
  ev_timer_stop(loop, &guard);
  assert_false(expired);
  assert_int_equal(*counter, target);
}

static struct ev_loop *new_loop(void) {
  struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
  assert_non_null(loop);
  return loop;
}

/* The wheel's invariants, checked from outside: a slot's bit is set iff it
 * holds timers; each timer sits in its deadline's slot, after the last tick
 * processed and not before the slot's lower bound; count is exact; the
 * watcher is active iff armed_tick says so. */
static void check_invariants(const relock__wheel_t *w) {
  size_t total = 0;
  for (size_t s = 0; s <= w->mask; s++) {
    const relock__link_t *head = &w->slots[s];
    int bit = (int)((w->occupied[s / 64] >> (s % 64)) & 1);
    assert_int_equal(bit, !relock__list_empty(head));
    for (const relock__link_t *l = head->next; l != head; l = l->next) {
      const relock__timer_t *t = relock__container_of(l, relock__timer_t, link);
      assert_int_equal(t->deadline & w->mask, s);
      assert_true(t->deadline > w->current);
      assert_true(t->deadline >= w->min_deadline[s]);
      assert_ptr_equal(t->wheel, w);
      total++;
    }
  }
  for (const relock__link_t *l = w->firing.next; l != &w->firing; l = l->next)
    total++;
  assert_int_equal(total, w->count);
  assert_int_equal(ev_is_active(&w->watcher) != 0, w->armed_tick != UINT64_MAX);
}

/* -- arguments ------------------------------------------------------------- */

static void noop_cb(relock__timer_t *timer, int status, void *arg) {
  (void)timer;
  (void)status;
  (void)arg;
}

static void test_invalid_arguments(void **state) {
  (void)state;
  struct ev_loop *loop = new_loop();
  relock__wheel_t w;
  assert_int_equal(relock__wheel_init(NULL, loop, 10, 8), RELOCK_EINVAL);
  assert_int_equal(relock__wheel_init(&w, NULL, 10, 8), RELOCK_EINVAL);
  relock__wheel_close(&w); /* after a failed init: a no-op */
  assert_int_equal(relock__wheel_init(&w, loop, 0, 8), RELOCK_EINVAL);
  assert_int_equal(relock__wheel_init(&w, loop, -10, 8), RELOCK_EINVAL);
  assert_int_equal(relock__wheel_init(&w, loop, INT64_MAX, 8), RELOCK_EINVAL);
  assert_int_equal(relock__wheel_init(&w, loop, 10, 0), RELOCK_EINVAL);
  assert_int_equal(relock__wheel_init(&w, loop, 10, SIZE_MAX), RELOCK_EINVAL);
  relock__wheel_close(&w);

  assert_int_equal(relock__wheel_init(&w, loop, 10, 512), 0);
  relock__timer_t t, no_cb;
  relock__timer_init(&t, noop_cb, NULL);
  relock__timer_init(&no_cb, NULL, NULL);
  assert_int_equal(relock__timer_start(NULL, &t, 1), RELOCK_EINVAL);
  assert_int_equal(relock__timer_start(&w, NULL, 1), RELOCK_EINVAL);
  assert_int_equal(relock__timer_start(&w, &no_cb, 1), RELOCK_EINVAL);
  assert_int_equal(relock__timer_start(&w, &t, -1), RELOCK_EINVAL);
  assert_false(relock__timer_pending(&t));
  assert_int_equal(relock__wheel_count(&w), 0);
  assert_false(ev_is_active(&w.watcher));
  relock__wheel_close(&w);
  ev_loop_destroy(loop);
}

static void test_slots_round_up_to_power_of_two(void **state) {
  (void)state;
  struct ev_loop *loop = new_loop();
  static const size_t asked[] = {1, 2, 5, 64, 65, 512, 513};
  static const size_t got[] = {1, 2, 8, 64, 128, 512, 1024};
  for (size_t i = 0; i < sizeof asked / sizeof asked[0]; i++) {
    relock__wheel_t w;
    assert_int_equal(relock__wheel_init(&w, loop, RELOCK__WHEEL_DEFAULT_TICK_MS, asked[i]), 0);
    assert_int_equal(w.mask + 1, got[i]);
    assert_int_equal(w.tick_ns, RELOCK__WHEEL_DEFAULT_TICK_MS * MS);
    check_invariants(&w);
    relock__wheel_close(&w);
  }
  ev_loop_destroy(loop);
}

#if defined(__SANITIZE_ADDRESS__)
/* ASan aborts on an impossible allocation unless told to return NULL, as
 * malloc does. It reads this hook at start-up. */
__attribute__((visibility("default"))) const char *__asan_default_options(void);
__attribute__((visibility("default"))) const char *__asan_default_options(void) {
  return "allocator_may_return_null=1";
}
#endif
#if defined(__SANITIZE_THREAD__)
/* ThreadSanitizer likewise (TSAN_OPTIONS from the environment still
 * apply on top). */
__attribute__((visibility("default"))) const char *__tsan_default_options(void);
__attribute__((visibility("default"))) const char *__tsan_default_options(void) {
  return "allocator_may_return_null=1";
}
#endif

static void test_out_of_memory(void **state) {
  (void)state;
  struct ev_loop *loop = new_loop();
  relock__wheel_t w;
  /* 2^40 slots: tens of terabytes, which malloc refuses. */
  assert_int_equal(relock__wheel_init(&w, loop, 10, (size_t)1 << 40), RELOCK_ENOMEM);
  relock__wheel_close(&w); /* nothing to free: a no-op */
  relock__timer_t t;
  relock__timer_init(&t, noop_cb, NULL);
  assert_int_equal(relock__timer_start(&w, &t, 1), RELOCK_ECLOSED);
  ev_loop_destroy(loop);
}

/* -- time ------------------------------------------------------------------ */

static const int64_t some_timeouts[] = {0, 1, 2, 5, 9, 10, 11, 19, 20, 21, 33, 55, 100, 250};
#define NTIMEOUTS (sizeof some_timeouts / sizeof some_timeouts[0])

static void start_round(probe_t *probes, relock__wheel_t *wheel) {
  for (size_t i = 0; i < NTIMEOUTS; i++)
    assert_int_equal(probe_start(&probes[i], wheel, some_timeouts[i]), 0);
}

static void start_round_hook(probe_t *p) { start_round(p->ctx, p->log->wheel); }

/* Every timeout, sub-tick ones and 0 included, twice: once from outside the
 * loop and once from a callback, just after a tick began. */
static void check_never_early(int64_t tick_ms, size_t nslots) {
  struct ev_loop *loop = new_loop();
  relock__wheel_t w;
  assert_int_equal(relock__wheel_init(&w, loop, tick_ms, nslots), 0);
  log_t log = {.wheel = &w};
  probe_t round1[NTIMEOUTS], round2[NTIMEOUTS], starter;
  for (size_t i = 0; i < NTIMEOUTS; i++) {
    probe_init(&round1[i], &log, (int)i);
    probe_init(&round2[i], &log, (int)(NTIMEOUTS + i));
  }
  probe_init(&starter, &log, 2 * NTIMEOUTS);
  starter.hook = start_round_hook;
  starter.ctx = round2;

  start_round(round1, &w);
  assert_int_equal(probe_start(&starter, &w, 7), 0);
  assert_int_equal(relock__wheel_count(&w), NTIMEOUTS + 1);
  check_invariants(&w);
  run_until(loop, &log.fired, 2 * NTIMEOUTS + 1);

  for (size_t i = 0; i < NTIMEOUTS; i++) {
    assert_fired_on_time(&round1[i], &w);
    assert_fired_on_time(&round2[i], &w);
  }
  assert_fired_on_time(&starter, &w);
  assert_int_equal(relock__wheel_count(&w), 0);
  assert_false(ev_is_active(&w.watcher));
  check_invariants(&w);
  relock__wheel_close(&w);
  ev_loop_destroy(loop);
}

static void test_never_early_default_wheel(void **state) {
  (void)state;
  check_never_early(RELOCK__WHEEL_DEFAULT_TICK_MS, RELOCK__WHEEL_DEFAULT_SLOTS);
}

/* 1 ms x 8: the longer timeouts go round the wheel many times. */
static void test_never_early_small_wheel(void **state) {
  (void)state;
  check_never_early(1, 8);
}

/* 50 ms ticks: most timeouts are shorter than a tick. */
static void test_never_early_coarse_ticks(void **state) {
  (void)state;
  check_never_early(50, 4);
}

/* Timers started just after a tick began (on a wheel made that instant),
 * with whole-tick timeouts: each timeout ends a few microseconds into a
 * tick, so a start that takes "now" from a clock lagging the precise one by
 * more than that rounds the deadline down a whole tick, and the timer fires
 * early. Such a lag comes and goes with the kernel's own tick (the coarse
 * clock lags by more than its resolution at some moments and not at
 * others), so the batches start at many moments, after the CPU has been
 * busy for a while (an idle CPU catches its clocks up on waking) and at
 * varying phases of the kernel's tick. */
#define PHASE_TICKS 4 /* timeouts of 1 .. PHASE_TICKS ticks */

typedef struct phase_run {
  relock__wheel_t *wheels; /* one per batch */
  probe_t *probes;
  int moments;             /* batches to start */
  int started;             /* batches started */
  uint32_t seed;
  ev_timer starter;
} phase_run_t;

/* Wakes the starter 1 .. 5 ms from now. */
static void arm_starter(struct ev_loop *loop, phase_run_t *run) {
  ev_timer_set(&run->starter, (double)(1000 + next_random(&run->seed) % 4000) / 1e6, 0.0);
  ev_timer_start(loop, &run->starter);
}

static void on_starter(struct ev_loop *loop, ev_timer *watcher, int revents) {
  phase_run_t *run = watcher->data;
  (void)revents;
  uint64_t spin_until = relock__now_ns() + (uint64_t)(next_random(&run->seed) % 5000) * 1000;
  while (relock__now_ns() < spin_until)
    ;
  relock__wheel_t *w = &run->wheels[run->started];
  assert_int_equal(relock__wheel_init(w, loop, RELOCK__WHEEL_DEFAULT_TICK_MS, 8), 0);
  probe_t *batch = &run->probes[run->started * PHASE_TICKS];
  for (int k = 0; k < PHASE_TICKS; k++)
    assert_int_equal(probe_start(&batch[k], w, (k + 1) * RELOCK__WHEEL_DEFAULT_TICK_MS), 0);
  if (++run->started < run->moments)
    arm_starter(loop, run);
}

static void test_never_early_at_tick_start(void **state) {
  (void)state;
  const int moments = relock_test_under_valgrind() ? 30 : 200, n = moments * PHASE_TICKS;
  struct ev_loop *loop = new_loop();
  phase_run_t run = {.moments = moments, .seed = 4242};
  run.wheels = calloc((size_t)moments, sizeof *run.wheels);
  run.probes = calloc((size_t)n, sizeof *run.probes);
  assert_non_null(run.wheels);
  assert_non_null(run.probes);
  log_t log = {0}; /* for all the wheels */
  for (int i = 0; i < n; i++)
    probe_init(&run.probes[i], &log, i);
  ev_timer_init(&run.starter, on_starter, 0.0, 0.0);
  run.starter.data = &run;
  arm_starter(loop, &run);

  run_until(loop, &log.fired, n);
  uint64_t closest = UINT64_MAX;
  for (int i = 0; i < n; i++) {
    const probe_t *p = &run.probes[i];
    assert_fired_on_time(p, &run.wheels[i / PHASE_TICKS]);
    uint64_t late = p->fired_ns - p->started_ns - (uint64_t)(p->timeout_ms * MS);
    if (late < closest)
      closest = late;
  }
  printf("# %d timers started as their tick began: none early (the closest fired %.3f ms after its timeout)\n", n,
         (double)closest / 1e6);
  for (int m = 0; m < moments; m++) {
    assert_int_equal(relock__wheel_count(&run.wheels[m]), 0);
    relock__wheel_close(&run.wheels[m]);
  }
  free(run.probes);
  free(run.wheels);
  ev_loop_destroy(loop);
}

static void test_huge_timeout(void **state) {
  (void)state;
  struct ev_loop *loop = new_loop();
  relock__wheel_t w;
  assert_int_equal(relock__wheel_init(&w, loop, 10, 64), 0);
  relock__timer_t t;
  relock__timer_init(&t, noop_cb, NULL);
  assert_int_equal(relock__timer_start(&w, &t, INT64_MAX), 0);
  assert_true(relock__timer_pending(&t));
  assert_true(t.deadline >= (UINT64_C(1) << 40) / 10);
  assert_true(ev_timer_remaining(loop, &w.watcher) > 1e9);
  check_invariants(&w);
  relock__timer_stop(&t);
  assert_false(ev_is_active(&w.watcher));
  relock__wheel_close(&w);
  ev_loop_destroy(loop);
}

/* -- order ----------------------------------------------------------------- */

/* The log is in deadline-tick order, ties in scheduling (index) order. */
static void assert_sequence_ordered(const probe_t *probes, const int *sequence, int n) {
  for (int k = 1; k < n; k++) {
    const probe_t *a = &probes[sequence[k - 1]], *b = &probes[sequence[k]];
    assert_true(a->timer.deadline <= b->timer.deadline);
    if (a->timer.deadline == b->timer.deadline)
      assert_true(a->index < b->index);
  }
}

/* Seen from outside: of two timers started one after the other, the first
 * with the shorter or equal timeout is called first. */
static void assert_pairs_ordered(const probe_t *probes, int n) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (probes[i].timeout_ms <= probes[j].timeout_ms)
        assert_true(probes[i].order < probes[j].order);
}

#define NORDER 2000

static void test_deadline_order(void **state) {
  (void)state;
  struct ev_loop *loop = new_loop();
  relock__wheel_t w;
  assert_int_equal(relock__wheel_init(&w, loop, 1, 64), 0);
  probe_t *probes = calloc(NORDER, sizeof *probes);
  int *sequence = calloc(NORDER, sizeof *sequence);
  assert_non_null(probes);
  assert_non_null(sequence);
  log_t log = {.wheel = &w, .sequence = sequence, .cap = NORDER};
  uint32_t seed = 12345;
  for (int i = 0; i < NORDER; i++) {
    probe_init(&probes[i], &log, i);
    /* Multiples of 5 ms up to 150 ms: many equal timeouts, 2+ rotations. */
    assert_int_equal(probe_start(&probes[i], &w, (int64_t)(next_random(&seed) % 31) * 5), 0);
  }
  check_invariants(&w);
  run_until(loop, &log.fired, NORDER);

  for (int i = 0; i < NORDER; i++)
    assert_fired_on_time(&probes[i], &w);
  assert_sequence_ordered(probes, sequence, NORDER);
  assert_pairs_ordered(probes, NORDER);
  check_invariants(&w);
  relock__wheel_close(&w);
  free(sequence);
  free(probes);
  ev_loop_destroy(loop);
}

/* -- cancel and restart ---------------------------------------------------- */

static void test_cancelled_timer_never_fires(void **state) {
  (void)state;
  struct ev_loop *loop = new_loop();
  relock__wheel_t w;
  assert_int_equal(relock__wheel_init(&w, loop, 10, 512), 0);
  log_t log = {.wheel = &w};
  probe_t a, b, c, never_started;
  probe_init(&a, &log, 0);
  probe_init(&b, &log, 1);
  probe_init(&c, &log, 2);
  probe_init(&never_started, &log, 3);
  assert_int_equal(probe_start(&a, &w, 20), 0);
  assert_int_equal(probe_start(&b, &w, 20), 0);
  assert_int_equal(probe_start(&c, &w, 40), 0);
  assert_int_equal(relock__wheel_count(&w), 3);

  relock__timer_stop(&b.timer);
  assert_false(relock__timer_pending(&b.timer));
  assert_int_equal(relock__wheel_count(&w), 2);
  relock__timer_stop(&b.timer); /* not pending any more: no-op */
  relock__timer_stop(&never_started.timer);
  assert_int_equal(relock__wheel_count(&w), 2);
  check_invariants(&w);

  run_until(loop, &log.fired, 2);
  assert_fired_on_time(&a, &w);
  assert_fired_on_time(&c, &w);
  assert_int_equal(b.calls, 0);
  assert_int_equal(never_started.calls, 0);
  relock__timer_stop(&a.timer); /* already fired: no-op */
  assert_int_equal(relock__wheel_count(&w), 0);
  assert_false(ev_is_active(&w.watcher));
  check_invariants(&w);
  relock__wheel_close(&w);
  ev_loop_destroy(loop);
}

/* Starts all n probes with timeout_ms until they share one deadline tick
 * (a tick may begin between two starts; then they are started again). */
static void start_in_one_tick(probe_t **probes, int n, relock__wheel_t *w, int64_t timeout_ms) {
  for (int attempt = 0;; attempt++) {
    assert_true(attempt < 100);
    int same = 1;
    for (int i = 0; i < n; i++) {
      assert_int_equal(probe_start(probes[i], w, timeout_ms), 0);
      same = same && probes[i]->timer.deadline == probes[0]->timer.deadline;
    }
    if (same)
      return;
  }
}

/* Runs in a's callback, while b, c and d (due in the same tick) wait in the
 * firing list. */
static void cancel_in_same_tick_hook(probe_t *a) {
  probe_t **rest = a->ctx;
  relock__wheel_t *w = a->log->wheel;
  relock__timer_stop(&rest[0]->timer); /* b: cancelled before its turn */
  assert_false(relock__timer_pending(&rest[0]->timer));
  assert_int_equal(probe_start(rest[1], w, 0), 0); /* c: moved to a later tick */
  relock__timer_stop(&a->timer);                   /* itself: not pending, no-op */
  assert_int_equal(relock__wheel_count(w), 2);
  check_invariants(w);
}

static void test_cancel_from_callback_in_same_tick(void **state) {
  (void)state;
  struct ev_loop *loop = new_loop();
  relock__wheel_t w;
  assert_int_equal(relock__wheel_init(&w, loop, 10, 512), 0);
  log_t log = {.wheel = &w};
  probe_t a, b, c, d;
  probe_t *all[] = {&a, &b, &c, &d};
  for (int i = 0; i < 4; i++)
    probe_init(all[i], &log, i);
  a.hook = cancel_in_same_tick_hook;
  a.ctx = &all[1];
  start_in_one_tick(all, 4, &w, 30);
  uint64_t tick = a.timer.deadline;

  run_until(loop, &log.fired, 3);
  assert_fired_on_time(&a, &w);
  assert_fired_on_time(&d, &w);
  assert_fired_on_time(&c, &w);
  assert_int_equal(b.calls, 0);
  assert_int_equal(a.order, 0);
  assert_int_equal(d.order, 1);
  assert_int_equal(c.order, 2);
  assert_true(c.timer.deadline > tick);
  assert_int_equal(relock__wheel_count(&w), 0);
  assert_false(ev_is_active(&w.watcher));
  relock__wheel_close(&w);
  ev_loop_destroy(loop);
}

#define PERIODS 10
#define PERIOD_MS 15

/* Checks the period that just ended, then starts the next one. */
static void periodic_hook(probe_t *p) {
  int *depth = p->ctx;
  assert_int_equal(*depth, 0); /* never called back from inside start */
  (*depth)++;
  uint64_t min = (uint64_t)(p->timeout_ms * MS);
  assert_in_range(p->fired_ns - p->started_ns, min, min + p->log->wheel->tick_ns + slack_ns());
  if (p->calls < PERIODS)
    assert_int_equal(probe_start(p, p->log->wheel, p->timeout_ms), 0);
  (*depth)--;
}

static void test_periodic_restart_from_own_callback(void **state) {
  (void)state;
  struct ev_loop *loop = new_loop();
  relock__wheel_t w;
  assert_int_equal(relock__wheel_init(&w, loop, 10, 512), 0);
  log_t log = {.wheel = &w};
  int depth = 0;
  probe_t p, immediate;
  probe_init(&p, &log, 0);
  probe_init(&immediate, &log, 1);
  p.hook = periodic_hook;
  p.ctx = &depth;
  immediate.hook = periodic_hook; /* timeout 0, restarted from its callback */
  immediate.ctx = &depth;
  assert_int_equal(probe_start(&p, &w, PERIOD_MS), 0);
  assert_int_equal(probe_start(&immediate, &w, 0), 0);

  run_until(loop, &log.fired, 2 * PERIODS);
  assert_int_equal(p.calls, PERIODS);
  assert_int_equal(immediate.calls, PERIODS);
  assert_int_equal(relock__wheel_count(&w), 0);
  assert_false(ev_is_active(&w.watcher));
  relock__wheel_close(&w);
  ev_loop_destroy(loop);
}

/* One timer at a time, restarted from its callback, on 1 ms x 128 slots (a
 * two-word bitmap): the next deadline is often in a slot before the current
 * one, in the other word, so the search for it has to wrap around. */
static void test_chain_around_the_wheel(void **state) {
  (void)state;
  struct ev_loop *loop = new_loop();
  relock__wheel_t w;
  assert_int_equal(relock__wheel_init(&w, loop, 1, 128), 0);
  log_t log = {.wheel = &w};
  int depth = 0;
  probe_t p;
  probe_init(&p, &log, 0);
  p.hook = periodic_hook;
  p.ctx = &depth;
  assert_int_equal(probe_start(&p, &w, 45), 0);
  run_until(loop, &log.fired, PERIODS);
  assert_true(w.current > 2 * 128); /* went round more than twice */
  assert_int_equal(relock__wheel_count(&w), 0);
  assert_false(ev_is_active(&w.watcher));
  relock__wheel_close(&w);
  ev_loop_destroy(loop);
}

static void test_start_pending_moves_it(void **state) {
  (void)state;
  struct ev_loop *loop = new_loop();
  relock__wheel_t w, other;
  assert_int_equal(relock__wheel_init(&w, loop, 10, 512), 0);
  assert_int_equal(relock__wheel_init(&other, loop, 10, 512), 0);
  log_t log = {.wheel = &w};
  probe_t sooner, later, moved;
  probe_init(&sooner, &log, 0);
  probe_init(&later, &log, 1);
  probe_init(&moved, &log, 2);

  assert_int_equal(probe_start(&sooner, &w, 5000), 0);
  assert_int_equal(probe_start(&sooner, &w, 10), 0);
  assert_int_equal(probe_start(&later, &w, 10), 0);
  assert_int_equal(probe_start(&later, &w, 150), 0);
  assert_int_equal(relock__wheel_count(&w), 2);
  /* To another wheel: the first one goes idle. */
  assert_int_equal(probe_start(&moved, &other, 1000), 0);
  assert_int_equal(probe_start(&moved, &w, 50), 0);
  assert_int_equal(relock__wheel_count(&other), 0);
  assert_false(ev_is_active(&other.watcher));
  assert_int_equal(relock__wheel_count(&w), 3);
  check_invariants(&w);
  check_invariants(&other);

  run_until(loop, &log.fired, 3);
  assert_fired_on_time(&sooner, &w);
  assert_fired_on_time(&moved, &w);
  assert_fired_on_time(&later, &w);
  assert_int_equal(sooner.order, 0);
  assert_int_equal(moved.order, 1);
  assert_int_equal(later.order, 2);
  assert_int_equal(relock__wheel_count(&w), 0);
  relock__wheel_close(&w);
  relock__wheel_close(&other);
  ev_loop_destroy(loop);
}

/* -- a loop that stalled --------------------------------------------------- */

#define NSTALL 300
#define STALL_BEFORE_MS 30
#define STALL_INSIDE_MS 40

static void stall_hook(probe_t *p) {
  (void)p;
  busy_wait_ms(STALL_INSIDE_MS);
}

static void spawn_hook(probe_t *p) { assert_int_equal(probe_start(p->ctx, p->log->wheel, 3), 0); }

/* 1 ms x 8 slots: the loop is blocked for several full rotations, before it
 * runs and again inside a callback, while timers spread over 7 rotations
 * wait. Each fires once, in order, never early; one started during the
 * catch-up also keeps its timeout. */
static void test_stalled_loop_catches_up(void **state) {
  (void)state;
  struct ev_loop *loop = new_loop();
  relock__wheel_t w;
  assert_int_equal(relock__wheel_init(&w, loop, 1, 8), 0);
  const int n = NSTALL + 2; /* the random ones, the staller, the spawned one */
  probe_t *probes = calloc((size_t)n, sizeof *probes);
  int *sequence = calloc((size_t)n, sizeof *sequence);
  assert_non_null(probes);
  assert_non_null(sequence);
  log_t log = {.wheel = &w, .sequence = sequence, .cap = n};
  for (int i = 0; i < n; i++)
    probe_init(&probes[i], &log, i);
  probes[NSTALL].hook = stall_hook;
  probes[NSTALL / 2].hook = spawn_hook;
  probes[NSTALL / 2].ctx = &probes[NSTALL + 1];

  uint32_t seed = 777;
  for (int i = 0; i < NSTALL; i++)
    assert_int_equal(probe_start(&probes[i], &w, (int64_t)(next_random(&seed) % 60)), 0);
  assert_int_equal(probe_start(&probes[NSTALL], &w, 1), 0);
  check_invariants(&w);
  busy_wait_ms(STALL_BEFORE_MS);
  run_until(loop, &log.fired, n);

  const uint64_t stalls = (uint64_t)(STALL_BEFORE_MS + STALL_INSIDE_MS) * MS;
  for (int i = 0; i < n; i++) {
    const probe_t *p = &probes[i];
    uint64_t min = (uint64_t)(p->timeout_ms * MS);
    assert_int_equal(p->calls, 1);
    assert_int_equal(p->status, 0);
    assert_in_range(p->fired_ns - p->started_ns, min, min + stalls + w.tick_ns + slack_ns());
  }
  assert_sequence_ordered(probes, sequence, n);
  assert_pairs_ordered(probes, NSTALL + 1);
  assert_int_equal(relock__wheel_count(&w), 0);
  assert_false(ev_is_active(&w.watcher));
  check_invariants(&w);
  relock__wheel_close(&w);
  free(sequence);
  free(probes);
  ev_loop_destroy(loop);
}

/* -- many timers ----------------------------------------------------------- */

typedef struct mini {
  relock__timer_t timer;
  int calls;
  int status;
} mini_t;

static void mini_cb(relock__timer_t *timer, int status, void *arg) {
  mini_t *m = relock__container_of(timer, mini_t, timer);
  m->calls++;
  m->status = status;
  (*(int *)arg)++;
}

/* Every tenth timer is short (0..49 ms), the rest are long (10..60 s). */
static int64_t mini_timeout(int i) { return i % 10 == 0 ? (i / 10) % 50 : 10000 + i % 50000; }

static void test_million_pending(void **state) {
  (void)state;
  const int n = relock_test_under_valgrind() ? 100000 : 1000000;
  struct ev_loop *loop = new_loop();
  relock__wheel_t w;
  assert_int_equal(relock__wheel_init(&w, loop, RELOCK__WHEEL_DEFAULT_TICK_MS, RELOCK__WHEEL_DEFAULT_SLOTS), 0);
  mini_t *timers = calloc((size_t)n, sizeof *timers);
  assert_non_null(timers);
  int fired = 0;
  for (int i = 0; i < n; i++) {
    relock__timer_init(&timers[i].timer, mini_cb, &fired);
    assert_int_equal(relock__timer_start(&w, &timers[i].timer, mini_timeout(i)), 0);
  }
  assert_int_equal(relock__wheel_count(&w), n);
  for (int i = 1; i < n; i += 2)
    relock__timer_stop(&timers[i].timer);
  assert_int_equal(relock__wheel_count(&w), n / 2);
  check_invariants(&w);

  /* The short ones are all even, so none was stopped. */
  run_until(loop, &fired, n / 10);
  const int long_left = n / 2 - n / 10;
  assert_int_equal(relock__wheel_count(&w), long_left);
  for (int i = 0; i < n; i++) {
    assert_int_equal(timers[i].calls, i % 10 == 0);
    assert_int_equal(relock__timer_pending(&timers[i].timer), i % 2 == 0 && i % 10 != 0);
  }
  /* Armed for the first long deadline, not for the next tick. */
  assert_true(ev_is_active(&w.watcher));
  assert_true(ev_timer_remaining(loop, &w.watcher) > 1.0);
  check_invariants(&w);

  fired = 0;
  relock__wheel_close(&w);
  assert_int_equal(fired, long_left);
  for (int i = 0; i < n; i++) {
    int was_long_pending = i % 2 == 0 && i % 10 != 0;
    assert_int_equal(timers[i].calls, i % 10 == 0 || was_long_pending);
    if (was_long_pending)
      assert_int_equal(timers[i].status, RELOCK_ECANCELED);
  }
  free(timers);
  ev_loop_destroy(loop);
}

/* -- the ev_timer ---------------------------------------------------------- */

static void test_idle_wheel_has_no_armed_watcher(void **state) {
  (void)state;
  struct ev_loop *loop = new_loop();
  relock__wheel_t w;
  assert_int_equal(relock__wheel_init(&w, loop, 10, 512), 0);
  log_t log = {.wheel = &w};
  probe_t a, b;
  probe_init(&a, &log, 0);
  probe_init(&b, &log, 1);
  assert_false(ev_is_active(&w.watcher)); /* after init */

  assert_int_equal(probe_start(&a, &w, 100), 0);
  assert_true(ev_is_active(&w.watcher));
  relock__timer_stop(&a.timer);
  assert_false(ev_is_active(&w.watcher)); /* after the last cancel */

  assert_int_equal(probe_start(&a, &w, 100), 0);
  assert_int_equal(probe_start(&b, &w, 200), 0);
  relock__timer_stop(&b.timer);
  assert_true(ev_is_active(&w.watcher));
  relock__timer_stop(&a.timer);
  assert_false(ev_is_active(&w.watcher));
  check_invariants(&w);

  assert_int_equal(probe_start(&a, &w, 20), 0);
  run_until(loop, &log.fired, 1);
  assert_false(ev_is_active(&w.watcher)); /* after the last fire */
  check_invariants(&w);
  relock__wheel_close(&w);
  ev_loop_destroy(loop);
}

static void test_armed_for_next_deadline_only(void **state) {
  (void)state;
  struct ev_loop *loop = new_loop();
  relock__wheel_t w;
  assert_int_equal(relock__wheel_init(&w, loop, 10, 512), 0);
  log_t log = {.wheel = &w};
  probe_t a, b, c, d, e;
  probe_init(&a, &log, 0);
  probe_init(&b, &log, 1);
  probe_init(&c, &log, 2);
  probe_init(&d, &log, 3);
  probe_init(&e, &log, 4);

  /* One timer 500 ms away on 10 ms ticks: the loop wakes about once, not
   * fifty times. */
  assert_int_equal(probe_start(&a, &w, 500), 0);
  assert_int_equal(w.armed_tick, a.timer.deadline);
  assert_true(ev_timer_remaining(loop, &w.watcher) > 0.25);
  unsigned before = ev_iteration(loop);
  run_until(loop, &log.fired, 1);
  assert_fired_on_time(&a, &w);
  assert_in_range(ev_iteration(loop) - before, 1, 3);

  /* An earlier deadline re-arms it; a later one does not. */
  assert_int_equal(probe_start(&d, &w, 300), 0);
  assert_int_equal(probe_start(&b, &w, 100), 0);
  assert_int_equal(w.armed_tick, b.timer.deadline);
  assert_int_equal(probe_start(&c, &w, 200), 0);
  assert_int_equal(w.armed_tick, b.timer.deadline);
  before = ev_iteration(loop);
  run_until(loop, &log.fired, 2);
  assert_int_equal(w.armed_tick, c.timer.deadline);
  run_until(loop, &log.fired, 4);
  assert_fired_on_time(&b, &w);
  assert_fired_on_time(&c, &w);
  assert_fired_on_time(&d, &w);
  assert_in_range(ev_iteration(loop) - before, 3, 9);
  assert_false(ev_is_active(&w.watcher));

  /* Moving the only timer later keeps the watcher armed for the old tick:
   * one spare wake-up, then it arms for the new one. */
  assert_int_equal(probe_start(&e, &w, 50), 0);
  uint64_t first = w.armed_tick;
  assert_int_equal(probe_start(&e, &w, 200), 0);
  assert_int_equal(w.armed_tick, first);
  before = ev_iteration(loop);
  run_until(loop, &log.fired, 5);
  assert_fired_on_time(&e, &w);
  assert_in_range(ev_iteration(loop) - before, 2, 6);
  assert_false(ev_is_active(&w.watcher));
  relock__wheel_close(&w);
  ev_loop_destroy(loop);
}

/* A deadline many rotations away on a small wheel: the watcher is armed for
 * it directly, not once per rotation. */
static void test_armed_beyond_one_rotation(void **state) {
  (void)state;
  struct ev_loop *loop = new_loop();
  relock__wheel_t w;
  assert_int_equal(relock__wheel_init(&w, loop, 1, 8), 0);
  log_t log = {.wheel = &w};
  probe_t a;
  probe_init(&a, &log, 0);
  assert_int_equal(probe_start(&a, &w, 300), 0);
  assert_true(ev_timer_remaining(loop, &w.watcher) > 0.15);
  unsigned before = ev_iteration(loop);
  run_until(loop, &log.fired, 1);
  assert_fired_on_time(&a, &w);
  assert_in_range(ev_iteration(loop) - before, 1, 3);
  relock__wheel_close(&w);
  ev_loop_destroy(loop);
}

/* -- close ----------------------------------------------------------------- */

static void stop_other_hook(probe_t *p) { relock__timer_stop(&((probe_t *)p->ctx)->timer); }

/* ctx: two ints, the results of starting another timer and itself again. */
static void start_during_close_hook(probe_t *p) {
  int *results = p->ctx;
  relock__timer_t t;
  relock__timer_init(&t, noop_cb, NULL);
  results[0] = relock__timer_start(p->log->wheel, &t, 0);
  results[1] = relock__timer_start(p->log->wheel, &p->timer, 0);
  assert_false(relock__timer_pending(&t));
  assert_false(relock__timer_pending(&p->timer));
}

static void test_close_cancels_pending(void **state) {
  (void)state;
  struct ev_loop *loop = new_loop();
  relock__wheel_t w;
  assert_int_equal(relock__wheel_init(&w, loop, 10, 512), 0);
  log_t log = {.wheel = &w};
  enum { STOPPER, STARTER, FAR, STOPPED_BY_STOPPER, PLAIN, CANCELLED_BEFORE, N };
  probe_t p[N];
  for (int i = 0; i < N; i++)
    probe_init(&p[i], &log, i);
  int start_results[2] = {0, 0};
  p[STOPPER].hook = stop_other_hook;
  p[STOPPER].ctx = &p[STOPPED_BY_STOPPER];
  p[STARTER].hook = start_during_close_hook;
  p[STARTER].ctx = start_results;
  /* Close calls back slot by slot from the next tick on, so STOPPER (tick
   * 1 or 2) comes before STOPPED_BY_STOPPER (tick 30 or 31). */
  assert_int_equal(probe_start(&p[STOPPER], &w, 10), 0);
  assert_int_equal(probe_start(&p[STARTER], &w, 20), 0);
  assert_int_equal(probe_start(&p[FAR], &w, 60000), 0);
  assert_int_equal(probe_start(&p[STOPPED_BY_STOPPER], &w, 300), 0);
  assert_int_equal(probe_start(&p[PLAIN], &w, 300), 0);
  assert_int_equal(probe_start(&p[CANCELLED_BEFORE], &w, 40), 0);
  relock__timer_stop(&p[CANCELLED_BEFORE].timer);

  relock__wheel_close(&w);
  assert_int_equal(log.fired, 4);
  for (int i = 0; i < N; i++) {
    int expected = i != STOPPED_BY_STOPPER && i != CANCELLED_BEFORE;
    assert_int_equal(p[i].calls, expected);
    if (expected)
      assert_int_equal(p[i].status, RELOCK_ECANCELED);
  }
  assert_int_equal(start_results[0], RELOCK_ECLOSED);
  assert_int_equal(start_results[1], RELOCK_ECLOSED);
  assert_int_equal(relock__wheel_count(&w), 0);
  assert_false(ev_is_active(&w.watcher));

  /* After close: start refuses, a second close does nothing. */
  assert_int_equal(probe_start(&p[PLAIN], &w, 0), RELOCK_ECLOSED);
  relock__wheel_close(&w);
  assert_int_equal(log.fired, 4);

  /* The same wheel, initialised again, works. */
  assert_int_equal(relock__wheel_init(&w, loop, 10, 512), 0);
  assert_int_equal(probe_start(&p[PLAIN], &w, 5), 0);
  run_until(loop, &log.fired, 5);
  assert_int_equal(p[PLAIN].calls, 2);
  assert_int_equal(p[PLAIN].status, 0);
  relock__wheel_close(&w);
  ev_loop_destroy(loop);
}

static void close_hook(probe_t *p) { relock__wheel_close(p->log->wheel); }

/* A callback closes its wheel while a timer due in the same tick waits in
 * the firing list: that one and a later one are called back cancelled. */
static void test_close_from_callback(void **state) {
  (void)state;
  struct ev_loop *loop = new_loop();
  relock__wheel_t w;
  assert_int_equal(relock__wheel_init(&w, loop, 10, 512), 0);
  log_t log = {.wheel = &w};
  probe_t a, b, c;
  probe_t *same_tick[] = {&a, &b};
  probe_init(&a, &log, 0);
  probe_init(&b, &log, 1);
  probe_init(&c, &log, 2);
  a.hook = close_hook;
  start_in_one_tick(same_tick, 2, &w, 20);
  assert_int_equal(probe_start(&c, &w, 60000), 0);

  run_until(loop, &log.fired, 3);
  assert_fired_on_time(&a, &w);
  assert_int_equal(a.order, 0);
  assert_int_equal(b.calls, 1);
  assert_int_equal(b.status, RELOCK_ECANCELED);
  assert_int_equal(c.calls, 1);
  assert_int_equal(c.status, RELOCK_ECANCELED);
  assert_int_equal(relock__wheel_count(&w), 0);
  assert_false(ev_is_active(&w.watcher));
  assert_int_equal(probe_start(&a, &w, 0), RELOCK_ECLOSED);
  ev_loop_destroy(loop);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_invalid_arguments),
    cmocka_unit_test(test_slots_round_up_to_power_of_two),
    cmocka_unit_test(test_out_of_memory),
    cmocka_unit_test(test_never_early_default_wheel),
    cmocka_unit_test(test_never_early_small_wheel),
    cmocka_unit_test(test_never_early_coarse_ticks),
    cmocka_unit_test(test_never_early_at_tick_start),
    cmocka_unit_test(test_huge_timeout),
    cmocka_unit_test(test_deadline_order),
    cmocka_unit_test(test_cancelled_timer_never_fires),
    cmocka_unit_test(test_cancel_from_callback_in_same_tick),
    cmocka_unit_test(test_periodic_restart_from_own_callback),
    cmocka_unit_test(test_chain_around_the_wheel),
    cmocka_unit_test(test_start_pending_moves_it),
    cmocka_unit_test(test_stalled_loop_catches_up),
    cmocka_unit_test(test_million_pending),
    cmocka_unit_test(test_idle_wheel_has_no_armed_watcher),
    cmocka_unit_test(test_armed_for_next_deadline_only),
    cmocka_unit_test(test_armed_beyond_one_rotation),
    cmocka_unit_test(test_close_cancels_pending),
    cmocka_unit_test(test_close_from_callback),
};

RELOCK_TEST_MAIN(tests, NULL, NULL)
