/* A step of the wall clock changes nothing: the timer wheel and the
 * watchdog run on the monotonic clock only.
 *
 * This program is linked with tests/support/wall_clock.c: its own
 * clock_gettime, gettimeofday and time add an offset the tests set at run
 * time to CLOCK_REALTIME and its relatives, as an NTP step, a VM resume or
 * an administrator would; the monotonic clocks are left alone. The first
 * test proves that libev's own reads are intercepted. */
#include <config.h>

#include <stdatomic.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "support/client_fixture.h"
#include "support/wall_clock.h"
#include "objects/lock_impl.h"
#include "loop/wheel.h"

#define MS INT64_C(1000000)
#define HOUR_NS (INT64_C(3600) * 1000000000)

/* -- the wall-clock shim (tests/support/wall_clock.c) ------------------------ */

static void wall_step(int64_t ns) { relock_test_wall_step(ns); }

static void wall_reset(void) { relock_test_wall_reset(); }

static double kernel_wall_s(void) {
  struct timespec ts;
  relock_test_kernel_clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_shim_steps_the_wall_clock_only(void **state) {
  (void)state;
  wall_step(HOUR_NS);
  /* libev's ev_time() is in libev.so: its read of the wall clock (gettimeofday
   * or clock_gettime, as it was built) comes here. */
  assert_in_range((uint64_t)(ev_time() - kernel_wall_s()), 3599, 3601);
  struct timeval tv = {0};
  assert_int_equal(gettimeofday(&tv, NULL), 0);
  assert_in_range((uint64_t)((double)tv.tv_sec - kernel_wall_s()), 3598, 3601);
  assert_in_range((uint64_t)((double)time(NULL) - kernel_wall_s()), 3598, 3601);
  struct timespec mono, kmono;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  relock_test_kernel_clock_gettime(CLOCK_MONOTONIC, &kmono);
  assert_true(kmono.tv_sec - mono.tv_sec <= 1); /* untouched */
  wall_step(-2 * HOUR_NS);
  assert_in_range((uint64_t)(kernel_wall_s() - ev_time()), 3599, 3601);
  wall_reset();
  assert_true(ev_time() - kernel_wall_s() < 1.0);
}

/* -- the wheel -------------------------------------------------------------- */

/* A slow machine may run late; the point is that nothing runs an hour late,
 * or early. */
static uint64_t slack_ns(void) { return (uint64_t)(relock_test_under_valgrind() ? 5000 : 300) * MS; }

#define NPROBES 10 /* 50 .. 500 ms */

typedef struct probe {
  relock__timer_t timer;
  int64_t timeout_ms;
  uint64_t started_ns;
  uint64_t fired_ns;
  int calls;
  int status;
  int *fired;
} probe_t;

static void probe_cb(relock__timer_t *timer, int status, void *arg) {
  probe_t *p = relock__container_of(timer, probe_t, timer);
  (void)arg;
  p->fired_ns = relock__now_ns();
  p->calls++;
  p->status = status;
  (*p->fired)++;
}

/* A scenario: wall-clock steps of step_s seconds at_ms after the timers
 * started (at_ms < 0: just before they start). */
typedef struct step {
  int64_t at_ms;
  int64_t step_s;
} step_t;

typedef struct stepper {
  ev_timer watcher;
  const step_t *steps;
  int nsteps;
  int next;
  uint64_t t0;
} stepper_t;

static void arm_stepper(struct ev_loop *loop, stepper_t *s) {
  if (s->next >= s->nsteps)
    return;
  /* A plain ev_timer: libev keeps those on the monotonic clock. Measured
   * from a reading taken before ev_now_update(), like the wheel's own. */
  double after = (double)(s->t0 + (uint64_t)(s->steps[s->next].at_ms * MS)) - (double)relock__now_ns();
  ev_now_update(loop);
  ev_timer_set(&s->watcher, after > 0 ? after / 1e9 : 0.0, 0.0);
  ev_timer_start(loop, &s->watcher);
}

static void on_step(struct ev_loop *loop, ev_timer *w, int revents) {
  stepper_t *s = w->data;
  (void)revents;
  wall_step(s->steps[s->next].step_s * 1000000000);
  s->next++;
  arm_stepper(loop, s);
}

static void on_guard(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  *(int *)w->data = 1;
}

/* Timers of 50 .. 500 ms on the default wheel fire on time, however the
 * wall clock steps meanwhile, and the loop wakes for them only (a loop that
 * spins shows as thousands of iterations). */
static void check_wheel_across_steps(const char *name, const step_t *steps, int nsteps) {
  struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
  assert_non_null(loop);
  relock__wheel_t w;
  assert_int_equal(relock__wheel_init(&w, loop, RELOCK__WHEEL_DEFAULT_TICK_MS, RELOCK__WHEEL_DEFAULT_SLOTS), 0);
  int fired = 0, expired = 0;
  probe_t probes[NPROBES];
  stepper_t stepper = {.steps = steps, .nsteps = nsteps};
  ev_timer_init(&stepper.watcher, on_step, 0.0, 0.0);
  stepper.watcher.data = &stepper;
  while (stepper.next < nsteps && steps[stepper.next].at_ms < 0)
    wall_step(steps[stepper.next++].step_s * 1000000000);

  stepper.t0 = relock__now_ns();
  for (int i = 0; i < NPROBES; i++) {
    probes[i] = (probe_t){.timeout_ms = 50 * (i + 1), .fired = &fired};
    relock__timer_init(&probes[i].timer, probe_cb, NULL);
    probes[i].started_ns = relock__now_ns();
    assert_int_equal(relock__timer_start(&w, &probes[i].timer, probes[i].timeout_ms), 0);
  }
  arm_stepper(loop, &stepper);
  ev_timer guard;
  ev_timer_init(&guard, on_guard, relock_test_under_valgrind() ? 60.0 : 10.0, 0.0);
  guard.data = &expired;
  ev_timer_start(loop, &guard);
  const unsigned before = ev_iteration(loop);
  while (fired < NPROBES && !expired)
    ev_run(loop, EVRUN_ONCE);
  const unsigned iterations = ev_iteration(loop) - before;
  ev_timer_stop(loop, &guard);
  ev_timer_stop(loop, &stepper.watcher);
  wall_reset();
  if (expired)
    fail_msg("%s: %d of %d timers fired in %.0f s", name, fired, NPROBES, relock_test_under_valgrind() ? 60.0 : 10.0);

  uint64_t max_late = 0;
  for (int i = 0; i < NPROBES; i++) {
    const probe_t *p = &probes[i];
    uint64_t min = (uint64_t)(p->timeout_ms * MS);
    assert_int_equal(p->calls, 1);
    assert_int_equal(p->status, 0);
    assert_in_range(p->fired_ns - p->started_ns, min, min + 3 * w.tick_ns + slack_ns());
    if (p->fired_ns - p->started_ns - min > max_late)
      max_late = p->fired_ns - p->started_ns - min;
  }
  printf("# %s: %d timers on time (at most %.1f ms after the timeout), %u loop iterations\n", name, NPROBES,
         (double)max_late / 1e6, iterations);
  /* One wake-up per deadline and per step, a few spare: not a spin. */
  assert_in_range(iterations, 1, 4 * (NPROBES + (unsigned)nsteps) + 10);
  relock__wheel_close(&w);
  ev_loop_destroy(loop);
}

static void test_wheel_forward_step(void **state) {
  (void)state;
  static const step_t steps[] = {{75, 3600}};
  check_wheel_across_steps("+1 h at 75 ms", steps, 1);
}

static void test_wheel_backward_step(void **state) {
  (void)state;
  static const step_t steps[] = {{75, -3600}};
  check_wheel_across_steps("-1 h at 75 ms", steps, 1);
}

static void test_wheel_forward_then_back(void **state) {
  (void)state;
  static const step_t steps[] = {{75, 3600}, {275, -3600}};
  check_wheel_across_steps("+1 h at 75 ms, -1 h at 275 ms", steps, 2);
}

static void test_wheel_steps_before_start(void **state) {
  (void)state;
  static const step_t forward[] = {{-1, 3600}};
  check_wheel_across_steps("+1 h just before the start", forward, 1);
  static const step_t backward[] = {{-1, -3600}};
  check_wheel_across_steps("-1 h just before the start", backward, 1);
}

/* -- the watchdog ----------------------------------------------------------- */

#define WATCHDOG_MS 600 /* renewed every 200 ms */

typedef struct watch {
  relock_client_t *client;
  relock_test_redis_t *redis;
  uint64_t t0;
  /* successful renewals, seen after each loop iteration */
  uint64_t renewed_seen;
  uint64_t last_renewal_ns;
  uint64_t max_gap_ns;
  int renewals;
  /* the key's PTTL, sampled every 50 ms */
  long long min_pttl;
  int samples;
  /* wall-clock steps: +1 h, back (-1 h), -1 h more, then the end */
  int next_step;
  int done;
  ev_check check;
  ev_timer sampler;
} watch_t;

static const struct {
  int64_t at_ms;
  int64_t step_s;
} watch_steps[] = {{300, 3600}, {1300, -3600}, {2300, -3600}};
#define WATCH_STEPS ((int)(sizeof watch_steps / sizeof watch_steps[0]))
#define WATCH_END_MS 3300

static void on_check(struct ev_loop *loop, ev_check *w, int revents) {
  watch_t *wt = w->data;
  (void)loop;
  (void)revents;
  if (wt->client->renewal.renewed == wt->renewed_seen)
    return;
  uint64_t now = relock__now_ns();
  wt->renewed_seen = wt->client->renewal.renewed;
  if (now - wt->last_renewal_ns > wt->max_gap_ns)
    wt->max_gap_ns = now - wt->last_renewal_ns;
  wt->last_renewal_ns = now;
  wt->renewals++;
}

static void on_sample(struct ev_loop *loop, ev_timer *w, int revents) {
  watch_t *wt = w->data;
  (void)loop;
  (void)revents;
  long long pttl = fx_raw_int(wt->redis, "PTTL", "res", NULL);
  if (pttl < wt->min_pttl)
    wt->min_pttl = pttl;
  wt->samples++;
  double at_ms = fx_ms_since(wt->t0);
  while (wt->next_step < WATCH_STEPS && at_ms >= (double)watch_steps[wt->next_step].at_ms)
    wall_step(watch_steps[wt->next_step++].step_s * 1000000000);
  if (at_ms >= WATCH_END_MS)
    wt->done = 1;
}

typedef struct lost {
  int calls;
  int reason;
} lost_t;

static void on_lost(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg) {
  lost_t *l = arg;
  (void)lock;
  (void)owner;
  (void)message;
  l->calls++;
  l->reason = reason;
}

static int64_t value_of(relock_future_t *f) {
  assert_non_null(f);
  int r = relock_future_wait(f, fx_slack_ms(10000));
  if (r != 0)
    fail_msg("operation failed: %s (%s)", relock_future_message(f), relock_err_name(r));
  int64_t v = relock_future_value_type(f) == RELOCK_VALUE_BOOL ? relock_future_bool(f) : relock_future_int(f);
  relock_future_release(f);
  return v;
}

/* A lock held with the watchdog stays held, renewed every third of the
 * watchdog timeout, while the wall clock steps +1 h, back, and -1 h. */
typedef struct fx {
  relock_test_redis_t *redis;
  relock_client_t *client;
  relock_lock_t *lock;
} fx_t;

static int setup(void **state) {
  fx_t *fx = calloc(1, sizeof *fx);
  *state = fx;
  if (fx == NULL || !relock_test_redis_available())
    return 0; /* the test skips */
  fx->redis = relock_test_redis_start(NULL);
  return fx->redis != NULL ? 0 : -1;
}

static int teardown(void **state) {
  fx_t *fx = *state;
  wall_reset();
  relock_lock_free(fx->lock);
  relock_client_free(fx->client);
  relock_test_redis_free(fx->redis);
  free(fx);
  return 0;
}

static void test_watchdog_renews_across_steps(void **state) {
  fx_t *fx = *state;
  if (fx->redis == NULL) {
    printf("# redis-server not found: install the Debian package redis-server\n");
    skip();
  }
  relock_test_redis_t *redis = fx->redis;
  relock_options_t *cfg;
  cfg = fx_options(redis, 1);
  fx_set_ms(cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, WATCHDOG_MS);
  relock_client_t *c = fx->client = fx_client(cfg);
  relock_options_free(cfg);
  relock_lock_t *l = fx->lock = relock_lock_new(c, "res", NULL);
  assert_non_null(l);
  lost_t lost = {0};
  relock_lock_on_lost(l, on_lost, &lost);
  assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE)), 1);

  watch_t wt = {.client = c, .redis = redis, .min_pttl = WATCHDOG_MS};
  wt.t0 = wt.last_renewal_ns = relock__now_ns();
  wt.renewed_seen = c->renewal.renewed;
  const uint64_t cycles0 = c->renewal.cycles;
  ev_check_init(&wt.check, on_check);
  wt.check.data = &wt;
  ev_check_start(c->loop, &wt.check);
  ev_timer_init(&wt.sampler, on_sample, 0.05, 0.05);
  wt.sampler.data = &wt;
  ev_timer_start(c->loop, &wt.sampler);
  const unsigned before = ev_iteration(c->loop);
  while (!wt.done)
    ev_run(c->loop, EVRUN_ONCE);
  const unsigned iterations = ev_iteration(c->loop) - before;
  if (relock__now_ns() - wt.last_renewal_ns > wt.max_gap_ns) /* renewals that stopped */
    wt.max_gap_ns = relock__now_ns() - wt.last_renewal_ns;
  ev_timer_stop(c->loop, &wt.sampler);
  ev_check_stop(c->loop, &wt.check);
  wall_reset();

  const double secs = fx_ms_since(wt.t0) / 1000.0;
  const uint64_t cycles = c->renewal.cycles - cycles0;
  printf("# renewals unaffected by +-1 h clock steps: %llu cycles, %d renewals in %.1f s, max gap %.0f ms, "
         "min PTTL %lld ms, %u loop iterations\n",
         (unsigned long long)cycles, wt.renewals, secs, (double)wt.max_gap_ns / 1e6, wt.min_pttl, iterations);
  assert_int_equal(lost.calls, 0);
  assert_int_equal(wt.next_step, WATCH_STEPS);
  assert_true(wt.min_pttl > 0); /* the key never expired */
  assert_true(wt.max_gap_ns < (uint64_t)WATCHDOG_MS * MS);
  /* One every 200 ms: 16 in 3.3 s; the gap bound above is the real test. */
  assert_true(cycles >= 10);
  assert_true(wt.renewals >= 10);
  /* The sampler, the cycles and their replies wake the loop ~30 times a
   * second; a loop that spins wakes thousands of times. */
  assert_true(iterations < (unsigned)(200 * secs));
  assert_int_equal(value_of(relock_lock_unlock_async(l, 1)), 1); /* still ours */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shim_steps_the_wall_clock_only),
      cmocka_unit_test(test_wheel_forward_step),
      cmocka_unit_test(test_wheel_backward_step),
      cmocka_unit_test(test_wheel_forward_then_back),
      cmocka_unit_test(test_wheel_steps_before_start),
      cmocka_unit_test_setup_teardown(test_watchdog_renews_across_steps, setup, teardown),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("clock_step", tests, NULL, NULL);
}
