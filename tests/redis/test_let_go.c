/* Letting go is a state of its own (docs/SAFETY.md, "Letting go"): once an
 * owner has asked to release its last hold, nothing renews that hold
 * again, whatever the release's answer; a release that got no answer is
 * retried in the background until Redis answers or the lease has ended,
 * so the lock is free within one lease of the ask at the latest - and as
 * soon as Redis is back, in practice. The owner's next acquisition counts
 * what Redis answers, never the hold it let go of.
 *
 * The cases are generated: every kind of hold (each lock kind, a watched
 * permit) x lease (the watchdog's, a fixed one) x re-entry (one hold or
 * two; the last release is the one that fails) x outage (shorter than the
 * lease, or longer), each against a real redis-server behind the test
 * proxy, which black-holes the connections the release goes on. The seed
 * (RELOCK_TEST_SEED) picks the outages' lengths. */
#include <config.h>

#include <string.h>

#include <relock/permit_semaphore.h>

#include "support/proxied_holds.h"
#include "base/random.h"
#include "objects/lock_impl.h"
#include "redis/scripts.h"

#define WATCHDOG_MS 3000
#define FIXED_MS 4000

static int setup(void **state) {
  if (proxied_setup(state) != 0)
    return -1;
  fx_t *fx = *state;
  fx_set_ms(fx->via, RELOCK_OPT_WATCHDOG_TIMEOUT, WATCHDOG_MS);
  fx_set_ms(fx->via, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(250));
  fx_set_int(fx->via, RELOCK_OPT_RETRY_ATTEMPTS, 0);
  fx_set_ms(fx->via, RELOCK_OPT_RETRY_INTERVAL, 100);
  fx_set_ms(fx->via, RELOCK_OPT_PING_INTERVAL, 200);
  for (int i = 0; i < RELOCK__SCRIPT_COUNT; i++)
    assert_int_equal(relock_test_redis_cmd(fx->redis, NULL, 0, "SCRIPT", "LOAD", relock__scripts[i].body, NULL), 0);
  return 0;
}

/* One case: what is held, and how the release's outage goes. */
typedef struct {
  kind_t kind;
  int watchdog;      /* the watchdog's lease, or a fixed one */
  int holds;         /* 1, or 2 (re-entered: the first release is answered) */
  int64_t outage_ms; /* from the ask, how long Redis stays out of reach */
} case_t;

typedef struct {
  fx_t *fx;
  relock_client_t *c;
  relock_lock_t *l;             /* a lock kind's */
  relock_permit_semaphore_t *s; /* the permit's */
  char permit[RELOCK_PERMIT_ID_SIZE];
  char name[64];
  uint64_t owner;
} held_t;

/* Whether Redis still has what h's owner let go of: its field in the
 * lock's hash, or its permit in the semaphore's timeout zset. */
static int still_there(held_t *h) {
  if (h->s != NULL) {
    char zset[80];
    snprintf(zset, sizeof zset, "{%s}:timeout", h->name);
    return fx_raw_int(h->fx->redis, "ZCARD", zset, NULL) > 0;
  }
  char field[RELOCK__FIELD_MAX];
  relock__lock_field(h->l, h->owner, field);
  return fx_raw_int(h->fx->redis, "HEXISTS", h->name, field, NULL) == 1;
}

static int gone(void *arg) { return !still_there(arg); }

static void take(held_t *h, const case_t *k) {
  int64_t lease = k->watchdog ? RELOCK_INFINITE : FIXED_MS;
  if (k->kind == K_PERMIT) {
    assert_int_equal(relock_test_redis_cmd(h->fx->redis, NULL, 0, "DEL", h->name, NULL), 0);
    h->s = relock_permit_semaphore_new(h->c, h->name, NULL);
    assert_non_null(h->s);
    assert_int_equal(fx_value(relock_permit_semaphore_try_set_permits_async(h->s, 1)), 1);
    relock_future_t *f = relock_permit_semaphore_acquire_async(h->s, 0, lease);
    assert_int_equal(relock_future_wait(f, fx_slack_ms(5000)), 0);
    size_t len;
    const char *id = relock_future_string(f, &len);
    assert_non_null(id);
    memcpy(h->permit, id, len + 1);
    relock_future_release(f);
    return;
  }
  h->l = new_lock(h->c, k->kind, h->name);
  assert_non_null(h->l);
  for (int i = 0; i < k->holds; i++)
    assert_int_equal(fx_value(relock_lock_lock_async(h->l, h->owner, 0, lease)), 1);
}

static relock_future_t *release(held_t *h) {
  return h->s != NULL ? relock_permit_semaphore_release_async(h->s, h->permit)
                      : relock_lock_unlock_async(h->l, h->owner);
}

static int64_t validity(held_t *h) {
  return h->s != NULL ? relock_permit_semaphore_validity_ms(h->s, h->permit)
                      : relock_lock_validity_ms(h->l, h->owner);
}

static void run_case(fx_t *fx, const case_t *k, int n) {
  held_t h = {.fx = fx, .owner = 7};
  snprintf(h.name, sizeof h.name, "letgo-%d", n);
  h.c = fx_client(fx->via);
  struct ev_loop *loop = relock_client_loop(h.c);
  take(&h, k);
  for (int i = 1; i < k->holds; i++) /* the earlier releases are answered */
    assert_int_equal(fx_value(release(&h)), 0);
  int64_t lease = k->watchdog ? WATCHDOG_MS : FIXED_MS;
  print_message("# case %d: %s, %s lease, %d hold(s), outage %lld ms\n", n, kind_names[k->kind],
                k->watchdog ? "watchdog" : "fixed", k->holds, (long long)k->outage_ms);

  /* Redis out of reach: what is sent is swallowed, new connections too. */
  relock_test_proxy_blackhole_accept(fx->proxy, 1);
  relock_test_proxy_blackhole_current(fx->proxy);
  uint64_t asked = relock__now_ns();
  char msg[512];
  relock_future_t *f = release(&h);
  assert_non_null(f);
  int err = relock_future_wait(f, fx_slack_ms(5000));
  assert_int_not_equal(err, RELOCK_EPENDING);
  snprintf(msg, sizeof msg, "%s", relock_future_message(f));
  relock_future_release(f);
  print_message("# the release: %s (%s)\n", relock_err_name(err), msg);
  assert_true(err == RELOCK_ETIMEDOUT || err == RELOCK_ECONNLOST || err == RELOCK_ECONNREFUSED);
  /* The caller is told that the release goes on, and by when the lock is
   * free at the latest. */
  assert_non_null(strstr(msg, "retried in the background"));
  assert_non_null(strstr(msg, "at the latest"));
  /* Let go: the owner holds nothing any more, whatever Redis has. */
  assert_int_equal(validity(&h), RELOCK_ENOTOWNER);

  fx_run_for(loop, k->outage_ms - (int64_t)fx_ms_since(asked));
  relock_test_proxy_blackhole_accept(fx->proxy, 0);
  relock_test_proxy_cut(fx->proxy); /* the swallowed connections end: the client connects again at once */
  uint64_t back = relock__now_ns();
  /* Gone within one lease of the ask (nothing renews it), and once Redis is
   * back, within a reconnect and a retry interval or two (the background
   * retry) - whichever comes later. */
  int64_t bound = lease + fx_slack_ms(300) - (int64_t)fx_ms_since(asked);
  int64_t prompt = fx_slack_ms(2000);
  if (bound < prompt)
    bound = prompt;
  int ok = fx_run_until(loop, gone, &h, bound);
  print_message("# gone %.0f ms after the ask, %.0f ms after Redis was back\n", fx_ms_since(asked),
                fx_ms_since(back));
  assert_true(ok);
  assert_true(fx_ms_since(back) < (double)prompt + fx_slack_ms(300));

  relock_stats_t st;
  assert_int_equal(relock_client_stats(h.c, &st, sizeof st), 0);
  assert_true(st.release_retries >= 1);

  /* The owner takes it again: Redis's count is the owner's, one hold. */
  if (h.l != NULL) {
    assert_true(fx_value(relock_lock_lock_async(h.l, h.owner, 0, RELOCK_INFINITE)) > 0); /* 1, or a fencing token */
    assert_true(validity(&h) > 0);
    assert_int_equal(fx_value(relock_lock_unlock_async(h.l, h.owner)), 1);
    assert_true(gone(&h));
    relock_lock_free(h.l);
  } else {
    relock_permit_semaphore_free(h.s);
  }
  relock_client_free(h.c);
}

static void test_a_release_that_gets_no_answer_lets_go(void **state) {
  fx_t *fx = *state;
  uint64_t rng = fx_seed("a release that gets no answer lets go") * 2654435761u + 1;
  int n = 0;
  for (kind_t kind = 0; kind < KINDS; kind++)
    for (int watchdog = 1; watchdog >= 0; watchdog--)
      for (int holds = 1; holds <= 2; holds++) {
        /* Every kind with the watchdog's lease; re-entry, and a fixed
         * lease, where a kind's release differs (the plain hash, the read
         * holds' timeout keys, the permit's zset): the others' releases
         * are the reentrant lock's, and the run stays short. */
        int differs = kind == K_LOCK || kind == K_READ || kind == K_PERMIT;
        if ((holds == 2 || !watchdog) && !differs)
          continue;
        if (holds == 2 && (kind == K_PERMIT || !watchdog))
          continue;
        case_t k = {kind, watchdog, holds, 0};
        /* Shorter than the lease, or (one case in four) longer. */
        int64_t lease = watchdog ? WATCHDOG_MS : FIXED_MS;
        k.outage_ms = relock__random(&rng) % 4 == 0 ? lease + 200 + (int64_t)(relock__random(&rng) % 300)
                                                    : 500 + (int64_t)(relock__random(&rng) % 500);
        run_case(fx, &k, n++);
      }
  print_message("# %d cases\n", n);
}

static int64_t raw_count(fx_t *fx, relock_lock_t *l, uint64_t owner) {
  char field[RELOCK__FIELD_MAX], buf[64];
  relock__lock_field(l, owner, field);
  assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "HGET", relock_lock_name(l), field, NULL), 0);
  return buf[0] == '$' && buf[1] != '-' ? atoll(strchr(buf, '\n') + 1) : 0;
}

typedef struct {
  fx_t *fx;
  relock_lock_t *l;
  int64_t want;
} count_is_t;

static int count_is(void *arg) {
  count_is_t *c = arg;
  return raw_count(c->fx, c->l, 3) == c->want;
}

/* Redis counts more holds for an owner than it believes in: what Redis
 * says wins - the surplus is a hold nobody believes in, given back like an
 * orphan field: at once when an acquisition's answer shows it, else by the
 * owner's last release. Three ways to get there: a count added behind the
 * owner's back (a duplicate) and released, the same then re-entered, and a
 * fixed lease that ended locally while Redis kept the key longer (as it
 * may for the drift margin), taken again by the same owner. */
static void test_a_surplus_in_redis_is_given_back(void **state) {
  fx_t *fx = *state;
  relock_client_t *c = fx_client(fx->via);
  struct ev_loop *loop = relock_client_loop(c);
  for (int how = 0; how < 3; how++) {
    const char *name = how == 0 ? "surplus-dup" : how == 1 ? "surplus-dup-reentered" : "surplus-drift";
    relock_lock_t *l = relock_lock_new(c, name, NULL);
    char field[RELOCK__FIELD_MAX];
    relock__lock_field(l, 3, field);
    int64_t believed = 1;
    if (how < 2) {
      assert_int_equal(fx_value(relock_lock_lock_async(l, 3, 0, RELOCK_INFINITE)), 1);
      fx_raw_int(fx->redis, "HINCRBY", name, field, "1", NULL);
      if (how == 1) { /* the answer says 3, the owner believes 2: one given back at once */
        assert_int_equal(fx_value(relock_lock_lock_async(l, 3, 0, RELOCK_INFINITE)), 1);
        count_is_t want = {fx, l, 2};
        assert_true(fx_run_until(loop, count_is, &want, fx_slack_ms(2000)));
        assert_int_equal(fx_value(relock_lock_unlock_async(l, 3)), 0);
      } else {
        believed = 2; /* unseen until the last release */
      }
    } else {
      assert_int_equal(fx_value(relock_lock_lock_async(l, 3, 0, 300)), 1);
      fx_raw_int(fx->redis, "PEXPIRE", name, "20000", NULL); /* Redis keeps it longer than believed */
      held_t h = {.fx = fx, .l = l, .owner = 3};
      snprintf(h.name, sizeof h.name, "%s", name);
      fx_run_for(loop, 400); /* the lease ends locally: the ledger forgets it */
      assert_int_equal(relock_lock_validity_ms(l, 3), RELOCK_ENOTOWNER);
      assert_true(still_there(&h));
      assert_int_equal(fx_value(relock_lock_lock_async(l, 3, 0, RELOCK_INFINITE)), 1); /* taken again */
      count_is_t want = {fx, l, 1}; /* the answer said 2: the stale one given back at once */
      assert_true(fx_run_until(loop, count_is, &want, fx_slack_ms(2000)));
    }
    assert_int_equal(raw_count(fx, l, 3), believed);
    assert_int_equal(fx_value(relock_lock_unlock_async(l, 3)), 1); /* freed: the surplus is given back */
    assert_int_equal(fx_raw_int(fx->redis, "EXISTS", name, NULL), 0);
    assert_int_equal(relock_lock_validity_ms(l, 3), RELOCK_ENOTOWNER);
    relock_lock_free(l);
  }
  relock_client_free(c);
}

static void on_closed(relock_client_t *c, void *arg) {
  size_t *counts = arg;
  relock_client_released(c, &counts[0], &counts[1]);
}

/* A close while a release is retried in the background, waiting out its
 * back-off: the close sends it at once and waits for its answer (within
 * the command timeout), and counts it. */
static void test_a_close_hurries_the_releases_retried(void **state) {
  fx_t *fx = *state;
  relock_options_t *o = fx_copy(fx->via);
  fx_set_ms(o, RELOCK_OPT_RETRY_INTERVAL, 60000); /* the retry would wait 30-60 s */
  fx_set_ms(o, RELOCK_OPT_WATCHDOG_TIMEOUT, 30000); /* the key outlives a slow run's steps (valgrind) */
  /* No health check: the connection that swallows everything is not found
   * dead (the background try would then wait in its queue for the
   * reconnect, and go at once) - its tries time out, the retry backs off. */
  fx_set_ms(o, RELOCK_OPT_PING_INTERVAL, 600000);
  relock_client_t *c = fx_client(o);
  relock_lock_t *l = relock_lock_new(c, "letgo-close", NULL);
  assert_int_equal(fx_value(relock_lock_lock_async(l, 5, 0, RELOCK_INFINITE)), 1);
  relock_stats_t st;
  assert_int_equal(relock_client_stats(c, &st, sizeof st), 0);
  uint64_t unanswered = st.command_failures;
  relock_test_proxy_blackhole_current(fx->proxy);
  relock_future_t *f = relock_lock_unlock_async(l, 5);
  assert_int_equal(relock_future_wait(f, fx_slack_ms(5000)), RELOCK_ETIMEDOUT);
  relock_future_release(f);
  /* The background try times out too: it backs off. Until then it is in
   * flight, and a cut would send it again at the reconnect, which shows
   * nothing of the close - so the case waits for its failure, counted
   * (the release's and the try's), however slow the run (valgrind). */
  uint64_t t_try = relock__now_ns();
  do {
    fx_run_for(relock_client_loop(c), 20);
    assert_int_equal(relock_client_stats(c, &st, sizeof st), 0);
  } while (st.command_failures < unanswered + 2 && fx_ms_since(t_try) < fx_slack_ms(5000));
  assert_true(st.command_failures >= unanswered + 2);
  relock_test_proxy_cut(fx->proxy);
  uint64_t t0 = relock__now_ns();
  int up = 0;
  while (!up && fx_ms_since(t0) < fx_slack_ms(5000)) {
    relock_future_t *ping = FX_CMD(c, "PING");
    up = relock_future_wait(ping, fx_slack_ms(1000)) == 0;
    relock_future_release(ping);
  }
  assert_true(up);
  assert_int_equal(relock_client_stats(c, &st, sizeof st), 0);
  print_message("# before the close: %llu retried, %llu settled, %llu expired\n", (unsigned long long)st.release_retries,
                (unsigned long long)st.releases_settled, (unsigned long long)st.releases_expired);
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", "letgo-close", NULL), 1); /* still waiting to retry */
  size_t counts[2] = {99, 99};
  uint64_t t1 = relock__now_ns();
  assert_int_equal(relock_client_close(c, on_closed, counts), 0);
  relock_lock_free(l);
  relock_client_free(c); /* waits for the close */
  print_message("# the close took %.0f ms: %zu released, %zu not\n", fx_ms_since(t1), counts[0], counts[1]);
  assert_true(fx_ms_since(t1) < fx_slack_ms(1000));
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", "letgo-close", NULL), 0);
  assert_int_equal(counts[0], 1);
  assert_int_equal(counts[1], 0);
  relock_options_free(o);
}

/* A re-entry that fails - its answer lost, or late past its lease less the
 * drift margin - takes nothing, and takes nothing away: the holds before
 * it are held on (their validity stands) whatever objects of the name
 * took them, and the give-back of the failed try leaves them in Redis.
 * Generated: the first hold's object x the second's x how the re-entry
 * fails. */
static void test_a_failed_reentry_keeps_the_holds_before_it(void **state) {
  fx_t *fx = *state;
  relock_client_t *c = fx_client(fx->via);
  struct ev_loop *loop = relock_client_loop(c);
  relock_lock_t *(*const make[3])(relock_client_t *, const char *, relock_error_t *) = {
      relock_lock_new, relock_spin_lock_new, relock_fenced_lock_new};
  static const char *const made[3] = {"lock", "spin lock", "fenced lock"};
  int n = 0;
  for (int first = 0; first < 3; first++)
    for (int second = 0; second < 3; second++)
      for (int how = 0; how < 2; how++, n++) {
        char name[64];
        snprintf(name, sizeof name, "reentry-%d", n);
        relock_lock_t *a = make[first](c, name, NULL), *b = make[second](c, name, NULL),
                      *r = relock_lock_new(c, name, NULL);
        assert_true(a != NULL && b != NULL && r != NULL);
        /* a's lease outlives the re-entry's command timeout and the wait
         * after it, however slow the run (valgrind: ten times) */
        assert_true(fx_value(relock_lock_lock_async(a, 3, 0, fx_slack_ms(3900))) > 0); /* a fenced lock: its token */
        assert_true(fx_value(relock_lock_lock_async(b, 3, 0, 555)) > 0);
        /* how 0: the answer is lost (the connection swallows it); 1: it
         * comes past the 432 ms lease less its margin */
        if (how == 0)
          relock_test_proxy_blackhole_current(fx->proxy);
        else
          relock_test_proxy_delay(fx->proxy, fx_slack_ms(250) / 2 + 220);
        relock_future_t *f = relock_lock_lock_async(r, 3, 0, 432);
        int err = relock_future_wait(f, fx_slack_ms(5000));
        relock_future_release(f);
        relock_test_proxy_delay(fx->proxy, 0);
        fx_run_for(loop, 700); /* b's lease has ended; the give-back has gone */
        int64_t valid = relock_lock_validity_ms(a, 3);
        if (valid <= 0)
          fail_msg("case %d (%s, then %s, then a re-entry %s: %s): the first hold's validity is %lld (%s)", n,
                   made[first], made[second], how == 0 ? "whose answer was lost" : "answered late",
                   relock_err_name(err), (long long)valid, valid < 0 ? relock_err_name((int)valid) : "");
        char field[RELOCK__FIELD_MAX];
        relock__lock_field(a, 3, field);
        assert_true(fx_raw_int(fx->redis, "HEXISTS", name, field, NULL) == 1);
        relock_lock_free(a);
        relock_lock_free(b);
        relock_lock_free(r);
      }
  print_message("# %d cases\n", n);
  relock_client_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_a_release_that_gets_no_answer_lets_go, setup, proxied_teardown),
      cmocka_unit_test_setup_teardown(test_a_surplus_in_redis_is_given_back, setup, proxied_teardown),
      cmocka_unit_test_setup_teardown(test_a_close_hurries_the_releases_retried, setup, proxied_teardown),
      cmocka_unit_test_setup_teardown(test_a_failed_reentry_keeps_the_holds_before_it, setup, proxied_teardown),
  };
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found: install the Debian package redis-server");
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("let_go", tests, NULL, NULL);
}
