/* Unit tests of the hold ledger (src/watchdog/hold.c) without a server: a
 * fake holder records every release the ledger asks for, and the test
 * answers each as a model of Redis would (one key, one owner's count, the
 * unlock latch that makes a repeated request id answer what it answered
 * first), on a private libev loop.
 *
 * A seeded random walk (RELOCK_TEST_SEED replays it) of acquisitions of
 * every lease kind, releases, and answers - freed, holds remain, not held,
 * no answer (the request lost before Redis, or its reply lost after Redis
 * ran it), a count Redis has on top (a surplus) - checks, after every
 * step, both directions of the hold's truth:
 *   - what the ledger believes is what the owner was told: its count is the
 *     model's, and once the owner asked to release its last hold the hold
 *     is nowhere renewed or checked and its validity is RELOCK_ENOTOWNER;
 *   - once nothing is in flight, Redis has exactly what the owner
 *     believes: no surplus, no field of a hold let go;
 *   - every release's settled callback is called exactly once, and a
 *     release that got no answer is retried with the same request id. */
#include "support/test.h"

#include <ev.h>
#include <string.h>

#include <relock/error.h>

#include "base/clock.h"
#include "base/random.h"
#include "config/settings.h"
#include "future/promise.h"
#include "loop/exec.h"
#include "stats/stats.h"
#include "watchdog/hold.h"

/* -- the fake holder and the model of Redis ---------------------------------*/

#define MAX_PENDING 8

typedef struct pending {
  relock_future_t *f;
  relock__release_req_t req;
  int last;                     /* of the owner's last hold (the walk does one release at a time) */
} pending_t;

typedef struct fake {
  relock__holder_t holder;      /* first: the ledger's callbacks find the fake from it */
  int refs;                     /* references the ledger holds */
  int64_t redis_count;          /* the owner's field in Redis */
  pending_t pending[MAX_PENDING];
  int npending;
  int releases_sent;
  int background_sent;
  int lost_told;
  int asking_last;              /* the release in progress is of the owner's last hold */
  /* the unlock latch: the answer stored for a request id that ran */
  uint64_t latch_id[4096][2];
  int64_t latch_answer[4096];
  int nlatches;
} fake_t;

static fake_t *fake_of(const relock__holder_t *h) { return (fake_t *)(void *)h; }

static const char *fake_key(const relock__holder_t *h, size_t *len) {
  (void)h;
  *len = 4;
  return "lock";
}

static size_t fake_field(const relock__holder_t *h, uint64_t owner, char field[RELOCK__HOLD_FIELD_MAX]) {
  (void)h;
  return (size_t)snprintf(field, RELOCK__HOLD_FIELD_MAX, "client:%llu", (unsigned long long)owner);
}

static void fake_name(const relock__holder_t *h, uint64_t owner, char name[RELOCK__HOLD_FIELD_MAX]) {
  fake_field(h, owner, name);
}

static void fake_lost(relock__holder_t *h, uint64_t owner, int reason, const char *msg) {
  (void)owner, (void)reason, (void)msg;
  fake_of(h)->lost_told++;
}

static void fake_drop(relock__holder_t *h) { fake_of(h)->refs--; }

static relock__exec_t *exec_of_test;

static relock_future_t *fake_release(relock__holder_t *h, uint64_t owner, const relock__release_req_t *req) {
  (void)owner;
  fake_t *fk = fake_of(h);
  assert_true(fk->npending < MAX_PENDING);
  relock_future_t *f = relock__future_new(exec_of_test);
  fk->pending[fk->npending].f = relock_future_retain(f);
  fk->pending[fk->npending].last = fk->asking_last;
  fk->pending[fk->npending++].req = *req;
  fk->releases_sent++;
  if (req->answer_by_ns != 0)
    fk->background_sent++;
  return f;
}

static const relock__holder_ops_t fake_ops = {
    .what = "lock",
    .key = fake_key,
    .field = fake_field,
    .name = fake_name,
    .on_lost = fake_lost,
    .drop = fake_drop,
    .release = fake_release,
};

/* Redis runs the release with request id: the latch answers a repeat. */
static int64_t redis_release(fake_t *fk, const uint64_t id[2]) {
  for (int i = 0; i < fk->nlatches; i++)
    if (fk->latch_id[i][0] == id[0] && fk->latch_id[i][1] == id[1])
      return fk->latch_answer[i];
  int64_t answer = fk->redis_count <= 0 ? -1 : --fk->redis_count == 0 ? 1 : 0;
  assert_true(fk->nlatches < 4096);
  memcpy(fk->latch_id[fk->nlatches], id, sizeof fk->latch_id[0]);
  fk->latch_answer[fk->nlatches++] = answer;
  return answer;
}

typedef enum { ANSWER, LOST_BEFORE, LOST_AFTER } fate_t;

/* Answers the oldest pending release: Redis runs it (or not) and its
 * answer comes back (or not). */
static void answer_one(fake_t *fk, fate_t fate, int *surplus) {
  assert_true(fk->npending > 0);
  pending_t p = fk->pending[0];
  memmove(&fk->pending[0], &fk->pending[1], (size_t)(fk->npending - 1) * sizeof p);
  fk->npending--;
  if (fate == ANSWER)
    relock__future_succeed_int(p.f, redis_release(fk, p.req.id));
  else if (fate == LOST_AFTER)
    (void)redis_release(fk, p.req.id), relock__future_fail(p.f, RELOCK_ETIMEDOUT, "no reply in time");
  else
    relock__future_fail(p.f, RELOCK_ECONNLOST, "connection lost");
  relock_future_release(p.f);
  if (fate != ANSWER && p.req.answer_by_ns != 0) {
    /* A background release fails only once its lease has surely ended
     * (redis/call.h: it is retried until then): a hold let go has expired
     * meanwhile, nobody renewing it; a partial one's release never ran,
     * or did: Redis's count is what it is, a surplus perhaps. */
    if (p.last)
      fk->redis_count = 0;
    else if (fate == LOST_BEFORE && surplus != NULL)
      *surplus = 1;
  }
}

/* -- the fixture ---------------------------------------------------------------*/

typedef struct fx {
  struct ev_loop *loop;
  relock__exec_t *exec;
  relock__wheel_t wheel;
  relock__settings_t settings;
  relock__stats_t stats;
  uint64_t rng;
  relock__redis_t redis;
  relock__ledger_t ledger;
  fake_t fk;
  int surplus; /* the walk added a count on top since the owner last let go of everything */
} fx_t;

static int setup(void **state) {
  fx_t *fx = calloc(1, sizeof(*fx));
  fx->loop = ev_loop_new(EVFLAG_AUTO);
  fx->exec = relock__exec_embedded(fx->loop);
  exec_of_test = fx->exec;
  assert_int_equal(relock__wheel_init(&fx->wheel, fx->loop, 10, 64), 0);
  relock__stats_init(&fx->stats, NULL, 1);
  fx->settings.stats = &fx->stats;
  fx->settings.opt.command_timeout_ms = 100;
  fx->rng = 88172645463325252ull;
  fx->redis.exec = fx->exec;
  fx->redis.loop = fx->loop;
  fx->redis.wheel = &fx->wheel;
  fx->redis.settings = &fx->settings;
  fx->redis.rng = &fx->rng;
  assert_int_equal(relock__ledger_init(&fx->ledger, &fx->redis, &fx->wheel, 30000), 0);
  fx->fk.holder.ops = &fake_ops;
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fx_t *fx = *state;
  relock__ledger_close(&fx->ledger);
  while (fx->fk.npending > 0)
    answer_one(&fx->fk, LOST_BEFORE, NULL);
  ev_run(fx->loop, EVRUN_NOWAIT);
  assert_int_equal(fx->fk.refs, 0); /* every reference the ledger took is given back */
  relock__wheel_close(&fx->wheel);
  relock__exec_unref(fx->exec);
  ev_loop_destroy(fx->loop);
  free(fx);
  return 0;
}

static const relock__hold_id_t id = {.key = "lock", .key_len = 4, .owner = 1, .role = RELOCK__ROLE_PLAIN};

static relock__holder_t *ref(fake_t *fk) {
  fk->refs++;
  return &fk->holder;
}

/* -- a release and its settling ----------------------------------------------*/

typedef struct ask {
  relock_future_t *f;
  int settled;
} ask_t;

static void on_settled(void *arg) { ((ask_t *)arg)->settled++; }

/* An acquisition that Redis answered with its count; a surplus it reports
 * is given back at once, as the lock object does (its settling counted). */
static int give_backs_settled;
static void on_given_back(void *arg) { (void)arg, give_backs_settled++; }

static void acquire(fx_t *fx, relock__lease_kind_t lease) {
  fx->fk.redis_count++;
  int64_t surplus = -1;
  assert_int_equal(relock__hold_acquired(&fx->ledger, &id, ref(&fx->fk), lease, 30000, relock__now_ns(),
                                         fx->fk.redis_count, NULL, &surplus),
                   0);
  assert_true(surplus >= 0);
  if (surplus > 0)
    relock__hold_give_back(&fx->ledger, &id, ref(&fx->fk), surplus, on_given_back, NULL);
}

static relock__hold_t *hold(fx_t *fx) { return relock__hold_find(&fx->ledger, &id); }

static void test_a_failed_last_release_lets_go_and_retries(void **state) {
  fx_t *fx = *state;
  acquire(fx, RELOCK__LEASE_RENEWED);
  assert_int_equal(fx->ledger.nrenewing, 1);
  ask_t a = {0};
  a.f = relock__hold_release(&fx->ledger, &id, ref(&fx->fk), on_settled, &a);
  assert_non_null(a.f);
  /* let go at once: renewed no more, believed in no more */
  assert_int_equal(fx->ledger.nrenewing, 0);
  assert_int_equal(relock__hold_validity_ms(&fx->ledger, &id), RELOCK_ENOTOWNER);
  uint64_t first[2];
  memcpy(first, fx->fk.pending[0].req.id, sizeof first);
  answer_one(&fx->fk, LOST_BEFORE, NULL);
  ev_run(fx->loop, EVRUN_NOWAIT);
  assert_int_equal(relock_future_error(a.f), RELOCK_ECONNLOST);
  assert_non_null(strstr(relock_future_message(a.f), "at the latest"));
  assert_int_equal(a.settled, 0); /* the retry keeps the owner's turn */
  assert_int_equal(fx->fk.background_sent, 1);
  assert_memory_equal(fx->fk.pending[0].req.id, first, sizeof first); /* the same request id */
  assert_true(fx->fk.pending[0].req.answer_by_ns > relock__now_ns());
  answer_one(&fx->fk, ANSWER, NULL);
  ev_run(fx->loop, EVRUN_NOWAIT);
  assert_int_equal(a.settled, 1);
  assert_null(hold(fx));
  assert_int_equal(fx->fk.redis_count, 0);
  assert_int_equal(fx->stats.s.release_retries, 1);
  assert_int_equal(fx->stats.s.releases_settled, 1);
  relock_future_release(a.f);
}

static void test_a_lost_hold_is_answered_without_redis(void **state) {
  fx_t *fx = *state;
  acquire(fx, RELOCK__LEASE_RENEWED);
  relock__hold_gone(&fx->ledger, hold(fx)); /* renewal: the field is gone */
  assert_int_equal(fx->fk.lost_told, 1);
  ask_t a = {0};
  a.f = relock__hold_release(&fx->ledger, &id, ref(&fx->fk), on_settled, &a);
  assert_int_equal(relock_future_error(a.f), RELOCK_ELOST);
  assert_int_equal(a.settled, 1);
  assert_int_equal(fx->fk.releases_sent, 0);
  assert_null(hold(fx));
  relock_future_release(a.f);
}

/* -- the random walk -----------------------------------------------------------*/

static void check_both_ways(fx_t *fx, int64_t believed, const char *step) {
  relock__hold_t *h = hold(fx);
  int64_t v = relock__hold_validity_ms(&fx->ledger, &id);
  if (believed > 0) {
    if (h == NULL || h->letting_go || h->count != believed)
      fail_msg("after %s: the owner believes %lld holds, the ledger %lld", step, (long long)believed,
               h != NULL && !h->letting_go ? (long long)h->count : 0LL);
    if (v <= 0)
      fail_msg("after %s: the owner believes %lld holds, yet its validity is %lld (lost %d)", step, (long long)believed, (long long)v, h->lost);
  } else {
    if (v != RELOCK_ENOTOWNER && v != RELOCK_ELOST)
      fail_msg("after %s: the owner let go, yet its validity is %lld", step, (long long)v);
    if (fx->ledger.nrenewing != 0 || fx->ledger.nfixed != 0)
      fail_msg("after %s: a hold let go is still renewed or checked", step);
  }
  /* Held, Redis has at least what the owner believes (a count added on top
   * is in the same field: its last release gives it back); let go, Redis
   * has nothing - once nothing is in flight. */
  if (fx->fk.npending == 0 && (believed > 0 ? fx->fk.redis_count < believed : fx->fk.redis_count != 0))
    fail_msg("after %s: nothing in flight, the owner believes %lld holds, Redis has %lld", step, (long long)believed,
             (long long)fx->fk.redis_count);
  if (fx->fk.npending == 0 && believed > 0 && fx->fk.redis_count > believed && !fx->surplus)
    fail_msg("after %s: Redis has %lld holds, the owner believes %lld, and no surplus was added", step,
             (long long)fx->fk.redis_count, (long long)believed);
}

static void test_random_walk_keeps_both_directions(void **state) {
  fx_t *fx = *state;
  const char *env = getenv("RELOCK_TEST_SEED");
  uint64_t seed = env != NULL ? strtoull(env, NULL, 10) : relock__now_ns() | 1;
  print_message("# the ledger's random walk: seed %llu (RELOCK_TEST_SEED=%llu replays it)\n",
                (unsigned long long)seed, (unsigned long long)seed);
  uint64_t rng = seed * 2654435761u + 1;
  int64_t believed = 0;
  ask_t asks[64];
  int nasks = 0;
  char step[96];
  for (int i = 0; i < 3000; i++) {
    uint64_t r = relock__random(&rng) % 100;
    if (fx->fk.npending > 0 && r < 45) {
      fate_t fate = r < 30 ? ANSWER : r < 38 ? LOST_BEFORE : LOST_AFTER;
      snprintf(step, sizeof step, "step %d: an answer (%s)", i,
               fate == ANSWER ? "answered" : fate == LOST_BEFORE ? "lost before Redis" : "reply lost");
      answer_one(&fx->fk, fate, &fx->surplus);
    } else if (fx->fk.npending == 0 && r < 70 && believed < 5) {
      snprintf(step, sizeof step, "step %d: an acquisition", i);
      relock__lease_kind_t lease = (relock__lease_kind_t)(relock__random(&rng) % 3);
      if (believed > 0 && lease == RELOCK__LEASE_KEPT)
        lease = RELOCK__LEASE_RENEWED; /* a kept permit is one hold */
      acquire(fx, lease);
      believed++;
      if (relock__random(&rng) % 20 == 0) /* Redis counts one more than it was asked for */
        fx->fk.redis_count++, fx->surplus = 1;
    } else if (fx->fk.npending == 0 && believed > 0 && nasks < 64) {
      snprintf(step, sizeof step, "step %d: a release", i);
      asks[nasks].settled = 0;
      fx->fk.asking_last = believed == 1;
      asks[nasks].f = relock__hold_release(&fx->ledger, &id, ref(&fx->fk), on_settled, &asks[nasks]);
      assert_non_null(asks[nasks].f);
      nasks++;
      believed--; /* the belief ends the moment the owner asks */
    } else {
      continue;
    }
    ev_run(fx->loop, EVRUN_NOWAIT);
    check_both_ways(fx, believed, step);
    if (believed == 0 && fx->fk.npending == 0)
      fx->surplus = 0;
    if (nasks == 64 || (fx->fk.npending == 0 && nasks > 0)) {
      for (int k = 0; k < nasks; k++) {
        assert_int_equal(asks[k].settled, 1);
        relock_future_release(asks[k].f);
      }
      nasks = 0;
    }
  }
  while (fx->fk.npending > 0) /* the asks' settled flags live on this stack */
    answer_one(&fx->fk, ANSWER, &fx->surplus);
  ev_run(fx->loop, EVRUN_NOWAIT);
  print_message("# %d releases sent, %d of them retried in the background\n", fx->fk.releases_sent,
                fx->fk.background_sent);
  assert_true(fx->fk.background_sent > 0);
  for (int k = 0; k < nasks; k++)
    relock_future_release(asks[k].f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_a_failed_last_release_lets_go_and_retries, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_lost_hold_is_answered_without_redis, setup, teardown),
      cmocka_unit_test_setup_teardown(test_random_walk_keeps_both_directions, setup, teardown),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("hold", tests, NULL, NULL);
}
