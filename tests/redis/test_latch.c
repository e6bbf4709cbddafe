/* The count-down latch against a real redis-server: Redisson's layout (a
 * string count, deleted at zero, "0" published on
 * redisson_countdownlatch__channel__{name}), 8 awaiting processes released
 * together by the last count-down, deadlines, delete, and a repeated
 * count-down counted once. */
#include <config.h>

#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <relock/latch.h>

#include "support/client_fixture.h"
#include "redis/scripts.h"

#define CHANNEL "redisson_countdownlatch__channel__{done}"

typedef fx_pair_t fx_t;

static relock_latch_t *latch_of(relock_client_t *c, const char *name) {
  relock_latch_t *l = relock_latch_new(c, name, NULL);
  assert_non_null(l);
  return l;
}

/* Waits until n clients listen on channel. */
static void await_listeners(fx_t *fx, const char *channel, long long n) {
  char buf[256], want[32];
  snprintf(want, sizeof want, ":%lld\r\n", n);
  for (int i = 0; i < fx_slack_ms(500); i++) {
    assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "PUBSUB", "NUMSUB", channel, NULL), 0);
    char *count = strstr(buf, channel);
    if (count != NULL && strstr(count, want) != NULL)
      return;
    relock_future_release(FX_CMD(fx->a, "PING")); /* turns the loop too */
    usleep(10000);
  }
  fail_msg("%lld listeners on %s never came", n, channel);
}

static void test_layout_is_redissons(void **state) {
  fx_t *fx = *state;
  relock_latch_t *l = latch_of(fx->a, "done");
  assert_int_equal(fx_value(relock_latch_count_async(l)), 0);
  assert_int_equal(fx_value(relock_latch_await_async(l, 0)), 1); /* never set: open */
  assert_int_equal(fx_value(relock_latch_try_set_count_async(l, 3)), 1);
  assert_int_equal(fx_value(relock_latch_try_set_count_async(l, 5)), 0);
  assert_int_equal(fx_raw_get(fx->redis, "done"), 3);
  relock_latch_t *lb = latch_of(fx->b, "done");
  relock_future_t *w = relock_latch_await_async(lb, fx_slack_ms(5000));
  assert_int_equal(relock_future_wait(w, 100), RELOCK_EPENDING);
  await_listeners(fx, CHANNEL, 1);
  assert_int_equal(fx_value(relock_latch_count_down_async(l)), 2);
  assert_int_equal(fx_value(relock_latch_count_down_async(l)), 1);
  assert_int_equal(fx_value(relock_latch_count_async(l)), 1);
  assert_int_equal(relock_future_wait(w, 100), RELOCK_EPENDING);
  assert_int_equal(fx_value(relock_latch_count_down_async(l)), 0);
  assert_int_equal(fx_value(w), 1);
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", "done", NULL), 0); /* deleted at zero */
  assert_int_equal(fx_value(relock_latch_count_down_async(l)), 0);   /* and stays open */
  relock_latch_free(lb);
  /* the name is braced whatever it holds */
  relock_latch_t *tagged = latch_of(fx->b, "a{b}");
  assert_int_equal(fx_value(relock_latch_try_set_count_async(tagged, 1)), 1);
  relock_future_t *t = relock_latch_await_async(tagged, fx_slack_ms(5000));
  await_listeners(fx, "redisson_countdownlatch__channel__{a{b}}", 1);
  relock_test_redis_cmd(fx->redis, NULL, 0, "DEL", "a{b}", NULL);
  relock_test_redis_cmd(fx->redis, NULL, 0, "PUBLISH", "redisson_countdownlatch__channel__{a{b}}", "0", NULL);
  assert_int_equal(fx_value(t), 1);
  relock_latch_free(tagged);
  relock_latch_free(l);
}

static void test_deadline_delete_and_blocking_calls(void **state) {
  fx_t *fx = *state;
  relock_latch_t *l = latch_of(fx->a, "done");
  int flag = -1;
  int64_t n = -1;
  assert_int_equal(relock_latch_try_set_count(l, 2, &flag), 0);
  assert_int_equal(flag, 1);
  assert_int_equal(fx_value(relock_latch_await_async(l, 0)), 0);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(relock_latch_await(l, 200, &flag), 0);
  assert_int_equal(flag, 0);
  double took = fx_ms_since(t0);
  assert_true(took >= 190 && took < fx_slack_ms(1000));
  relock_future_t *cancelled = relock_latch_await_async(l, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(cancelled, 50), RELOCK_EPENDING);
  assert_int_equal(relock_future_cancel(cancelled), 1);
  relock_future_release(cancelled);
  relock_latch_t *lb = latch_of(fx->b, "done");
  relock_future_t *w = relock_latch_await_async(lb, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(w, 100), RELOCK_EPENDING);
  assert_int_equal(relock_latch_count_down(l, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(relock_latch_count(l, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(fx_value(relock_latch_delete_async(l)), 1); /* opens it */
  assert_int_equal(fx_value(w), 1);
  assert_int_equal(fx_value(relock_latch_delete_async(l)), 0);
  /* the blocking delete, which opens it for an awaiter too */
  assert_int_equal(relock_latch_try_set_count(l, 3, &flag), 0);
  assert_int_equal(flag, 1);
  w = relock_latch_await_async(lb, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(w, 50), RELOCK_EPENDING);
  assert_int_equal(relock_latch_delete(l, &flag), 0);
  assert_int_equal(flag, 1);
  assert_int_equal(fx_value(w), 1);
  assert_int_equal(relock_latch_delete(l, &flag), 0);
  assert_int_equal(flag, 0);
  assert_int_equal(relock_latch_delete(l, NULL), 0);
  assert_int_equal(relock_latch_delete(NULL, &flag), RELOCK_EINVAL);
  relock_latch_free(lb);
  assert_string_equal(relock_latch_name(l), "done");
  /* bad input */
  FX_REFUSED(relock_latch_try_set_count_async(l, 0), "count must be >= 1");
  FX_REFUSED(relock_latch_await_async(l, -5), "wait_ms must be");
  FX_REFUSED(relock_latch_count_down_async(NULL), "latch is NULL");
  FX_REFUSED(relock_latch_await_async(NULL, 0), "latch is NULL");
  assert_int_equal(relock_latch_await(NULL, 0, NULL), RELOCK_EINVAL);
  relock_error_t err;
  assert_null(relock_latch_new(fx->a, "", &err));
  assert_int_equal(err.code, RELOCK_EINVAL);
  relock_latch_free(NULL);
  relock_test_redis_cmd(fx->redis, NULL, 0, "SET", "done", "not a number", NULL);
  assert_int_equal(fx_error(relock_latch_count_down_async(l), NULL, 0), RELOCK_ESERVER);
  relock_latch_free(l);
}

static void test_repeated_count_down_counts_once(void **state) {
  fx_t *fx = *state;
  const relock__script_t *update = &relock__scripts[RELOCK__SCRIPT_LATCH_UPDATE];
  relock_test_redis_cmd(fx->redis, NULL, 0, "SET", "done", "3", NULL);
  char buf[64];
  for (int i = 0; i < 3; i++) {
    assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "EVAL", update->body, "3", "done", CHANNEL,
                                           "latch-1", "down", "0", "10000", "PUBLISH", NULL),
                     0);
    assert_string_equal(buf, ":2\r\n");
  }
  assert_int_equal(fx_raw_get(fx->redis, "done"), 2);
}

/* -- 8 awaiting processes ---------------------------------------------------------*/

#define PROCS 8

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A child: awaits the latch, then records when it got through. */
static void awaiting_child(const relock_options_t *cfg) {
  relock_client_t *c = relock_client_new(NULL, cfg, NULL);
  relock_latch_t *l = c != NULL ? relock_latch_new(c, "done", NULL) : NULL;
  if (l == NULL)
    _exit(9);
  int open = 0;
  if (relock_latch_await(l, 30000, &open) != 0 || !open)
    _exit(10);
  uint64_t through = mono_ns();
  relock_future_t *f = relock_client_commandf_async(c, "RPUSH through %llu", (unsigned long long)through);
  if (relock_future_wait(f, 10000) != 0)
    _exit(11);
  relock_future_release(f);
  relock_latch_free(l);
  relock_client_free(c);
  _exit(0);
}

static void test_last_count_down_releases_8_processes_together(void **state) {
  fx_t *fx = *state;
  relock_latch_t *l = latch_of(fx->a, "done");
  assert_int_equal(fx_value(relock_latch_try_set_count_async(l, 2)), 1);
  pid_t pids[PROCS];
  for (int i = 0; i < PROCS; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0)
      awaiting_child(fx->cfg);
  }
  await_listeners(fx, CHANNEL, PROCS);
  assert_int_equal(fx_value(relock_latch_count_down_async(l)), 1);
  usleep(100000);
  assert_int_equal(fx_raw_int(fx->redis, "LLEN", "through", NULL), 0); /* one more to go */
  uint64_t t0 = mono_ns();
  assert_int_equal(fx_value(relock_latch_count_down_async(l)), 0);
  for (int i = 0; i < PROCS; i++) {
    int status = 0;
    assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  double last = 0;
  for (int i = 0; i < PROCS; i++) {
    char buf[64], index[16];
    snprintf(index, sizeof index, "%d", i);
    assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "LINDEX", "through", index, NULL), 0);
    double ms = ((double)strtoull(strchr(buf, '\n') + 1, NULL, 10) - (double)t0) / 1e6;
    if (ms > last)
      last = ms;
  }
  printf("# the last of %d awaiting processes got through %.2f ms after the last count-down was sent\n", PROCS,
         last);
  if (last >= fx_slack_ms(50))
    fail_msg("the last awaiter got through %.1f ms after the last count-down (bound 50)", last);
  relock_latch_free(l);
}

#define T(name) cmocka_unit_test_setup_teardown(name, fx_pair_setup, fx_pair_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_layout_is_redissons),
      T(test_deadline_delete_and_blocking_calls),
      T(test_repeated_count_down_counts_once),
      T(test_last_count_down_releases_8_processes_together),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, NULL, NULL);
}
