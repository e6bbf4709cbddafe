/* Regression tests of the lock's safety rules (docs/SAFETY.md), each against
 * a real redis-server, with real faults: the test proxy delays, stalls or
 * black-holes traffic, the server is paused (SIGSTOP) or kept busy.
 *
 * "Acquired" always means held: a retried acquisition answers "acquired"
 * only while its field exists; an answer later than the lease is never
 * reported; what a lost, late or abandoned try took is given back; a
 * bounded wait bounds the try in flight; re-entry never shortens a lease,
 * and whatever mix of leases an owner holds, Redis keeps what it believes;
 * a lease within the drift margin is refused; an unconfirmed subscription
 * does not make a waiter sleep through an unlock; lost and expired holds
 * leave the registry; the hold's validity can be asked for locally and
 * checked against Redis, and comes down to what Redis keeps when another
 * client cuts a fixed lease's key shorter. */
#include <config.h>

#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <relock/permit_semaphore.h>
#include <relock/semaphore.h>

#include "support/client_fixture.h"
#include "base/random.h"
#include "base/hashtab.h"
#include "base/random.h"
#include "objects/lock_impl.h"
#include "support/proxy.h"
#include "redis/scripts.h"

typedef struct {
  relock_test_redis_t *redis;
  relock_test_proxy_t *proxy;
  relock_options_t *cfg;    /* straight to the server */
  relock_options_t *via;    /* through the proxy */
  relock_client_t *a;     /* the client under test (through the proxy where it matters) */
  relock_client_t *b;     /* a contender, straight to the server */
} fx_t;

static int setup(void **state) {
  fx_t *fx = calloc(1, sizeof(*fx));
  fx->redis = relock_test_redis_start(NULL);
  if (fx->redis == NULL)
    return -1;
  fx->proxy = relock_test_proxy_start(relock_test_redis_host(fx->redis), relock_test_redis_port(fx->redis));
  if (fx->proxy == NULL)
    return -1;
  fx->cfg = fx_options(fx->redis, 0);
  fx->via = fx_copy(fx->cfg);
  fx_set_int(fx->via, RELOCK_OPT_PORT, relock_test_proxy_port(fx->proxy));
  /* Scripts loaded up front: a NOSCRIPT fallback would re-send a script
   * after the commands queued behind it, and these tests watch order. */
  for (int i = 0; i < RELOCK__SCRIPT_COUNT; i++)
    assert_int_equal(relock_test_redis_cmd(fx->redis, NULL, 0, "SCRIPT", "LOAD", relock__scripts[i].body, NULL), 0);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fx_t *fx = *state;
  relock_client_free(fx->a);
  relock_client_free(fx->b);
  relock_test_proxy_stop(fx->proxy);
  relock_test_redis_free(fx->redis);
  relock_options_free(fx->cfg);
  relock_options_free(fx->via);
  free(fx);
  return 0;
}

static relock_lock_t *lock_of(relock_client_t *c, const char *name) {
  relock_lock_t *l = relock_lock_new(c, name, NULL);
  assert_non_null(l);
  return l;
}

/* Waits for f; returns its error and (on success) its value in *v. */
static int outcome(relock_future_t *f, int64_t *v, char *msg, size_t size) {
  assert_non_null(f);
  int r = relock_future_wait(f, fx_slack_ms(20000));
  assert_int_not_equal(r, RELOCK_EPENDING);
  if (r == 0 && v != NULL)
    *v = relock_future_value_type(f) == RELOCK_VALUE_BOOL ? relock_future_bool(f) : relock_future_int(f);
  if (msg != NULL)
    snprintf(msg, size, "%s", relock_future_message(f));
  relock_future_release(f);
  return r;
}

static int64_t value_of(relock_future_t *f) {
  int64_t v = -999;
  char msg[256];
  int r = outcome(f, &v, msg, sizeof msg);
  if (r != 0)
    fail_msg("operation failed: %s (%s)", msg, relock_err_name(r));
  return v;
}

/* The watchdog's hold of l by owner (NULL: none). */
static relock__hold_t *hold_of(relock_client_t *c, relock_lock_t *l, uint64_t owner) {
  relock__hold_id_t id = relock__lock_hold(l, owner);
  return relock__hold_find(&c->ledger, &id);
}

/* The hold count of owner's field of l in Redis (0: no field). */
static long long raw_count(fx_t *fx, relock_lock_t *l, uint64_t owner) {
  char field[RELOCK__FIELD_MAX], buf[128];
  relock__lock_field(l, owner, field);
  assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "HGET", relock_lock_name(l), field, NULL), 0);
  return buf[0] == '$' && buf[1] != '-' ? atoll(strchr(buf, '\n') + 1) : 0;
}

typedef struct {
  fx_t *fx;
  relock_lock_t *l;
  uint64_t owner;
  long long want;
} count_is_t;

static int count_is(void *arg) {
  count_is_t *c = arg;
  return raw_count(c->fx, c->l, c->owner) == c->want;
}

/* Runs c's loop until owner's count of l in Redis is want (or timeout_ms). */
static int until_count(fx_t *fx, relock_client_t *c, relock_lock_t *l, uint64_t owner, long long want,
                       int64_t timeout_ms) {
  count_is_t arg = {fx, l, owner, want};
  return fx_run_until(relock_client_loop(c), count_is, &arg, timeout_ms);
}

static int key_gone(void *arg) {
  fx_t *fx = ((void **)arg)[0];
  return fx_raw_int(fx->redis, "EXISTS", ((void **)arg)[1], NULL) == 0;
}

/* -- item 1: a retried acquisition, and a late answer ----------------------*/

/* The acquire script's "acquired": {count}, the holder's hold count now. */
static void assert_held(const relock_reply_t *r, long long count) {
  assert_int_equal(r->type, RELOCK_REPLY_ARRAY);
  assert_int_equal(r->elements, 1);
  assert_int_equal(r->element[0]->type, RELOCK_REPLY_INTEGER);
  assert_int_equal(r->element[0]->integer, count);
}

/* The acquire script, run by hand with one request id twice, as a retry
 * after a lost reply would: by the retry the first hold has expired and
 * another client holds the lock. The latch must not answer "acquired". */
static void test_retried_acquire_after_expiry_is_not_acquired(void **state) {
  fx_t *fx = *state;
  fx->a = fx_client(fx->cfg);
  const char *body = relock__scripts[RELOCK__SCRIPT_LOCK_ACQUIRE].body;
  const char *latch = "redisson_unlock_latch:{retried}:0123456789abcdef0123456789abcdef";
  relock_future_t *f = FX_CMD(fx->a, "EVAL", body, "2", "retried", latch, "100", "A:1", "21000");
  assert_held(fx_ok(f), 1); /* A's first attempt took it; its reply was lost */
  relock_future_release(f);
  void *arg[2] = {fx, (char[]){"retried"}};
  assert_true(fx_run_until(fx->a->loop, key_gone, arg, 2000)); /* A's lease ran out */
  f = FX_CMD(fx->a, "EVAL", body, "2", "retried", "redisson_unlock_latch:{retried}:b", "30000", "B:1", "21000");
  assert_held(fx_ok(f), 1); /* B holds it now */
  relock_future_release(f);
  f = FX_CMD(fx->a, "EVAL", body, "2", "retried", latch, "100", "A:1", "21000"); /* A's retry */
  const relock_reply_t *r = fx_ok(f);
  assert_int_equal(r->type, RELOCK_REPLY_INTEGER); /* B's remaining time, not "acquired" */
  assert_true(r->integer > 0);
  relock_future_release(f);
}

/* The same retry while the first hold is still there: acquired, counted
 * once, and both answer the same count. */
static void test_retried_acquire_while_held_counts_once(void **state) {
  fx_t *fx = *state;
  fx->a = fx_client(fx->cfg);
  const char *body = relock__scripts[RELOCK__SCRIPT_LOCK_ACQUIRE].body;
  const char *latch = "redisson_unlock_latch:{once}:0123456789abcdef0123456789abcdef";
  for (int attempt = 0; attempt < 2; attempt++) {
    relock_future_t *f = FX_CMD(fx->a, "EVAL", body, "2", "once", latch, "30000", "A:1", "21000");
    assert_held(fx_ok(f), 1);
    relock_future_release(f);
  }
  assert_int_equal(fx_raw_int(fx->redis, "HINCRBY", "once", "A:1", "0", NULL), 1);
}

/* Every answer comes back later than the lease (the proxy holds each
 * direction 150 ms; the lease is 200 ms): no try may be reported acquired,
 * none may be left held, and a contender gets the lock. */
static void test_answer_later_than_the_lease_is_not_acquired(void **state) {
  fx_t *fx = *state;
  fx->a = fx_client(fx->via);
  fx->b = fx_client(fx->cfg);
  relock_lock_t *la = lock_of(fx->a, "late"), *lb = lock_of(fx->b, "late");
  relock_future_release(FX_CMD(fx->a, "PING")); /* connected before the delay */
  relock_test_proxy_delay(fx->proxy, 150);
  char msg[256];
  int64_t v = -1;
  int r = outcome(relock_lock_lock_async(la, 1, 0, 200), &v, msg, sizeof msg);
  assert_int_equal(r, RELOCK_ETIMEDOUT); /* on the old code: 0 with v = 1 */
  assert_non_null(strstr(msg, "given back"));
  assert_int_equal(relock_lock_validity_ms(la, 1), RELOCK_ENOTOWNER);
  /* Waiting: tries keep coming back late; none counts, the wait ends. */
  r = outcome(relock_lock_lock_async(la, 1, 1500, 200), &v, msg, sizeof msg);
  assert_true(r == 0 && v == 0);
  relock_test_proxy_delay(fx->proxy, 0);
  assert_true(until_count(fx, fx->a, la, 1, 0, 3000));
  assert_int_equal(value_of(relock_lock_lock_async(lb, 2, 2000, 30000)), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

/* -- item 4: re-entry never shortens a lease --------------------------------*/

static void test_reentry_with_a_shorter_lease_keeps_the_longer(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 3000);
  fx->a = fx_client(fx->cfg);
  relock_lock_t *l = lock_of(fx->a, "reenter");
  assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE)), 1);
  assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, 100)), 1); /* re-entry, 100 ms */
  int64_t ttl = value_of(relock_lock_remaining_ttl_async(l));
  assert_true(ttl > 2500); /* on the old code: <= 100, and the watchdog hold dies */
  assert_int_equal(value_of(relock_lock_unlock_async(l, 1)), 0); /* one hold left */
  ttl = value_of(relock_lock_remaining_ttl_async(l));
  assert_true(ttl > 2500); /* a partial release keeps the watchdog's lease, not 100 ms */
  /* A fixed lease re-entered with a shorter one keeps the longer too. */
  relock_lock_t *f = lock_of(fx->a, "reenter-fixed");
  assert_int_equal(value_of(relock_lock_lock_async(f, 1, 0, 10000)), 1);
  assert_int_equal(value_of(relock_lock_lock_async(f, 1, 0, 100)), 1);
  assert_true(value_of(relock_lock_remaining_ttl_async(f)) > 9000);
  assert_int_equal(value_of(relock_lock_unlock_async(f, 1)), 0);
  assert_true(value_of(relock_lock_remaining_ttl_async(f)) > 9000);
  assert_int_equal(value_of(relock_lock_unlock_async(f, 1)), 1);
  assert_int_equal(value_of(relock_lock_unlock_async(l, 1)), 1);
  relock_lock_free(l);
  relock_lock_free(f);
}

/* -- a lease within the drift margin ----------------------------------------*/

/* A lease of 2 ms is all drift margin (1% + 2 ms): every answer would come
 * "too late", be given back and be tried again, forever, at the speed of
 * the network. Every kind refuses it at once, and anything under
 * RELOCK_MIN_LEASE_MS, naming the argument; the smallest lease allowed is
 * granted. */
static void test_lease_within_the_drift_margin_is_refused(void **state) {
  fx_t *fx = *state;
  fx->a = fx_client(fx->cfg);
  relock_lock_t *(*kinds[])(relock_client_t *, const char *, relock_error_t *) = {
      relock_lock_new, relock_fair_lock_new, relock_read_lock_new, relock_write_lock_new, relock_fenced_lock_new,
      relock_spin_lock_new};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    char name[32];
    snprintf(name, sizeof name, "tiny-lease-%zu", i);
    relock_lock_t *l = kinds[i](fx->a, name, NULL);
    assert_non_null(l);
    FX_REFUSED(relock_lock_lock_async(l, 1, 1000, 2), "lease_ms");
    FX_REFUSED(relock_lock_lock_async(l, 1, 0, RELOCK_MIN_LEASE_MS - 1), "drift margin");
    assert_int_equal(relock_lock_try_lock(l, 1000, 2, NULL), RELOCK_EINVAL);
    assert_non_null(strstr(relock_last_error_message(), "drift margin"));
    assert_true(value_of(relock_lock_lock_async(l, 1, fx_slack_ms(2000), RELOCK_MIN_LEASE_MS)) >= 1); /* a token */
    relock_lock_free(l);
  }
  relock_permit_semaphore_t *s = relock_permit_semaphore_new(fx->a, "tiny-lease-permits", NULL);
  assert_non_null(s);
  FX_REFUSED(relock_permit_semaphore_acquire_async(s, 1000, 2), "drift margin");
  char id[RELOCK_PERMIT_ID_SIZE];
  assert_int_equal(relock_permit_semaphore_acquire(s, 1000, 2, id), RELOCK_EINVAL);
  relock_permit_semaphore_free(s);
  relock_lock_t *locks[2] = {lock_of(fx->a, "tiny-1"), lock_of(fx->a, "tiny-2")};
  relock_multi_lock_t *m = relock_multi_lock_new(locks, 2, NULL); /* the locks are the group's */
  assert_non_null(m);
  FX_REFUSED(relock_multi_lock_lock_async(m, 1, 1000, 2), "drift margin");
  assert_int_equal(relock_multi_lock_try_lock(m, 1000, 2, NULL), RELOCK_EINVAL);
  relock_multi_lock_free(m);
  relock_lock_t *one = lock_of(fx->a, "tiny-red");
  m = relock_redlock_new(&one, 1, NULL);
  assert_non_null(m);
  FX_REFUSED(relock_multi_lock_lock_async(m, 1, 1000, 2), "drift margin");
  relock_multi_lock_free(m);
}

/* -- item 5: an unconfirmed subscription ------------------------------------*/

static int never(void *arg) {
  (void)arg;
  return 0;
}

/* The waiter's subscriber connection is a black hole (the proxy accepts it
 * and never answers), so its subscription is not confirmed; the holder
 * unlocks meanwhile. With the holder's lease 10 s, a waiter trusting the
 * TTL would sleep 10 s; it must take the lock within its poll cadence. */
static void test_unlock_while_the_subscription_is_unconfirmed(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->via, RELOCK_OPT_COMMAND_TIMEOUT, 200);
  fx->a = fx_client(fx->via);
  fx->b = fx_client(fx->cfg);
  relock_lock_t *la = lock_of(fx->a, "deaf"), *lb = lock_of(fx->b, "deaf");
  assert_int_equal(value_of(relock_lock_lock_async(lb, 2, 0, 10000)), 1);
  relock_future_release(FX_CMD(fx->a, "PING")); /* the command connection is up */
  relock_test_proxy_blackhole_accept(fx->proxy, 1); /* the subscriber connection will not be */
  relock_future_t *w = relock_lock_lock_async(la, 1, fx_slack_ms(5000), RELOCK_INFINITE);
  /* Past the confirmation's timeout: the waiter is waiting, unsubscribed. */
  fx_run_until(fx->a->loop, never, NULL, 400);
  assert_false(relock_future_is_done(w));
  char numsub[128];
  assert_int_equal(relock_test_redis_cmd(fx->redis, numsub, sizeof numsub, "PUBSUB", "NUMSUB",
                                         "redisson_lock__channel:{deaf}", NULL), 0);
  assert_non_null(strstr(numsub, "\r\n:0\r\n")); /* nobody subscribed */
  assert_int_equal(value_of(relock_lock_unlock_async(lb, 2)), 1); /* published to nobody */
  uint64_t t1 = relock__now_ns();
  int64_t v = -1;
  assert_int_equal(outcome(w, &v, NULL, 0), 0);
  assert_int_equal(v, 1);
  double ms = fx_ms_since(t1);
  print_message("# acquired %.0f ms after an unlock it could not hear\n", ms);
  assert_true(ms < fx_slack_ms(500)); /* polls every 50-100 ms; on the old code: ~10 s */
  relock_test_proxy_blackhole_accept(fx->proxy, 0);
  assert_int_equal(value_of(relock_lock_unlock_async(la, 1)), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

/* -- item 6: a deadline already passed is not 34 years away -----------------*/

static void test_release_in_flight_past_the_deadline_keeps_the_check_near(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 300);
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(3000));
  fx_set_int(fx->cfg, RELOCK_OPT_RETRY_ATTEMPTS, 0);
  fx->a = fx_client(fx->cfg);
  relock_lock_t *l = lock_of(fx->a, "inflight");
  assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE)), 1);
  assert_int_equal(relock_test_redis_pause(fx->redis), 0);
  relock_future_t *rel = relock_lock_unlock_async(l, 1); /* stuck in the paused server */
  uint64_t t0 = relock__now_ns();
  uint64_t worst = 0;
  while (fx_ms_since(t0) < 600) { /* the hold's deadline passes meanwhile */
    ev_run(fx->a->loop, EVRUN_ONCE);
    relock__timer_t *check = &fx->a->ledger.check;
    if (relock__timer_pending(check) && check->deadline - fx->a->wheel.current > worst)
      worst = check->deadline - fx->a->wheel.current;
  }
  assert_int_equal(relock_test_redis_resume(fx->redis), 0);
  int64_t v = -1;
  int r = outcome(rel, &v, NULL, 0);
  assert_true(r == 0 || r == RELOCK_ELOST || r == RELOCK_ENOTOWNER);
  /* in ticks of 10 ms: never further than a renewal period (old: ~2^40 ms) */
  assert_true(worst <= 100);
  relock_lock_free(l);
}

/* -- item 7: a failed acquisition leaves nothing behind ---------------------*/

/* Each try reaches Redis and takes its hold, but the answer comes after the
 * command timeout (the proxy holds each direction 300 ms; the timeout is
 * 200 ms, no retries): the call fails, and the hold it took must be given
 * back, leaving an earlier hold of the same owner counted once. */
static void test_failed_acquire_gives_back_its_hold(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->via, RELOCK_OPT_COMMAND_TIMEOUT, 200);
  fx_set_int(fx->via, RELOCK_OPT_RETRY_ATTEMPTS, 0);
  fx->a = fx_client(fx->via);
  relock_lock_t *l = lock_of(fx->a, "failed");
  assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, 30000)), 1); /* one hold before */
  relock_test_proxy_delay(fx->proxy, 300);
  assert_int_equal(outcome(relock_lock_lock_async(l, 1, 0, 30000), NULL, NULL, 0), RELOCK_ETIMEDOUT);
  assert_int_equal(outcome(relock_lock_lock_async(l, 2, 0, 30000), NULL, NULL, 0), RELOCK_ETIMEDOUT);
  relock_test_proxy_delay(fx->proxy, 0);
  /* Both tries ran in Redis (owner 1 re-entered: 2); the undo follows them. */
  assert_true(until_count(fx, fx->a, l, 1, 1, 3000)); /* on the old code: stays 2 */
  assert_int_equal(raw_count(fx, l, 2), 0);
  assert_int_equal(hold_of(fx->a, l, 1)->count, 1);
  assert_null(hold_of(fx->a, l, 2));
  assert_int_equal(value_of(relock_lock_unlock_async(l, 1)), 1); /* one release frees it */
  relock_lock_free(l);
}

/* -- item 8: a bounded wait bounds the try in flight ------------------------*/

static void test_bounded_wait_bounds_the_try_in_flight(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->via, RELOCK_OPT_COMMAND_TIMEOUT, 5000);
  fx->a = fx_client(fx->via);
  relock_lock_t *l = lock_of(fx->a, "bounded");
  relock_future_release(FX_CMD(fx->a, "PING"));
  relock_test_proxy_delay(fx->proxy, 700); /* a try takes 1.4 s */
  uint64_t t0 = relock__now_ns();
  char msg[256];
  int r = outcome(relock_lock_lock_async(l, 1, 300, RELOCK_INFINITE), NULL, msg, sizeof msg);
  double ms = fx_ms_since(t0);
  print_message("# a 300 ms wait with a 1.4 s try in flight ended after %.0f ms: %s\n", ms, msg);
  assert_int_equal(r, RELOCK_ETIMEDOUT);
  assert_non_null(strstr(msg, "did not answer within the 300 ms wait"));
  assert_true(ms >= 290 && ms < fx_slack_ms(600)); /* on the old code: ~1400 ms, acquired */
  /* The abandoned try ran in Redis later; what it took is given back. */
  assert_true(until_count(fx, fx->a, l, 1, 1, 3000) || raw_count(fx, l, 1) == 0);
  relock_test_proxy_delay(fx->proxy, 0);
  assert_true(until_count(fx, fx->a, l, 1, 0, 5000));
  assert_null(hold_of(fx->a, l, 1));
  relock_lock_free(l);
}

/* -- item 14: a give-back outlives any outage ------------------------------*/

/* One acquisition whose answer is lost, then Redis out of reach for
 * outage_ms, longer than the retry budget and the old latch's life; then
 * back. What it took must be given back once Redis is back, for every kind
 * of acquisition that takes something (a semaphore's permits leak for good
 * otherwise: they have no lease). */
typedef enum { GB_SEMAPHORE, GB_PERMIT, GB_LOCK, GB_KINDS } gb_kind_t;

static const char *const gb_kind_names[] = {"semaphore", "permit-expirable semaphore", "lock"};

typedef struct {
  fx_t *fx;
  const char *name;
  gb_kind_t kind;
  long long want;
} gb_state_t;

#define GB_PERMITS 3
#define GB_PERMITS_S "3"

/* What the acquisition took that is still taken in Redis: permits, or the
 * lock's holds. */
static long long gb_taken(fx_t *fx, const char *name, gb_kind_t kind) {
  if (kind == GB_LOCK)
    return fx_raw_int(fx->redis, "EXISTS", name, NULL);
  return GB_PERMITS - fx_raw_get(fx->redis, name);
}

static int gb_taken_is(void *arg) {
  gb_state_t *g = arg;
  return gb_taken(g->fx, g->name, g->kind) == g->want;
}

/* Sends the acquisition through the proxy, which holds each direction
 * 200 ms (the command timeout is 300 ms); once the script has run in
 * Redis, the proxy stalls and the connection becomes a black hole for
 * good: the answer is lost, and no retry or give-back sent on it arrives.
 * So do the connections made during the outage (no stale request reaches
 * Redis when it ends, as it would if they were only stalled). New
 * connections get through again after outage_ms. */
static void gb_case(fx_t *fx, gb_kind_t kind, int64_t permits, int64_t outage_ms, int n) {
  char name[64];
  snprintf(name, sizeof name, "gb%d", n);
  if (kind != GB_LOCK)
    assert_int_equal(relock_test_redis_cmd(fx->redis, NULL, 0, "SET", name, GB_PERMITS_S, NULL), 0);
  relock_lock_t *obj = kind == GB_LOCK ? lock_of(fx->a, name)
                       : kind == GB_SEMAPHORE
                           ? (relock_lock_t *)(void *)relock_semaphore_new(fx->a, name, NULL)
                           : (relock_lock_t *)(void *)relock_permit_semaphore_new(fx->a, name, NULL);
  assert_non_null(obj);
  long long take = kind == GB_PERMIT || kind == GB_LOCK ? 1 : permits;
  relock_test_proxy_delay(fx->proxy, 200);
  relock_future_t *f =
      kind == GB_LOCK      ? relock_lock_lock_async(obj, 1, 0, 60000)
      : kind == GB_PERMIT  ? relock_permit_semaphore_acquire_async((relock_permit_semaphore_t *)(void *)obj, 0,
                                                                   RELOCK_INFINITE)
                           : relock_semaphore_acquire_async((relock_semaphore_t *)(void *)obj, take, 0);
  assert_non_null(f);
  gb_state_t g = {fx, name, kind, take};
  assert_true(fx_run_until(fx->a->loop, gb_taken_is, &g, 3000)); /* the script ran */
  /* New connections are held before the current ones are cut off: one
   * accepted in between would be forwarded once the stall ends (valgrind,
   * which runs one thread at a time, made that gap wide enough to hit). */
  relock_test_proxy_stall(fx->proxy, 1);
  relock_test_proxy_blackhole_accept(fx->proxy, 1);
  relock_test_proxy_blackhole_current(fx->proxy);
  relock_test_proxy_stall(fx->proxy, 0);
  relock_test_proxy_delay(fx->proxy, 0);
  fx_run_for(fx->a->loop, outage_ms); /* stretched already, with the budget */
  assert_int_equal(relock_future_state(f), RELOCK_FUTURE_FAILED); /* never reported taken */
  relock_future_release(f);
  /* Nothing came through meanwhile: the give-back has not happened yet,
   * and the client says it owes it. */
  assert_int_equal(gb_taken(fx, name, kind), take);
  assert_int_equal(relock_client_unreturned(fx->a), 1);
  relock_test_proxy_blackhole_accept(fx->proxy, 0);
  uint64_t t0 = relock__now_ns();
  g.want = 0;
  int back = fx_run_until(fx->a->loop, gb_taken_is, &g, 5000);
  print_message("# %s, %lld taken, Redis out of reach %lld ms: %s after %.0f ms\n", gb_kind_names[kind], take,
                (long long)outage_ms, back ? "given back" : "NOT given back", fx_ms_since(t0));
  assert_true(back); /* on the old code: still taken, for good */
  /* Given back once: it stays so, and no acquisition latch is left behind. */
  fx_run_until(fx->a->loop, never, NULL, 300);
  assert_int_equal(gb_taken(fx, name, kind), 0);
  assert_int_equal(relock_client_unreturned(fx->a), 0);
  char keys[256];
  assert_int_equal(relock_test_redis_cmd(fx->redis, keys, sizeof keys, "KEYS", "relock_lock_latch:*", NULL), 0);
  assert_string_equal(keys, "*0\r\n");
  /* (a lock's acquisition latch has the name of its release's) */
  assert_int_equal(relock_test_redis_cmd(fx->redis, keys, sizeof keys, "KEYS", "redisson_unlock_latch:*", NULL), 0);
  assert_string_equal(keys, "*0\r\n");
  relock_lock_free(obj);
}

static void test_give_back_outlives_any_outage(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->via, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(300));
  fx_set_int(fx->via, RELOCK_OPT_RETRY_ATTEMPTS, 1);
  fx_set_ms(fx->via, RELOCK_OPT_RETRY_INTERVAL, 100);
  fx_set_ms(fx->via, RELOCK_OPT_PING_INTERVAL, 200);
  fx->a = fx_client(fx->via);
  relock_future_release(FX_CMD(fx->a, "PING"));
  /* The retry budget (and the old latch's life): 2 * (300 + 100) + 300 ms;
   * the acquisition's retries and then its give-back's are over after
   * twice that. */
  int64_t budget = 2 * (fx_slack_ms(300) + 100) + fx_slack_ms(300);
  uint64_t rng = fx_seed("a give-back outlives any outage") * 2654435761u + 1;
  int n = 0;
  for (gb_kind_t kind = 0; kind < GB_KINDS; kind++) {
    int64_t permits = 1 + (int64_t)(relock__random(&rng) % GB_PERMITS);
    int64_t outage = 2 * budget + 500 + (int64_t)(relock__random(&rng) % (uint64_t)(2 * budget));
    gb_case(fx, kind, permits, outage, n++);
  }
}

static void on_closed_count(relock_client_t *c, void *arg) {
  *(size_t *)arg = relock_client_unreturned(c);
}

/* A close while a give-back is owed and Redis is out of reach: the close
 * ends within its bound and counts the give-back it could not make; a
 * close with Redis back makes it. */
static void test_close_reports_what_it_could_not_give_back(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->via, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(300));
  fx_set_int(fx->via, RELOCK_OPT_RETRY_ATTEMPTS, 0);
  fx_set_ms(fx->via, RELOCK_OPT_RETRY_INTERVAL, 20000);
  for (int reachable = 0; reachable < 2; reachable++) {
    fx->a = fx_client(fx->via);
    relock_future_release(FX_CMD(fx->a, "PING"));
    assert_int_equal(relock_test_redis_cmd(fx->redis, NULL, 0, "SET", "gbclose", GB_PERMITS_S, NULL), 0);
    relock_semaphore_t *s = relock_semaphore_new(fx->a, "gbclose", NULL);
    relock_test_proxy_delay(fx->proxy, 200);
    relock_future_t *f = relock_semaphore_acquire_async(s, 2, 0);
    gb_state_t g = {fx, "gbclose", GB_SEMAPHORE, 2};
    assert_true(fx_run_until(fx->a->loop, gb_taken_is, &g, 3000));
    relock_test_proxy_stall(fx->proxy, 1);
    relock_test_proxy_blackhole_accept(fx->proxy, 1); /* first: see gb_case */
    relock_test_proxy_blackhole_current(fx->proxy);
    relock_test_proxy_stall(fx->proxy, 0);
    relock_test_proxy_delay(fx->proxy, 0);
    assert_int_equal(relock_future_wait(f, fx_slack_ms(3000)), RELOCK_ETIMEDOUT);
    relock_future_release(f);
    /* The give-back's first try timed out too: it waits 10-20 s to retry. */
    fx_run_for(fx->a->loop, fx_slack_ms(400));
    assert_int_equal(relock_client_unreturned(fx->a), 1);
    if (reachable) { /* connected again, the give-back still waiting for its retry */
      relock_test_proxy_blackhole_accept(fx->proxy, 0);
      uint64_t t1 = relock__now_ns();
      int up = 0;
      while (!up && fx_ms_since(t1) < fx_slack_ms(5000)) {
        relock_future_t *ping = FX_CMD(fx->a, "PING");
        up = relock_future_wait(ping, fx_slack_ms(3000)) == 0;
        relock_future_release(ping);
      }
      assert_true(up);
      assert_int_equal(relock_client_unreturned(fx->a), 1);
      assert_int_equal(gb_taken(fx, "gbclose", GB_SEMAPHORE), 2);
    }
    size_t unreturned = 99;
    uint64_t t0 = relock__now_ns();
    assert_int_equal(relock_client_close(fx->a, on_closed_count, &unreturned), 0);
    relock_semaphore_free(s);
    relock_client_free(fx->a); /* waits for the close */
    fx->a = NULL;
    print_message("# Redis %s: the close took %.0f ms, %zu not given back\n", reachable ? "back" : "out of reach",
                  fx_ms_since(t0), unreturned);
    assert_true(fx_ms_since(t0) < fx_slack_ms(2000)); /* within its bound, not the retry's */
    assert_int_equal(unreturned, reachable ? 0 : 1);
    assert_int_equal(gb_taken(fx, "gbclose", GB_SEMAPHORE), reachable ? 0 : 2);
    relock_test_proxy_blackhole_accept(fx->proxy, 0);
  }
}

/* -- item 9: "not now" answers are retried ----------------------------------*/

typedef struct {
  const relock_test_redis_t *redis;
  int rc;
} busy_t;

static void *run_busy_script(void *arg) {
  busy_t *b = arg;
  /* Busy for 800 ms; past lua-time-limit others get -BUSY. */
  b->rc = relock_test_redis_cmd(b->redis, NULL, 0, "EVAL",
                                "local t = redis.call('time'); local s = t[1] * 1000000 + t[2]; "
                                "while true do t = redis.call('time'); "
                                "if t[1] * 1000000 + t[2] - s > 800000 then break end end return 1",
                                "0", NULL);
  return NULL;
}

/* The client goes through the proxy, which counts the BUSY answers it was
 * given: INFO errorstats (the server's count) is Redis 6.2's. */
static void test_busy_server_is_retried(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->via, RELOCK_OPT_RETRY_INTERVAL, 200);
  fx_set_int(fx->via, RELOCK_OPT_RETRY_ATTEMPTS, 10);
  fx->a = fx_client(fx->via);
  relock_lock_t *l = lock_of(fx->a, "busy");
  relock_future_release(FX_CMD(fx->a, "PING"));
  relock_test_proxy_watch(fx->proxy, "-BUSY ");
  /* lua-time-limit: busy-reply-threshold's name before 7.0, its alias since */
  char reply[64];
  assert_int_equal(relock_test_redis_cmd(fx->redis, reply, sizeof reply, "CONFIG", "SET", "lua-time-limit", "50", NULL),
                   0);
  assert_string_equal(reply, "+OK\r\n");
  relock_test_redis_set_cmd_timeout(fx->redis, 5000);
  busy_t b = {fx->redis, -1};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, run_busy_script, &b), 0);
  struct timespec ts = {0, 200 * 1000000};
  nanosleep(&ts, NULL); /* the script has been running past the threshold */
  assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE)), 1);
  pthread_join(th, NULL);
  assert_int_equal(b.rc, 0);
  /* it was answered BUSY, and retried: acquired above */
  assert_true(relock_test_proxy_seen(fx->proxy) >= 1);
  if (relock_test_redis_version(fx->redis) >= 60200) {
    char info[4096];
    assert_int_equal(relock_test_redis_cmd(fx->redis, info, sizeof info, "INFO", "errorstats", NULL), 0);
    assert_non_null(strstr(info, "errorstat_BUSY"));
  }
  relock_test_proxy_watch(fx->proxy, NULL);
  assert_int_equal(value_of(relock_lock_unlock_async(l, 1)), 1);
  relock_lock_free(l);
}

/* -- item 11: the registry forgets what is over -----------------------------*/

typedef struct {
  int calls;
  int reason;
} lost_t;

static void on_lost(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg) {
  (void)lock;
  (void)owner;
  (void)message;
  lost_t *l = arg;
  l->calls++;
  l->reason = reason;
}

static int registry_empty(void *arg) { return ((relock_client_t *)arg)->ledger.holds.count == 0; }

static void test_lost_and_expired_holds_leave_the_registry(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 300);
  fx->a = fx_client(fx->cfg);
  fx->a->ledger.lost_kept_ms = 300;
  relock_lock_t *l = lock_of(fx->a, "over");
  lost_t lost = {0, 0};
  relock_lock_on_lost(l, on_lost, &lost);
  assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE)), 1);
  assert_int_equal(value_of(relock_lock_lock_async(l, 2, 0, 200)), 0); /* busy: nothing tracked */
  relock_lock_t *f = lock_of(fx->a, "over-fixed");
  assert_int_equal(value_of(relock_lock_lock_async(f, 1, 0, 200)), 1);
  assert_int_equal(fx->a->ledger.holds.count, 2);
  fx_raw_int(fx->redis, "DEL", "over", NULL);
  assert_true(fx_run_until(fx->a->loop, registry_empty, fx->a, 2000)); /* old: both stay forever */
  assert_int_equal(lost.calls, 1);
  assert_int_equal(lost.reason, RELOCK_ELOST);
  assert_int_equal(relock_lock_validity_ms(l, 1), RELOCK_ENOTOWNER);
  relock_lock_free(l);
  relock_lock_free(f);
}

/* A release within the time a lost hold is remembered reports the loss. */
static void test_release_of_a_lost_hold_reports_it(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 300);
  fx->a = fx_client(fx->cfg);
  relock_lock_t *l = lock_of(fx->a, "lostrel");
  lost_t lost = {0, 0};
  relock_lock_on_lost(l, on_lost, &lost);
  assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE)), 1);
  fx_raw_int(fx->redis, "DEL", "lostrel", NULL);
  uint64_t t0 = relock__now_ns();
  while (lost.calls == 0 && fx_ms_since(t0) < fx_slack_ms(2000))
    ev_run(fx->a->loop, EVRUN_ONCE);
  assert_int_equal(lost.calls, 1);
  assert_int_equal(relock_lock_validity_ms(l, 1), RELOCK_ELOST);
  assert_int_equal(outcome(relock_lock_unlock_async(l, 1), NULL, NULL, 0), RELOCK_ELOST);
  assert_int_equal(fx->a->ledger.holds.count, 0);
  relock_lock_free(l);
}

/* -- issue 20: a hold's states (watchdog/renewal.h) ------------------------*/

typedef struct {
  relock_lock_t *l;
  uint64_t owner;
  lost_t *lost;
  int calls;
} hold_ref_t;

static int forgotten(void *arg) {
  hold_ref_t *h = arg;
  return relock_lock_validity_ms(h->l, h->owner) == RELOCK_ENOTOWNER;
}

static int told(void *arg) {
  hold_ref_t *h = arg;
  return h->lost->calls >= h->calls;
}

/* A fixed lease re-entered with the watchdog's is renewed from then on,
 * past both leases, and a partial release keeps the watchdog's lease. */
static void test_fixed_hold_taken_again_with_the_watchdog_is_renewed(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 300);
  fx->a = fx_client(fx->cfg);
  relock__ledger_t *r = &fx->a->ledger;
  relock_lock_t *l = lock_of(fx->a, "fixed-then-renewed");
  assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, 200)), 1);
  assert_int_equal(r->nrenewing, 0);
  assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE)), 1);
  assert_int_equal(r->nrenewing, 1);
  fx_run_until(fx->a->loop, never, NULL, 700); /* past the fixed lease and the watchdog's */
  assert_int_equal(raw_count(fx, l, 1), 2);
  assert_true(relock_lock_validity_ms(l, 1) > 0);
  assert_int_equal(value_of(relock_lock_unlock_async(l, 1)), 0);
  assert_true(value_of(relock_lock_remaining_ttl_async(l)) > 200); /* 300, not the fixed 200 */
  assert_int_equal(value_of(relock_lock_unlock_async(l, 1)), 1);
  assert_int_equal(r->nrenewing, 0);
  assert_int_equal(r->holds.count, 0);
  relock_lock_free(l);
}

/* Lost holds are forgotten when each is due - lost_kept_ms after its loss,
 * whatever order that makes - by one timer, which stops once none is left
 * (an idle client never wakes). */
static void test_lost_holds_are_forgotten_when_due(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 300);
  fx->a = fx_client(fx->cfg);
  relock__ledger_t *r = &fx->a->ledger;
  lost_t lost = {0, 0};
  relock_lock_t *first = lock_of(fx->a, "lost-first"), *second = lock_of(fx->a, "lost-second");
  relock_lock_on_lost(first, on_lost, &lost);
  relock_lock_on_lost(second, on_lost, &lost);
  assert_int_equal(value_of(relock_lock_lock_async(first, 1, 0, RELOCK_INFINITE)), 1);
  assert_int_equal(value_of(relock_lock_lock_async(second, 1, 0, RELOCK_INFINITE)), 1);
  r->lost_kept_ms = fx_slack_ms(2000);
  fx_raw_int(fx->redis, "DEL", "lost-first", NULL);
  hold_ref_t h = {first, 1, &lost, 1};
  assert_true(fx_run_until(fx->a->loop, told, &h, fx_slack_ms(2000)));
  r->lost_kept_ms = 100;
  fx_raw_int(fx->redis, "DEL", "lost-second", NULL);
  h.calls = 2;
  assert_true(fx_run_until(fx->a->loop, told, &h, fx_slack_ms(2000)));
  assert_int_equal(relock_lock_validity_ms(second, 1), RELOCK_ELOST);
  hold_ref_t due = {second, 1, &lost, 0};
  assert_true(fx_run_until(fx->a->loop, forgotten, &due, fx_slack_ms(1000))); /* lost last, forgotten first */
  assert_int_equal(relock_lock_validity_ms(first, 1), RELOCK_ELOST);
  assert_true(relock__timer_pending(&r->forget));
  due.l = first;
  assert_true(fx_run_until(fx->a->loop, forgotten, &due, fx_slack_ms(4000)));
  assert_int_equal(r->holds.count, 0);
  assert_false(relock__timer_pending(&r->forget));
  assert_int_equal(lost.calls, 2);
  relock_lock_free(first);
  relock_lock_free(second);
}

/* -- issue 14 item 2: cancel, then close, leaves nothing held ---------------*/

static void on_closed(relock_client_t *c, void *arg) {
  (void)c;
  *(int *)arg = 1;
}

typedef struct {
  relock_test_redis_t *redis;
  uint64_t resume_at;
  int *closed;
} resume_t;

/* Resumes the paused server once its time has come; done when closed. */
static int resumed_and_closed(void *arg) {
  resume_t *r = arg;
  if (r->resume_at != 0 && relock__now_ns() >= r->resume_at) {
    assert_int_equal(relock_test_redis_resume(r->redis), 0);
    r->resume_at = 0;
  }
  return r->resume_at == 0 && *r->closed;
}

/* The try is in Redis (paused: unanswered) when the caller cancels and at
 * once closes the client (or just closes it). The try will run and take the
 * lock: the give-back the cancel (or the close) sends must reach Redis
 * before the connection goes, and the close must wait for it. The old close
 * dropped it unsent: the lock stayed held for the watchdog lease by a
 * client that no longer exists. */
static void cancel_then_close(fx_t *fx, int cancel) {
  fx->a = fx_client(fx->cfg);
  relock_lock_t *l = lock_of(fx->a, "cancelclose");
  relock_future_release(FX_CMD(fx->a, "PING")); /* connected: the try is sent at once */
  assert_int_equal(relock_test_redis_pause(fx->redis), 0);
  relock_future_t *f = relock_lock_lock_async(l, 1, RELOCK_INFINITE, RELOCK_INFINITE);
  assert_non_null(f);
  for (int i = 0; i < 10; i++) /* the try is written to the socket */
    ev_run(fx->a->loop, EVRUN_NOWAIT);
  if (cancel) {
    relock_future_cancel(f);
    assert_int_equal(relock_future_state(f), RELOCK_FUTURE_CANCELLED);
  }
  relock_lock_free(l);
  int closed = 0;
  assert_int_equal(relock_client_close(fx->a, on_closed, &closed), 0);
  assert_int_equal(relock_future_error(f), cancel ? RELOCK_ECANCELED : RELOCK_ECLOSED);
  relock_future_release(f);
  resume_t r = {fx->redis, relock__now_ns() + 200 * 1000000u, &closed};
  assert_true(fx_run_until(fx->a->loop, resumed_and_closed, &r, 5000));
  /* Whatever ran in Redis has run by now; give a late one time too. */
  struct timespec ts = {0, 100 * 1000000};
  nanosleep(&ts, NULL);
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", "cancelclose", NULL), 0);
  relock_client_free(fx->a);
  fx->a = NULL;
}

static void test_cancel_then_close_leaves_nothing_held(void **state) {
  cancel_then_close(*state, 1);
  cancel_then_close(*state, 0);
}

/* Issue 14 item 10: a hold known lost answers its release at once, from
 * what the client knows, even with Redis gone (the old release asked Redis
 * first, and reported the connection's error after its timeout). */
static void test_release_of_a_lost_hold_needs_no_redis(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 300);
  fx->a = fx_client(fx->cfg);
  relock_lock_t *l = lock_of(fx->a, "lostdown");
  lost_t lost = {0, 0};
  relock_lock_on_lost(l, on_lost, &lost);
  assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE)), 1);
  assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE)), 1); /* re-entered */
  fx_raw_int(fx->redis, "DEL", "lostdown", NULL);
  uint64_t t0 = relock__now_ns();
  while (lost.calls == 0 && fx_ms_since(t0) < fx_slack_ms(2000))
    ev_run(fx->a->loop, EVRUN_ONCE);
  assert_int_equal(lost.calls, 1);
  assert_int_equal(relock_test_redis_stop(fx->redis), 0);
  t0 = relock__now_ns();
  char msg[256];
  assert_int_equal(outcome(relock_lock_unlock_async(l, 1), NULL, msg, sizeof msg), RELOCK_ELOST);
  assert_true(fx_ms_since(t0) < fx_slack_ms(100));
  assert_non_null(strstr(msg, "lost"));
  /* Each release of the re-entered hold says so; the last one ends it. */
  assert_int_equal(fx->a->ledger.holds.count, 1);
  assert_int_equal(outcome(relock_lock_unlock_async(l, 1), NULL, NULL, 0), RELOCK_ELOST);
  assert_int_equal(fx->a->ledger.holds.count, 0);
  relock_lock_free(l);
}

/* -- item 13: the tables' hash is keyed per process -------------------------*/

static uint64_t hash_in_a_child(void) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  pid_t pid = fork();
  if (pid == 0) {
    uint64_t h = relock__hash_bytes(RELOCK__HASH_SEED, "lock-name", 9);
    (void)!write(p[1], &h, sizeof h);
    _exit(0);
  }
  uint64_t h = 0;
  assert_int_equal(read(p[0], &h, sizeof h), (ssize_t)sizeof h);
  waitpid(pid, NULL, 0);
  close(p[0]);
  close(p[1]);
  return h;
}

static void test_table_hash_is_keyed_per_process(void **state) {
  (void)state;
  /* Nothing in this process hashed yet (children draw their own key):
   * the same name hashes differently in each, so colliding names cannot
   * be computed in advance. */
  uint64_t a = hash_in_a_child(), b = hash_in_a_child(), c = hash_in_a_child();
  assert_true(a != b || b != c);
  /* Within one process it is a function. */
  assert_true(relock__hash_bytes(RELOCK__HASH_SEED, "x", 1) == relock__hash_bytes(RELOCK__HASH_SEED, "x", 1));
  assert_true(relock__hash_bytes(RELOCK__HASH_SEED, "x", 1) != relock__hash_bytes(RELOCK__HASH_SEED, "y", 1));
}

/* -- a belief is never longer than what Redis keeps ------------------------*/

typedef struct belief {
  fx_t *fx;
  relock_lock_t *l;
  uint64_t owner;
  const char *step;     /* what was done last, for the failure message */
  uint64_t next_ns;     /* the next check */
  int64_t checks;       /* of a hold believed valid */
  char failed[512];     /* what was found wrong ("": nothing) */
} belief_t;

/* What owner believes of l is kept by Redis: while the hold is locally
 * valid, its field exists and the key's PTTL is at least that validity.
 * Redis is read first: the validity read after it can only have fallen.
 * Returns 0, or 1 with what is wrong in b->failed. */
static int check_belief(belief_t *b) {
  long long count = raw_count(b->fx, b->l, b->owner);
  long long pttl = fx_raw_int(b->fx->redis, "PTTL", relock_lock_name(b->l), NULL);
  int64_t valid = relock_lock_validity_ms(b->l, b->owner);
  if (valid <= 0)
    return 0;
  b->checks++;
  if (count > 0 && (pttl == -1 || pttl >= valid))
    return 0;
  snprintf(b->failed, sizeof b->failed,
           "after %s: owner %llu believes it holds %s for %lld ms more, Redis keeps %lld ms (hold count %lld)",
           b->step, (unsigned long long)b->owner, relock_lock_name(b->l), (long long)valid, pttl, count);
  return 1;
}

/* fx_run_until's condition: checks the belief every 20 ms, met when it is
 * found wrong (a failure inside the loop would leave it running). */
static int belief_broken(void *arg) {
  belief_t *b = arg;
  if (relock__now_ns() < b->next_ns)
    return 0;
  b->next_ns = relock__now_ns() + 20 * 1000000ull;
  return check_belief(b);
}

/* One seeded run: 20 steps, each a watchdog acquisition, a fixed one (0.5
 * to 4 s, so shorter and longer than the 1 s watchdog lease) or a release,
 * then up to 600 ms of renewals (every 333 ms), checked all along. */
static void mix_leases(fx_t *fx, relock_lock_t *l, unsigned seed) {
  char step[128];
  belief_t b = {.fx = fx, .l = l, .owner = 1, .step = step};
  unsigned first = seed;
  for (int i = 0; i < 20; i++) {
    int op = (int)(rand_r(&seed) % 3);
    int64_t lease = op == 0 ? RELOCK_INFINITE : 500 + (int64_t)(rand_r(&seed) % 3501);
    if (op == 2) {
      int64_t v = -1;
      int r = outcome(relock_lock_unlock_async(l, 1), &v, NULL, 0);
      assert_true(r == 0 || r == RELOCK_ENOTOWNER); /* (a fixed lease may have run out) */
      snprintf(step, sizeof step, "step %d (seed %u), a release: %s", i, first,
               r == 0 ? (v ? "freed" : "held") : "not held");
    } else {
      assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, lease)), 1);
      snprintf(step, sizeof step, "step %d (seed %u), an acquisition with lease %lld", i, first, (long long)lease);
    }
    b.next_ns = 0;
    if (fx_run_until(fx->a->loop, belief_broken, &b, rand_r(&seed) % 600))
      fail_msg("%s", b.failed);
  }
  assert_true(b.checks > 0);
  while (relock_lock_validity_ms(l, 1) > 0) /* let go of what is left */
    assert_int_equal(outcome(relock_lock_unlock_async(l, 1), NULL, NULL, 0), 0);
}

/* An owner mixes watchdog and fixed leases on one lock, re-entering and
 * releasing: after every step, and while renewals go on, what it believes
 * (relock_lock_validity_ms) Redis keeps. Before, a renewal cut a longer
 * fixed lease to the watchdog's (and so did a partial release), while the
 * owner went on believing the longer one: cut off from Redis, its lock
 * would expire and go to another client while it still believed it held it.
 * One seed known to mix every case, and a fresh one. */
static void test_mixed_leases_keep_what_the_owner_believes(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 1000);
  fx->a = fx_client(fx->cfg);
  lost_t lost = {0, 0};
  relock_lock_t *l = lock_of(fx->a, "mixed-leases");
  relock_lock_on_lost(l, on_lost, &lost);
  mix_leases(fx, l, 1);
  mix_leases(fx, l, (unsigned)(fx_seed("mixed leases") % 1000000007u));
  assert_int_equal(lost.calls, 0); /* nothing was ever lost */
  relock_lock_free(l);
}

/* -- is it still mine? ------------------------------------------------------*/

static void test_validity_is_local_and_validate_asks_redis(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 600);
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, 100);
  fx_set_ms(fx->cfg, RELOCK_OPT_RETRY_INTERVAL, 20);
  fx->a = fx_client(fx->cfg);
  relock_lock_t *l = lock_of(fx->a, "mine");
  lost_t lost = {0, 0};
  relock_lock_on_lost(l, on_lost, &lost);
  assert_int_equal(relock_lock_validity_ms(l, 1), RELOCK_ENOTOWNER);
  assert_int_equal(relock_lock_validity_ms(NULL, 1), RELOCK_EINVAL);
  assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE)), 1);
  int64_t v = relock_lock_validity_ms(l, 1);
  assert_true(v > 450 && v <= 600 - 8); /* the lease less 1% + 2 ms */
  assert_int_equal(value_of(relock_lock_validate_async(l, 1)), 1);
  assert_true(relock_lock_validity_ms(l, 1) > 500); /* renewed on the way */

  /* Redis frozen: no renewal gets through, validity runs down to 0 without
   * any network, and the hold is lost when it does (never later). */
  assert_int_equal(relock_test_redis_pause(fx->redis), 0);
  uint64_t t0 = relock__now_ns();
  int64_t last = relock_lock_validity_ms(l, 1);
  while (lost.calls == 0 && fx_ms_since(t0) < fx_slack_ms(3000)) {
    ev_run(fx->a->loop, EVRUN_ONCE);
    int64_t now = relock_lock_validity_ms(l, 1);
    if (now >= 0) {
      assert_true(now <= last);
      last = now;
    }
  }
  assert_int_equal(relock_test_redis_resume(fx->redis), 0);
  assert_int_equal(lost.calls, 1);
  assert_int_equal(lost.reason, RELOCK_ETIMEDOUT);
  assert_int_equal(relock_lock_validity_ms(l, 1), RELOCK_ELOST);
  assert_int_equal(value_of(relock_lock_validate_async(l, 1)), 0);

  /* Deleted behind its back: validate finds out at once. */
  fx->a->ledger.lost_kept_ms = 0;
  relock_lock_t *m = lock_of(fx->a, "mine2");
  relock_lock_on_lost(m, on_lost, &lost);
  assert_int_equal(value_of(relock_lock_lock_async(m, 1, 0, RELOCK_INFINITE)), 1);
  fx_raw_int(fx->redis, "DEL", "mine2", NULL);
  assert_int_equal(value_of(relock_lock_validate_async(m, 1)), 0);
  assert_int_equal(lost.calls, 2);
  assert_int_equal(lost.reason, RELOCK_ELOST);

  /* A fixed lease: validity from its lease, validate does not extend it. */
  relock_lock_t *f = lock_of(fx->a, "mine3");
  assert_int_equal(value_of(relock_lock_lock_async(f, 1, 0, 400)), 1);
  v = relock_lock_validity_ms(f, 1);
  assert_true(v > 250 && v <= 400 - 6);
  assert_int_equal(value_of(relock_lock_validate_async(f, 1)), 1);
  assert_true(relock_lock_validity_ms(f, 1) <= v);
  assert_int_equal(value_of(relock_lock_unlock_async(f, 1)), 1);
  assert_int_equal(relock_lock_validity_ms(f, 1), RELOCK_ENOTOWNER);
  assert_int_equal(value_of(relock_lock_validate_async(f, 1)), 0);
  relock_lock_free(l);
  relock_lock_free(m);
  relock_lock_free(f);
}

/* -- every loss is reported, fixed leases too --------------------------------*/

typedef relock_lock_t *(*lock_new_fn)(relock_client_t *c, const char *name, relock_error_t *err);

static const struct {
  const char *what;
  lock_new_fn make;
} lock_kinds[] = {{"reentrant", relock_lock_new}, {"fair", relock_fair_lock_new}, {"fenced", relock_fenced_lock_new},
                  {"spin", relock_spin_lock_new},   {"read", relock_read_lock_new}, {"write", relock_write_lock_new}};

#define NKINDS (sizeof lock_kinds / sizeof lock_kinds[0])

/* How one hold is taken and lost. */
typedef struct {
  size_t kind;      /* in lock_kinds */
  int fixed;        /* a fixed lease (else the watchdog's) */
  int forced;       /* relock's force release by another client (else a DEL, which publishes nothing) */
  int watched;      /* relock_lock_watch_loss */
  int64_t delay_ms; /* from the acquisition to the loss: anywhere in the renewal cycle */
} loss_case_t;

typedef struct {
  int calls;
  int reason;
  uint64_t at_ns; /* the first call's time */
} told_t;

static void on_told(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg) {
  (void)lock;
  (void)owner;
  (void)message;
  told_t *t = arg;
  if (t->calls++ == 0)
    t->at_ns = relock__now_ns();
  t->reason = reason;
}

static int was_told(void *arg) { return ((told_t *)arg)->calls > 0; }

typedef struct {
  fx_t *fx;
  char channel[RELOCK__CHANNEL_BUF];
} channel_ref_t;

/* Someone listens on the channel (the holder's loss watch). */
static int listened(void *arg) {
  channel_ref_t *c = arg;
  char buf[512];
  assert_int_equal(relock_test_redis_cmd(c->fx->redis, buf, sizeof buf, "PUBSUB", "NUMSUB", c->channel, NULL), 0);
  const char *count = strrchr(buf, ':');
  return count != NULL && atoll(count + 1) >= 1;
}

/* Takes a hold as c says (client a, owner 1), waits c->delay_ms, takes it
 * away (client b's force release, or a DEL) and returns how long after
 * that the lost callback ran, in ms; -1 if it did not within 2 s. A loss
 * told is kept: validity says lost, and so does a release. */
static double lose_hold(fx_t *fx, const loss_case_t *c, int n, char *what, size_t size) {
  char name[64];
  snprintf(name, sizeof name, "loss-%d-%s", n, lock_kinds[c->kind].what);
  snprintf(what, size, "%s/%s/%s%s", lock_kinds[c->kind].what, c->fixed ? "fixed" : "watchdog",
           c->forced ? "force release" : "DEL", c->watched ? "/watched" : "");
  relock_lock_t *l = lock_kinds[c->kind].make(fx->a, name, NULL);
  relock_lock_t *other = lock_kinds[c->kind].make(fx->b, name, NULL);
  assert_non_null(l);
  assert_non_null(other);
  told_t told = {0, 0, 0};
  assert_int_equal(relock_lock_on_lost(l, on_told, &told), 0);
  if (c->watched)
    assert_int_equal(relock_lock_watch_loss(l, 1), 0);
  assert_true(value_of(relock_lock_lock_async(l, 1, 0, c->fixed ? 20000 : RELOCK_INFINITE)) >= 1);
  if (c->watched) {
    channel_ref_t ch = {fx, ""};
    relock__lock_channel_to(l, ch.channel, sizeof ch.channel);
    assert_true(fx_run_until(fx->a->loop, listened, &ch, 2000));
  }
  fx_run_until(fx->a->loop, never, NULL, c->delay_ms);
  assert_int_equal(told.calls, 0); /* nothing lost yet */
  uint64_t t0 = relock__now_ns();
  if (c->forced)
    assert_int_equal(value_of(relock_lock_force_unlock_async(other)), 1);
  else
    assert_int_equal(fx_raw_int(fx->redis, "DEL", name, NULL), 1);
  double took = -1;
  if (fx_run_until(fx->a->loop, was_told, &told, 2000)) {
    took = (double)(told.at_ns - t0) / 1e6;
    assert_int_equal(told.calls, 1);
    assert_int_equal(told.reason, RELOCK_ELOST);
    assert_int_equal(relock_lock_validity_ms(l, 1), RELOCK_ELOST); /* no validity left */
    assert_int_equal(outcome(relock_lock_unlock_async(l, 1), NULL, NULL, 0), RELOCK_ELOST);
  }
  relock_lock_free(other);
  relock_lock_free(l);
  return took;
}

/* Runs every case, and fails naming each one told later than bound_ms (or
 * never). */
static void lose_holds(fx_t *fx, loss_case_t *cases, int n, double bound_ms) {
  char failures[4096] = "", what[128];
  size_t used = 0;
  double worst = 0;
  for (int i = 0; i < n; i++) {
    double took = lose_hold(fx, &cases[i], i, what, sizeof what);
    if (took > worst)
      worst = took;
    if (took >= 0 && took <= bound_ms)
      continue;
    char when[32] = "never told";
    if (took >= 0)
      snprintf(when, sizeof when, "told after %.0f ms", took);
    snprintf(failures + used, sizeof failures - used, "\n#   %s: %s", what, when);
    used = strlen(failures);
  }
  printf("# %d losses, the slowest told after %.1f ms (bound %.0f ms)\n", n, worst, bound_ms);
  if (used > 0)
    fail_msg("losses not told within %.0f ms:%s", bound_ms, failures);
}

/* Every kind, fixed lease or watchdog, deleted or force-released, watched
 * or not: the lost callback runs within the watchdog's cycle (a third of
 * its timeout) plus a round trip, whenever in the cycle the loss comes.
 * Before, a fixed-lease hold was never checked: its loss went untold until
 * its lease ran out (20 s here), and then silently. */
static void test_every_loss_is_told_within_a_cycle(void **state) {
  fx_t *fx = *state;
  const int64_t watchdog_ms = 600;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, watchdog_ms);
  fx->a = fx_client(fx->cfg);
  fx->b = fx_client(fx->cfg);
  uint64_t rng = fx_seed("every loss is told");
  loss_case_t cases[NKINDS * 2 * 2];
  int n = 0;
  for (size_t kind = 0; kind < NKINDS; kind++)
    for (int fixed = 0; fixed < 2; fixed++)
      for (int forced = 0; forced < 2; forced++)
        cases[n++] = (loss_case_t){kind, fixed, forced, (int)(relock__random(&rng) % 2),
                                   (int64_t)(relock__random(&rng) % (uint64_t)(watchdog_ms / 3))};
  for (int i = n - 1; i > 0; i--) { /* in a random order */
    int j = (int)(relock__random(&rng) % (uint64_t)(i + 1));
    loss_case_t t = cases[i];
    cases[i] = cases[j];
    cases[j] = t;
  }
  lose_holds(fx, cases, n, (double)fx_slack_ms(watchdog_ms / 3 + 100));
}

/* A watched hold of every kind, fixed lease or watchdog, hears relock's own
 * force release at once (the renewal cycle is 10 s here). Before, the fair
 * lock's force release woke only the head of its queue, the spin lock's
 * published nothing, and a fixed lease found gone was forgotten untold. */
static void test_watched_hold_of_every_kind_hears_a_force_release(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 30000);
  fx->a = fx_client(fx->cfg);
  fx->b = fx_client(fx->cfg);
  uint64_t rng = fx_seed("force release heard");
  loss_case_t cases[NKINDS * 2];
  int n = 0;
  for (size_t kind = 0; kind < NKINDS; kind++)
    for (int fixed = 0; fixed < 2; fixed++)
      cases[n++] = (loss_case_t){kind, fixed, 1, 1, (int64_t)(relock__random(&rng) % 50)};
  lose_holds(fx, cases, n, (double)fx_slack_ms(100));
}

/* -- a re-entry after the key vanished -----------------------------------------*/

/* How an owner's holds of a name are taken and the key vanishes under them. */
typedef struct {
  size_t kind;      /* in lock_kinds */
  int fixed;        /* the first hold: a fixed lease (else the watchdog's) */
  int fixed_again;  /* the re-entry: a fixed lease (else the watchdog's) */
  int forced;       /* b's force release (else a DEL); a is not watching: it hears nothing */
  int other_object; /* the re-entry goes through another object of the same kind and name */
} vanish_case_t;

/* Owner 1 of a holds the name; the key vanishes and, before any renewal or
 * check notices (the watchdog's cycle is 10 s), owner 1 re-enters. Redis
 * makes the field afresh with one hold: the earlier hold is lost (told, as
 * any loss), and the owner holds what Redis counts - one hold, released by
 * one release. Returns NULL, or what went wrong. */
static const char *reenter_after_vanish(fx_t *fx, const vanish_case_t *c, int n, char *what, size_t size) {
  static char why[256];
  char name[64];
  snprintf(name, sizeof name, "vanish-%d-%s", n, lock_kinds[c->kind].what);
  snprintf(what, size, "%s: %s, %s, re-entered %s%s", name, c->fixed ? "fixed" : "watchdog",
           c->forced ? "force released" : "deleted", c->fixed_again ? "fixed" : "with the watchdog",
           c->other_object ? " through another object" : "");
  relock_lock_t *l = lock_kinds[c->kind].make(fx->a, name, NULL);
  relock_lock_t *l2 = c->other_object ? lock_kinds[c->kind].make(fx->a, name, NULL) : l;
  relock_lock_t *other = lock_kinds[c->kind].make(fx->b, name, NULL);
  told_t told = {0, 0, 0};
  assert_int_equal(relock_lock_on_lost(l, on_told, &told), 0);
  assert_int_equal(relock_lock_on_lost(l2, on_told, &told), 0);
  const char *wrong = NULL;
  assert_true(value_of(relock_lock_lock_async(l, 1, 0, c->fixed ? 20000 : RELOCK_INFINITE)) >= 1);
  if (c->forced)
    assert_int_equal(value_of(relock_lock_force_unlock_async(other)), 1);
  else
    assert_int_equal(fx_raw_int(fx->redis, "DEL", name, NULL), 1);
  assert_true(value_of(relock_lock_lock_async(l2, 1, 0, c->fixed_again ? 20000 : RELOCK_INFINITE)) >= 1);
  relock__hold_t *hold = hold_of(fx->a, l, 1);
  long long local = hold != NULL ? (long long)hold->count : 0, redis = raw_count(fx, l, 1);
  if (told.calls != 1 || told.reason != RELOCK_ELOST || local != redis) {
    snprintf(why, sizeof why, "the lost callback ran %d times (reason %s), local count %lld, Redis's %lld", told.calls,
             told.calls > 0 ? relock_err_name(told.reason) : "none", local, redis);
    wrong = why;
  } else if (relock_lock_validity_ms(l2, 1) <= 0) {
    snprintf(why, sizeof why, "the re-entry is not valid: %lld", (long long)relock_lock_validity_ms(l2, 1));
    wrong = why;
  }
  /* One release for the one hold Redis counts: the lock is free, for b. */
  int64_t freed = -1;
  int r = outcome(relock_lock_unlock_async(l2, 1), &freed, NULL, 0);
  if (wrong == NULL && (r != 0 || freed != 1)) {
    snprintf(why, sizeof why, "the release answered %s, freed %lld", relock_err_name(r), (long long)freed);
    wrong = why;
  }
  fx_raw_int(fx->redis, "DEL", name, NULL);
  relock_lock_free(other);
  if (l2 != l)
    relock_lock_free(l2);
  relock_lock_free(l);
  return wrong;
}

/* Every kind whose holds are counted, each lease, a DEL or a force release,
 * the same object or another: a re-entry after the key vanished reports
 * the earlier holds lost, and counts what Redis counts. Before, the
 * re-entry was counted on top of the vanished hold (2 here, 1 in Redis),
 * nobody was told, and the owner's next release freed the lock under the
 * hold it still believed in. */
static void test_reentry_after_the_key_vanished_loses_the_earlier_holds(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 30000);
  fx->a = fx_client(fx->cfg);
  fx->b = fx_client(fx->cfg);
  uint64_t rng = fx_seed("re-entry after a vanish");
  char what[160];
  int n = 0, failed = 0;
  for (size_t kind = 0; kind < NKINDS; kind++)
    for (int i = 0; i < 3; i++, n++) {
      vanish_case_t c = {kind, (int)(relock__random(&rng) % 2), (int)(relock__random(&rng) % 2),
                         (int)(relock__random(&rng) % 2), (int)(relock__random(&rng) % 2)};
      const char *wrong = reenter_after_vanish(fx, &c, n, what, sizeof what);
      if (wrong != NULL) {
        printf("#   %s: %s\n", what, wrong);
        failed++;
      }
    }
  if (failed > 0)
    fail_msg("%d of %d re-entries after a vanish went wrong (above)", failed, n);
}

/* -- one owner's count-changing requests, one at a time ------------------------*/

/* Loads every script but the ones that give holds back (releases, undos):
 * those meet NOSCRIPT, and the client sends them again as EVAL behind what
 * it sent meanwhile - as after a restart of Redis, which forgets its
 * scripts. */
static void forget_give_back_scripts(fx_t *fx) {
  assert_int_equal(relock_test_redis_cmd(fx->redis, NULL, 0, "SCRIPT", "FLUSH", NULL), 0);
  for (int i = 0; i < RELOCK__SCRIPT_COUNT; i++)
    if (i != RELOCK__SCRIPT_LOCK_RELEASE && i != RELOCK__SCRIPT_LOCK_ACQUIRE_UNDO &&
        i != RELOCK__SCRIPT_FAIR_LOCK_RELEASE && i != RELOCK__SCRIPT_RWLOCK_READ_RELEASE &&
        i != RELOCK__SCRIPT_RWLOCK_WRITE_RELEASE)
      assert_int_equal(relock_test_redis_cmd(fx->redis, NULL, 0, "SCRIPT", "LOAD", relock__scripts[i].body, NULL), 0);
}

static int give_backs_over(void *arg) {
  return __atomic_load_n(&((relock_client_t *)arg)->give_backs_owed, __ATOMIC_RELAXED) == 0;
}

typedef struct {
  size_t kind;      /* in lock_kinds */
  int undo;         /* the earlier request: the give-back of a late acquisition (else a release) */
  int fixed;        /* the new acquisition: a fixed lease (else the watchdog's) */
  int other_object; /* the new acquisition goes through another object */
} overlap_case_t;

/* Owner 1's give-back of a hold is sent, and right after it the same
 * owner's new acquisition of the name; the hold it gives back is gone from
 * Redis meanwhile (its key vanished, or its lease of 1 ms ran out). The
 * give-back meets NOSCRIPT and is sent again: had the acquisition gone
 * ahead of it, the give-back would take away the hold the acquisition made
 * afresh, under the owner's belief. Returns NULL, or what went wrong. */
static const char *overlap(fx_t *fx, const overlap_case_t *c, int n, char *what, size_t size) {
  static char why[256];
  char name[64];
  snprintf(name, sizeof name, "overlap-%d-%s", n, lock_kinds[c->kind].what);
  snprintf(what, size, "%s: %s, then acquired %s%s", name, c->undo ? "a late acquisition given back" : "released",
           c->fixed ? "fixed" : "with the watchdog", c->other_object ? " through another object" : "");
  relock_lock_t *l = lock_kinds[c->kind].make(fx->a, name, NULL);
  relock_lock_t *l2 = c->other_object ? lock_kinds[c->kind].make(fx->a, name, NULL) : l;
  relock_future_t *first;
  if (c->undo) {
    /* Its answer comes 12 ms after the try, past the shortest lease's
     * validity (10 ms less the drift margin): given back. */
    relock_test_proxy_delay(fx->proxy, 6);
    forget_give_back_scripts(fx);
    first = relock_lock_lock_async(l, 1, 0, RELOCK_MIN_LEASE_MS);
    assert_int_equal(outcome(first, NULL, NULL, 0), RELOCK_ETIMEDOUT); /* the give-back is on its way */
    first = NULL;
  } else {
    assert_true(value_of(relock_lock_lock_async(l, 1, 0, 20000)) >= 1);
    assert_int_equal(fx_raw_int(fx->redis, "DEL", name, NULL), 1);
    relock_test_proxy_delay(fx->proxy, 5);
    forget_give_back_scripts(fx);
    first = relock_lock_unlock_async(l, 1);
  }
  int64_t acquired = -1;
  int r = outcome(relock_lock_lock_async(l2, 1, 0, c->fixed ? 20000 : RELOCK_INFINITE), &acquired, NULL, 0);
  if (first != NULL)
    outcome(first, NULL, NULL, 0); /* lost: the hold is gone */
  assert_true(fx_run_until(fx->a->loop, give_backs_over, fx->a, 2000)); /* the give-back has run */
  relock_test_proxy_delay(fx->proxy, 0);
  const char *wrong = NULL;
  long long redis = raw_count(fx, l2, 1);
  relock__hold_t *hold = hold_of(fx->a, l2, 1);
  if (r != 0 || acquired < 1) {
    snprintf(why, sizeof why, "the acquisition answered %s, %lld", relock_err_name(r), (long long)acquired);
    wrong = why;
  }
  if (wrong == NULL && (redis != 1 || hold == NULL || hold->count != 1 || relock_lock_validity_ms(l2, 1) <= 0)) {
    snprintf(why, sizeof why, "acquired, but Redis counts %lld hold(s), the owner %lld (validity %lld)", redis,
             hold != NULL ? (long long)hold->count : 0LL, (long long)relock_lock_validity_ms(l2, 1));
    wrong = why;
  }
  if (r == 0 && acquired >= 1)
    outcome(relock_lock_unlock_async(l2, 1), NULL, NULL, 0);
  for (int i = 0; i < RELOCK__SCRIPT_COUNT; i++)
    assert_int_equal(relock_test_redis_cmd(fx->redis, NULL, 0, "SCRIPT", "LOAD", relock__scripts[i].body, NULL), 0);
  fx_raw_int(fx->redis, "DEL", name, NULL);
  if (l2 != l)
    relock_lock_free(l2);
  relock_lock_free(l);
  return wrong;
}

/* Has a's connection send every give-back script once, so that it knows
 * them (its first EVALSHA of a script goes alone, with nothing behind it). */
static void learn_give_back_scripts(fx_t *fx) {
  for (size_t kind = 0; kind < NKINDS; kind++) {
    relock_lock_t *l = lock_kinds[kind].make(fx->a, "learn", NULL);
    assert_true(value_of(relock_lock_lock_async(l, 1, 0, 20000)) >= 1);
    assert_int_equal(value_of(relock_lock_unlock_async(l, 1)), 1);
    relock_test_proxy_delay(fx->proxy, 6); /* an answer too late for the shortest lease */
    assert_int_equal(outcome(relock_lock_lock_async(l, 1, 0, RELOCK_MIN_LEASE_MS), NULL, NULL, 0),
                     RELOCK_ETIMEDOUT);
    relock_test_proxy_delay(fx->proxy, 0);
    assert_true(fx_run_until(fx->a->loop, give_backs_over, fx->a, 2000));
    relock_lock_free(l);
  }
}

/* Every kind whose holds are counted: an owner's release, or the give-back
 * of its late acquisition, and its next acquisition of the name go to Redis
 * one at a time, whatever happens to the first on its way (here: NOSCRIPT,
 * and a second trip). Before, the acquisition went ahead, made the field
 * afresh, and the give-back running after it took that hold away: the
 * owner was told "acquired" with nothing in Redis. */
static void test_one_owners_counting_requests_go_one_at_a_time(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->via, RELOCK_OPT_WATCHDOG_TIMEOUT, 30000);
  fx->a = fx_client(fx->via);
  uint64_t rng = fx_seed("one at a time");
  learn_give_back_scripts(fx);
  char what[160];
  int n = 0, failed = 0;
  for (size_t kind = 0; kind < NKINDS; kind++)
    for (int undo = 0; undo < 2; undo++, n++) {
      overlap_case_t c = {kind, undo, (int)(relock__random(&rng) % 2), (int)(relock__random(&rng) % 2)};
      const char *wrong = overlap(fx, &c, n, what, sizeof what);
      if (wrong != NULL) {
        printf("#   %s: %s\n", what, wrong);
        failed++;
      }
    }
  if (failed > 0)
    fail_msg("%d of %d owners' requests overlapped (above)", failed, n);
}

/* -- a foreign client cuts a fixed lease --------------------------------------*/

/* a holds the lock with a fixed 6 s lease; another client cuts its key's
 * expiry to 1 s with a plain PEXPIRE (as Redisson's watchdog renewal does,
 * with its own lease, on a lock it shares). a cannot stop that, but within
 * a check cycle (200 ms) and a round trip it believes no longer than Redis
 * keeps the key, and nobody renewing it, a is told of the loss before
 * another client can take the lock. Before, a went on believing its 6 s:
 * the key expired, and b took the lock while a believed it held it. */
static void test_a_foreign_pexpire_cuts_a_fixed_lease(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 600);
  fx->a = fx_client(fx->cfg);
  fx->b = fx_client(fx->cfg);
  relock_lock_t *l = lock_of(fx->a, "cut"), *other = lock_of(fx->b, "cut"), *alone = lock_of(fx->a, "uncut");
  lost_t lost = {0, 0}, alone_lost = {0, 0};
  relock_lock_on_lost(l, on_lost, &lost);
  relock_lock_on_lost(alone, on_lost, &alone_lost);
  int64_t cut = 1000 * relock_test_slowdown(); /* outlasts the check's bound */
  assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, 6 * cut)), 1);
  /* a lease nobody cuts, checked all along, merely runs out meanwhile */
  assert_int_equal(value_of(relock_lock_lock_async(alone, 1, 0, cut)), 1);
  char cut_s[32];
  snprintf(cut_s, sizeof cut_s, "%lld", (long long)cut);
  assert_int_equal(fx_raw_int(fx->redis, "PEXPIRE", "cut", cut_s, NULL), 1);
  fx_kept_at_least_believed(fx->redis, "cut", l, 1, 200 + 100);
  assert_int_equal(lost.calls, 0); /* not yet: Redis keeps it for a while */
  fx_told_before_taken(&lost.calls, other, 2, 3 * cut);
  assert_int_equal(lost.calls, 1);
  assert_int_equal(lost.reason, RELOCK_ELOST);
  assert_int_equal(relock_lock_validity_ms(l, 1), RELOCK_ELOST);
  assert_int_equal(outcome(relock_lock_unlock_async(l, 1), NULL, NULL, 0), RELOCK_ELOST);
  assert_int_equal(value_of(relock_lock_unlock_async(other, 2)), 1);
  char uncut_key[] = "uncut";
  void *uncut[] = {fx, uncut_key};
  assert_true(fx_run_until(fx->a->loop, key_gone, uncut, 2 * cut));
  fx_run_until(fx->a->loop, never, NULL, 20); /* its end's timer, a tick late at most */
  assert_int_equal(relock_lock_validity_ms(alone, 1), RELOCK_ENOTOWNER); /* forgotten, */
  assert_int_equal(alone_lost.calls, 0);                                 /* not lost */
  relock_lock_free(l);
  relock_lock_free(other);
  relock_lock_free(alone);
}

/* relock_lock_validate asks Redis the same, at once (no check cycle runs
 * within this test: the watchdog's is every 10 s): a cut expiry cuts the
 * validity, and one too short to leave any is a loss. Before, validate
 * answered "still there" and the validity stayed at 6 s. */
static void test_validate_sees_a_foreign_cut(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 30000);
  fx->a = fx_client(fx->cfg);
  relock_lock_t *l = lock_of(fx->a, "cut-validate");
  lost_t lost = {0, 0};
  relock_lock_on_lost(l, on_lost, &lost);
  assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, 6000)), 1);
  assert_int_equal(fx_raw_int(fx->redis, "PEXPIRE", "cut-validate", "1000", NULL), 1);
  assert_int_equal(value_of(relock_lock_validate_async(l, 1)), 1);
  fx_kept_at_least_believed(fx->redis, "cut-validate", l, 1, 0);
  assert_int_equal(fx_raw_int(fx->redis, "PEXPIRE", "cut-validate", "1", NULL), 1);
  assert_int_equal(value_of(relock_lock_validate_async(l, 1)), 0);
  assert_int_equal(lost.calls, 1);
  assert_int_equal(lost.reason, RELOCK_ELOST);
  assert_int_equal(relock_lock_validity_ms(l, 1), RELOCK_ELOST);
  relock_lock_free(l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_hash_is_keyed_per_process),
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
      T(test_retried_acquire_after_expiry_is_not_acquired),
      T(test_retried_acquire_while_held_counts_once),
      T(test_answer_later_than_the_lease_is_not_acquired),
      T(test_reentry_with_a_shorter_lease_keeps_the_longer),
      T(test_lease_within_the_drift_margin_is_refused),
      T(test_mixed_leases_keep_what_the_owner_believes),
      T(test_unlock_while_the_subscription_is_unconfirmed),
      T(test_release_in_flight_past_the_deadline_keeps_the_check_near),
      T(test_failed_acquire_gives_back_its_hold),
      T(test_bounded_wait_bounds_the_try_in_flight),
      T(test_give_back_outlives_any_outage),
      T(test_close_reports_what_it_could_not_give_back),
      T(test_busy_server_is_retried),
      T(test_lost_and_expired_holds_leave_the_registry),
      T(test_release_of_a_lost_hold_reports_it),
      T(test_fixed_hold_taken_again_with_the_watchdog_is_renewed),
      T(test_lost_holds_are_forgotten_when_due),
      T(test_validity_is_local_and_validate_asks_redis),
      T(test_cancel_then_close_leaves_nothing_held),
      T(test_release_of_a_lost_hold_needs_no_redis),
      T(test_every_loss_is_told_within_a_cycle),
      T(test_watched_hold_of_every_kind_hears_a_force_release),
      T(test_reentry_after_the_key_vanished_loses_the_earlier_holds),
      T(test_one_owners_counting_requests_go_one_at_a_time),
      T(test_a_foreign_pexpire_cuts_a_fixed_lease),
      T(test_validate_sees_a_foreign_cut),
#undef T
  };
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found: install the Debian package redis-server");
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("lock_safety", tests, NULL, NULL);
}
