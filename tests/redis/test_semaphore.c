/* The semaphore against a real redis-server: Redisson's layout (a string of
 * free permits, the free count published on redisson_sc:{name}), waiters
 * woken by pub/sub for as many permits as were freed, deadlines and cancel
 * that leave no permit taken, changes made once when repeated, and never
 * more holders than permits across 8 processes. */
#include <config.h>

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <relock/semaphore.h>

#include "support/client_fixture.h"
#include "redis/scripts.h"

typedef fx_pair_t fx_t;

static relock_semaphore_t *sem_of(relock_client_t *c, const char *name) {
  relock_semaphore_t *s = relock_semaphore_new(c, name, NULL);
  assert_non_null(s);
  return s;
}

#define ACQUIRE(s, n, wait) fx_value(relock_semaphore_acquire_async((s), (n), (wait)))

/* -- the layout and the counts ---------------------------------------------------*/

static void test_layout_is_redissons(void **state) {
  fx_t *fx = *state;
  relock_semaphore_t *s = sem_of(fx->a, "sem");
  assert_int_equal(fx_value(relock_semaphore_available_async(s)), 0); /* no count yet */
  assert_int_equal(fx_value(relock_semaphore_try_set_permits_async(s, 3)), 1);
  assert_int_equal(fx_raw_get(fx->redis, "sem"), 3);
  assert_int_equal(fx_value(relock_semaphore_try_set_permits_async(s, 5)), 0); /* set already */
  assert_int_equal(ACQUIRE(s, 2, 0), 1);
  assert_int_equal(fx_raw_get(fx->redis, "sem"), 1);
  /* a waiter listens on Redisson's channel; a name with a hash tag keeps it */
  relock_semaphore_t *tagged = sem_of(fx->b, "x{t}y"), *sb = sem_of(fx->b, "sem");
  relock_future_t *w1 = relock_semaphore_acquire_async(sb, 2, fx_slack_ms(5000));
  relock_future_t *w2 = relock_semaphore_acquire_async(tagged, 1, fx_slack_ms(5000));
  assert_int_equal(relock_future_wait(w1, 200), RELOCK_EPENDING);
  assert_int_equal(relock_future_wait(w2, 50), RELOCK_EPENDING);
  char buf[512];
  assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "PUBSUB", "CHANNELS", "redisson_sc*", NULL), 0);
  assert_non_null(strstr(buf, "redisson_sc:{sem}"));
  assert_non_null(strstr(buf, "redisson_sc:x{t}y"));
  /* a release publishes the free count: the waiter for 2 hears it */
  uint64_t t0 = relock__now_ns();
  assert_int_equal(fx_value(relock_semaphore_release_async(s, 2)), 3);
  assert_int_equal(fx_value(w1), 1);
  double took = fx_ms_since(t0);
  if (took >= fx_slack_ms(100)) /* a re-check without a message comes after a second */
    fail_msg("the waiter took %.1f ms to hear the release", took);
  assert_int_equal(fx_raw_get(fx->redis, "sem"), 1);
  relock_test_redis_cmd(fx->redis, NULL, 0, "SET", "x{t}y", "1", NULL);
  assert_int_equal(fx_value(relock_semaphore_add_permits_async(tagged, 0)), 1); /* publishes 1 */
  assert_int_equal(fx_value(w2), 1);
  relock_semaphore_free(tagged);
  relock_semaphore_free(sb);
  relock_semaphore_free(s);
}

static void test_counts(void **state) {
  fx_t *fx = *state;
  relock_semaphore_t *s = sem_of(fx->a, "sem");
  assert_int_equal(fx_value(relock_semaphore_add_permits_async(s, 4)), 4); /* no count: from 0 */
  assert_int_equal(ACQUIRE(s, 5, 0), 0);                                  /* not enough */
  assert_int_equal(fx_raw_get(fx->redis, "sem"), 4);                      /* and nothing taken */
  assert_int_equal(ACQUIRE(s, 4, 0), 1);
  assert_int_equal(fx_value(relock_semaphore_available_async(s)), 0);
  assert_int_equal(fx_value(relock_semaphore_release_async(s, 3)), 3);
  assert_int_equal(fx_value(relock_semaphore_add_permits_async(s, -5)), -2); /* below zero: as Redisson */
  assert_int_equal(ACQUIRE(s, 1, 0), 0);
  assert_int_equal(fx_value(relock_semaphore_add_permits_async(s, 7)), 5);
  assert_int_equal(fx_value(relock_semaphore_drain_permits_async(s)), 5);
  assert_int_equal(fx_value(relock_semaphore_available_async(s)), 0);
  assert_int_equal(fx_value(relock_semaphore_drain_permits_async(s)), 0);
  /* the blocking calls */
  int ok = -1;
  int64_t n = -1;
  assert_int_equal(relock_semaphore_release(s, 2), 0);
  assert_int_equal(relock_semaphore_acquire(s, 2, 0, &ok), 0);
  assert_int_equal(ok, 1);
  assert_int_equal(relock_semaphore_acquire(s, 1, 0, &ok), 0);
  assert_int_equal(ok, 0);
  assert_int_equal(relock_semaphore_available(s, &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(relock_semaphore_try_set_permits(s, 1, &ok), 0);
  assert_int_equal(ok, 0);
  assert_int_equal(relock_semaphore_add_permits(s, 6, &n), 0);
  assert_int_equal(n, 6);
  assert_int_equal(relock_semaphore_add_permits(s, -2, NULL), 0);
  assert_int_equal(fx_raw_get(fx->redis, "sem"), 4);
  assert_int_equal(relock_semaphore_drain_permits(s, &n), 0);
  assert_int_equal(n, 4);
  assert_int_equal(relock_semaphore_drain_permits(s, &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(relock_semaphore_drain_permits(s, NULL), 0);
  assert_int_equal(relock_semaphore_add_permits(NULL, 1, &n), RELOCK_EINVAL);
  assert_int_equal(relock_semaphore_drain_permits(NULL, &n), RELOCK_EINVAL);
  assert_string_equal(relock_semaphore_name(s), "sem");
  relock_semaphore_free(s);
}

static void test_invalid_arguments(void **state) {
  fx_t *fx = *state;
  relock_semaphore_t *s = sem_of(fx->a, "sem");
  FX_REFUSED(relock_semaphore_acquire_async(s, 0, 0), "permits must be >= 1");
  FX_REFUSED(relock_semaphore_acquire_async(s, -3, 0), "permits must be >= 1");
  FX_REFUSED(relock_semaphore_acquire_async(s, 1, -2), "wait_ms must be");
  FX_REFUSED(relock_semaphore_release_async(s, 0), "permits must be >= 1");
  FX_REFUSED(relock_semaphore_try_set_permits_async(s, -1), "permits must be >= 0");
  FX_REFUSED(relock_semaphore_acquire_async(NULL, 1, 0), "semaphore is NULL");
  FX_REFUSED(relock_semaphore_release_async(NULL, 1), "semaphore is NULL");
  FX_REFUSED(relock_semaphore_available_async(NULL), "semaphore is NULL");
  relock_error_t err;
  assert_null(relock_semaphore_new(fx->a, "", &err));
  assert_int_equal(err.code, RELOCK_EINVAL);
  assert_null(relock_semaphore_new(NULL, "x", &err));
  assert_int_equal(err.code, RELOCK_EINVAL);
  assert_int_equal(relock_semaphore_acquire(NULL, 1, 0, NULL), RELOCK_EINVAL);
  relock_semaphore_free(NULL);
  /* a key of another type: another kind of object under the name, said
   * so (RELOCK_EWRONGKIND), nothing crashes */
  relock_test_redis_cmd(fx->redis, NULL, 0, "HSET", "sem", "f", "1", NULL);
  assert_int_equal(fx_error(relock_semaphore_acquire_async(s, 1, 0), NULL, 0), RELOCK_EWRONGKIND);
  assert_int_equal(fx_error(relock_semaphore_release_async(s, 1), NULL, 0), RELOCK_EWRONGKIND);
  relock_semaphore_free(s);
}

/* -- waiting ---------------------------------------------------------------------*/

/* A release of n wakes waiters for n permits, oldest first; the others stay
 * asleep (no try of theirs reaches Redis). */
static void test_release_wakes_waiters_for_its_permits(void **state) {
  fx_t *fx = *state;
  relock_semaphore_t *s = sem_of(fx->a, "sem"), *sb = sem_of(fx->b, "sem");
  assert_int_equal(fx_value(relock_semaphore_try_set_permits_async(s, 0)), 1);
  relock_future_t *w[3];
  for (int i = 0; i < 3; i++) {
    w[i] = relock_semaphore_acquire_async(sb, 1, fx_slack_ms(10000));
    assert_int_equal(relock_future_wait(w[i], 100), RELOCK_EPENDING);
  }
  uint64_t t0 = relock__now_ns();
  assert_int_equal(fx_value(relock_semaphore_release_async(s, 2)), 2);
  assert_int_equal(fx_value(w[0]), 1);
  assert_int_equal(fx_value(w[1]), 1);
  double took = fx_ms_since(t0);
  if (took >= fx_slack_ms(100))
    fail_msg("two waiters took %.1f ms to get the two permits released", took);
  assert_int_equal(relock_future_wait(w[2], 200), RELOCK_EPENDING);
  assert_int_equal(fx_raw_get(fx->redis, "sem"), 0);
  /* a waiter for 2 while 1 is free waits on; the one for 1 behind it does not */
  relock_future_t *two = relock_semaphore_acquire_async(sb, 2, fx_slack_ms(10000));
  assert_int_equal(relock_future_wait(two, 100), RELOCK_EPENDING);
  assert_int_equal(fx_value(relock_semaphore_release_async(s, 1)), 1);
  assert_int_equal(fx_value(w[2]), 1);
  assert_int_equal(relock_future_wait(two, 200), RELOCK_EPENDING);
  assert_int_equal(fx_value(relock_semaphore_release_async(s, 2)), 2);
  assert_int_equal(fx_value(two), 1);
  assert_int_equal(fx_raw_get(fx->redis, "sem"), 0);
  relock_semaphore_free(s);
  relock_semaphore_free(sb);
}

static void test_deadline_and_cancel_take_nothing(void **state) {
  fx_t *fx = *state;
  relock_semaphore_t *s = sem_of(fx->a, "sem");
  assert_int_equal(fx_value(relock_semaphore_try_set_permits_async(s, 1)), 1);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(ACQUIRE(s, 2, 200), 0);
  double took = fx_ms_since(t0);
  assert_true(took >= 190 && took < fx_slack_ms(1000));
  relock_future_t *w = relock_semaphore_acquire_async(s, 2, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(w, 100), RELOCK_EPENDING);
  assert_int_equal(relock_future_cancel(w), 1);
  relock_future_release(w);
  assert_int_equal(fx_raw_get(fx->redis, "sem"), 1);
  /* a try whose answer comes after the caller gave up: what it took goes
   * back. Redis sleeps with the try queued behind the sleep; the wait ends
   * first. */
  relock_future_t *sleep = relock_client_commandf_async(fx->b, "DEBUG SLEEP 0.5");
  assert_int_equal(relock_future_wait(sleep, 50), RELOCK_EPENDING);
  assert_int_equal(fx_error(relock_semaphore_acquire_async(s, 1, 100), NULL, 0), RELOCK_ETIMEDOUT);
  assert_int_equal(relock_future_wait(sleep, fx_slack_ms(5000)), 0);
  relock_future_release(sleep);
  assert_int_equal(fx_value(relock_client_commandf_async(fx->a, "EXISTS x")), 0); /* the undo ran before */
  assert_int_equal(fx_raw_get(fx->redis, "sem"), 1);
  char keys[256]; /* no acquisition latch left behind (a change's latch lives out its retry window) */
  assert_int_equal(relock_test_redis_cmd(fx->redis, keys, sizeof keys, "KEYS", "relock_lock_latch:*", NULL), 0);
  assert_string_equal(keys, "*0\r\n");
  relock_semaphore_free(s);
}

/* A change repeated with the same request latch (a retry after a lost
 * answer) answers as the first did and changes nothing more. */
static void test_repeated_change_counts_once(void **state) {
  fx_t *fx = *state;
  const relock__script_t *update = &relock__scripts[RELOCK__SCRIPT_SEMAPHORE_UPDATE];
  const relock__script_t *acquire = &relock__scripts[RELOCK__SCRIPT_SEMAPHORE_ACQUIRE];
  char buf[64];
  for (int i = 0; i < 2; i++) {
    assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "EVAL", update->body, "3", "sem",
                                           "redisson_sc:{sem}", "latch-1", "release", "2", "10000", "PUBLISH", NULL),
                     0);
    assert_string_equal(buf, ":2\r\n");
  }
  assert_int_equal(fx_raw_get(fx->redis, "sem"), 2);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "EVAL", acquire->body, "2", "sem", "latch-2",
                                           "1", "10000", NULL),
                     0);
    assert_string_equal(buf, "$-1\r\n"); /* taken - once */
  }
  assert_int_equal(fx_raw_get(fx->redis, "sem"), 1);
}

/* -- across processes -------------------------------------------------------------*/

#define PROCS 8
#define PERMITS 3
#define ROUNDS 25

/* A child: takes a permit ROUNDS times; while inside, counts itself in
 * "inside" and records how many were there. */
static void permit_child(const relock_options_t *cfg) {
  relock_client_t *c = relock_client_new(NULL, cfg, NULL);
  relock_semaphore_t *s = c != NULL ? relock_semaphore_new(c, "sem", NULL) : NULL;
  if (s == NULL)
    _exit(9);
  for (int i = 0; i < ROUNDS; i++) {
    int ok = 0;
    if (relock_semaphore_acquire(s, 1, RELOCK_INFINITE, &ok) != 0 || !ok)
      _exit(10);
    relock_future_t *f = relock_client_commandf_async(c, "INCR inside");
    if (relock_future_wait(f, 10000) != 0)
      _exit(11);
    int64_t n = relock_future_reply(f)->integer;
    relock_future_release(f);
    relock_future_release(relock_client_commandf_async(c, "RPUSH seen %lld", (long long)n));
    usleep(2000);
    f = relock_client_commandf_async(c, "DECR inside");
    if (relock_future_wait(f, 10000) != 0)
      _exit(12);
    relock_future_release(f);
    if (relock_semaphore_release(s, 1) != 0)
      _exit(13);
  }
  relock_semaphore_free(s);
  relock_client_free(c);
  _exit(0);
}

static void test_never_more_inside_than_permits_across_8_processes(void **state) {
  fx_t *fx = *state;
  relock_semaphore_t *s = sem_of(fx->a, "sem");
  assert_int_equal(fx_value(relock_semaphore_try_set_permits_async(s, PERMITS)), 1);
  pid_t pids[PROCS];
  for (int i = 0; i < PROCS; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0)
      permit_child(fx->cfg);
  }
  for (int i = 0; i < PROCS; i++) {
    int status = 0;
    assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  assert_int_equal(fx_raw_int(fx->redis, "LLEN", "seen", NULL), PROCS * ROUNDS);
  long long most = 0;
  for (int i = 0; i < PROCS * ROUNDS; i++) {
    char buf[64], index[16];
    snprintf(index, sizeof index, "%d", i);
    assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "LINDEX", "seen", index, NULL), 0);
    long long n = atoll(strchr(buf, '\n') + 1);
    if (n > PERMITS)
      fail_msg("%lld inside at once with %d permits", n, PERMITS);
    if (n > most)
      most = n;
  }
  assert_int_equal(most, PERMITS); /* and they did overlap: the permits were used */
  assert_int_equal(fx_raw_get(fx->redis, "sem"), PERMITS);
  printf("# %d processes x %d rounds, %d permits: at most %lld inside\n", PROCS, ROUNDS, PERMITS, most);
  relock_semaphore_free(s);
}

#define T(name) cmocka_unit_test_setup_teardown(name, fx_pair_setup, fx_pair_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_layout_is_redissons),
      T(test_counts),
      T(test_invalid_arguments),
      T(test_release_wakes_waiters_for_its_permits),
      T(test_deadline_and_cancel_take_nothing),
      T(test_repeated_change_counts_once),
      T(test_never_more_inside_than_permits_across_8_processes),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, NULL, NULL);
}
