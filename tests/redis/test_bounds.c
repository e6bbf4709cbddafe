/* A blocking call has a bounded worst case, a function of the options
 * (relock_options(3), "Worst cases"): against a Redis that never answers
 * (SIGSTOPped), a call that Redis never answers ends within
 *   (retry-attempts + 1) x command-timeout + retry-attempts x retry-interval
 * and relock_client_free within one command-timeout when give-backs are
 * owed, at once when nothing is. Real server, real SIGSTOP; bounds scaled
 * by relock_test_slowdown() where valgrind or a sanitizer slows the loop. */
#include <config.h>

#include <string.h>

#include "support/client_fixture.h"

#define TIMEOUT_MS 500
#define ATTEMPTS 2
#define INTERVAL_MS 300

typedef struct fx {
  relock_test_redis_t *redis;
  relock_options_t *opts;
} fx_t;

static int setup(void **state) {
  fx_t *fx = calloc(1, sizeof(*fx));
  fx->redis = relock_test_redis_start(NULL);
  if (fx->redis == NULL)
    fail_msg("cannot start redis-server");
  fx->opts = relock_options_new(NULL);
  fx_set_str(fx->opts, RELOCK_OPT_HOST, relock_test_redis_host(fx->redis));
  fx_set_int(fx->opts, RELOCK_OPT_PORT, relock_test_redis_port(fx->redis));
  fx_set_ms(fx->opts, RELOCK_OPT_COMMAND_TIMEOUT, TIMEOUT_MS);
  fx_set_int(fx->opts, RELOCK_OPT_RETRY_ATTEMPTS, ATTEMPTS);
  fx_set_ms(fx->opts, RELOCK_OPT_RETRY_INTERVAL, INTERVAL_MS);
  *state = fx;
  return 0;
}

/* Without the health PING, nothing but the command timeout ends an
 * attempt: every attempt runs its full course. */
static int setup_no_ping(void **state) {
  setup(state);
  fx_set_ms(((fx_t *)*state)->opts, RELOCK_OPT_PING_INTERVAL, 0);
  return 0;
}

static int teardown(void **state) {
  fx_t *fx = *state;
  relock_test_redis_resume(fx->redis);
  relock_test_redis_free(fx->redis);
  relock_options_free(fx->opts);
  free(fx);
  return 0;
}

/* The documented worst case of a call Redis never answers, and the slack a
 * loop's timers may run late by (a tick of the wheel, scheduling). */
static double call_bound_ms(void) {
  return (double)((ATTEMPTS + 1) * TIMEOUT_MS + ATTEMPTS * INTERVAL_MS) * relock_test_slowdown();
}
static double slack_ms(void) { return 150.0 * relock_test_slowdown(); }

static relock_client_t *ready_client(fx_t *fx, relock_lock_t **lock) {
  relock_client_t *c = relock_client_new(NULL, fx->opts, NULL);
  assert_non_null(c);
  *lock = relock_lock_new(c, "bounded", NULL);
  assert_non_null(*lock);
  int held = -1;
  assert_int_equal(relock_lock_is_locked(*lock, &held), 0); /* connected */
  return c;
}

static void test_lock_on_a_stopped_redis_is_bounded(void **state) {
  fx_t *fx = *state;
  relock_lock_t *l;
  relock_client_t *c = ready_client(fx, &l);
  assert_int_equal(relock_test_redis_pause(fx->redis), 0);
  uint64_t t0 = relock__now_ns();
  int r = relock_lock_lock(l, RELOCK_INFINITE);
  double took = fx_ms_since(t0);
  printf("# relock_lock_lock: %s after %.0f ms (%s); bound %.0f ms\n", relock_err_name(r), took,
         relock_last_error_message(), call_bound_ms());
  assert_true(r == RELOCK_ETIMEDOUT || r == RELOCK_ECONNLOST); /* no answer in time, or the health PING's */
  if (took > call_bound_ms() + slack_ms())
    fail_msg("relock_lock_lock took %.0f ms, more than its worst case %.0f ms", took, call_bound_ms());
  /* the acquisition's try is owed back: free waits for it, once */
  t0 = relock__now_ns();
  relock_lock_free(l);
  relock_client_free(c);
  took = fx_ms_since(t0);
  printf("# relock_client_free with a give-back owed: %.0f ms\n", took);
  if (took > TIMEOUT_MS * relock_test_slowdown() + slack_ms())
    fail_msg("relock_client_free took %.0f ms, more than one command timeout (%d ms)", took, TIMEOUT_MS);
}

static void test_unlock_on_a_stopped_redis_is_bounded(void **state) {
  fx_t *fx = *state;
  relock_lock_t *l;
  relock_client_t *c = ready_client(fx, &l);
  assert_int_equal(relock_lock_lock(l, RELOCK_INFINITE), 0);
  assert_int_equal(relock_test_redis_pause(fx->redis), 0);
  uint64_t t0 = relock__now_ns();
  int r = relock_lock_unlock(l);
  double took = fx_ms_since(t0);
  printf("# relock_lock_unlock: %s after %.0f ms (%s)\n", relock_err_name(r), took, relock_last_error_message());
  assert_true(r == RELOCK_ETIMEDOUT || r == RELOCK_ECONNLOST);
  if (took > call_bound_ms() + slack_ms())
    fail_msg("relock_lock_unlock took %.0f ms, more than its worst case %.0f ms", took, call_bound_ms());
  relock_lock_free(l);
  relock_client_free(c);
}

/* A deadline ends the wait at once, whatever the try in flight does (it
 * is given back in the background). */
static void test_try_lock_on_a_stopped_redis_ends_at_its_deadline(void **state) {
  fx_t *fx = *state;
  relock_lock_t *l;
  relock_client_t *c = ready_client(fx, &l);
  assert_int_equal(relock_test_redis_pause(fx->redis), 0);
  int acquired = -1;
  uint64_t t0 = relock__now_ns();
  int r = relock_lock_try_lock(l, 300, RELOCK_INFINITE, &acquired);
  double took = fx_ms_since(t0);
  printf("# relock_lock_try_lock(300 ms): %s after %.0f ms (%s)\n", relock_err_name(r), took,
         relock_last_error_message());
  assert_true(r == RELOCK_ETIMEDOUT || r == RELOCK_ECONNLOST || (r == 0 && acquired == 0));
  if (took > 300 * relock_test_slowdown() + slack_ms())
    fail_msg("relock_lock_try_lock(300 ms) took %.0f ms", took);
  relock_lock_free(l);
  relock_client_free(c);
}

/* Nothing owed: free has nothing to wait for from a server that does not
 * answer. */
static void test_free_owing_nothing_is_prompt(void **state) {
  fx_t *fx = *state;
  relock_lock_t *l;
  relock_client_t *c = ready_client(fx, &l);
  assert_int_equal(relock_test_redis_pause(fx->redis), 0);
  uint64_t t0 = relock__now_ns();
  relock_lock_free(l);
  relock_client_free(c);
  double took = fx_ms_since(t0);
  printf("# relock_client_free owing nothing: %.0f ms\n", took);
  if (took > slack_ms())
    fail_msg("relock_client_free took %.0f ms with nothing to give back", took);
}

/* A hold is not a give-back: a client holding a lock owes Redis nothing
 * at close (the lease ends the hold), so free does not wait either. */
static void test_held_lock_free_owing_nothing_is_prompt(void **state) {
  fx_t *fx = *state;
  relock_lock_t *l;
  relock_client_t *c = ready_client(fx, &l);
  assert_int_equal(relock_lock_lock(l, RELOCK_INFINITE), 0);
  assert_int_equal(relock_test_redis_pause(fx->redis), 0);
  uint64_t t0 = relock__now_ns();
  relock_lock_free(l);
  relock_client_free(c);
  double took = fx_ms_since(t0);
  printf("# relock_client_free holding a lock, owing nothing: %.0f ms\n", took);
  if (took > slack_ms())
    fail_msg("relock_client_free took %.0f ms with nothing to give back", took);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_lock_on_a_stopped_redis_is_bounded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unlock_on_a_stopped_redis_is_bounded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_free_owing_nothing_is_prompt, setup, teardown),
      cmocka_unit_test_setup_teardown(test_try_lock_on_a_stopped_redis_ends_at_its_deadline, setup_no_ping, teardown),
      cmocka_unit_test_setup_teardown(test_lock_on_a_stopped_redis_is_bounded, setup_no_ping, teardown),
      cmocka_unit_test_setup_teardown(test_unlock_on_a_stopped_redis_is_bounded, setup_no_ping, teardown),
      cmocka_unit_test_setup_teardown(test_held_lock_free_owing_nothing_is_prompt, setup_no_ping, teardown),
  };
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("no redis-server");
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("test_bounds", tests, NULL, NULL);
}
