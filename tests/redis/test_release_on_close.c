/* Graceful shutdown (RELOCK_OPT_RELEASE_ON_CLOSE): with the option, closing
 * a client releases every hold it has, of every kind of lock, re-entered
 * ones wholly, so that another client acquires at once; without it (the
 * default, as Redisson's shutdown) the holds stay until their leases end;
 * against a stopped server the close still ends within the command timeout
 * and says what it could not release. */
#include <config.h>

#include <string.h>

#include "support/client_fixture.h"

typedef fx_pair_t fx_t;

typedef relock_lock_t *(*lock_new_fn)(relock_client_t *, const char *, relock_error_t *);

static const struct {
  const char *name;
  lock_new_fn make;
} kinds[] = {
    {"lock", relock_lock_new},         {"fair", relock_fair_lock_new}, {"fenced", relock_fenced_lock_new},
    {"spin", relock_spin_lock_new},    {"rw-read", relock_read_lock_new}, {"rw-write", relock_write_lock_new},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

typedef struct {
  int closed;
  int rc;
  size_t released;
  size_t not_released;
} close_t;

static void on_closed(relock_client_t *c, void *arg) {
  close_t *x = arg;
  x->rc = relock_client_released(c, &x->released, &x->not_released);
  x->closed = 1;
}

static int closed(void *arg) { return ((close_t *)arg)->closed; }

/* Client a with the option as given holds every kind (the lock twice:
 * re-entered) with the watchdog, and a fixed-lease lock; returns them. */
static void hold_all(fx_t *fx, relock_lock_t **held, relock_lock_t **fixed) {
  for (size_t k = 0; k < NKINDS; k++) {
    held[k] = kinds[k].make(fx->a, kinds[k].name, NULL);
    assert_non_null(held[k]);
    assert_true(fx_value(relock_lock_lock_async(held[k], 1, 0, RELOCK_INFINITE)) > 0);
  }
  assert_true(fx_value(relock_lock_lock_async(held[0], 1, 0, RELOCK_INFINITE)) > 0); /* re-entered */
  *fixed = relock_lock_new(fx->a, "fixed", NULL);
  assert_true(fx_value(relock_lock_lock_async(*fixed, 1, 0, 60000)) > 0);
}

static void close_a(fx_t *fx, close_t *x) {
  assert_int_equal(relock_client_close(fx->a, on_closed, x), 0);
  assert_true(fx_run_until(fx_loop(), closed, x, fx_slack_ms(10000)));
}

static void test_release_on_close_frees_every_kind_at_once(void **state) {
  fx_t *fx = *state;
  fx_set_int(fx->cfg, RELOCK_OPT_RELEASE_ON_CLOSE, 1);
  fx_pair_clients(fx);
  relock_lock_t *held[NKINDS], *fixed;
  hold_all(fx, held, &fixed);
  close_t x = {0};
  close_a(fx, &x);
  assert_int_equal(x.rc, 0);
  assert_int_equal(x.released, NKINDS + 1); /* every hold, the fixed lease's too */
  assert_int_equal(x.not_released, 0);
  for (size_t k = 0; k < NKINDS; k++) {
    if (fx_raw_int(fx->redis, "EXISTS", kinds[k].name, NULL) != 0)
      fail_msg("%s: still in Redis after the close released it", kinds[k].name);
    relock_lock_t *other = kinds[k].make(fx->b, kinds[k].name, NULL);
    if (fx_value(relock_lock_lock_async(other, 2, 0, 30000)) <= 0) /* a single try: at once */
      fail_msg("%s: another client could not take it at once after the close", kinds[k].name);
    relock_lock_free(other);
    relock_lock_free(held[k]);
  }
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", "fixed", NULL), 0);
  relock_lock_free(fixed);
}

/* relock_client_free without a close first: the same. */
static void test_free_releases_too(void **state) {
  fx_t *fx = *state;
  fx_set_int(fx->cfg, RELOCK_OPT_RELEASE_ON_CLOSE, 1);
  fx_pair_clients(fx);
  relock_lock_t *held[NKINDS], *fixed;
  hold_all(fx, held, &fixed);
  for (size_t k = 0; k < NKINDS; k++)
    relock_lock_free(held[k]);
  relock_lock_free(fixed);
  relock_client_free(fx->a);
  fx->a = NULL;
  for (size_t k = 0; k < NKINDS; k++) {
    relock_lock_t *other = kinds[k].make(fx->b, kinds[k].name, NULL);
    if (fx_value(relock_lock_lock_async(other, 2, 0, 30000)) <= 0)
      fail_msg("%s: another client could not take it at once after the free", kinds[k].name);
    relock_lock_free(other);
  }
}

/* A threaded client, freed from the application's thread (not its loop
 * thread), with blocking holds: the same. */
static void test_a_threaded_client_releases_on_free(void **state) {
  fx_t *fx = *state;
  fx_set_int(fx->cfg, RELOCK_OPT_RELEASE_ON_CLOSE, 1);
  fx_pair_clients(fx);
  relock_error_t err;
  relock_client_t *t = relock_client_new(NULL, fx->cfg, &err);
  if (t == NULL)
    fail_msg("relock_client_new: %s", err.message);
  relock_lock_t *held[NKINDS];
  for (size_t k = 0; k < NKINDS; k++) {
    held[k] = kinds[k].make(t, kinds[k].name, NULL);
    assert_non_null(held[k]);
    assert_int_equal(relock_lock_lock(held[k], RELOCK_INFINITE), 0);
  }
  for (size_t k = 0; k < NKINDS; k++)
    relock_lock_free(held[k]); /* the holds keep what their release needs */
  relock_client_free(t);
  for (size_t k = 0; k < NKINDS; k++) {
    relock_lock_t *other = kinds[k].make(fx->b, kinds[k].name, NULL);
    if (fx_value(relock_lock_lock_async(other, 2, 0, 30000)) <= 0)
      fail_msg("%s: another client could not take it at once after the threaded client's free", kinds[k].name);
    relock_lock_free(other);
  }
}

/* A permit-expirable semaphore's permits are holds of the client's, of
 * every lease: watched (renewed), fixed, and none at all (which would
 * never come back by themselves). The close releases those not released
 * yet. */
static void test_permits_are_released(void **state) {
  fx_t *fx = *state;
  fx_set_int(fx->cfg, RELOCK_OPT_RELEASE_ON_CLOSE, 1);
  fx_pair_clients(fx);
  relock_permit_semaphore_t *p = relock_permit_semaphore_new(fx->a, "ps", NULL);
  assert_non_null(p);
  assert_int_equal(fx_value(relock_permit_semaphore_try_set_permits_async(p, 5)), 1);
  const int64_t leases[5] = {RELOCK_INFINITE, RELOCK_PERMIT_NO_LEASE, RELOCK_INFINITE, 60000, RELOCK_PERMIT_NO_LEASE};
  char ids[5][RELOCK_PERMIT_ID_SIZE];
  for (int i = 0; i < 5; i++) {
    relock_future_t *f = relock_permit_semaphore_acquire_async(p, 0, leases[i]);
    assert_int_equal(relock_future_wait(f, fx_slack_ms(10000)), 0);
    assert_int_equal(relock_future_value_type(f), RELOCK_VALUE_STRING);
    snprintf(ids[i], sizeof ids[i], "%s", relock_future_string(f, NULL));
    relock_future_release(f);
  }
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(p, ids[0])), 1); /* released by its taker */
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(p, ids[4])), 1);
  assert_int_equal(fx_value(relock_permit_semaphore_available_async(p)), 2);
  relock_permit_semaphore_free(p); /* the permits keep what their release needs */
  close_t x = {0};
  close_a(fx, &x);
  assert_int_equal(x.rc, 0);
  assert_int_equal(x.released, 3); /* ids[1], ids[2], ids[3]; ids[0] and ids[4] were released */
  assert_int_equal(x.not_released, 0);
  relock_permit_semaphore_t *q = relock_permit_semaphore_new(fx->b, "ps", NULL);
  assert_int_equal(fx_value(relock_permit_semaphore_available_async(q)), 5);
  relock_permit_semaphore_free(q);
}

static void test_without_the_option_holds_stay_until_their_lease(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *held[NKINDS], *fixed;
  hold_all(fx, held, &fixed);
  close_t x = {0};
  close_a(fx, &x);
  assert_int_equal(x.rc, 0);
  assert_int_equal(x.released, 0);
  assert_int_equal(x.not_released, 0);
  for (size_t k = 0; k < NKINDS; k++) {
    assert_true(fx_raw_int(fx->redis, "PTTL", kinds[k].name, NULL) > 0); /* until its lease */
    relock_lock_t *other = kinds[k].make(fx->b, kinds[k].name, NULL);
    int64_t got = fx_value(relock_lock_lock_async(other, 2, 0, 30000));
    if (k != 4 && got != 0) /* readers share: a second reader may take it */
      fail_msg("%s: taken while the closed client's hold should stay", kinds[k].name);
    relock_lock_free(other);
    relock_lock_free(held[k]);
  }
  relock_lock_free(fixed);
}

static void test_a_stopped_server_bounds_the_close_and_it_says_what_stayed(void **state) {
  fx_t *fx = *state;
  fx_set_int(fx->cfg, RELOCK_OPT_RELEASE_ON_CLOSE, 1);
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, 300);
  fx_pair_clients(fx);
  relock_lock_t *held[NKINDS], *fixed;
  hold_all(fx, held, &fixed);
  assert_int_equal(relock_test_redis_pause(fx->redis), 0);
  close_t x = {0};
  uint64_t t0 = relock__now_ns();
  close_a(fx, &x);
  double ms = fx_ms_since(t0);
  assert_int_equal(relock_test_redis_resume(fx->redis), 0);
  if (ms > fx_slack_ms(300 + 500))
    fail_msg("the close took %.0f ms, more than the command timeout (300 ms) and a margin", ms);
  assert_int_equal(x.rc, 0);
  assert_int_equal(x.released, 0);
  assert_int_equal(x.not_released, NKINDS + 1);
  for (size_t k = 0; k < NKINDS; k++)
    relock_lock_free(held[k]);
  relock_lock_free(fixed);
}

#define T(name) cmocka_unit_test_setup_teardown(name, fx_pair_server_setup, fx_pair_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_release_on_close_frees_every_kind_at_once),
      T(test_free_releases_too),
      T(test_a_threaded_client_releases_on_free),
      T(test_permits_are_released),
      T(test_without_the_option_holds_stay_until_their_lease),
      T(test_a_stopped_server_bounds_the_close_and_it_says_what_stayed),
  };
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found: install the Debian package redis-server");
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, NULL, NULL);
}
