/* The permit-expirable semaphore against a real redis-server: Redisson's
 * layout (free permits in a string, the permits taken in "{name}:timeout"
 * by id and expiry), permits that return to the pool when their lease
 * ends, waiters woken by a release (pub/sub) and by the next expiry,
 * deadlines and cancel that leave no permit taken, and a repeated try
 * that takes once. */
#include <config.h>

#include <string.h>
#include <unistd.h>

#include <relock/permit_semaphore.h>

#include "support/client_fixture.h"
#include "redis/scripts.h"

typedef fx_pair_t fx_t;

static relock_permit_semaphore_t *sem_of(relock_client_t *c, const char *name) {
  relock_permit_semaphore_t *s = relock_permit_semaphore_new(c, name, NULL);
  assert_non_null(s);
  return s;
}

/* Acquires a permit that must be taken; its id into id. */
static void take(relock_permit_semaphore_t *s, int64_t wait_ms, int64_t lease_ms, char id[RELOCK_PERMIT_ID_SIZE]) {
  relock_future_t *f = relock_permit_semaphore_acquire_async(s, wait_ms, lease_ms);
  assert_non_null(f);
  int r = relock_future_wait(f, fx_slack_ms(10000));
  if (r != 0)
    fail_msg("acquire failed: %s", relock_future_message(f));
  if (relock_future_value_type(f) != RELOCK_VALUE_STRING)
    fail_msg("no permit: value type %d", (int)relock_future_value_type(f));
  size_t len;
  const char *s_id = relock_future_string(f, &len);
  assert_int_equal(len, RELOCK_PERMIT_ID_SIZE - 1);
  for (size_t i = 0; i < len; i++)
    assert_non_null(strchr("0123456789abcdef", s_id[i]));
  memcpy(id, s_id, RELOCK_PERMIT_ID_SIZE);
  relock_future_release(f);
}

/* An acquisition that must find no permit within its wait. */
static void none(relock_future_t *f) {
  assert_non_null(f);
  assert_int_equal(relock_future_wait(f, fx_slack_ms(10000)), 0);
  assert_int_equal(relock_future_value_type(f), RELOCK_VALUE_NONE);
  relock_future_release(f);
}

static long long server_ms(relock_test_redis_t *r) {
  char buf[128];
  assert_int_equal(relock_test_redis_cmd(r, buf, sizeof buf, "TIME", NULL), 0);
  /* *2\r\n$10\r\n<seconds>\r\n$6\r\n<micros>\r\n */
  const char *p = strchr(strchr(buf, '\n') + 1, '\n') + 1;
  long long sec = atoll(p);
  p = strchr(strchr(p, '\n') + 1, '\n') + 1;
  return sec * 1000 + atoll(p) / 1000;
}

/* The expiry of permit id: Redisson keeps it as the 16 bytes of its hex. */
static long long score(relock_test_redis_t *r, const char *key, const char *id) {
  char buf[128], member[16];
  for (int i = 0; i < 16; i++) {
    unsigned byte;
    sscanf(id + 2 * i, "%2x", &byte);
    member[i] = (char)byte;
  }
  const char *argv[] = {"ZSCORE", key, member};
  const size_t lens[] = {6, strlen(key), 16};
  assert_int_equal(relock_test_redis_cmdv(r, buf, sizeof buf, 3, argv, lens), 0);
  if (buf[0] != '$' || buf[1] == '-')
    return -1;
  return atoll(strchr(buf, '\n') + 1);
}

static void test_layout_is_redissons(void **state) {
  fx_t *fx = *state;
  relock_permit_semaphore_t *s = sem_of(fx->a, "ps");
  assert_int_equal(fx_value(relock_permit_semaphore_try_set_permits_async(s, 2)), 1);
  assert_int_equal(fx_value(relock_permit_semaphore_try_set_permits_async(s, 5)), 0);
  char forever[RELOCK_PERMIT_ID_SIZE], leased[RELOCK_PERMIT_ID_SIZE];
  take(s, 0, RELOCK_PERMIT_NO_LEASE, forever);
  assert_int_equal(score(fx->redis, "{ps}:timeout", forever), 922337203685477LL);
  long long before = server_ms(fx->redis);
  take(s, 0, 5000, leased);
  long long expiry = score(fx->redis, "{ps}:timeout", leased);
  assert_true(expiry >= before + 5000 && expiry <= server_ms(fx->redis) + 5000);
  assert_string_not_equal(forever, leased);
  assert_int_equal(fx_raw_get(fx->redis, "ps"), 0);
  none(relock_permit_semaphore_acquire_async(s, 0, RELOCK_INFINITE));
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(s, forever)), 1);
  assert_int_equal(fx_raw_get(fx->redis, "ps"), 1);
  assert_int_equal(score(fx->redis, "{ps}:timeout", forever), -1);
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(s, forever)), 0); /* not taken any more */
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(s, "0123456789abcdef0123456789ABCDEF")),
                   0); /* never taken */
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(s, leased)), 1);
  assert_int_equal(fx_value(relock_permit_semaphore_available_async(s)), 2);
  assert_int_equal(fx_value(relock_permit_semaphore_add_permits_async(s, 3)), 5);
  /* a name with a hash tag keeps it: "x{t}y:timeout" */
  relock_permit_semaphore_t *tagged = sem_of(fx->a, "x{t}y");
  assert_int_equal(fx_value(relock_permit_semaphore_add_permits_async(tagged, 1)), 1);
  char id[RELOCK_PERMIT_ID_SIZE];
  take(tagged, 0, RELOCK_PERMIT_NO_LEASE, id);
  assert_int_equal(score(fx->redis, "x{t}y:timeout", id), 922337203685477LL);
  /* the blocking calls */
  int released = -1;
  assert_int_equal(relock_permit_semaphore_release(tagged, id, &released), 0);
  assert_int_equal(released, 1);
  assert_int_equal(relock_permit_semaphore_acquire(tagged, 0, 1000, id), 0);
  assert_int_equal(strlen(id), RELOCK_PERMIT_ID_SIZE - 1);
  assert_int_equal(relock_permit_semaphore_acquire(tagged, 0, 1000, id), 0);
  assert_string_equal(id, ""); /* none free */
  int64_t available = -1;
  assert_int_equal(relock_permit_semaphore_available(tagged, &available), 0);
  assert_int_equal(available, 0);
  /* (the permit taken for 1000 ms may come back meanwhile: counted relatively) */
  assert_int_equal(relock_permit_semaphore_add_permits(tagged, 2, &available), 0);
  assert_true(available == 2 || available == 3);
  int64_t after = -1;
  assert_int_equal(relock_permit_semaphore_add_permits(tagged, -1, &after), 0);
  assert_true(after == available - 1 || after == available); /* available: if it came back in between */
  assert_int_equal(relock_permit_semaphore_add_permits(tagged, 0, NULL), 0);
  assert_int_equal(relock_permit_semaphore_add_permits(NULL, 1, &available), RELOCK_EINVAL);
  relock_permit_semaphore_free(tagged);
  relock_permit_semaphore_free(s);
}

static void test_expired_permits_return_to_the_pool(void **state) {
  fx_t *fx = *state;
  relock_permit_semaphore_t *s = sem_of(fx->a, "ps");
  assert_int_equal(fx_value(relock_permit_semaphore_try_set_permits_async(s, 1)), 1);
  char id[RELOCK_PERMIT_ID_SIZE];
  take(s, 0, 300, id);
  assert_int_equal(fx_value(relock_permit_semaphore_available_async(s)), 0);
  /* a waiter is told when the permit expires: it needs no release */
  relock_permit_semaphore_t *other = sem_of(fx->b, "ps");
  uint64_t t0 = relock__now_ns();
  char next[RELOCK_PERMIT_ID_SIZE];
  take(other, fx_slack_ms(5000), RELOCK_INFINITE, next);
  double took = fx_ms_since(t0);
  if (took < 250 || took > fx_slack_ms(800))
    fail_msg("the waiter got the expired permit after %.1f ms (lease 300 ms)", took);
  assert_int_equal(fx_raw_int(fx->redis, "ZCARD", "{ps}:timeout", NULL), 1); /* only the new one */
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(s, id)), 0); /* it had expired */
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(other, next)), 1);
  /* available returns expired permits too */
  take(s, 0, 100, id);
  usleep(150 * 1000); /* past its lease */
  assert_int_equal(fx_value(relock_permit_semaphore_available_async(s)), 1);
  assert_int_equal(fx_raw_int(fx->redis, "ZCARD", "{ps}:timeout", NULL), 0);
  relock_permit_semaphore_free(other);
  relock_permit_semaphore_free(s);
}

static void test_release_wakes_a_waiter(void **state) {
  fx_t *fx = *state;
  relock_permit_semaphore_t *s = sem_of(fx->a, "ps"), *other = sem_of(fx->b, "ps");
  assert_int_equal(fx_value(relock_permit_semaphore_try_set_permits_async(s, 1)), 1);
  char id[RELOCK_PERMIT_ID_SIZE];
  take(s, 0, RELOCK_INFINITE, id);
  relock_future_t *w = relock_permit_semaphore_acquire_async(other, fx_slack_ms(5000), RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(w, 200), RELOCK_EPENDING);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(s, id)), 1);
  assert_int_equal(relock_future_wait(w, fx_slack_ms(5000)), 0);
  assert_int_equal(relock_future_value_type(w), RELOCK_VALUE_STRING);
  double took = fx_ms_since(t0);
  if (took >= fx_slack_ms(100)) /* a permit that never expires: only the message wakes it */
    fail_msg("the waiter took %.1f ms to hear the release", took);
  relock_future_release(w);
  relock_permit_semaphore_free(other);
  relock_permit_semaphore_free(s);
}

static void test_deadline_and_cancel_take_nothing(void **state) {
  fx_t *fx = *state;
  relock_permit_semaphore_t *s = sem_of(fx->a, "ps"), *other = sem_of(fx->b, "ps");
  assert_int_equal(fx_value(relock_permit_semaphore_try_set_permits_async(s, 1)), 1);
  char id[RELOCK_PERMIT_ID_SIZE];
  take(s, 0, RELOCK_INFINITE, id);
  uint64_t t0 = relock__now_ns();
  none(relock_permit_semaphore_acquire_async(other, 200, RELOCK_INFINITE));
  assert_true(fx_ms_since(t0) >= 200);
  relock_future_t *c = relock_permit_semaphore_acquire_async(other, RELOCK_INFINITE, 10000);
  assert_int_equal(relock_future_wait(c, 100), RELOCK_EPENDING);
  assert_int_equal(relock_future_cancel(c), 1);
  relock_future_release(c);
  /* cancelled while its try is in flight: whatever it took is given back */
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(s, id)), 1);
  for (int i = 0; i < 20; i++) {
    relock_future_t *f = relock_permit_semaphore_acquire_async(other, RELOCK_INFINITE, 10000);
    relock_future_cancel(f);
    relock_future_release(f);
  }
  take(s, fx_slack_ms(2000), RELOCK_INFINITE, id); /* the one permit is free again */
  assert_int_equal(fx_raw_int(fx->redis, "ZCARD", "{ps}:timeout", NULL), 1);
  assert_int_equal(fx_raw_get(fx->redis, "ps"), 0);
  relock_permit_semaphore_free(other);
  relock_permit_semaphore_free(s);
}

/* The same try repeated (a retry after a lost answer) takes one permit. */
static void test_repeated_try_takes_once(void **state) {
  fx_t *fx = *state;
  const relock__script_t *acquire = &relock__scripts[RELOCK__SCRIPT_PERMIT_SEMAPHORE_ACQUIRE];
  relock_test_redis_cmd(fx->redis, NULL, 0, "SET", "ps", "2", NULL);
  char buf[64];
  for (int i = 0; i < 2; i++) {
    assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "EVAL", acquire->body, "3", "ps",
                                           "{ps}:timeout", "redisson_sc:{ps}", "-1", "id-1", "PUBLISH", NULL),
                     0);
    assert_string_equal(buf, "$-1\r\n"); /* taken - once */
  }
  assert_int_equal(fx_raw_get(fx->redis, "ps"), 1);
  assert_int_equal(fx_raw_int(fx->redis, "ZCARD", "{ps}:timeout", NULL), 1);
}

static void test_invalid_arguments(void **state) {
  fx_t *fx = *state;
  relock_permit_semaphore_t *s = sem_of(fx->a, "ps");
  FX_REFUSED(relock_permit_semaphore_acquire_async(NULL, 0, RELOCK_INFINITE), "NULL");
  FX_REFUSED(relock_permit_semaphore_acquire_async(s, -5, RELOCK_INFINITE), "wait_ms");
  FX_REFUSED(relock_permit_semaphore_acquire_async(s, 0, 0), "lease_ms");
  FX_REFUSED(relock_permit_semaphore_release_async(s, NULL), "id must be");
  FX_REFUSED(relock_permit_semaphore_release_async(s, ""), "id must be");
  FX_REFUSED(relock_permit_semaphore_release_async(s, "0123"), "32 hex digits");
  FX_REFUSED(relock_permit_semaphore_release_async(s, "0123456789abcdef0123456789abcdeg"), "32 hex digits");
  FX_REFUSED(relock_permit_semaphore_release_async(s, "0123456789abcdef0123456789abcdef0"), "32 hex digits");
  FX_REFUSED(relock_permit_semaphore_try_set_permits_async(s, -1), "permits must be");
  char id[RELOCK_PERMIT_ID_SIZE] = "x";
  assert_int_equal(relock_permit_semaphore_acquire(NULL, 0, RELOCK_INFINITE, id), RELOCK_EINVAL);
  assert_string_equal(id, "");
  relock_permit_semaphore_free(s);
  relock_permit_semaphore_free(NULL);
}

#define T(name) cmocka_unit_test_setup_teardown(name, fx_pair_setup, fx_pair_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_layout_is_redissons),
      T(test_expired_permits_return_to_the_pool),
      T(test_release_wakes_a_waiter),
      T(test_deadline_and_cancel_take_nothing),
      T(test_repeated_try_takes_once),
      T(test_invalid_arguments),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, NULL, NULL);
}
