/* Integration tests of the reentrant lock against a real redis-server:
 * acquire/release and reentrancy, leases and the watchdog, waiting (pub/sub,
 * deadlines, cancellation, the races), lost locks, batching of renewals,
 * mutual exclusion across processes, the blocking API. */
#include <config.h>

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/client_fixture.h"
#include "objects/lock_impl.h"
#include "objects/wait_queue.h"

typedef fx_pair_t fx_t;

static int setup_aof(void **state) {
  relock_test_redis_opts_t opts = {.aof = 1};
  return fx_pair_start(state, &opts, 0);
}

static relock_lock_t *lock_of(relock_client_t *c, const char *name) {
  relock_error_t err = {-1, ""};
  relock_lock_t *l = relock_lock_new(c, name, &err);
  assert_non_null(l);
  assert_int_equal(err.code, 0);
  return l;
}

/* Waits for a future that must succeed, returns its value, releases it. */
static int64_t value_of(relock_future_t *f) {
  assert_non_null(f);
  int r = relock_future_wait(f, fx_slack_ms(10000));
  if (r != 0)
    fail_msg("operation failed: %s (%s)", relock_future_message(f), relock_err_name(r));
  int64_t v = relock_future_value_type(f) == RELOCK_VALUE_BOOL ? relock_future_bool(f) : relock_future_int(f);
  relock_future_release(f);
  return v;
}

/* Waits for a future that must fail; returns its error, keeps its message. */
static int error_of(relock_future_t *f, char *msg, size_t size) {
  assert_non_null(f);
  int r = relock_future_wait(f, fx_slack_ms(10000));
  assert_int_not_equal(r, RELOCK_EPENDING);
  if (msg != NULL)
    snprintf(msg, size, "%s", relock_future_message(f));
  relock_future_release(f);
  return r;
}

#define ACQUIRE(l, owner, wait, lease) value_of(relock_lock_lock_async((l), (owner), (wait), (lease)))
#define RELEASE(l, owner) value_of(relock_lock_unlock_async((l), (owner)))

static long long raw_count(fx_t *fx, const char *name, relock_lock_t *l, uint64_t owner) {
  char field[RELOCK__FIELD_MAX], buf[128];
  relock__lock_field(l, owner, field);
  assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "HGET", name, field, NULL), 0);
  return buf[0] == '$' && buf[1] != '-' ? atoll(strchr(buf, '\n') + 1) : 0;
}

static long long evalsha_calls(fx_t *fx) {
  char buf[8192];
  assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "INFO", "commandstats", NULL), 0);
  long long n = 0;
  const char *p = strstr(buf, "cmdstat_evalsha:calls=");
  if (p != NULL)
    n += atoll(p + strlen("cmdstat_evalsha:calls="));
  p = strstr(buf, "cmdstat_eval:calls=");
  if (p != NULL)
    n += atoll(p + strlen("cmdstat_eval:calls="));
  return n;
}

/* -- acquire, release, reentrancy -------------------------------------------*/

static void test_acquire_release_reentrant(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx->a, "res");
  assert_string_equal(relock_lock_name(l), "res");
  assert_int_equal(ACQUIRE(l, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(ACQUIRE(l, 1, 0, RELOCK_INFINITE), 1); /* reentrant */
  assert_int_equal(raw_count(fx, "res", l, 1), 2);
  assert_int_equal(value_of(relock_lock_hold_count_async(l, 1)), 2);
  assert_int_equal(value_of(relock_lock_is_held_by_thread_async(l, 1)), 1);
  assert_int_equal(value_of(relock_lock_is_held_by_thread_async(l, 2)), 0);
  assert_int_equal(ACQUIRE(l, 2, 0, RELOCK_INFINITE), 0); /* another owner: busy */
  assert_int_equal(RELEASE(l, 1), 0);                     /* one hold remains */
  assert_int_equal(raw_count(fx, "res", l, 1), 1);
  assert_int_equal(RELEASE(l, 1), 1); /* free now */
  assert_int_equal(value_of(relock_lock_is_locked_async(l)), 0);
  assert_int_equal(value_of(relock_lock_remaining_ttl_async(l)), -2);
  assert_int_equal(ACQUIRE(l, 2, 0, 5000), 1);
  int64_t ttl = value_of(relock_lock_remaining_ttl_async(l));
  assert_true(ttl > 4000 && ttl <= 5000);
  assert_int_equal(RELEASE(l, 2), 1);
  relock_lock_free(l);
}

static void test_release_by_non_owner(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx->a, "res");
  char msg[256];
  assert_int_equal(error_of(relock_lock_unlock_async(l, 9), msg, sizeof msg), RELOCK_ENOTOWNER);
  assert_non_null(strstr(msg, "res"));
  char field[RELOCK__FIELD_MAX];
  relock__lock_field(l, 9, field);
  assert_non_null(strstr(msg, field));
  assert_int_equal(ACQUIRE(l, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(error_of(relock_lock_unlock_async(l, 2), NULL, 0), RELOCK_ENOTOWNER);
  relock_lock_t *other = lock_of(fx->b, "res"); /* another client, same owner number */
  assert_int_equal(error_of(relock_lock_unlock_async(other, 1), NULL, 0), RELOCK_ENOTOWNER);
  assert_int_equal(RELEASE(l, 1), 1);
  relock_lock_free(other);
  relock_lock_free(l);
}

static void test_invalid_arguments(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_error_t err = {0, ""};
  assert_null(relock_lock_new(fx->a, "", &err));
  assert_int_equal(err.code, RELOCK_EINVAL);
  assert_string_equal(err.message, "the lock name is empty");
  assert_null(relock_lock_new(NULL, "x", &err));
  assert_int_equal(err.code, RELOCK_EINVAL);
  assert_string_equal(err.message, "client is NULL");
  assert_null(relock_lock_new(fx->a, NULL, NULL));
  relock_lock_t *l = lock_of(fx->a, "x");
  FX_REFUSED(relock_lock_lock_async(l, 1, -2, RELOCK_INFINITE), "wait_ms must be >= 0, or RELOCK_INFINITE (got -2)");
  FX_REFUSED(relock_lock_lock_async(l, 1, 0, 0), "lease_ms must be 10-");
  FX_REFUSED(relock_lock_lock_async(l, 1, 0, -5), "(got -5)");
  FX_REFUSED(relock_lock_lock_async(NULL, 1, 0, 100), "lock is NULL");
  FX_REFUSED(relock_lock_unlock_async(NULL, 1), "lock is NULL");
  assert_int_equal(relock_lock_try_lock(l, -3, RELOCK_INFINITE, NULL), RELOCK_EINVAL);
  relock_lock_free(l);
}

static void test_wrong_type_is_another_kind(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_test_redis_cmd(fx->redis, NULL, 0, "RPUSH", "listy", "a", NULL);
  relock_lock_t *l = lock_of(fx->a, "listy");
  char msg[256];
  assert_int_equal(error_of(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE), msg, sizeof msg), RELOCK_EWRONGKIND);
  assert_non_null(strstr(msg, "'listy' holds a Redis list, not a lock"));
  relock_lock_free(l);
}

/* -- leases and the watchdog ------------------------------------------------*/

static int key_gone(void *arg) {
  fx_t *fx = arg;
  return fx_raw_int(fx->redis, "EXISTS", "res", NULL) == 0;
}

static void test_fixed_lease_expires_unrenewed(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 300);
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx->a, "res");
  uint64_t t0 = relock__now_ns();
  assert_int_equal(ACQUIRE(l, 1, 0, 400), 1);
  assert_true(fx_run_until(fx->a->loop, key_gone, fx, 3000));
  assert_true(fx_ms_since(t0) >= 390.0); /* Redis's clock, not ours: allow 10 ms */
  assert_int_equal(fx->a->renewal.batches, 0); /* never renewed */
  assert_int_equal(error_of(relock_lock_unlock_async(l, 1), NULL, 0), RELOCK_ENOTOWNER);
  relock_lock_free(l);
}

typedef struct {
  fx_t *fx;
  relock_client_t *c;
  uint64_t until_ns;
  int checks;
  int gone;
} watch_t;

static int watch_held(void *arg) {
  watch_t *w = arg;
  if (fx_raw_int(w->fx->redis, "EXISTS", "res", NULL) != 1)
    w->gone++;
  w->checks++;
  return relock__now_ns() >= w->until_ns;
}

static void test_watchdog_keeps_lock_ten_times_its_timeout(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 300);
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx->a, "res");
  assert_int_equal(ACQUIRE(l, 1, 0, RELOCK_INFINITE), 1);
  watch_t w = {fx, fx->a, relock__now_ns() + 3000 * 1000000ull, 0, 0};
  assert_true(fx_run_until(fx->a->loop, watch_held, &w, 10000));
  assert_int_equal(w.gone, 0);
  assert_true(w.checks > 10);
  assert_true(fx->a->renewal.cycles >= 20); /* every 100 ms */
  int64_t ttl = value_of(relock_lock_remaining_ttl_async(l));
  assert_true(ttl > 0 && ttl <= 300);
  assert_int_equal(RELEASE(l, 1), 1);
  relock_lock_free(l);
}

static void test_renewal_stops_at_release(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 300);
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx->a, "res");
  assert_int_equal(ACQUIRE(l, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(ACQUIRE(l, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(RELEASE(l, 1), 0);
  assert_true(relock__timer_pending(&fx->a->renewal.cycle)); /* one hold left: still renewed */
  assert_int_equal(RELEASE(l, 1), 1);
  assert_false(relock__timer_pending(&fx->a->renewal.cycle)); /* stopped at once */
  uint64_t batches = fx->a->renewal.batches;
  watch_t w = {fx, fx->a, relock__now_ns() + 500 * 1000000ull, 0, 0};
  fx_run_until(fx->a->loop, watch_held, &w, 2000);
  assert_int_equal(fx->a->renewal.batches, batches); /* no renewal after unlock */
  assert_false(ev_is_active(&fx->a->wheel.watcher) && fx->a->wheel.count == 0);
  relock_lock_free(l);
}

static void test_kill9_holder_frees_within_watchdog_timeout(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 500);
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  pid_t pid = fork();
  if (pid == 0) {
    /* Embedded, on a loop of the child's own (the parent's epoll set is
     * shared across fork): the child runs the loop itself. */
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    relock_client_t *c = loop != NULL ? relock_client_new(loop, fx->cfg, NULL) : NULL;
    relock_lock_t *l = relock_lock_new(c, "res", NULL);
    int ok = relock_lock_lock(l, RELOCK_INFINITE) == 0;
    (void)!write(ready[1], &ok, sizeof ok);
    for (;;)
      ev_run(loop, EVRUN_ONCE); /* renewing until killed */
  }
  int ok = 0;
  assert_int_equal(read(ready[0], &ok, sizeof ok), (ssize_t)sizeof ok);
  assert_int_equal(ok, 1);
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx->a, "res");
  assert_int_equal(ACQUIRE(l, 1, 0, RELOCK_INFINITE), 0); /* held by the child */
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(ACQUIRE(l, 1, 5000, RELOCK_INFINITE), 1);
  assert_true(fx_ms_since(t0) < fx_slack_ms(500 + 200)); /* within the watchdog timeout */
  assert_int_equal(RELEASE(l, 1), 1);
  relock_lock_free(l);
  close(ready[0]);
  close(ready[1]);
}

/* -- waiting ----------------------------------------------------------------*/

static void test_try_once_and_deadline(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx->a, "res"), *lb = lock_of(fx->b, "res");
  assert_int_equal(ACQUIRE(la, 1, 0, RELOCK_INFINITE), 1);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(ACQUIRE(lb, 1, 0, RELOCK_INFINITE), 0);
  assert_true(fx_ms_since(t0) < fx_slack_ms(100)); /* one round trip, no waiting */
  t0 = relock__now_ns();
  assert_int_equal(ACQUIRE(lb, 1, 300, RELOCK_INFINITE), 0);
  double waited = fx_ms_since(t0);
  assert_true(waited >= 300.0);
  assert_true(waited < fx_slack_ms(300 + 100)); /* the deadline, within a tick and a round trip */
  assert_int_equal(RELEASE(la, 1), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

static void test_waiter_acquires_a_round_trip_after_release(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx->a, "res"), *lb = lock_of(fx->b, "res");
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1); /* a long lease: no TTL wake-up */
  relock_future_t *wait = relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(wait, 200), RELOCK_EPENDING); /* waiting, subscribed */
  uint64_t t0 = relock__now_ns();
  assert_int_equal(RELEASE(la, 1), 1);
  assert_int_equal(relock_future_wait(wait, 5000), 0);
  double latency = fx_ms_since(t0);
  assert_int_equal(relock_future_bool(wait), 1);
  relock_future_release(wait);
  assert_true(latency < fx_slack_ms(100)); /* a round trip or two, not the 10 s lease */
  assert_int_equal(RELEASE(lb, 2), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

static void test_force_release_wakes_waiter(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx->a, "res"), *lb = lock_of(fx->b, "res");
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1);
  relock_future_t *wait = relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(wait, 200), RELOCK_EPENDING);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(value_of(relock_lock_force_unlock_async(la)), 1);
  assert_int_equal(relock_future_wait(wait, 5000), 0);
  assert_true(fx_ms_since(t0) < fx_slack_ms(100));
  relock_future_release(wait);
  assert_int_equal(value_of(relock_lock_force_unlock_async(la)), 1); /* b's hold */
  assert_int_equal(value_of(relock_lock_force_unlock_async(la)), 0); /* nothing left */
  relock_lock_free(la);
  relock_lock_free(lb);
}

/* -- the wait callback -------------------------------------------------------*/

typedef struct {
  int calls;
  uint64_t owner;
  int64_t ttl_ms;
  relock_lock_t *lock;
  relock_future_t *cancel; /* cancelled from the callback on call number cancel_at */
  int cancel_at;
} waited_t;

static void on_wait(relock_lock_t *lock, uint64_t owner, int64_t ttl_ms, void *arg) {
  waited_t *w = arg;
  w->calls++;
  w->owner = owner;
  w->ttl_ms = ttl_ms;
  w->lock = lock;
  if (w->cancel != NULL && w->calls == w->cancel_at)
    relock_future_cancel(w->cancel);
}

static int called_twice(void *arg) { return ((waited_t *)arg)->calls >= 2; }

static void test_wait_callback_sees_each_try_that_finds_it_held(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx->a, "res"), *lb = lock_of(fx->b, "res");
  waited_t w = {0};
  assert_int_equal(relock_lock_on_wait(NULL, on_wait, &w), RELOCK_EINVAL);
  assert_int_equal(relock_lock_on_wait(lb, on_wait, &w), 0);
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1);
  assert_int_equal(ACQUIRE(lb, 2, 0, RELOCK_INFINITE), 0); /* one try: one call */
  assert_int_equal(w.calls, 1);
  assert_int_equal(w.owner, 2);
  assert_ptr_equal(w.lock, lb);
  assert_true(w.ttl_ms > 9000 && w.ttl_ms <= 10000); /* the holder's lease left */

  /* A wait: the first try, the try once subscribed, one per wake-up. */
  w.calls = 0;
  relock_future_t *wait = relock_lock_lock_async(lb, 3, 20000, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(wait, 300), RELOCK_EPENDING);
  assert_int_equal(w.calls, 2);
  assert_int_equal(w.owner, 3);
  fx_raw_int(fx->redis, "PUBLISH", "redisson_lock__channel:{res}", "1", NULL); /* wakes every waiter */
  assert_int_equal(relock_future_wait(wait, 300), RELOCK_EPENDING);
  assert_int_equal(w.calls, 3);
  assert_int_equal(RELEASE(la, 1), 1);
  assert_int_equal(relock_future_wait(wait, 5000), 0);
  assert_int_equal(relock_future_bool(wait), 1);
  relock_future_release(wait);
  assert_int_equal(w.calls, 3); /* the try that took it is no wait */

  /* The callback may cancel the acquisition it reports on. The channel is
   * still heard (the queue lingers): the first try's answer stands, so it
   * waits after one try, and is cancelled at its next. */
  w.calls = 0;
  w.cancel_at = 2;
  w.cancel = relock_lock_lock_async(lb, 4, RELOCK_INFINITE, RELOCK_INFINITE); /* owner 3 holds it */
  assert_int_equal(relock_future_wait(w.cancel, 200), RELOCK_EPENDING);
  assert_int_equal(w.calls, 1);
  fx_raw_int(fx->redis, "PUBLISH", "redisson_lock__channel:{res}", "1", NULL); /* wakes every waiter */
  assert_true(fx_run_until(fx->b->loop, called_twice, &w, 2000));
  assert_int_equal(relock_future_state(w.cancel), RELOCK_FUTURE_CANCELLED);
  relock_future_release(w.cancel);
  w.cancel = NULL;
  assert_int_equal(w.calls, 2);

  assert_int_equal(relock_lock_on_wait(lb, NULL, NULL), 0); /* cleared */
  assert_int_equal(ACQUIRE(la, 5, 0, RELOCK_INFINITE), 0);
  assert_int_equal(ACQUIRE(lb, 5, 0, RELOCK_INFINITE), 0);
  assert_int_equal(w.calls, 2);
  assert_int_equal(RELEASE(lb, 3), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

static int no_channels(void *arg) { return relock__pubsub_channels(&((relock_client_t *)arg)->redis.pubsub) == 0; }

static void test_cancel_during_wait(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx->a, "res"), *lb = lock_of(fx->b, "res");
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1);
  relock_future_t *wait = relock_lock_lock_async(lb, 2, RELOCK_INFINITE, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(wait, 200), RELOCK_EPENDING);
  assert_int_equal(relock__pubsub_channels(&fx->b->redis.pubsub), 1);
  assert_int_equal(relock_future_cancel(wait), 1);
  assert_int_equal(relock_future_state(wait), RELOCK_FUTURE_CANCELLED);
  relock_future_release(wait);
  assert_int_equal(relock__pubsub_channels(&fx->b->redis.pubsub) <= 1, 1); /* unsubscribing */
  assert_int_equal(RELEASE(la, 1), 1);
  relock_future_release(FX_CMD(fx->b, "PING")); /* let b's loop run */
  assert_int_equal(value_of(relock_lock_is_locked_async(la)), 0); /* b did not take it */
  /* The UNSUBSCRIBE is answered on the subscriber connection, in no order
   * with the commands above (under valgrind it can come later). */
  assert_true(fx_run_until(fx->b->loop, no_channels, fx->b, 2000));
  relock_lock_free(la);
  relock_lock_free(lb);
}

static void test_cancel_races_a_successful_try(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx->a, "res");
  /* the lock is free: the try in flight will succeed on the server */
  relock_future_t *f = relock_lock_lock_async(l, 1, RELOCK_INFINITE, RELOCK_INFINITE);
  assert_int_equal(relock_future_cancel(f), 1);
  relock_future_release(f);
  /* the acquisition is given back, never left held (nor renewed) */
  assert_true(fx_run_until(fx->a->loop, key_gone, fx, 2000));
  assert_int_equal(fx->a->ledger.holds.count, 0);
  relock_lock_free(l);
}

static int joined_queue(void *arg) {
  relock_client_t *c = arg;
  return relock__pubsub_channels(&c->redis.pubsub) == 1;
}

static void test_unlock_between_try_and_subscribe_is_not_missed(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx->a, "res"), *lb = lock_of(fx->b, "res");
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1);
  /* b tries, is told "held", and starts subscribing: its subscriber
   * connection is not even connected yet */
  relock_future_t *wait = relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE);
  assert_true(fx_run_until(fx->b->loop, joined_queue, fx->b, 2000));
  assert_int_not_equal(fx->b->redis.pubsub.conn.state, RELOCK__CONN_READY);
  /* now a releases, on a's loop: b runs nothing meanwhile, so the unlock
   * message goes out before b's SUBSCRIBE */
  assert_int_equal(RELEASE(la, 1), 1);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(relock_future_wait(wait, 5000), 0);
  assert_int_equal(relock_future_bool(wait), 1);
  assert_true(fx_ms_since(t0) < fx_slack_ms(500)); /* not the 10 s lease */
  relock_future_release(wait);
  assert_int_equal(RELEASE(lb, 2), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

typedef struct {
  int done;
  int acquired;
} count_t;

static void count_acquired(relock_future_t *f, void *arg) {
  count_t *c = arg;
  c->done++;
  if (relock_future_error(f) == 0 && relock_future_bool(f))
    c->acquired++;
}

static int one_acquired(void *arg) { return ((count_t *)arg)->acquired >= 1; }

typedef struct {
  count_t *c;
  int n;
} want_t;

static int acquired_at_least(void *arg) {
  want_t *w = arg;
  return w->c->acquired >= w->n;
}

static void test_waiters_share_a_subscription_and_one_unlock_wakes_one(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx->a, "res"), *lb = lock_of(fx->b, "res");
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1);
  enum { N = 5 };
  count_t c = {0, 0};
  relock_future_t *waits[N];
  for (int i = 0; i < N; i++) {
    waits[i] = relock_lock_lock_async(lb, 10 + (uint64_t)i, 20000, 10000);
    relock_future_on_done(waits[i], count_acquired, &c);
  }
  relock_future_t *all = relock_future_all(waits, N, NULL);
  assert_int_equal(relock_future_wait(all, 300), RELOCK_EPENDING); /* all subscribed and waiting */
  assert_int_equal(relock__pubsub_channels(&fx->b->redis.pubsub), 1);
  char buf[256];
  relock_test_redis_cmd(fx->redis, buf, sizeof buf, "PUBSUB", "NUMSUB", "redisson_lock__channel:{res}", NULL);
  assert_non_null(strstr(buf, ":1\r\n")); /* one subscription for five waiters */

  /* the scripts are in Redis's cache already (a NOSCRIPT would count twice) */
  relock_lock_t *warm = lock_of(fx->a, "warm-up");
  assert_int_equal(ACQUIRE(warm, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(RELEASE(warm, 1), 1);
  relock_lock_free(warm);
  long long before = evalsha_calls(fx);
  assert_int_equal(RELEASE(la, 1), 1); /* one evalsha: the release */
  assert_true(fx_run_until(fx->b->loop, one_acquired, &c, 2000));
  relock_future_release(FX_CMD(fx->b, "PING"));
  assert_int_equal(evalsha_calls(fx) - before, 2); /* the release, and one waiter's try */
  assert_int_equal(c.acquired, 1);
  /* each release hands the lock to the next local waiter */
  int released[N];
  memset(released, 0, sizeof released);
  for (int round = 1; round <= N; round++) {
    want_t w = {&c, round};
    assert_true(fx_run_until(fx->b->loop, acquired_at_least, &w, 2000));
    assert_int_equal(c.acquired, round); /* one at a time */
    /* Release this round's holder only: the next waiter may take the lock
     * while the release's answer is read, and must wait for its own round
     * rather than be released in this sweep. */
    for (int i = 0; i < N; i++) {
      if (!released[i] && relock_future_is_done(waits[i]) && relock_future_bool(waits[i])) {
        assert_int_equal(RELEASE(lb, 10 + (uint64_t)i), 1);
        released[i] = 1;
        break;
      }
    }
  }
  assert_int_equal(relock_future_wait(all, 5000), 0);
  relock_future_release(all);
  for (int i = 0; i < N; i++)
    relock_future_release(waits[i]);
  relock_lock_free(la);
  relock_lock_free(lb);
}

/* -- one unlock, one process (issue 20: the herd) ----------------------------*/

enum { NPROCS = 4 };

static int never(void *arg) {
  (void)arg;
  return 0;
}

typedef struct {
  relock_client_t *c[NPROCS]; /* each its own subscriber connection: a "process" */
  relock_lock_t *l[NPROCS];
  relock_future_t *w[NPROCS];
  waited_t tries;            /* every try that found the lock held, all processes */
  count_t got;
} procs_t;

static void procs_wait(fx_t *fx, procs_t *p, int n) {
  memset(p, 0, sizeof(*p));
  for (int i = 0; i < n; i++) {
    p->c[i] = fx_client(fx->cfg);
    /* Under valgrind the woken process may take longer than the fallback
     * (250 ms) to take the lock, and the others would rightly try: the
     * fallback scales with the tool, as the test's own waits do. */
    assert_int_equal(relock__waitq_set_fallback_ms(p->c[i], fx_slack_ms(1000)), 0);
    p->l[i] = lock_of(p->c[i], "res");
    assert_int_equal(relock_lock_on_wait(p->l[i], on_wait, &p->tries), 0);
    p->w[i] = relock_lock_lock_async(p->l[i], 7, 20000, RELOCK_INFINITE);
    relock_future_on_done(p->w[i], count_acquired, &p->got);
  }
  /* each has tried, subscribed and tried again: all of them wait now */
  assert_int_equal(relock_future_wait(p->w[0], 300), RELOCK_EPENDING);
  for (int i = 0; i < n; i++)
    assert_int_equal(relock_future_state(p->w[i]), RELOCK_FUTURE_PENDING);
}

static void procs_free(procs_t *p, int n) {
  for (int i = 0; i < n; i++) {
    relock_future_release(p->w[i]);
    relock_lock_free(p->l[i]);
    relock_client_free(p->c[i]);
  }
}

/* Releases the one process holding it; returns which one that was. */
static int procs_release_holder(procs_t *p, int n, int *released) {
  for (int i = 0; i < n; i++)
    if (!released[i] && relock_future_is_done(p->w[i]) && relock_future_bool(p->w[i])) {
      assert_int_equal(RELEASE(p->l[i], 7), 1);
      released[i] = 1;
      return i;
    }
  fail_msg("no process holds the lock");
  return -1;
}

/* Four processes wait for one name. Each unlock wakes one of them, not one
 * waiter in each (the cross-process herd: three failed tries per unlock
 * before), and every one of them gets its turn. */
static void test_one_unlock_wakes_one_process(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx->a, "res");
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1);
  procs_t p;
  procs_wait(fx, &p, NPROCS);
  int before = p.tries.calls;
  assert_int_equal(RELEASE(la, 1), 1);
  assert_true(fx_run_until(fx_loop(), one_acquired, &p.got, 2000));
  fx_run_until(fx_loop(), never, NULL, 200); /* time for any other process to try */
  assert_int_equal(p.got.acquired, 1);
  assert_int_equal(p.tries.calls - before, 0); /* nobody else tried: nobody was woken in vain */
  int released[NPROCS] = {0};
  for (int round = 2; round <= NPROCS; round++) {
    before = p.tries.calls;
    procs_release_holder(&p, NPROCS, released);
    want_t w = {&p.got, round};
    assert_true(fx_run_until(fx_loop(), acquired_at_least, &w, 2000));
    fx_run_until(fx_loop(), never, NULL, 100);
    assert_int_equal(p.got.acquired, round);
    assert_int_equal(p.tries.calls - before, 0);
  }
  procs_release_holder(&p, NPROCS, released);
  procs_free(&p, NPROCS);
  relock_lock_free(la);
}

/* The process an unlock was meant for is gone (it died registered as a
 * waiter): the others do not wait for the holder's lease, they try after a
 * short while of hearing nobody take it. */
static void test_a_woken_process_that_is_gone_does_not_strand_the_others(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx->a, "res");
  assert_int_equal(ACQUIRE(la, 1, 0, 60000), 1);
  procs_t p;
  procs_wait(fx, &p, 2);
  for (int i = 0; i < 2; i++)
    assert_int_equal(relock__waitq_set_fallback_ms(p.c[i], 0), 0); /* the default: that is what this test times */
  /* a dead process's registration, first in line: valid for 30 s more on
   * the server's clock, the live ones for the lease and more */
  fx_raw_int(fx->redis, "EVAL",
             "local t = redis.call('time') return redis.call('zadd', KEYS[1], t[1] * 1000 + 30000, ARGV[1])", "1",
             "relock_lock_latch:{res}:waiters", "123456789012345678", NULL);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(RELEASE(la, 1), 1);
  assert_true(fx_run_until(fx_loop(), one_acquired, &p.got, 2000));
  double took = fx_ms_since(t0);
  assert_true(took >= 200);                /* the unlock went to the dead one: the others waited the fallback */
  assert_true(took < fx_slack_ms(1000));   /* and not the 60 s lease */
  int released[2] = {0};
  procs_release_holder(&p, 2, released);
  want_t w = {&p.got, 2};
  assert_true(fx_run_until(fx_loop(), acquired_at_least, &w, 2000));
  procs_release_holder(&p, 2, released);
  procs_free(&p, 2);
  relock_lock_free(la);
}

/* -- the hand-off's fallback, in generated interleavings --------------------*/

enum { IL_PROCS = 3, IL_WAITERS = 2, IL_ROUNDS = 40 };

typedef struct {
  relock_future_t *f;
  int64_t start_ms, cancel_ms; /* cancel_ms < 0: never cancelled */
  uint64_t owner;
  int proc;
} il_waiter_t;

static uint64_t il_rand(uint64_t *s) { /* xorshift64* */
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

static int64_t il_between(uint64_t *s, int64_t lo, int64_t hi) { return lo + (int64_t)(il_rand(s) % (uint64_t)(hi - lo + 1)); }

typedef struct {
  il_waiter_t *w;
  int n;
} il_round_t;

static int il_someone_holds(void *arg) {
  il_round_t *r = arg;
  for (int i = 0; i < r->n; i++)
    if (r->w[i].f != NULL && relock_future_is_done(r->w[i].f) && relock_future_error(r->w[i].f) == 0 &&
        relock_future_bool(r->w[i].f))
      return 1;
  return 0;
}

/* Runs the loop until at_ms after t0. */
static void il_run_to(uint64_t t0, int64_t at_ms) {
  double now = fx_ms_since(t0);
  if (now < (double)at_ms)
    fx_run_until(fx_loop(), never, NULL, at_ms - (int64_t)now);
}

/* Several processes' waiters join, some are cancelled (before, while and
 * after their registering tries are in flight), a third of the rounds
 * have a process that died registered first in line, and the holder
 * releases, at seeded random moments. Whatever the interleaving, once the lock is
 * free a live waiter has it within the hand-off's fallback (250 ms) and a
 * round trip - not the holder's 30 s lease - and once no waiter is left,
 * no process is left registered as waiting (an unlock named to it would
 * cost the others the fallback). RELOCK_TEST_SEED replays a run. */
static void test_a_free_lock_is_taken_within_the_fallback_in_any_interleaving(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  uint64_t seed = fx_seed("the fallback in any interleaving"), rng = seed;
  relock_lock_t *holder = lock_of(fx->a, "res");
  relock_client_t *c[IL_PROCS];
  relock_lock_t *l[IL_PROCS];
  for (int i = 0; i < IL_PROCS; i++) {
    c[i] = fx_client(fx->cfg);
    l[i] = lock_of(c[i], "res"); /* kept across rounds: its tries carry the waker id once it waited */
  }
  double worst = 0;
  for (int round = 0; round < IL_ROUNDS; round++) {
    il_waiter_t w[IL_PROCS * IL_WAITERS];
    il_round_t r = {w, 0};
    assert_int_equal(ACQUIRE(holder, 1, 0, 30000), 1);
    for (int i = 0; i < IL_PROCS; i++)
      for (int j = 0, n = (int)il_between(&rng, 0, IL_WAITERS); j < n; j++) {
        il_waiter_t *x = &w[r.n++];
        x->f = NULL;
        x->proc = i;
        x->owner = 100 + (uint64_t)(r.n);
        x->start_ms = il_between(&rng, 0, 40);
        x->cancel_ms = il_rand(&rng) % 2 ? x->start_ms + il_between(&rng, 0, 15) : -1;
      }
    if (il_rand(&rng) % 3 == 0) /* a process that died waiting, first in line */
      fx_raw_int(fx->redis, "EVAL",
                 "local t = redis.call('time') return redis.call('zadd', KEYS[1], t[1] * 1000 + 30000, ARGV[1])", "1",
                 "relock_lock_latch:{res}:waiters", "123456789012345678", NULL);
    int64_t release_ms = il_between(&rng, 0, 60), end_ms = release_ms;
    for (int i = 0; i < r.n; i++) /* some join just as the holder releases */
      if (il_rand(&rng) % 3 == 0) {
        w[i].cancel_ms = w[i].cancel_ms < 0 ? -1 : release_ms + w[i].cancel_ms - w[i].start_ms;
        w[i].start_ms = release_ms;
      }
    uint64_t t0 = relock__now_ns();
    int released = 0;
    for (;;) { /* the next event, in time order */
      int64_t next = released ? INT64_MAX : release_ms;
      for (int i = 0; i < r.n; i++) {
        if (w[i].f == NULL && w[i].start_ms < next)
          next = w[i].start_ms;
        if (w[i].f != NULL && w[i].cancel_ms >= 0 && w[i].cancel_ms < next)
          next = w[i].cancel_ms;
      }
      if (next == INT64_MAX)
        break;
      il_run_to(t0, next);
      end_ms = next;
      /* one of the events due now, at random: -1 the release, else a waiter's */
      int due[1 + IL_PROCS * IL_WAITERS], ndue = 0;
      if (!released && release_ms == next)
        due[ndue++] = -1;
      for (int i = 0; i < r.n; i++)
        if ((w[i].f == NULL && w[i].start_ms == next) || (w[i].f != NULL && w[i].cancel_ms == next))
          due[ndue++] = i;
      int e = due[il_rand(&rng) % (uint64_t)ndue];
      if (e < 0) {
        assert_int_equal(RELEASE(holder, 1), 1);
        released = 1;
      } else if (w[e].f == NULL) {
        w[e].f = relock_lock_lock_async(l[w[e].proc], w[e].owner, 20000, RELOCK_INFINITE);
      } else {
        relock_future_cancel(w[e].f);
        w[e].cancel_ms = -1;
      }
    }
    int live = 0;
    for (int i = 0; i < r.n; i++)
      live += relock_future_state(w[i].f) != RELOCK_FUTURE_CANCELLED;
    if (live > 0) {
      /* free, with a live waiter, since the last event at the latest */
      uint64_t from = t0 + (uint64_t)end_ms * 1000000u;
      fx_run_until(fx_loop(), il_someone_holds, &r, 2000);
      double took = fx_ms_since(from);
      worst = took > worst ? took : worst;
      if (!il_someone_holds(&r))
        fail_msg("round %d (seed %llu): a free lock with %d live waiters, none has it after %.0f ms", round,
                 (unsigned long long)seed, live, took);
      if (took >= fx_slack_ms(250 + 100))
        fail_msg("round %d (seed %llu): a free lock was taken %.0f ms after it was free (fallback 250 ms)", round,
                 (unsigned long long)seed, took);
    }
    for (int i = 0; i < r.n; i++) { /* the round ends: the holder gives it back, the rest give up */
      if (il_someone_holds(&(il_round_t){&w[i], 1}))
        assert_int_equal(RELEASE(l[w[i].proc], w[i].owner), 1);
      else
        relock_future_cancel(w[i].f);
    }
    fx_run_until(fx_loop(), never, NULL, 30); /* the cancelled ones' give-backs */
    fx_raw_int(fx->redis, "ZREM", "relock_lock_latch:{res}:waiters", "123456789012345678", NULL);
    for (int i = 0; i < IL_PROCS; i++)
      relock_future_release(FX_CMD(c[i], "PING")); /* each one's commands ran */
    if (fx_raw_int(fx->redis, "EXISTS", "relock_lock_latch:{res}:waiters", NULL) != 0) {
      char buf[512];
      relock_test_redis_cmd(fx->redis, buf, sizeof buf, "ZRANGE", "relock_lock_latch:{res}:waiters", "0", "-1", NULL);
      fail_msg("round %d (seed %llu): no waiter is left, yet processes are registered: %s", round,
               (unsigned long long)seed, buf);
    }
    assert_int_equal(fx_raw_int(fx->redis, "EXISTS", "res", NULL), 0);
    for (int i = 0; i < r.n; i++)
      relock_future_release(w[i].f);
  }
  printf("# %d rounds: a free lock taken within %.1f ms at worst\n", IL_ROUNDS, worst);
  for (int i = 0; i < IL_PROCS; i++) {
    relock_lock_free(l[i]);
    relock_client_free(c[i]);
  }
  relock_lock_free(holder);
}

static void test_waiters_keep_their_place_across_subscriber_reconnect(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx->a, "res"), *lb = lock_of(fx->b, "res");
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1);
  relock_future_t *wait = relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(wait, 200), RELOCK_EPENDING);
  uint64_t connects = fx->b->redis.pubsub.conn.connects;
  char reply[64];
  relock_test_redis_cmd(fx->redis, reply, sizeof reply, "CLIENT", "KILL", "TYPE", "pubsub", NULL);
  assert_int_equal(relock_future_wait(wait, 300), RELOCK_EPENDING); /* re-checked, still held */
  assert_true(fx->b->redis.pubsub.conn.connects > connects);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(RELEASE(la, 1), 1);
  assert_int_equal(relock_future_wait(wait, 5000), 0);
  assert_int_equal(relock_future_bool(wait), 1);
  assert_true(fx_ms_since(t0) < fx_slack_ms(200));
  relock_future_release(wait);
  assert_int_equal(RELEASE(lb, 2), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

static void test_waiter_joining_while_the_queue_unsubscribes_hears_the_unlock(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx->a, "res"), *lb = lock_of(fx->b, "res");
  for (int round = 0; round < 5; round++) {
    assert_int_equal(ACQUIRE(la, 1, 0, 60000), 1);
    relock_future_t *first = relock_lock_lock_async(lb, 2, 10000, RELOCK_INFINITE);
    assert_int_equal(relock_future_wait(first, 200), RELOCK_EPENDING); /* queued, subscribed */
    relock_future_t *second = relock_lock_lock_async(lb, 3, 10000, RELOCK_INFINITE);
    relock_future_cancel(first); /* the last waiter leaves: UNSUBSCRIBE goes out... */
    assert_int_equal(relock_future_wait(second, 200), RELOCK_EPENDING); /* ...as another joins */
    uint64_t t0 = relock__now_ns();
    assert_int_equal(RELEASE(la, 1), 1);
    assert_int_equal(relock_future_wait(second, 5000), 0);
    assert_int_equal(relock_future_bool(second), 1);
    assert_true(fx_ms_since(t0) < fx_slack_ms(200)); /* heard, not the 60 s lease */
    assert_int_equal(RELEASE(lb, 3), 1);
    relock_future_release(first);
    relock_future_release(second);
  }
  relock_lock_free(la);
  relock_lock_free(lb);
}

static void test_bounded_wait_bounds_retries_when_redis_is_down(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, 200);
  fx_set_int(fx->cfg, RELOCK_OPT_RETRY_ATTEMPTS, 5);
  fx_set_ms(fx->cfg, RELOCK_OPT_RETRY_INTERVAL, 100);
  fx_pair_clients(fx);
  relock_test_redis_stop(fx->redis);
  relock_lock_t *l = lock_of(fx->a, "res");
  uint64_t t0 = relock__now_ns();
  int err = error_of(relock_lock_lock_async(l, 1, 250, RELOCK_INFINITE), NULL, 0);
  assert_true(err == RELOCK_ECONNREFUSED || err == RELOCK_ETIMEDOUT);
  assert_true(fx_ms_since(t0) < fx_slack_ms(900)); /* not 6 attempts of 200 ms + back-offs */
  relock_lock_free(l);
}

/* -- lost locks -------------------------------------------------------------*/

typedef struct {
  int calls;
  uint64_t owner;
  int reason;
  char message[512];
  uint64_t at_ns;
} lost_t;

static void on_lost(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg) {
  (void)lock;
  lost_t *l = arg;
  l->calls++;
  l->owner = owner;
  l->reason = reason;
  l->at_ns = relock__now_ns();
  snprintf(l->message, sizeof l->message, "%s", message);
}

static int was_lost(void *arg) { return ((lost_t *)arg)->calls > 0; }

static void test_lost_when_key_deleted(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 300);
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx->a, "res");
  lost_t lost = {0};
  relock_lock_on_lost(l, on_lost, &lost);
  assert_int_equal(ACQUIRE(l, 7, 0, RELOCK_INFINITE), 1);
  uint64_t t0 = relock__now_ns();
  relock_test_redis_cmd(fx->redis, NULL, 0, "DEL", "res", NULL);
  assert_true(fx_run_until(fx->a->loop, was_lost, &lost, 2000));
  assert_true((double)(lost.at_ns - t0) / 1e6 < fx_slack_ms(100 + 100)); /* one renewal period */
  assert_int_equal(lost.calls, 1);
  assert_int_equal(lost.owner, 7);
  assert_int_equal(lost.reason, RELOCK_ELOST);
  assert_non_null(strstr(lost.message, "res"));
  char msg[256];
  assert_int_equal(error_of(relock_lock_unlock_async(l, 7), msg, sizeof msg), RELOCK_ELOST);
  assert_non_null(strstr(msg, "lost"));
  /* told once, and nothing is renewed any more */
  relock_future_release(FX_CMD(fx->a, "PING"));
  assert_int_equal(lost.calls, 1);
  assert_int_equal(fx->a->ledger.nrenewing, 0);
  relock_lock_free(l);
}

/* Issue 20: a watched hold hears a foreign force release (Redisson's
 * forceUnlock: DEL and PUBLISH 0) within 50 ms, not at the next renewal
 * (10 s here); an unwatched one does not; the holder's own releases and
 * re-entries never count as a loss. */
static void test_watched_hold_notices_a_force_release_at_once(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 30000);
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx->a, "res"), *other = lock_of(fx->b, "res");
  lost_t lost = {0};
  relock_lock_on_lost(l, on_lost, &lost);
  assert_int_equal(relock_lock_watch_loss(l, 1), 0);
  assert_int_equal(relock_lock_watch_loss(NULL, 1), RELOCK_EINVAL);
  /* own releases, re-entries, other owners through the same object: no loss */
  for (int i = 0; i < 20; i++) {
    assert_int_equal(ACQUIRE(l, 7, 0, RELOCK_INFINITE), 1);
    assert_int_equal(ACQUIRE(l, 7, 0, RELOCK_INFINITE), 1);
    assert_int_equal(RELEASE(l, 7), 0);
    assert_int_equal(RELEASE(l, 7), 1);
    assert_int_equal(ACQUIRE(other, 9, 0, RELOCK_INFINITE), 1); /* another client's, on the same channel */
    assert_int_equal(RELEASE(other, 9), 1);
  }
  assert_false(fx_run_until(fx->a->loop, was_lost, &lost, 100));
  assert_true(fx_run_until(fx->a->loop, no_channels, fx->a, 2000)); /* nothing held: not listening */
  /* held, then force-released by someone else */
  assert_int_equal(ACQUIRE(l, 7, 0, RELOCK_INFINITE), 1);
  assert_true(fx_run_until(fx->a->loop, joined_queue, fx->a, 2000)); /* listening */
  relock_future_release(FX_CMD(fx->a, "PING")); /* the subscription confirmed and its first check back */
  uint64_t t0 = relock__now_ns();
  assert_int_equal(value_of(relock_lock_force_unlock_async(other)), 1);
  assert_true(fx_run_until(fx->a->loop, was_lost, &lost, 2000));
  double ms = (double)(lost.at_ns - t0) / 1e6;
  printf("# foreign force release -> lost callback: %.2f ms\n", ms);
  if (ms >= fx_slack_ms(50))
    fail_msg("the loss was noticed after %.1f ms", ms);
  assert_int_equal(lost.owner, 7);
  assert_int_equal(lost.reason, RELOCK_ELOST);
  assert_int_equal(error_of(relock_lock_unlock_async(l, 7), NULL, 0), RELOCK_ELOST);
  /* unwatched: the same force release goes unnoticed until the renewal */
  relock_lock_t *plain = lock_of(fx->a, "res2");
  lost_t lost2 = {0};
  relock_lock_on_lost(plain, on_lost, &lost2);
  assert_int_equal(ACQUIRE(plain, 7, 0, RELOCK_INFINITE), 1);
  relock_lock_t *plain_other = lock_of(fx->b, "res2");
  assert_int_equal(value_of(relock_lock_force_unlock_async(plain_other)), 1);
  assert_false(fx_run_until(fx->a->loop, was_lost, &lost2, 300));
  relock_lock_free(plain_other);
  relock_lock_free(plain);
  relock_lock_free(other);
  relock_lock_free(l);
}

static void test_lost_when_redis_restarts_without_persistence(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 600);
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx->a, "res");
  lost_t lost = {0};
  relock_lock_on_lost(l, on_lost, &lost);
  assert_int_equal(ACQUIRE(l, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(relock_test_redis_restart(fx->redis), 0);
  assert_true(fx_run_until(fx->a->loop, was_lost, &lost, 3000));
  assert_int_equal(lost.reason, RELOCK_ELOST);
  relock_lock_free(l);
}

static void test_held_across_restart_with_aof(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 600);
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx->a, "res");
  lost_t lost = {0};
  relock_lock_on_lost(l, on_lost, &lost);
  assert_int_equal(ACQUIRE(l, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(relock_test_redis_restart(fx->redis), 0);
  uint64_t renewed = fx->a->renewal.renewed;
  watch_t w = {fx, fx->a, relock__now_ns() + 1500 * 1000000ull, 0, 0};
  fx_run_until(fx->a->loop, watch_held, &w, 5000);
  assert_int_equal(w.gone, 0);
  assert_int_equal(lost.calls, 0);
  assert_true(fx->a->renewal.renewed > renewed); /* renewals resumed */
  assert_int_equal(RELEASE(l, 1), 1);
  relock_lock_free(l);
}

static void test_lost_when_redis_unreachable_past_the_lease(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 600);
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, 100);
  fx_set_ms(fx->cfg, RELOCK_OPT_RETRY_INTERVAL, 20);
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx->a, "res");
  lost_t lost = {0};
  relock_lock_on_lost(l, on_lost, &lost);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(ACQUIRE(l, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(relock_test_redis_pause(fx->redis), 0);
  int ok = fx_run_until(fx->a->loop, was_lost, &lost, 3000);
  relock_test_redis_resume(fx->redis);
  assert_true(ok);
  assert_int_equal(lost.reason, RELOCK_ETIMEDOUT);
  double at = (double)(lost.at_ns - t0) / 1e6;
  /* not before the lease less its drift margin (1% + 2 ms) could have run
   * out: the hold is given up that much before Redis's own expiry */
  assert_true(at >= 600.0 - (double)relock__validity_margin_ms(600));
  assert_true(at < fx_slack_ms(600 + 250));
  relock_lock_free(l);
}

/* -- scale ------------------------------------------------------------------*/

static void test_thousand_locks_renewed_in_batches(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 900);
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(2000));
  fx_pair_clients(fx);
  enum { N = 1000 };
  relock_lock_t **locks = calloc(N, sizeof(*locks));
  relock_future_t **fs = calloc(N, sizeof(*fs));
  char name[32];
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "many:%d", i);
    locks[i] = lock_of(fx->a, name);
    fs[i] = relock_lock_lock_async(locks[i], 1, 0, RELOCK_INFINITE);
  }
  relock_future_t *all = relock_future_all(fs, N, NULL);
  assert_int_equal(relock_future_wait(all, fx_slack_ms(10000)), 0);
  relock_future_release(all);
  for (int i = 0; i < N; i++) {
    assert_int_equal(relock_future_bool(fs[i]), 1);
    relock_future_release(fs[i]);
  }
  /* after one cycle the renewal script is cached: count from there */
  uint64_t first = fx->a->renewal.cycles;
  watch_t warm = {fx, fx->a, relock__now_ns() + 400 * 1000000ull, 0, 0};
  fx_run_until(fx->a->loop, watch_held, &warm, 5000);
  relock_future_release(FX_CMD(fx->a, "PING"));
  assert_true(fx->a->renewal.cycles > first);
  uint64_t cycles = fx->a->renewal.cycles, batches = fx->a->renewal.batches;
  long long calls = evalsha_calls(fx);
  watch_t w = {fx, fx->a, relock__now_ns() + 1000 * 1000000ull, 0, 0};
  fx_run_until(fx->a->loop, watch_held, &w, 5000);
  relock_future_release(FX_CMD(fx->a, "PING")); /* the last batch answered */
  uint64_t ran = fx->a->renewal.cycles - cycles;
  assert_true(ran >= 2);
  assert_int_equal(fx->a->renewal.batches - batches, ran * (N / RELOCK__RENEW_BATCH));
  assert_true(evalsha_calls(fx) - calls <= (long long)(ran * (N / RELOCK__RENEW_BATCH)));
  assert_int_equal(fx->a->ledger.lost, 0);
  for (int i = 0; i < N; i++)
    relock_lock_free(locks[i]); /* holds stay, until the client closes */
  free(locks);
  free(fs);
}

static void test_several_owners_of_one_client(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 300);
  fx_pair_clients(fx);
  relock_lock_t *x = lock_of(fx->a, "x"), *y = lock_of(fx->a, "y");
  assert_int_equal(ACQUIRE(x, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(ACQUIRE(x, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(ACQUIRE(y, 2, 0, RELOCK_INFINITE), 1);
  assert_int_equal(ACQUIRE(x, 2, 0, RELOCK_INFINITE), 0);
  assert_int_equal(fx->a->ledger.nrenewing, 2);
  assert_int_equal(RELEASE(x, 1), 0);
  assert_int_equal(fx->a->ledger.nrenewing, 2);
  watch_t w = {fx, fx->a, relock__now_ns() + 700 * 1000000ull, 0, 0};
  fx_run_until(fx->a->loop, watch_held, &w, 3000); /* both outlive the 300 ms lease */
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", "x", NULL), 1);
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", "y", NULL), 1);
  assert_int_equal(RELEASE(x, 1), 1);
  assert_int_equal(fx->a->ledger.nrenewing, 1);
  assert_int_equal(RELEASE(y, 2), 1);
  assert_int_equal(fx->a->ledger.nrenewing, 0);
  relock_lock_free(x);
  relock_lock_free(y);
}

/* -- mutual exclusion across processes --------------------------------------*/

static void critical_sections(const relock_options_t *cfg, int n) {
  relock_client_t *c = relock_client_new(NULL, cfg, NULL);
  relock_lock_t *l = relock_lock_new(c, "counter-lock", NULL);
  for (int i = 0; i < n; i++) {
    if (relock_lock_lock(l, RELOCK_INFINITE) != 0)
      _exit(10);
    relock_future_t *f = relock_client_commandf_async(c, "GET counter");
    if (relock_future_wait(f, 10000) != 0)
      _exit(11);
    const relock_reply_t *r = relock_future_reply(f);
    long long v = r->type == RELOCK_REPLY_STRING ? atoll(r->str) : 0;
    relock_future_release(f);
    f = relock_client_commandf_async(c, "SET counter %lld", v + 1); /* not atomic: the lock is */
    if (relock_future_wait(f, 10000) != 0)
      _exit(12);
    relock_future_release(f);
    if (relock_lock_unlock(l) != 0)
      _exit(13);
  }
  relock_lock_free(l);
  relock_client_free(c);
  _exit(0);
}

static void test_mutual_exclusion_across_processes(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(3000));
  int per = relock_test_under_valgrind() ? 20 : 200;
  enum { PROCS = 8 };
  pid_t pids[PROCS];
  for (int i = 0; i < PROCS; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0)
      critical_sections(fx->cfg, per);
  }
  for (int i = 0; i < PROCS; i++) {
    int status = 0;
    assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  char buf[64];
  assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "GET", "counter", NULL), 0);
  assert_int_equal(atoll(strchr(buf, '\n') + 1), PROCS * per);
}

/* -- the blocking API -------------------------------------------------------*/

static void test_blocking_api(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx->a, "res"), *lb = lock_of(fx->b, "res");
  assert_int_equal(relock_lock_lock(l, RELOCK_INFINITE), 0);
  assert_int_equal(relock_lock_lock(l, RELOCK_INFINITE), 0);
  int64_t count = 0;
  assert_int_equal(relock_lock_hold_count(l, &count), 0);
  assert_int_equal(count, 2);
  int64_t ttl = 0;
  assert_int_equal(relock_lock_remaining_ttl(l, &ttl), 0); /* the watchdog lease */
  assert_true(ttl > 0 && ttl <= 30000);
  int flag = -1;
  assert_int_equal(relock_lock_is_held_by_thread(l, &flag), 0);
  assert_int_equal(flag, 1);
  assert_int_equal(relock_lock_try_lock(lb, 0, RELOCK_INFINITE, &flag), 0); /* other client: busy */
  assert_int_equal(flag, 0);
  assert_int_equal(relock_lock_unlock(l), 0);
  assert_int_equal(relock_lock_unlock(l), 0);
  assert_int_equal(relock_lock_unlock(l), RELOCK_ENOTOWNER);
  assert_int_equal(relock_lock_is_locked(l, &flag), 0);
  assert_int_equal(flag, 0);
  assert_int_equal(relock_lock_try_lock(lb, 100, 5000, &flag), 0);
  assert_int_equal(flag, 1);
  assert_int_equal(relock_lock_force_unlock(l, &flag), 0);
  assert_int_equal(flag, 1);
  assert_int_equal(relock_lock_remaining_ttl(l, &ttl), 0);
  assert_int_equal(ttl, -2); /* not locked */
  assert_int_equal(relock_lock_remaining_ttl(l, NULL), 0);
  assert_int_equal(relock_lock_remaining_ttl(NULL, &ttl), RELOCK_EINVAL);
  assert_true(relock_thread_owner() > 0);
  relock_lock_free(l);
  relock_lock_free(lb);
}

typedef struct {
  relock_lock_t *lock;
  int result;
} blocker_t;

static void block_inside_callback(relock_future_t *f, void *arg) {
  (void)f;
  blocker_t *b = arg;
  b->result = relock_lock_lock(b->lock, RELOCK_INFINITE);
}

static void test_blocking_inside_a_callback_would_block(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx->a, "res");
  blocker_t b = {l, 0};
  relock_future_t *f = relock_client_commandf_async(fx->a, "PING");
  relock_future_on_done(f, block_inside_callback, &b);
  assert_int_equal(relock_future_wait(f, 5000), 0);
  assert_int_equal(b.result, RELOCK_EWOULDBLOCK);
  assert_int_equal(value_of(relock_lock_is_locked_async(l)), 0); /* nothing was started */
  relock_future_release(f);
  relock_lock_free(l);
}

static void note_closed(relock_client_t *c, void *arg) {
  (void)c;
  (*(int *)arg)++;
}

static int closed_once(void *arg) { return *(int *)arg > 0; }

/* A hand-off's fallback that fires while the client closes (the close
 * drains a give-back the server is slow to answer), on a queue its last
 * waiter left: the wake-up finds nobody, and the queue goes (a closing
 * client keeps none lingering) - it must not be touched after. Before,
 * wake() noted the unclaimed wake-up in the freed queue (the truth
 * checker's threaded worker died of it under ASan). Only ASan and
 * valgrind see it. */
static void test_a_fallback_firing_while_closing_on_an_empty_queue(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx->a, "res"), *lb = lock_of(fx->b, "res"), *other = lock_of(fx->b, "other");
  assert_int_equal(relock__waitq_set_fallback_ms(fx->b, 100), 0);
  assert_int_equal(ACQUIRE(la, 1, 0, 60000), 1);
  relock_future_t *w = relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(w, 300), RELOCK_EPENDING); /* waiting, subscribed */
  relock_future_cancel(w);
  relock_future_release(w);
  fx_run_for(fx_loop(), 50); /* its registration taken back; the empty queue lingers, subscribed */
  /* a dead process registered first in line: the unlock is handed to it,
   * and b arms the fallback */
  fx_raw_int(fx->redis, "EVAL",
             "local t = redis.call('time') return redis.call('zadd', KEYS[1], t[1] * 1000 + 30000, ARGV[1])", "1",
             "relock_lock_latch:{res}:waiters", "123456789012345678", NULL);
  assert_int_equal(RELEASE(la, 1), 1);
  fx_run_for(fx_loop(), 20);
  /* b closes with a try in flight that the server answers only after the
   * fallback: the close drains its give-back meanwhile */
  char reply[64];
  /* no mode argument (ALL, 6.2+): without one every client is paused, on
   * every version */
  assert_int_equal(relock_test_redis_cmd(fx->redis, reply, sizeof reply, "CLIENT", "PAUSE", "500", NULL), 0);
  assert_string_equal(reply, "+OK\r\n");
  relock_future_t *t = relock_lock_lock_async(other, 3, 0, RELOCK_INFINITE);
  ev_run(fx_loop(), EVRUN_NOWAIT); /* sent */
  int closed = 0;
  assert_int_equal(relock_client_close(fx->b, note_closed, &closed), 0);
  assert_int_equal(relock_future_error(t), RELOCK_ECLOSED);
  relock_future_release(t);
  assert_true(fx_run_until(fx_loop(), closed_once, &closed, 3000));
  relock_lock_free(other);
  relock_lock_free(lb);
  relock_lock_free(la);
}

static void test_close_fails_pending_acquires(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx->a, "res"), *lb = lock_of(fx->b, "res");
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1);
  relock_future_t *wait = relock_lock_lock_async(lb, 2, RELOCK_INFINITE, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(wait, 200), RELOCK_EPENDING);
  relock_client_free(fx->b);
  fx->b = NULL;
  assert_int_equal(relock_future_error(wait), RELOCK_ECLOSED);
  relock_future_release(wait);
  relock_lock_free(lb); /* after its client: still fine */
  relock_lock_free(la);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_pair_server_setup, fx_pair_teardown)
  const struct CMUnitTest tests[] = {
      T(test_acquire_release_reentrant),
      T(test_release_by_non_owner),
      T(test_invalid_arguments),
      T(test_wrong_type_is_another_kind),
      T(test_fixed_lease_expires_unrenewed),
      T(test_watchdog_keeps_lock_ten_times_its_timeout),
      T(test_renewal_stops_at_release),
      T(test_kill9_holder_frees_within_watchdog_timeout),
      T(test_try_once_and_deadline),
      T(test_waiter_acquires_a_round_trip_after_release),
      T(test_force_release_wakes_waiter),
      T(test_cancel_during_wait),
      T(test_cancel_races_a_successful_try),
      T(test_unlock_between_try_and_subscribe_is_not_missed),
      T(test_waiters_share_a_subscription_and_one_unlock_wakes_one),
      T(test_one_unlock_wakes_one_process),
      T(test_a_woken_process_that_is_gone_does_not_strand_the_others),
      T(test_a_free_lock_is_taken_within_the_fallback_in_any_interleaving),
      T(test_waiters_keep_their_place_across_subscriber_reconnect),
      T(test_waiter_joining_while_the_queue_unsubscribes_hears_the_unlock),
      T(test_bounded_wait_bounds_retries_when_redis_is_down),
      T(test_lost_when_key_deleted),
      T(test_watched_hold_notices_a_force_release_at_once),
      T(test_lost_when_redis_restarts_without_persistence),
      cmocka_unit_test_setup_teardown(test_held_across_restart_with_aof, setup_aof, fx_pair_teardown),
      T(test_lost_when_redis_unreachable_past_the_lease),
      T(test_thousand_locks_renewed_in_batches),
      T(test_several_owners_of_one_client),
      T(test_mutual_exclusion_across_processes),
      T(test_blocking_api),
      T(test_blocking_inside_a_callback_would_block),
      T(test_close_fails_pending_acquires),
      T(test_a_fallback_firing_while_closing_on_an_empty_queue),
      T(test_wait_callback_sees_each_try_that_finds_it_held),
  };
#undef T
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found: install the Debian package redis-server");
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("lock", tests, NULL, NULL);
}
