/* The multi-lock and RedLock against 5 independent redis-servers: every
 * member tried at once, the quorum held with 2 nodes killed and lost (the
 * lost callback) with 3, a stalled node (DEBUG SLEEP) that neither delays
 * the group nor is left held, nodes stalled past the lease that make no
 * holder, all-or-nothing multi-locks that give back what they took, and
 * two multi-locks over the same names in opposite orders that never
 * deadlock and never overlap. */
#include <config.h>

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <relock/multi_lock.h>

#include "support/client_fixture.h"

#define NODES 5
#define WATCHDOG_MS 1500

typedef struct fx {
  relock_test_redis_t *redis[NODES];
  relock_options_t *cfg[NODES];
  relock_client_t *c[NODES];  /* one client per node */
  relock_client_t *d[NODES];  /* another, for a competing group */
} fx_t;

static fx_t *the_fx;

static int group_setup(void **state) {
  fx_t *fx = calloc(1, sizeof(*fx));
  if (fx == NULL)
    return -1;
  for (int i = 0; i < NODES; i++)
    if ((fx->redis[i] = relock_test_redis_start(NULL)) == NULL)
      return -1;
  the_fx = fx;
  *state = fx;
  return 0;
}

static int group_teardown(void **state) {
  fx_t *fx = *state;
  for (int i = 0; i < NODES; i++)
    relock_test_redis_free(fx->redis[i]);
  free(fx);
  return 0;
}

static int setup(void **state) {
  fx_t *fx = the_fx;
  for (int i = 0; i < NODES; i++) {
    if (!relock_test_redis_running(fx->redis[i]) && relock_test_redis_restart(fx->redis[i]) != 0)
      return -1;
    relock_test_redis_cmd(fx->redis[i], NULL, 0, "FLUSHALL", NULL);
    fx->cfg[i] = fx_options(fx->redis[i], 1);
    fx_set_ms(fx->cfg[i], RELOCK_OPT_WATCHDOG_TIMEOUT, WATCHDOG_MS);
    fx_set_int(fx->cfg[i], RELOCK_OPT_RETRY_ATTEMPTS, 1);
    fx_set_ms(fx->cfg[i], RELOCK_OPT_RETRY_INTERVAL, 10);
    fx->c[i] = fx_client(fx->cfg[i]);
    fx->d[i] = fx_client(fx->cfg[i]);
  }
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fx_t *fx = *state;
  for (int i = 0; i < NODES; i++) {
    relock_client_free(fx->c[i]);
    relock_client_free(fx->d[i]);
    relock_options_free(fx->cfg[i]);
  }
  return 0;
}

/* A RedLock over name on every node, through clients (fx->c or fx->d). */
static relock_multi_lock_t *redlock(relock_client_t **clients, const char *name) {
  relock_lock_t *locks[NODES];
  for (int i = 0; i < NODES; i++)
    assert_non_null(locks[i] = relock_lock_new(clients[i], name, NULL));
  relock_error_t err;
  relock_multi_lock_t *m = relock_redlock_new(locks, NODES, &err);
  if (m == NULL)
    fail_msg("relock_redlock_new: %s", err.message);
  return m;
}

static long long exists(relock_test_redis_t *r, const char *key) { return fx_raw_int(r, "EXISTS", key, NULL); }

static int held_on(fx_t *fx, const char *key) {
  int n = 0;
  for (int i = 0; i < NODES; i++)
    if (relock_test_redis_running(fx->redis[i]))
      n += (int)exists(fx->redis[i], key);
  return n;
}

typedef struct {
  fx_t *fx;
  const char *key;
  int want;
} held_t;

/* Every member has answered the last acquisition. */
static int settled(void *arg) {
  int got[NODES];
  relock_multi_lock_results(arg, got, NODES);
  for (int i = 0; i < NODES; i++)
    if (got[i] == RELOCK_EPENDING)
      return 0;
  return 1;
}

static int held_is(void *arg) {
  held_t *h = arg;
  return held_on(h->fx, h->key) == h->want;
}

static int held_is_not(void *arg) {
  return !held_is(arg);
}

#define ACQUIRE(m, owner, wait, lease) fx_value(relock_multi_lock_lock_async((m), (owner), (wait), (lease)))

#define ERR -100            /* any member error (not "pending") */
#define ERR_OR_PENDING -101 /* that, or no answer yet */
#define REFUSED_OR_PENDING -102 /* held by another, or no answer yet (a lost round stops waiting) */

static void expect_results(relock_multi_lock_t *m, const int *want) {
  int got[NODES];
  assert_int_equal(relock_multi_lock_results(m, got, NODES), NODES);
  for (int i = 0; i < NODES; i++)
    if (got[i] != want[i] && !(want[i] == ERR && got[i] < 0 && got[i] != RELOCK_EPENDING) &&
        !(want[i] == ERR_OR_PENDING && got[i] < 0) &&
        !(want[i] == REFUSED_OR_PENDING && (got[i] == 0 || got[i] == RELOCK_EPENDING)))
      fail_msg("member %d: result %d (%s), expected %d", i, got[i], got[i] < 0 ? relock_err_name(got[i]) : "",
               want[i]);
}

/* -- RedLock ------------------------------------------------------------------*/

static void test_redlock_takes_every_node_at_once(void **state) {
  fx_t *fx = *state;
  relock_multi_lock_t *m = redlock(fx->c, "res");
  assert_int_equal(relock_multi_lock_size(m), NODES);
  assert_int_equal(relock_multi_lock_quorum(m), 3);
  assert_int_equal(ACQUIRE(m, 1, 0, RELOCK_INFINITE), 1); /* once 3 are: the others may come later */
  assert_true(fx_run_until(fx_loop(), settled, m, 2000));
  expect_results(m, (int[]){1, 1, 1, 1, 1});
  assert_int_equal(held_on(fx, "res"), NODES);
  int64_t valid = relock_multi_lock_validity_ms(m, 1);
  assert_true(valid > 0 && valid <= WATCHDOG_MS);
  /* another group of the same name: refused everywhere, nothing taken */
  relock_multi_lock_t *other = redlock(fx->d, "res");
  assert_int_equal(ACQUIRE(other, 2, 0, RELOCK_INFINITE), 0);
  expect_results(other, (int[]){REFUSED_OR_PENDING, REFUSED_OR_PENDING, REFUSED_OR_PENDING, REFUSED_OR_PENDING,
                                REFUSED_OR_PENDING});
  int got[NODES], refused = 0;
  relock_multi_lock_results(other, got, NODES);
  for (int i = 0; i < NODES; i++)
    refused += got[i] == 0;
  assert_true(refused >= 3);
  for (int i = 0; i < NODES; i++)
    assert_int_equal(fx_raw_int(fx->redis[i], "HLEN", "res", NULL), 1);
  /* a waiting one gets it once released (RedLock tries again after a pause) */
  relock_future_t *w = relock_multi_lock_lock_async(other, 2, fx_slack_ms(5000), 10000);
  assert_int_equal(relock_future_wait(w, 300), RELOCK_EPENDING);
  assert_int_equal(fx_value(relock_multi_lock_unlock_async(m, 1)), NODES);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(fx_value(w), 1);
  assert_true(fx_ms_since(t0) < fx_slack_ms(1000));
  int64_t fixed = relock_multi_lock_validity_ms(other, 2);
  assert_true(fixed > 0 && fixed <= 10000 - 100 - 2);
  for (int i = 0; i < NODES; i++)
    assert_true(fx_raw_int(fx->redis[i], "PTTL", "res", NULL) > 9000);
  assert_true(fx_run_until(fx_loop(), settled, other, 2000)); /* else fewer to release: see below */
  assert_int_equal(fx_value(relock_multi_lock_unlock_async(other, 2)), NODES);
  assert_int_equal(held_on(fx, "res"), 0);
  /* released before the last answers came: those are given back as they come */
  relock_future_t *stall = relock_client_command_async(fx->d[4], 3, (const char *const[]){"DEBUG", "SLEEP", "0.2"},
                                                       NULL);
  assert_int_equal(ACQUIRE(other, 2, 0, 10000), 1);
  int64_t released = fx_value(relock_multi_lock_unlock_async(other, 2));
  assert_true(released >= 3 && released < NODES);
  assert_int_equal(relock_future_wait(stall, fx_slack_ms(5000)), 0);
  relock_future_release(stall);
  held_t none = {fx, "res", 0};
  assert_true(fx_run_until(fx_loop(), held_is, &none, 2000));
  char msg[256];
  assert_int_equal(fx_error(relock_multi_lock_unlock_async(m, 1), msg, sizeof msg), RELOCK_ENOTOWNER);
  assert_int_equal(relock_multi_lock_validity_ms(m, 1), RELOCK_ENOTOWNER);
  /* re-entry: two acquisitions, two releases */
  for (int i = 0; i < 2; i++) {
    assert_int_equal(ACQUIRE(m, 1, 0, RELOCK_INFINITE), 1);
    assert_true(fx_run_until(fx_loop(), settled, m, 2000));
  }
  assert_int_equal(fx_value(relock_multi_lock_unlock_async(m, 1)), NODES);
  assert_int_equal(held_on(fx, "res"), NODES);
  assert_int_equal(fx_value(relock_multi_lock_unlock_async(m, 1)), NODES);
  assert_int_equal(held_on(fx, "res"), 0);
  relock_multi_lock_free(other);
  relock_multi_lock_free(m);
}

typedef struct {
  int calls;
  int reason;
  uint64_t owner;
  char message[512];
} lost_t;

static void on_lost(relock_multi_lock_t *m, uint64_t owner, int reason, const char *message, void *arg) {
  (void)m;
  lost_t *l = arg;
  l->calls++;
  l->reason = reason;
  l->owner = owner;
  snprintf(l->message, sizeof l->message, "%s", message);
}

static int lost_called(void *arg) { return ((lost_t *)arg)->calls > 0; }

static void test_redlock_holds_with_one_or_two_nodes_down_and_is_lost_with_three(void **state) {
  fx_t *fx = *state;
  relock_multi_lock_t *m = redlock(fx->c, "res");
  lost_t lost = {0};
  assert_int_equal(relock_multi_lock_on_lost(m, on_lost, &lost), 0);
  assert_int_equal(ACQUIRE(m, 1, 0, RELOCK_INFINITE), 1);
  relock_multi_lock_t *other = redlock(fx->d, "res");
  /* one node down, then two: a competitor finds the others held */
  relock_test_redis_kill9(fx->redis[0]);
  assert_int_equal(ACQUIRE(other, 2, 0, RELOCK_INFINITE), 0);
  expect_results(other, (int[]){ERR_OR_PENDING, REFUSED_OR_PENDING, REFUSED_OR_PENDING, REFUSED_OR_PENDING,
                                REFUSED_OR_PENDING});
  relock_test_redis_kill9(fx->redis[1]);
  assert_int_equal(ACQUIRE(other, 2, 0, RELOCK_INFINITE), 0);
  expect_results(other, (int[]){ERR_OR_PENDING, ERR_OR_PENDING, 0, 0, 0}); /* 3 refusals decide it */
  /* the holder keeps renewing on three: no loss over two leases */
  assert_false(fx_run_until(fx_loop(), lost_called, &lost, 2 * WATCHDOG_MS));
  int64_t valid = relock_multi_lock_validity_ms(m, 1);
  assert_true(valid > 0);
  /* a third down: the quorum is gone, and the callback says so */
  relock_test_redis_kill9(fx->redis[2]);
  uint64_t t0 = relock__now_ns();
  assert_true(fx_run_until(fx_loop(), lost_called, &lost, WATCHDOG_MS + 3000));
  assert_true(fx_ms_since(t0) <= fx_slack_ms(WATCHDOG_MS + 1500));
  assert_int_equal(lost.calls, 1);
  assert_int_equal(lost.owner, 1);
  assert_int_equal(lost.reason, RELOCK_ETIMEDOUT);
  if (strstr(lost.message, "2 held, 3 needed") == NULL)
    fail_msg("lost message: %s", lost.message);
  assert_int_equal(relock_multi_lock_validity_ms(m, 1), RELOCK_ELOST);
  /* told of the loss, the owner holds nothing: the two members left are
   * let go at once, not renewed until it thinks of releasing the group
   * (which a program told of a loss may never do) */
  held_t let_go = {fx, "res", 0};
  if (!fx_run_until(fx_loop(), held_is, &let_go, fx_slack_ms(1000)))
    fail_msg("the loss was told, and %d members are still held in Redis", held_on(fx, "res"));
  assert_false(fx_run_until(fx_loop(), held_is_not, &let_go, 2 * WATCHDOG_MS)); /* and nothing renews them */
  char msg[256];
  assert_int_equal(fx_error(relock_multi_lock_unlock_async(m, 1), msg, sizeof msg), RELOCK_ELOST);
  if (strstr(msg, "its 2 members left were let go when the loss was found") == NULL)
    fail_msg("message: %s", msg);
  /* three down: no quorum can be had, and that is an error, not "busy" */
  relock_future_t *f = relock_multi_lock_lock_async(other, 3, fx_slack_ms(5000), RELOCK_INFINITE);
  int err = fx_error(f, msg, sizeof msg);
  assert_true(err < 0);
  if (strstr(msg, "3 of them failed, at most 2 may") == NULL)
    fail_msg("message: %s", msg);
  expect_results(other, (int[]){ERR, ERR, ERR, 1, 1});
  held_t none = {fx, "res", 0};
  assert_true(fx_run_until(fx_loop(), held_is, &none, 2000)); /* the two it had are given back */
  assert_int_equal(lost.calls, 1);
  relock_multi_lock_free(other);
  relock_multi_lock_free(m);
}

static relock_future_t *debug_sleep(relock_client_t *c, const char *seconds) {
  relock_future_t *f = relock_client_command_async(c, 3, (const char *const[]){"DEBUG", "SLEEP", seconds}, NULL);
  assert_non_null(f);
  return f;
}

static void test_redlock_does_not_wait_for_a_stalled_node(void **state) {
  fx_t *fx = *state;
  relock_multi_lock_t *m = redlock(fx->c, "res");
  relock_future_t *stall = debug_sleep(fx->c[0], "0.5");
  uint64_t t0 = relock__now_ns();
  assert_int_equal(ACQUIRE(m, 1, 0, RELOCK_INFINITE), 1);
  double took = fx_ms_since(t0);
  if (took >= fx_slack_ms(300))
    fail_msg("the group waited %.1f ms for the stalled node", took);
  int got[NODES];
  relock_multi_lock_results(m, got, NODES);
  assert_int_equal(got[0], RELOCK_EPENDING);
  assert_int_equal(relock_future_wait(stall, fx_slack_ms(5000)), 0);
  relock_future_release(stall);
  /* the stalled node's late "acquired" is kept with the group... */
  assert_true(fx_run_until(fx_loop(), settled, m, 2000));
  expect_results(m, (int[]){1, 1, 1, 1, 1});
  assert_int_equal(held_on(fx, "res"), NODES);
  /* ...and released with it */
  assert_int_equal(fx_value(relock_multi_lock_unlock_async(m, 1)), NODES);
  assert_int_equal(held_on(fx, "res"), 0);
  relock_multi_lock_free(m);
}

static void test_redlock_stalled_past_its_lease_makes_no_holder(void **state) {
  fx_t *fx = *state;
  relock_multi_lock_t *m = redlock(fx->c, "res");
  relock_future_t *stalls[3];
  for (int i = 0; i < 3; i++)
    stalls[i] = debug_sleep(fx->c[i], "0.6");
  char msg[512];
  int err = fx_error(relock_multi_lock_lock_async(m, 1, 0, 300), msg, sizeof msg);
  assert_int_equal(err, RELOCK_ETIMEDOUT); /* 3 answers came after the lease: no majority to trust */
  if (strstr(msg, "past its 300 ms lease") == NULL)
    fail_msg("message: %s", msg);
  expect_results(m, (int[]){RELOCK_ETIMEDOUT, RELOCK_ETIMEDOUT, RELOCK_ETIMEDOUT, 1, 1});
  for (int i = 0; i < 3; i++) {
    assert_int_equal(relock_future_wait(stalls[i], fx_slack_ms(5000)), 0);
    relock_future_release(stalls[i]);
  }
  held_t none = {fx, "res", 0};
  assert_true(fx_run_until(fx_loop(), held_is, &none, 2000)); /* all given back */
  assert_int_equal(relock_multi_lock_validity_ms(m, 1), RELOCK_ENOTOWNER);
  relock_multi_lock_free(m);
}

/* -- multi-lock ----------------------------------------------------------------*/

/* A multi-lock over "a" on node 0, "b" on node 1, "c" on node 2. */
static relock_multi_lock_t *abc(relock_client_t **clients) {
  const char *names[] = {"a", "b", "c"};
  relock_lock_t *locks[3];
  for (int i = 0; i < 3; i++)
    assert_non_null(locks[i] = relock_lock_new(clients[i], names[i], NULL));
  relock_multi_lock_t *m = relock_multi_lock_new(locks, 3, NULL);
  assert_non_null(m);
  return m;
}

static void test_multi_lock_is_all_or_nothing(void **state) {
  fx_t *fx = *state;
  relock_multi_lock_t *m = abc(fx->c);
  assert_int_equal(relock_multi_lock_quorum(m), 3);
  assert_int_equal(ACQUIRE(m, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(exists(fx->redis[0], "a") + exists(fx->redis[1], "b") + exists(fx->redis[2], "c"), 3);
  assert_int_equal(fx_value(relock_multi_lock_unlock_async(m, 1)), 3);
  /* "b" held alone by someone else: nothing of the group is left taken */
  relock_lock_t *b = relock_lock_new(fx->d[1], "b", NULL);
  assert_int_equal(fx_value(relock_lock_lock_async(b, 9, 0, RELOCK_INFINITE)), 1);
  assert_int_equal(ACQUIRE(m, 1, 0, RELOCK_INFINITE), 0);
  int got[3];
  assert_int_equal(relock_multi_lock_results(m, got, 3), 3);
  assert_int_equal(got[1], 0);
  /* given back as their answers come (a try cancelled in flight undoes
   * itself once answered) */
  held_t freed_a = {fx, "a", 0}, freed_c = {fx, "c", 0};
  assert_true(fx_run_until(fx_loop(), held_is, &freed_a, 2000));
  assert_true(fx_run_until(fx_loop(), held_is, &freed_c, 2000));
  /* waiting: taken once "b" is released */
  relock_future_t *w = relock_multi_lock_lock_async(m, 1, fx_slack_ms(5000), RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(w, 200), RELOCK_EPENDING);
  assert_int_equal(fx_value(relock_lock_unlock_async(b, 9)), 1);
  assert_int_equal(fx_value(w), 1);
  assert_int_equal(relock_multi_lock_results(m, got, 3), 3);
  assert_true(got[0] == 1 && got[1] == 1 && got[2] == 1);
  /* cancelled while waiting: gives back what it had */
  relock_multi_lock_t *other = abc(fx->d);
  relock_future_t *c = relock_multi_lock_lock_async(other, 2, RELOCK_INFINITE, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(c, 200), RELOCK_EPENDING);
  assert_int_equal(relock_future_cancel(c), 1);
  relock_future_release(c);
  assert_int_equal(fx_value(relock_multi_lock_unlock_async(m, 1)), 3);
  assert_int_equal(ACQUIRE(other, 2, 0, 5000), 1); /* nothing of the cancelled one was left */
  assert_int_equal(fx_value(relock_multi_lock_unlock_async(other, 2)), 3);
  assert_int_equal(exists(fx->redis[0], "a") + exists(fx->redis[1], "b") + exists(fx->redis[2], "c"), 0);
  /* a member's error fails a multi-lock */
  relock_test_redis_kill9(fx->redis[2]);
  char msg[256];
  assert_true(fx_error(relock_multi_lock_lock_async(m, 1, 0, RELOCK_INFINITE), msg, sizeof msg) < 0);
  if (strstr(msg, "lock 2 (c)") == NULL)
    fail_msg("message: %s", msg);
  held_t gone = {fx, "a", 0};
  assert_true(fx_run_until(fx_loop(), held_is, &gone, 2000));
  relock_lock_free(b);
  relock_multi_lock_free(other);
  relock_multi_lock_free(m);
}

/* Two multi-locks over "a" and "b" given in opposite orders, each taken and
 * released ROUNDS times back to back, waiting as long as it takes. */
#define ROUNDS 40

typedef struct side {
  relock_multi_lock_t *m;
  ev_timer hold;                  /* holds it 1 ms before releasing */
  uint64_t owner;
  int done;
  int *inside;
  int overlaps;
  int errors;
} side_t;

static void go(side_t *s);

static void on_released(relock_future_t *f, void *arg) {
  side_t *s = arg;
  if (relock_future_error(f) != 0)
    s->errors++;
  relock_future_release(f);
  if (++s->done < ROUNDS)
    go(s);
}

static void on_acquired(relock_future_t *f, void *arg) {
  side_t *s = arg;
  if (relock_future_error(f) != 0 || !relock_future_bool(f)) {
    s->errors++;
    relock_future_release(f);
    return;
  }
  relock_future_release(f);
  if ((*s->inside)++ != 0)
    s->overlaps++;
  ev_timer_start(fx_loop(), &s->hold);
}

static void on_held(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  side_t *s = w->data;
  (*s->inside)--;
  relock_future_on_done(relock_multi_lock_unlock_async(s->m, s->owner), on_released, s);
}

static void go(side_t *s) {
  relock_future_on_done(relock_multi_lock_lock_async(s->m, s->owner, RELOCK_INFINITE, RELOCK_INFINITE),
                        on_acquired, s);
}

static int both_done(void *arg) {
  side_t *s = arg;
  return (s[0].done == ROUNDS || s[0].errors) && (s[1].done == ROUNDS || s[1].errors);
}

static void test_opposite_orders_never_deadlock(void **state) {
  fx_t *fx = *state;
  relock_lock_t *ab[] = {relock_lock_new(fx->c[0], "a", NULL), relock_lock_new(fx->c[1], "b", NULL)};
  relock_lock_t *ba[] = {relock_lock_new(fx->d[1], "b", NULL), relock_lock_new(fx->d[0], "a", NULL)};
  int inside = 0;
  side_t sides[2] = {{.m = relock_multi_lock_new(ab, 2, NULL), .owner = 1, .inside = &inside},
                     {.m = relock_multi_lock_new(ba, 2, NULL), .owner = 2, .inside = &inside}};
  assert_non_null(sides[0].m);
  assert_non_null(sides[1].m);
  for (int i = 0; i < 2; i++) {
    ev_timer_init(&sides[i].hold, on_held, 0.001, 0);
    sides[i].hold.data = &sides[i];
  }
  go(&sides[0]);
  go(&sides[1]);
  assert_true(fx_run_until(fx_loop(), both_done, sides, 20000));
  assert_int_equal(sides[0].errors + sides[1].errors, 0);
  assert_int_equal(sides[0].overlaps + sides[1].overlaps, 0);
  assert_int_equal(exists(fx->redis[0], "a") + exists(fx->redis[1], "b"), 0);
  relock_multi_lock_free(sides[0].m);
  relock_multi_lock_free(sides[1].m);
}

/* -- threaded clients on one loop thread -----------------------------------------------*/

typedef struct {
  relock_multi_lock_t *m;
  int rounds;
  int overlaps;
  int errors;
  int *inside;
  pthread_mutex_t *mu;
} worker_t;

/* A thread taking the group with the blocking calls, ROUNDS times. */
static void *worker(void *arg) {
  worker_t *w = arg;
  for (int i = 0; i < w->rounds; i++) {
    int held = 0;
    if (relock_multi_lock_try_lock(w->m, 10000, RELOCK_INFINITE, &held) != 0 || !held) {
      w->errors++;
      continue;
    }
    pthread_mutex_lock(w->mu);
    if ((*w->inside)++ != 0)
      w->overlaps++;
    pthread_mutex_unlock(w->mu);
    usleep(200);
    pthread_mutex_lock(w->mu);
    (*w->inside)--;
    pthread_mutex_unlock(w->mu);
    if (relock_multi_lock_unlock(w->m) != 0)
      w->errors++;
  }
  return NULL;
}

/* Threaded clients made beside one another share one loop thread, so their
 * locks make a RedLock that any thread may take; the clients are freed in
 * any order, the first one's included, with the others still running. */
static void test_redlock_over_threaded_clients_beside_one_another(void **state) {
  fx_t *fx = *state;
  relock_error_t err;
  relock_client_t *t[NODES];
  assert_non_null(t[0] = relock_client_new(NULL, fx->cfg[0], &err));
  for (int i = 1; i < NODES; i++) {
    t[i] = relock_client_new_beside(t[0], fx->cfg[i], &err);
    if (t[i] == NULL)
      fail_msg("relock_client_new_beside: %s", err.message);
  }
  assert_ptr_equal(relock_client_loop(t[1]), relock_client_loop(t[0]));
  assert_null(relock_client_new_beside(NULL, fx->cfg[0], &err));
  assert_int_equal(err.code, RELOCK_EINVAL);
  relock_multi_lock_t *m = redlock(t, "res");
  relock_multi_lock_t *other = redlock(fx->c, "res"); /* embedded, on this thread's loop: a competitor */
  int held = -1;
  assert_int_equal(relock_multi_lock_try_lock(m, 0, RELOCK_INFINITE, &held), 0);
  assert_int_equal(held, 1);
  assert_int_equal(ACQUIRE(other, 7, 0, RELOCK_INFINITE), 0);
  assert_int_equal(relock_multi_lock_unlock(m), 0);
  /* threads of one process take turns (their owners differ) */
  int inside = 0;
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  worker_t w[3];
  pthread_t th[3];
  for (int i = 0; i < 3; i++) {
    w[i] = (worker_t){.m = m, .rounds = 15, .inside = &inside, .mu = &mu};
    assert_int_equal(pthread_create(&th[i], NULL, worker, &w[i]), 0);
  }
  for (int i = 0; i < 3; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(w[i].errors, 0);
    assert_int_equal(w[i].overlaps, 0);
  }
  held_t none = {fx, "res", 0}; /* a member that answered after its release is given back then */
  assert_true(fx_run_until(fx_loop(), held_is, &none, 2000));
  relock_multi_lock_free(m);
  relock_multi_lock_free(other);
  /* the first client goes first: the others keep the loop thread running */
  relock_client_free(t[0]);
  relock_lock_t *l = relock_lock_new(t[2], "after", NULL);
  assert_int_equal(fx_value(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE)), 1);
  assert_int_equal(exists(fx->redis[2], "after"), 1);
  assert_int_equal(fx_value(relock_lock_unlock_async(l, 1)), 1);
  relock_lock_free(l);
  for (int i = NODES - 1; i >= 1; i--)
    relock_client_free(t[i]);
}

/* -- arguments ------------------------------------------------------------------*/

static void test_invalid_arguments(void **state) {
  fx_t *fx = *state;
  relock_error_t err;
  relock_lock_t *a = relock_lock_new(fx->c[0], "a", NULL), *b = relock_lock_new(fx->c[1], "b", NULL);
  assert_null(relock_redlock_new(NULL, 3, &err));
  assert_int_equal(err.code, RELOCK_EINVAL);
  assert_null(relock_multi_lock_new((relock_lock_t *[]){a}, 0, &err));
  assert_null(relock_multi_lock_new((relock_lock_t *[]){a, NULL}, 2, &err));
  assert_non_null(strstr(err.message, "lock 1 is NULL"));
  assert_null(relock_multi_lock_new((relock_lock_t *[]){a, b, a}, 3, &err));
  assert_non_null(strstr(err.message, "lock 2 is lock 0 again"));
  /* a lock of a threaded client runs on another loop */
  relock_client_t *threaded = relock_client_new(NULL, fx->cfg[0], &err);
  assert_non_null(threaded);
  relock_lock_t *t = relock_lock_new(threaded, "t", NULL);
  assert_null(relock_multi_lock_new((relock_lock_t *[]){a, t}, 2, &err));
  assert_non_null(strstr(err.message, "lock 1 (t) runs on another loop"));
  relock_multi_lock_t *m = relock_multi_lock_new((relock_lock_t *[]){a, b}, 2, &err);
  assert_non_null(m);
  assert_null(relock_redlock_new((relock_lock_t *[]){b}, 1, &err));
  assert_non_null(strstr(err.message, "lock 0 (b) is in another group already"));
  FX_REFUSED(relock_multi_lock_lock_async(m, 1, -2, RELOCK_INFINITE), "wait_ms must be");
  FX_REFUSED(relock_multi_lock_lock_async(m, 1, 0, 0), "lease_ms must be");
  FX_REFUSED(relock_multi_lock_lock_async(NULL, 1, 0, 0), "NULL");
  FX_REFUSED(relock_multi_lock_unlock_async(NULL, 1), "NULL");
  char msg[256];
  assert_int_equal(fx_error(relock_multi_lock_unlock_async(m, 1), msg, sizeof msg), RELOCK_ENOTOWNER);
  assert_non_null(strstr(msg, "not held by owner 1"));
  assert_int_equal(relock_multi_lock_validity_ms(NULL, 1), RELOCK_EINVAL);
  assert_int_equal(relock_multi_lock_results(NULL, NULL, 0), RELOCK_EINVAL);
  /* on_lost answers as relock_lock_on_lost does */
  lost_t lost = {0};
  assert_int_equal(relock_multi_lock_on_lost(NULL, on_lost, &lost), RELOCK_EINVAL);
  assert_int_equal(relock_multi_lock_on_lost(m, on_lost, &lost), 0);
  assert_int_equal(relock_multi_lock_on_lost(m, NULL, NULL), 0);
  /* the blocking calls */
  int acquired = -1;
  assert_int_equal(relock_multi_lock_try_lock(m, 0, RELOCK_INFINITE, &acquired), 0);
  assert_int_equal(acquired, 1);
  assert_int_equal(relock_multi_lock_unlock(m), 0);
  assert_int_equal(relock_multi_lock_unlock(m), RELOCK_ENOTOWNER);
  assert_int_equal(relock_multi_lock_lock(NULL, RELOCK_INFINITE), RELOCK_EINVAL);
  relock_multi_lock_free(m);
  relock_multi_lock_free(NULL);
  relock_lock_free(t);
  relock_client_free(threaded);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_redlock_takes_every_node_at_once),
      T(test_redlock_holds_with_one_or_two_nodes_down_and_is_lost_with_three),
      T(test_redlock_does_not_wait_for_a_stalled_node),
      T(test_redlock_stalled_past_its_lease_makes_no_holder),
      T(test_multi_lock_is_all_or_nothing),
      T(test_opposite_orders_never_deadlock),
      T(test_redlock_over_threaded_clients_beside_one_another),
      T(test_invalid_arguments),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, group_setup, group_teardown);
}
