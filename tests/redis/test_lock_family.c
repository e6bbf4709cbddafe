/* The behaviour every exclusive kind of lock shares, run against each kind
 * (reentrant, fair, fenced, spin, write) on a real redis-server: reentrancy,
 * wait deadline, cancel, hand-off on release, lost-lock callback, watchdog
 * renewal in batches, fixed lease, force release, mutual exclusion across 8
 * processes. Then what is particular to the fenced lock (tokens) and the
 * spin lock (no pub/sub at all). The fair and read-write locks' own rules
 * are in test_fair_lock.c and test_rwlock.c. */
#include <config.h>

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/client_fixture.h"
#include "objects/lock_impl.h"

typedef relock_lock_t *(*make_fn)(relock_client_t *c, const char *name, relock_error_t *err);

typedef struct kind {
  make_fn make;
  int spin;    /* no pub/sub: a hand-off waits for a back-off */
  int fenced;  /* acquisitions answer a token */
} kind_t;

static const kind_t reentrant = {relock_lock_new, 0, 0};
static const kind_t fair = {relock_fair_lock_new, 0, 0};
static const kind_t fenced = {relock_fenced_lock_new, 0, 1};
static const kind_t spin = {relock_spin_lock_new, 1, 0};
static const kind_t write_lock = {relock_write_lock_new, 0, 0};

/* The kind under test is the test's prestate. */
typedef fx_pair_t fx_t;

static const kind_t *kind_of(const fx_t *fx) { return fx->param; }

static relock_lock_t *lock_of(fx_t *fx, relock_client_t *c, const char *name) {
  relock_error_t err = {-1, ""};
  relock_lock_t *l = kind_of(fx)->make(c, name, &err);
  assert_non_null(l);
  assert_int_equal(err.code, 0);
  return l;
}

#define ACQUIRE(l, owner, wait, lease) fx_value(relock_lock_lock_async((l), (owner), (wait), (lease)))
#define RELEASE(l, owner) fx_value(relock_lock_unlock_async((l), (owner)))

/* The hold count Redis has for owner's field. */
static long long raw_count(fx_t *fx, relock_lock_t *l, uint64_t owner) {
  char field[RELOCK__FIELD_MAX], buf[128];
  relock__lock_field(l, owner, field);
  assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "HGET", relock_lock_name(l), field, NULL), 0);
  return buf[0] == '$' && buf[1] != '-' ? atoll(strchr(buf, '\n') + 1) : 0;
}

/* GET key as a number (0 for nil). */
static long long raw_get(fx_t *fx, const char *key) {
  char buf[128];
  assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "GET", key, NULL), 0);
  return buf[0] == '$' && buf[1] != '-' ? atoll(strchr(buf, '\n') + 1) : 0;
}

/* How long a hand-off may take: a round trip or two when the release is
 * heard, a back-off (at most 128 ms, jittered up by half) for a spin lock. */
static double handoff_bound_ms(const fx_t *fx) { return (double)fx_slack_ms(kind_of(fx)->spin ? 250 : 100); }

/* -- each kind ----------------------------------------------------------------*/

static void test_reentrancy(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx, fx->a, "res"), *other = lock_of(fx, fx->b, "res");
  int64_t first = ACQUIRE(l, 1, 0, RELOCK_INFINITE);
  int64_t second = ACQUIRE(l, 1, 0, RELOCK_INFINITE);
  assert_true(first >= 1);
  assert_true(second >= 1);
  if (kind_of(fx)->fenced)
    assert_true(second > first); /* every acquisition takes a token, re-entries too */
  assert_int_equal(raw_count(fx, l, 1), 2);
  assert_int_equal(fx_value(relock_lock_hold_count_async(l, 1)), 2);
  assert_int_equal(ACQUIRE(other, 2, 0, RELOCK_INFINITE), 0); /* another owner: busy */
  assert_int_equal(RELEASE(l, 1), 0);
  assert_int_equal(raw_count(fx, l, 1), 1);
  assert_int_equal(ACQUIRE(other, 2, 0, RELOCK_INFINITE), 0);
  assert_int_equal(RELEASE(l, 1), 1);
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", "res", NULL), 0);
  assert_true(ACQUIRE(other, 2, 0, RELOCK_INFINITE) >= 1);
  assert_int_equal(fx_error(relock_lock_unlock_async(l, 1), NULL, 0), RELOCK_ENOTOWNER);
  assert_int_equal(RELEASE(other, 2), 1);
  relock_lock_free(l);
  relock_lock_free(other);
}

static void test_wait_deadline(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx, fx->a, "res"), *lb = lock_of(fx, fx->b, "res");
  assert_true(ACQUIRE(la, 1, 0, 10000) >= 1);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(ACQUIRE(lb, 2, 300, RELOCK_INFINITE), 0);
  double waited = fx_ms_since(t0);
  assert_true(waited >= 300.0);
  assert_true(waited < fx_slack_ms(300 + 100));
  assert_int_equal(raw_count(fx, la, 2), 0);
  assert_int_equal(RELEASE(la, 1), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

static void test_handoff_on_release(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx, fx->a, "res"), *lb = lock_of(fx, fx->b, "res");
  assert_true(ACQUIRE(la, 1, 0, 10000) >= 1); /* a long lease: no TTL wake-up */
  relock_future_t *wait = relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(wait, 300), RELOCK_EPENDING);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(RELEASE(la, 1), 1);
  assert_int_equal(relock_future_wait(wait, 5000), 0);
  double latency = fx_ms_since(t0);
  assert_true(fx_value(relock_future_retain(wait)) >= 1);
  relock_future_release(wait);
  if (latency >= handoff_bound_ms(fx))
    fail_msg("hand-off took %.1f ms (bound %.0f)", latency, handoff_bound_ms(fx));
  assert_int_equal(RELEASE(lb, 2), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

typedef struct redis_probe {
  fx_t *fx;
  const char *key;
} redis_probe_t;

static int key_gone(void *arg) {
  redis_probe_t *p = arg;
  return fx_raw_int(p->fx->redis, "EXISTS", p->key, NULL) == 0;
}

static void test_cancel_leaves_nothing(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx, fx->a, "res"), *lb = lock_of(fx, fx->b, "res");
  assert_true(ACQUIRE(la, 1, 0, 10000) >= 1);
  relock_future_t *wait = relock_lock_lock_async(lb, 2, RELOCK_INFINITE, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(wait, 300), RELOCK_EPENDING);
  assert_int_equal(relock_future_cancel(wait), 1);
  assert_int_equal(relock_future_state(wait), RELOCK_FUTURE_CANCELLED);
  relock_future_release(wait);
  /* a fair lock's waiter leaves its queue in Redis at once (a script sent
   * for the first time may take a second round trip: NOSCRIPT, then EVAL) */
  redis_probe_t gone = {fx, "redisson_lock_queue:{res}"};
  assert_true(fx_run_until(fx->b->loop, key_gone, &gone, fx_slack_ms(500)));
  assert_int_equal(RELEASE(la, 1), 1);
  relock_future_release(FX_CMD(fx->b, "PING"));
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", "res", NULL), 0); /* b did not take it */
  relock_lock_free(la);
  relock_lock_free(lb);
}

typedef struct lost {
  int calls;
  uint64_t owner;
  int reason;
} lost_t;

static void on_lost(relock_lock_t *l, uint64_t owner, int reason, const char *message, void *arg) {
  (void)l;
  (void)message;
  lost_t *lost = arg;
  lost->calls++;
  lost->owner = owner;
  lost->reason = reason;
}

static int was_lost(void *arg) { return ((lost_t *)arg)->calls > 0; }

static void test_lost_when_deleted(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 300);
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx, fx->a, "res");
  lost_t lost = {0};
  relock_lock_on_lost(l, on_lost, &lost);
  assert_true(ACQUIRE(l, 7, 0, RELOCK_INFINITE) >= 1);
  relock_test_redis_cmd(fx->redis, NULL, 0, "DEL", "res", NULL);
  assert_true(fx_run_until(fx->a->loop, was_lost, &lost, fx_slack_ms(2000)));
  assert_int_equal(lost.calls, 1);
  assert_int_equal(lost.owner, 7);
  assert_int_equal(lost.reason, RELOCK_ELOST);
  assert_int_equal(fx_error(relock_lock_unlock_async(l, 7), NULL, 0), RELOCK_ELOST);
  assert_int_equal(fx->a->ledger.nrenewing, 0);
  relock_lock_free(l);
}

typedef struct until {
  uint64_t end_ns;
} until_t;

static int time_is_up(void *arg) { return relock__now_ns() >= ((until_t *)arg)->end_ns; }

static void test_watchdog_renews_in_batches(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 600);
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(2000));
  fx_pair_clients(fx);
  enum { N = 250 };
  relock_lock_t *locks[N];
  char name[32];
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "many:%d", i);
    locks[i] = lock_of(fx, fx->a, name);
    assert_true(ACQUIRE(locks[i], 1, 0, RELOCK_INFINITE) >= 1);
  }
  uint64_t cycles = fx->a->renewal.cycles, batches = fx->a->renewal.batches;
  until_t u = {relock__now_ns() + 1500 * 1000000ull}; /* 2.5 leases */
  fx_run_until(fx->a->loop, time_is_up, &u, 5000);
  relock_future_release(FX_CMD(fx->a, "PING")); /* the last batch answered */
  uint64_t ran = fx->a->renewal.cycles - cycles;
  assert_true(ran >= 3);
  assert_int_equal(fx->a->renewal.batches - batches, ran * 3); /* 250 holds: 3 batches of at most 100 */
  assert_int_equal(fx->a->ledger.lost, 0);
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "many:%d", i);
    long long ttl = fx_raw_int(fx->redis, "PTTL", name, NULL);
    assert_true(ttl > 0 && ttl <= 600);
    assert_int_equal(RELEASE(locks[i], 1), 1);
    relock_lock_free(locks[i]);
  }
  assert_int_equal(fx->a->ledger.nrenewing, 0);
}

static void test_fixed_lease(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 300);
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx, fx->a, "res");
  assert_true(ACQUIRE(l, 1, 0, 400) >= 1);
  long long ttl = fx_raw_int(fx->redis, "PTTL", "res", NULL);
  assert_true(ttl > 300 && ttl <= 400);
  assert_int_equal(fx->a->ledger.nrenewing, 0); /* never renewed */
  int64_t valid = relock_lock_validity_ms(l, 1);
  assert_true(valid > 0 && valid <= 400);
  until_t u = {relock__now_ns() + 500 * 1000000ull};
  fx_run_until(fx->a->loop, time_is_up, &u, 2000);
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", "res", NULL), 0);
  assert_int_equal(relock_lock_validity_ms(l, 1), RELOCK_ENOTOWNER);
  assert_int_equal(fx_error(relock_lock_unlock_async(l, 1), NULL, 0), RELOCK_ENOTOWNER);
  relock_lock_free(l);
}

static void test_force_release(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx, fx->a, "res"), *lb = lock_of(fx, fx->b, "res");
  assert_true(ACQUIRE(la, 1, 0, 10000) >= 1);
  relock_future_t *wait = relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(wait, 300), RELOCK_EPENDING);
  uint64_t t0 = relock__now_ns();
  relock_lock_t *third = lock_of(fx, fx->a, "res");
  assert_int_equal(fx_value(relock_lock_force_unlock_async(third)), 1);
  assert_int_equal(relock_future_wait(wait, 5000), 0); /* the waiter is woken */
  double latency = fx_ms_since(t0);
  assert_true(fx_value(relock_future_retain(wait)) >= 1);
  relock_future_release(wait);
  if (latency >= handoff_bound_ms(fx))
    fail_msg("force release to acquisition took %.1f ms (bound %.0f)", latency, handoff_bound_ms(fx));
  assert_int_equal(fx_value(relock_lock_force_unlock_async(third)), 1); /* b's hold */
  assert_int_equal(fx_value(relock_lock_force_unlock_async(third)), 0); /* nothing left */
  relock_lock_free(la);
  relock_lock_free(lb);
  relock_lock_free(third);
}

/* -- mutual exclusion across processes ----------------------------------------*/

static void critical_sections(const kind_t *kind, const relock_options_t *cfg, int n) {
  relock_client_t *c = relock_client_new(NULL, cfg, NULL);
  relock_lock_t *l = kind->make(c, "counter-lock", NULL);
  if (c == NULL || l == NULL)
    _exit(9);
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

static void test_mutual_exclusion_8_processes(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(3000));
  /* spinners hand over by back-off, tens of ms each: fewer rounds */
  int per = relock_test_under_valgrind() ? 10 : kind_of(fx)->spin ? 25 : 100;
  enum { PROCS = 8 };
  pid_t pids[PROCS];
  for (int i = 0; i < PROCS; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0)
      critical_sections(kind_of(fx), fx->cfg, per);
  }
  for (int i = 0; i < PROCS; i++) {
    int status = 0;
    assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  assert_int_equal(raw_get(fx, "counter"), PROCS * per);
}

/* -- the fenced lock's tokens -------------------------------------------------*/

static void test_fenced_tokens_increase_across_clients(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx, fx->a, "res"), *lb = lock_of(fx, fx->b, "res");
  assert_int_equal(fx_value(relock_fenced_lock_token_async(la)), 0); /* none taken yet */
  int64_t last = 0;
  for (int i = 0; i < 10; i++) {
    relock_lock_t *l = i % 2 ? la : lb;
    int64_t token = ACQUIRE(l, 1, 1000, RELOCK_INFINITE);
    assert_true(token > last);
    assert_int_equal(fx_value(relock_fenced_lock_token_async(la)), token);
    assert_int_equal(raw_get(fx, "redisson_lock_token:{res}"), token);
    last = token;
    assert_int_equal(RELEASE(l, 1), 1);
  }
  /* "not acquired" is 0, never a token */
  assert_true(ACQUIRE(la, 1, 0, RELOCK_INFINITE) > last);
  assert_int_equal(ACQUIRE(lb, 2, 0, RELOCK_INFINITE), 0);
  assert_int_equal(ACQUIRE(lb, 2, 100, RELOCK_INFINITE), 0);
  assert_int_equal(RELEASE(la, 1), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

static void test_fenced_blocking_calls(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *l = lock_of(fx, fx->a, "res");
  int64_t t1 = 0, t2 = -1, latest = -1;
  assert_int_equal(relock_fenced_lock_token(l, &latest), 0);
  assert_int_equal(latest, 0); /* none taken yet */
  assert_int_equal(relock_fenced_lock_lock(l, RELOCK_INFINITE, &t1), 0);
  assert_true(t1 >= 1);
  assert_int_equal(relock_fenced_lock_try_lock(l, 0, RELOCK_INFINITE, &t2), 0);
  assert_true(t2 > t1);
  assert_int_equal(relock_fenced_lock_token(l, &latest), 0);
  assert_int_equal(latest, t2);
  assert_int_equal(relock_lock_unlock(l), 0);
  assert_int_equal(relock_lock_unlock(l), 0);
  relock_lock_t *plain = relock_lock_new(fx->a, "plain", NULL);
  assert_int_equal(relock_fenced_lock_lock(plain, RELOCK_INFINITE, &t1), RELOCK_EINVAL);
  assert_non_null(strstr(relock_last_error_message(), "not a fenced lock"));
  assert_int_equal(fx_error(relock_fenced_lock_token_async(plain), NULL, 0), RELOCK_EINVAL);
  assert_int_equal(relock_fenced_lock_token(plain, &latest), RELOCK_EINVAL);
  assert_non_null(strstr(relock_last_error_message(), "not a fenced lock"));
  assert_int_equal(relock_fenced_lock_token(NULL, &latest), RELOCK_EINVAL);
  relock_lock_free(plain);
  relock_lock_free(l);
}

/* -- the spin lock: no pub/sub --------------------------------------------------*/

static long long stat_calls(fx_t *fx, const char *command) {
  char buf[8192], key[64];
  assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "INFO", "commandstats", NULL), 0);
  snprintf(key, sizeof key, "cmdstat_%s:calls=", command);
  const char *p = strstr(buf, key);
  return p != NULL ? atoll(p + strlen(key)) : 0;
}

static void test_spin_uses_no_pubsub(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  relock_lock_t *la = lock_of(fx, fx->a, "res"), *lb = lock_of(fx, fx->b, "res");
  relock_test_redis_cmd(fx->redis, NULL, 0, "CONFIG", "RESETSTAT", NULL);
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1);
  relock_future_t *wait = relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(wait, 300), RELOCK_EPENDING);
  long long tries = stat_calls(fx, "evalsha") + stat_calls(fx, "eval");
  assert_true(tries >= 5); /* 300 ms of back-off: 1, 2, 4, ... 128 ms */
  assert_true(tries <= 12);
  assert_int_equal(RELEASE(la, 1), 1);
  assert_int_equal(relock_future_wait(wait, 5000), 0);
  relock_future_release(wait);
  assert_int_equal(RELEASE(lb, 2), 1);
  assert_int_equal(fx_value(relock_lock_force_unlock_async(la)), 0);
  assert_int_equal(stat_calls(fx, "subscribe") + stat_calls(fx, "ssubscribe"), 0);
  /* no PUBLISH either: scripts count their inner calls */
  assert_int_equal(stat_calls(fx, "publish") + stat_calls(fx, "spublish"), 0);
  relock_lock_free(la);
  relock_lock_free(lb);
}

/* Each test's fixture (setup, teardown): the kind is its prestate. */
#define FX fx_pair_server_setup, fx_pair_teardown

#define KIND_TESTS(k)                                                                           \
  {#k ": reentrancy", test_reentrancy, FX, (void *)&k},                                         \
      {#k ": wait deadline", test_wait_deadline, FX, (void *)&k},                               \
      {#k ": hand-off on release", test_handoff_on_release, FX, (void *)&k},                    \
      {#k ": cancel leaves nothing", test_cancel_leaves_nothing, FX, (void *)&k},               \
      {#k ": lost when deleted", test_lost_when_deleted, FX, (void *)&k},                       \
      {#k ": watchdog renews in batches", test_watchdog_renews_in_batches, FX, (void *)&k},     \
      {#k ": fixed lease", test_fixed_lease, FX, (void *)&k},                                   \
      {#k ": force release", test_force_release, FX, (void *)&k},                               \
      {#k ": mutual exclusion, 8 processes", test_mutual_exclusion_8_processes, FX, (void *)&k}

int main(void) {
  const struct CMUnitTest tests[] = {
      KIND_TESTS(reentrant),
      KIND_TESTS(fair),
      KIND_TESTS(fenced),
      KIND_TESTS(spin),
      KIND_TESTS(write_lock),
      {"fenced: tokens increase across clients", test_fenced_tokens_increase_across_clients, FX, (void *)&fenced},
      {"fenced: blocking calls", test_fenced_blocking_calls, FX, (void *)&fenced},
      {"spin: no pub/sub", test_spin_uses_no_pubsub, FX, (void *)&spin},
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, NULL, NULL);
}
