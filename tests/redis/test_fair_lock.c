/* The fair lock against a real redis-server: Redisson's queue layout, FIFO
 * order across processes, a release waking the head only, waiters that give
 * up or die leaving the queue, single tries never queueing. (What every
 * exclusive kind shares is in test_lock_family.c.) */
#include <config.h>

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/client_fixture.h"
#include "objects/lock_impl.h"

#define QUEUE "redisson_lock_queue:{fair}"
#define TIMEOUTS "redisson_lock_timeout:{fair}"

typedef fx_pair_t fx_t;

static relock_lock_t *fair_of(relock_client_t *c) {
  relock_lock_t *l = relock_fair_lock_new(c, "fair", NULL);
  assert_non_null(l);
  return l;
}

#define ACQUIRE(l, owner, wait, lease) fx_value(relock_lock_lock_async((l), (owner), (wait), (lease)))
#define RELEASE(l, owner) fx_value(relock_lock_unlock_async((l), (owner)))

typedef struct probe {
  fx_t *fx;
  long long want;
} probe_t;

static int queue_is(void *arg) {
  probe_t *p = arg;
  return fx_raw_int(p->fx->redis, "LLEN", QUEUE, NULL) == p->want;
}

/* Runs c's loop until the queue in Redis has n waiters (2 s at most). */
static void await_queue(fx_t *fx, relock_client_t *c, long long n) {
  probe_t p = {fx, n};
  if (!fx_run_until(c->loop, queue_is, &p, fx_slack_ms(2000)))
    fail_msg("the queue never had %lld waiters (has %lld)", n, fx_raw_int(fx->redis, "LLEN", QUEUE, NULL));
}

/* The queue's i-th field (0 first), in buf. */
static const char *queue_at(fx_t *fx, int i, char *buf, size_t size) {
  char index[16];
  snprintf(index, sizeof index, "%d", i);
  assert_int_equal(relock_test_redis_cmd(fx->redis, buf, size, "LINDEX", QUEUE, index, NULL), 0);
  if (buf[0] != '$' || buf[1] == '-')
    return "";
  char *s = strchr(buf, '\n') + 1;
  s[strcspn(s, "\r")] = '\0';
  return s;
}

/* -- the layout and single tries ---------------------------------------------------*/

static void test_queue_layout_is_redissons(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = fair_of(fx->a), *lb = fair_of(fx->b);
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1);
  assert_int_equal(ACQUIRE(lb, 2, 0, RELOCK_INFINITE), 0); /* a single try never queues */
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", QUEUE, NULL), 0);
  relock_future_t *w2 = relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE);
  await_queue(fx, fx->b, 1);
  relock_future_t *w3 = relock_lock_lock_async(lb, 3, 20000, RELOCK_INFINITE);
  await_queue(fx, fx->b, 2);
  char field[RELOCK__FIELD_MAX], buf[256];
  relock__lock_field(lb, 2, field);
  assert_string_equal(queue_at(fx, 0, buf, sizeof buf), field);
  relock__lock_field(lb, 3, field);
  assert_string_equal(queue_at(fx, 1, buf, sizeof buf), field);
  assert_int_equal(fx_raw_int(fx->redis, "ZCARD", TIMEOUTS, NULL), 2);

  /* the release tells the head on its own channel: "0" */
  fx_keyevents_t heard = {0};
  char channel[256];
  relock__lock_field(lb, 2, field);
  snprintf(channel, sizeof channel, "redisson_lock__channel:{fair}:%s", field);
  relock_subscription_t *sub = NULL;
  relock_future_t *f = relock_client_subscribe_async(fx->a, channel, strlen(channel), fx_on_keyevent_, &heard, &sub);
  assert_int_equal(relock_future_wait(f, fx_slack_ms(5000)), 0);
  relock_future_release(f);
  assert_int_equal(RELEASE(la, 1), 1);
  assert_true(fx_keyevents_wait(fx->a, &heard, 1));
  assert_string_equal(heard.keys[0], "0");
  assert_int_equal(fx_value(w2), 1);
  assert_int_equal(fx_raw_int(fx->redis, "LLEN", QUEUE, NULL), 1); /* the head left with the lock */
  assert_int_equal(RELEASE(lb, 2), 1);
  assert_int_equal(fx_value(w3), 1);
  assert_int_equal(RELEASE(lb, 3), 1);
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", QUEUE, NULL), 0);
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", TIMEOUTS, NULL), 0);
  relock_subscription_free(sub);
  relock_lock_free(la);
  relock_lock_free(lb);
}

/* -- waking the head only ---------------------------------------------------------*/

typedef struct tries {
  int n;
} tries_t;

static void count_try(relock_lock_t *l, uint64_t owner, int64_t ttl_ms, void *arg) {
  (void)l, (void)owner, (void)ttl_ms;
  ((tries_t *)arg)->n++;
}

static void test_release_wakes_the_head_only(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = fair_of(fx->a), *lb = fair_of(fx->b), *lc = fair_of(fx->a);
  tries_t second = {0};
  assert_int_equal(relock_lock_on_wait(lc, count_try, &second), 0);
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1);
  relock_future_t *head = relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE);
  await_queue(fx, fx->b, 1);
  relock_future_t *next = relock_lock_lock_async(lc, 3, 20000, RELOCK_INFINITE);
  await_queue(fx, fx->a, 2);
  relock_future_wait(next, 100); /* subscribed, waiting */
  int before = second.n;
  uint64_t t0 = relock__now_ns();
  assert_int_equal(RELEASE(la, 1), 1);
  assert_int_equal(fx_value(head), 1);
  double took = fx_ms_since(t0);
  if (took >= fx_slack_ms(100))
    fail_msg("the head took %.1f ms to get the lock", took);
  assert_int_equal(relock_future_wait(next, 200), RELOCK_EPENDING);
  assert_int_equal(second.n, before); /* the waiter behind did not even try */
  assert_int_equal(RELEASE(lb, 2), 1);
  assert_int_equal(fx_value(next), 1);
  assert_int_equal(RELEASE(lc, 3), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
  relock_lock_free(lc);
}

/* -- giving up ------------------------------------------------------------------*/

static void test_cancelled_and_timed_out_waiters_leave_at_once(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = fair_of(fx->a), *lb = fair_of(fx->b);
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1);
  relock_future_t *first = relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE);
  await_queue(fx, fx->b, 1);
  relock_future_t *timed = relock_lock_lock_async(lb, 3, 400, RELOCK_INFINITE);
  await_queue(fx, fx->b, 2);
  relock_future_t *last = relock_lock_lock_async(lb, 4, 20000, RELOCK_INFINITE);
  await_queue(fx, fx->b, 3);
  assert_int_equal(relock_future_cancel(first), 1);
  relock_future_release(first);
  assert_int_equal(fx_value(timed), 0); /* its deadline */
  await_queue(fx, fx->b, 1);             /* both left */
  char field[RELOCK__FIELD_MAX], buf[256];
  relock__lock_field(lb, 4, field);
  assert_string_equal(queue_at(fx, 0, buf, sizeof buf), field);
  assert_int_equal(fx_raw_int(fx->redis, "ZCARD", TIMEOUTS, NULL), 1);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(RELEASE(la, 1), 1);
  assert_int_equal(fx_value(last), 1);
  double took = fx_ms_since(t0);
  if (took >= fx_slack_ms(100))
    fail_msg("the waiter left at the head took %.1f ms to get the lock", took);
  assert_int_equal(RELEASE(lb, 4), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

/* The head gives up while the lock is free (its wake-up on the way): the
 * waiter behind is told at once, not after its timer. */
static void test_head_leaving_a_free_lock_wakes_the_next(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = fair_of(fx->a), *lb = fair_of(fx->b);
  /* a queue as a dead Java waiter leaves it, far from stale */
  relock_test_redis_cmd(fx->redis, NULL, 0, "RPUSH", QUEUE, "java-uuid:77", NULL);
  relock_test_redis_cmd(fx->redis, NULL, 0, "ZADD", TIMEOUTS, "99999999999999", "java-uuid:77", NULL);
  relock_future_t *w = relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE);
  await_queue(fx, fx->b, 2);
  assert_int_equal(relock_future_wait(w, 200), RELOCK_EPENDING); /* behind the Java waiter */
  /* the Java waiter gives up (Redisson's acquireFailed does what ours does) */
  relock__lock_call_t call;
  char field[RELOCK__FIELD_MAX];
  relock__lock_call_init(&call, la, 0, field);
  call.field = "java-uuid:77";
  call.field_len = strlen(call.field);
  relock_future_t *left = la->kind->leave_queue(&call);
  assert_int_equal(relock_future_wait(left, fx_slack_ms(5000)), 0);
  assert_int_equal(relock_future_reply(left)->integer, 1);
  relock_future_release(left);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(fx_value(w), 1);
  double took = fx_ms_since(t0);
  if (took >= fx_slack_ms(100))
    fail_msg("the new head took %.1f ms to hear", took);
  assert_int_equal(RELEASE(lb, 2), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

/* -- across processes -------------------------------------------------------------*/

/* A child: its own client, waits for the fair lock, appends its index to
 * "order", releases. */
static void queued_child(const relock_options_t *cfg, int index) {
  relock_client_t *c = relock_client_new(NULL, cfg, NULL);
  relock_lock_t *l = c != NULL ? relock_fair_lock_new(c, "fair", NULL) : NULL;
  if (l == NULL)
    _exit(9);
  if (relock_lock_lock(l, RELOCK_INFINITE) != 0)
    _exit(10);
  relock_future_t *f = relock_client_commandf_async(c, "RPUSH order %d", index);
  if (relock_future_wait(f, 10000) != 0)
    _exit(11);
  relock_future_release(f);
  if (relock_lock_unlock(l) != 0)
    _exit(12);
  relock_lock_free(l);
  relock_client_free(c);
  _exit(0);
}

static void reap(pid_t pid) {
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_fifo_across_8_processes(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = fair_of(fx->a);
  assert_int_equal(ACQUIRE(la, 1, 0, 30000), 1);
  enum { PROCS = 8 };
  pid_t pids[PROCS];
  for (int i = 0; i < PROCS; i++) { /* each queued before the next starts: a known order */
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0)
      queued_child(fx->cfg, i);
    await_queue(fx, fx->a, i + 1);
  }
  assert_int_equal(RELEASE(la, 1), 1);
  for (int i = 0; i < PROCS; i++)
    reap(pids[i]);
  char buf[256];
  assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "LRANGE", "order", "0", "-1", NULL), 0);
  assert_string_equal(buf, "*8\r\n$1\r\n0\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n$1\r\n5\r\n$1\r\n6\r\n$1\r\n7\r\n");
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", QUEUE, NULL), 0);
  relock_lock_free(la);
}

/* A dead head's deadline is Redisson's: the holder's TTL at its last try
 * plus the wait timeout (Java waiters chain theirs from it). The holder's
 * 3 s lease and the 1.5 s wait timeout: the queue moves on within 4.5 s
 * of the holder's acquisition. */
static void test_dead_waiter_leaves_within_the_lease_and_the_wait_timeout(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_FAIR_LOCK_WAIT_TIMEOUT, 1500);
  fx_pair_clients(fx);
  relock_lock_t *la = fair_of(fx->a);
  assert_int_equal(ACQUIRE(la, 1, 0, 3000), 1);
  pid_t dead = fork();
  assert_true(dead >= 0);
  if (dead == 0)
    queued_child(fx->cfg, 0);
  await_queue(fx, fx->a, 1);
  pid_t live = fork();
  assert_true(live >= 0);
  if (live == 0)
    queued_child(fx->cfg, 1);
  await_queue(fx, fx->a, 2);
  kill(dead, SIGKILL);
  uint64_t killed = relock__now_ns();
  int status;
  waitpid(dead, &status, 0);
  assert_int_equal(RELEASE(la, 1), 1); /* the dead head is told: nobody hears */
  reap(live);
  double took = fx_ms_since(killed);
  if (took >= fx_slack_ms(3000 + 1500 + 300))
    fail_msg("the queue moved on %.0f ms after its head died (lease 3000 ms, wait timeout 1500 ms)", took);
  printf("# the queue moved on %.0f ms after its head died (lease 3000 ms, wait timeout 1500 ms)\n", took);
  char buf[64];
  assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "LRANGE", "order", "0", "-1", NULL), 0);
  assert_string_equal(buf, "*1\r\n$1\r\n1\r\n");
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", QUEUE, NULL), 0);
  relock_lock_free(la);
}

/* A live waiter keeps its place far longer than the wait timeout. */
static void test_live_waiter_keeps_its_place(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_FAIR_LOCK_WAIT_TIMEOUT, 300);
  fx_pair_clients(fx);
  relock_lock_t *la = fair_of(fx->a), *lb = fair_of(fx->b);
  assert_int_equal(ACQUIRE(la, 1, 0, 30000), 1);
  relock_future_t *first = relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE);
  await_queue(fx, fx->b, 1);
  relock_future_t *second = relock_lock_lock_async(lb, 3, 20000, RELOCK_INFINITE);
  await_queue(fx, fx->b, 2);
  assert_int_equal(relock_future_wait(first, 1200), RELOCK_EPENDING); /* 4 wait timeouts */
  char field[RELOCK__FIELD_MAX], buf[256];
  relock__lock_field(lb, 2, field);
  assert_string_equal(queue_at(fx, 0, buf, sizeof buf), field);
  assert_int_equal(RELEASE(la, 1), 1);
  assert_int_equal(fx_value(first), 1);
  assert_int_equal(relock_future_wait(second, 100), RELOCK_EPENDING);
  assert_int_equal(RELEASE(lb, 2), 1);
  assert_int_equal(fx_value(second), 1);
  assert_int_equal(RELEASE(lb, 3), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

static void test_force_release_wakes_the_head(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = fair_of(fx->a), *lb = fair_of(fx->b);
  assert_int_equal(ACQUIRE(la, 1, 0, 30000), 1);
  relock_future_t *w = relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE);
  await_queue(fx, fx->b, 1);
  relock_future_wait(w, 100);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(fx_value(relock_lock_force_unlock_async(la)), 1);
  assert_int_equal(fx_value(w), 1);
  double took = fx_ms_since(t0);
  if (took >= fx_slack_ms(100))
    fail_msg("the head took %.1f ms after the force release", took);
  assert_int_equal(RELEASE(lb, 2), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

/* -- a server without a command the kind needs ---------------------------------
 * Redis before 6.0.6 has no LPOS, which a fair lock's waiter needs (README,
 * "Servers"); a server with LPOS renamed away is such a server. The waiter
 * fails at once with RELOCK_ESERVER in words that say the server lacks a
 * command and where to read what each kind needs - never a wait that hangs,
 * nor a lock wrongly taken; the holder is untouched and releases. */
static int without_lpos_setup(void **state) {
  static const char *const args[] = {"--rename-command", "LPOS", "", NULL};
  relock_test_redis_opts_t opts = {.extra_args = args};
  return fx_pair_start(state, &opts, 1);
}

static void test_server_without_lpos(void **state) {
  fx_t *fx = *state;
  relock_lock_t *la = fair_of(fx->a), *lb = fair_of(fx->b);
  assert_int_equal(ACQUIRE(la, 1, 0, 30000), 1);
  char msg[512];
  uint64_t t0 = relock__now_ns();
  int r = fx_error(relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE), msg, sizeof msg);
  /* "Unknown Redis command called from script" (Redis 7+), "... from Lua
   * script" (Redis 6), "Unknown command called from script" (Valkey), and
   * what it means */
  if (r != RELOCK_ESERVER || strstr(msg, "command called from") == NULL ||
      strstr(msg, "the server lacks a command") == NULL)
    fail_msg("want RELOCK_ESERVER naming the missing command, got %s: %s", relock_err_name(r), msg);
  assert_true(fx_ms_since(t0) < fx_slack_ms(2000));
  printf("# %s\n", msg);
  assert_int_equal(RELEASE(la, 1), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

#define T(name) cmocka_unit_test_setup_teardown(name, fx_pair_server_setup, fx_pair_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_queue_layout_is_redissons),
      T(test_release_wakes_the_head_only),
      T(test_cancelled_and_timed_out_waiters_leave_at_once),
      T(test_head_leaving_a_free_lock_wakes_the_next),
      T(test_fifo_across_8_processes),
      T(test_dead_waiter_leaves_within_the_lease_and_the_wait_timeout),
      T(test_live_waiter_keeps_its_place),
      T(test_force_release_wakes_the_head),
      cmocka_unit_test_setup_teardown(test_server_without_lpos, without_lpos_setup, fx_pair_teardown),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, NULL, NULL);
}
