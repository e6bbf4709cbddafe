/* A lock kind defined outside src/: the extension point of the lock
 * engine, proven from a test. The "counting lock" here has the reentrant
 * lock's layout and scripts (reused through lock_kind.h) and one thing of
 * its own - what an acquisition's future says: the owner's hold count in
 * Redis, 0 when not acquired - and the engine's acquisition, waiting on
 * the channel, re-entry, release, force release and loss reporting all
 * serve it without any change in src/. */
#include <config.h>

#include <string.h>

#include "future/promise.h"
#include "objects/lock_kind.h"
#include "support/client_fixture.h"

typedef fx_pair_t fx_t;

/* The kind's own part: the future answers the hold count. */
static void settle_count(relock_future_t *out, const relock__answer_t *a, const char *id) {
  (void)id;
  relock__future_succeed_int(out, a != NULL ? a->count : 0);
}

static const relock__lock_kind_t counting = {
    .what = "counting lock",
    .field_suffix = "",
    .channel_prefix = "redisson_lock__channel",
    .role = RELOCK__ROLE_PLAIN,
    .wait = RELOCK__WAIT_CHANNEL,
    .acquire = relock__rlock_acquire,
    .settle = settle_count,
    .undo = relock__rlock_undo,
    .release = relock__rlock_release,
    .force_release = relock__rlock_force_release,
};

static relock_lock_t *counting_lock(relock_client_t *c, const char *name) {
  relock_error_t err;
  relock_lock_t *l = relock__lock_new(c, name, &counting, &err);
  if (l == NULL)
    fail_msg("relock__lock_new: %s", err.message);
  return l;
}

static void test_the_future_says_what_the_kind_settles(void **state) {
  fx_t *fx = *state;
  relock_lock_t *l = counting_lock(fx->a, "k");
  assert_int_equal(fx_value(relock_lock_lock_async(l, 1, 0, 30000)), 1);
  assert_int_equal(fx_value(relock_lock_lock_async(l, 1, 0, 30000)), 2); /* re-entry: the count in Redis */
  assert_int_equal(fx_value(relock_lock_hold_count_async(l, 1)), 2); /* read from Redis */
  assert_int_equal(fx_raw_int(fx->redis, "HLEN", "k", NULL), 1);         /* one owner's field */
  relock_lock_t *other = counting_lock(fx->b, "k");
  assert_int_equal(fx_value(relock_lock_lock_async(other, 9, 0, 30000)), 0); /* a single try: not acquired */
  assert_int_equal(fx_value(relock_lock_unlock_async(l, 1)), 0);            /* one hold remains */
  assert_int_equal(fx_value(relock_lock_unlock_async(l, 1)), 1);            /* freed */
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", "k", NULL), 0);
  relock_lock_free(other);
  relock_lock_free(l);
}

/* A waiter of the new kind is woken by the unlock message on the lock's
 * channel, and its lease is kept by the watchdog like any lock's. */
static void test_a_waiter_of_the_new_kind_is_woken(void **state) {
  fx_t *fx = *state;
  relock_lock_t *la = counting_lock(fx->a, "w"), *lb = counting_lock(fx->b, "w");
  assert_int_equal(fx_value(relock_lock_lock_async(la, 1, 0, 30000)), 1);
  relock_future_t *w = relock_lock_lock_async(lb, 2, RELOCK_INFINITE, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(w, 200), RELOCK_EPENDING);
  assert_int_equal(fx_value(relock_lock_unlock_async(la, 1)), 1);
  assert_int_equal(fx_value(w), 1);
  assert_true(fx_raw_int(fx->redis, "PTTL", "w", NULL) > 0); /* the watchdog's lease */
  assert_int_equal(fx_value(relock_lock_unlock_async(lb, 2)), 1);
  relock_lock_free(lb);
  relock_lock_free(la);
}

static int losses;
static void count_loss(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg) {
  (void)lock;
  (void)owner;
  (void)reason;
  (void)message;
  (void)arg;
  losses++;
}

static int lost_once(void *arg) {
  (void)arg;
  return losses > 0;
}

/* A force release from another client ends the holder's belief with a
 * lost callback, as for the built-in kinds. */
static void test_a_force_release_is_reported_lost(void **state) {
  fx_t *fx = *state;
  relock_lock_t *la = counting_lock(fx->a, "f"), *lb = counting_lock(fx->b, "f");
  losses = 0;
  assert_int_equal(relock_lock_on_lost(la, count_loss, NULL), 0);
  assert_int_equal(relock_lock_watch_loss(la, 1), 0); /* heard at once, not at the next renewal */
  assert_int_equal(fx_value(relock_lock_lock_async(la, 1, 0, RELOCK_INFINITE)), 1);
  assert_int_equal(fx_value(relock_lock_force_unlock_async(lb)), 1);
  assert_true(fx_run_until(fx_loop(), lost_once, NULL, 5000));
  assert_int_equal(relock_lock_validity_ms(la, 1), RELOCK_ELOST); /* the belief ended */
  relock_lock_free(lb);
  relock_lock_free(la);
}

#define T(name) cmocka_unit_test_setup_teardown(name, fx_pair_setup, fx_pair_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_the_future_says_what_the_kind_settles),
      T(test_a_waiter_of_the_new_kind_is_woken),
      T(test_a_force_release_is_reported_lost),
  };
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found: install the Debian package redis-server");
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, NULL, NULL);
}
