/* A fixed lease is kept to its end, or its owner is told: the library may
 * stop vouching for a hold before the lease it asked for ends - a check
 * of the hold answered late cannot tell "the way to Redis grew slow" from
 * "someone cut the key's expiry", so it must trust only the shorter of the
 * two - but then the hold is lost, with its lost callback, never quietly
 * forgotten while its owner still counts on the lease: a re-entry after
 * that would start a count of its own and give back, as a surplus, the
 * holds the owner believes in.
 *
 * The cases are generated: every kind of hold (each lock kind, a permit)
 * x one hold or two (re-entered) x the latency of the way to Redis rising
 * while the hold is checked, for one answer (then gone: a check sent
 * again sees the lease whole, so nothing is lost), or for good (every
 * answer late: the lease cannot be confirmed to its end, so it is lost,
 * told). Throughout, up to the lease's end: the validity is positive, or
 * the loss was told - and in Redis the hold is kept at least as long as
 * it is believed. */
#include <config.h>

#include <string.h>

#include <relock/permit_semaphore.h>

#include "support/proxied_holds.h"
#include "objects/lock_impl.h"
#include "watchdog/hold.h"

#define LEASE_MS 1500
#define LATENCY_MS 250

static int setup(void **state) {
  if (proxied_setup(state) != 0)
    return -1;
  fx_t *fx = *state;
  /* the cycle's checks come every 10 s: the case's own check is the one */
  fx_set_ms(fx->via, RELOCK_OPT_WATCHDOG_TIMEOUT, 30000);
  fx_set_ms(fx->via, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(3000));
  return 0;
}

typedef struct {
  fx_t *fx;
  kind_t kind;
  relock_client_t *c;
  relock_lock_t *l;
  relock_permit_semaphore_t *s;
  char permit[RELOCK_PERMIT_ID_SIZE];
  char name[64];
  int told;   /* lost callbacks */
  int reason; /* the last one's */
  char why[256];
} held_t;

static void on_lock_lost(relock_lock_t *l, uint64_t owner, int reason, const char *msg, void *arg) {
  (void)l, (void)owner;
  held_t *h = arg;
  h->told++;
  h->reason = reason;
  snprintf(h->why, sizeof h->why, "%s", msg);
}

static void on_permit_lost(relock_permit_semaphore_t *s, const char *id, int reason, const char *msg, void *arg) {
  (void)s, (void)id;
  on_lock_lost(NULL, 0, reason, msg, arg);
}

#define OWNER 5

static void take(held_t *h, int holds, int64_t lease) {
  if (h->kind == K_PERMIT) {
    h->s = relock_permit_semaphore_new(h->c, h->name, NULL);
    assert_non_null(h->s);
    assert_int_equal(relock_permit_semaphore_on_lost(h->s, on_permit_lost, h), 0);
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
  h->l = new_lock(h->c, h->kind, h->name);
  assert_non_null(h->l);
  assert_int_equal(relock_lock_on_lost(h->l, on_lock_lost, h), 0);
  for (int i = 0; i < holds; i++)
    assert_true(fx_value(relock_lock_lock_async(h->l, OWNER, 0, lease)) > 0); /* 1, 2, or a fencing token */
}

static int64_t validity(held_t *h) {
  return h->s != NULL ? relock_permit_semaphore_validity_ms(h->s, h->permit) : relock_lock_validity_ms(h->l, OWNER);
}

static relock_future_t *validate(held_t *h) {
  return h->s != NULL ? relock_permit_semaphore_validate_async(h->s, h->permit)
                      : relock_lock_validate_async(h->l, OWNER);
}

/* How long Redis keeps the hold from now, in ms (-2: not at all): the
 * lock key's expiry, or the permit's score in the timeout zset. */
static long long kept_ms(held_t *h) {
  if (h->s != NULL) {
    char zset[80];
    snprintf(zset, sizeof zset, "{%s}:timeout", h->name);
    /* its only permit (the member is the id's 16 bytes), from the server's clock */
    return fx_raw_int(h->fx->redis, "EVAL",
                      "local p = redis.call('zrange', KEYS[1], 0, 0, 'withscores') "
                      "if not p[2] then return -2 end local t = redis.call('time') "
                      "return tonumber(p[2]) - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))",
                      "1", zset, NULL);
  }
  char field[RELOCK__FIELD_MAX];
  relock__lock_field(h->l, OWNER, field);
  if (fx_raw_int(h->fx->redis, "HEXISTS", h->name, field, NULL) != 1)
    return -2;
  return fx_raw_int(h->fx->redis, "PTTL", h->name, NULL);
}

static void run_case(fx_t *fx, kind_t kind, int holds, int lasting, int n) {
  held_t h = {.fx = fx, .kind = kind};
  snprintf(h.name, sizeof h.name, "fixed-%d", n);
  h.c = fx_client(fx->via);
  struct ev_loop *loop = relock_client_loop(h.c);
  int64_t lease = fx_slack_ms(LEASE_MS), latency = fx_slack_ms(LATENCY_MS);
  uint64_t sent = relock__now_ns();
  take(&h, holds, lease);
  /* what the owner was promised: the lease from before the ask, less the
   * drift margin (hold.h) */
  uint64_t end = sent + (uint64_t)(lease - relock__validity_margin_ms(lease)) * 1000000u;
  print_message("# case %d: %s, %d hold(s), latency %s\n", n, kind_names[kind], holds, lasting ? "for good" : "once");

  relock_test_proxy_delay(fx->proxy, latency);
  relock_future_t *f = validate(&h);
  assert_non_null(f);
  if (!lasting) { /* the way is fast again for what is sent after the check */
    fx_run_for(loop, 20);
    relock_test_proxy_delay(fx->proxy, 0);
  }
  assert_int_equal(relock_future_wait(f, fx_slack_ms(5000)), 0);
  assert_true(relock_future_bool(f));
  relock_future_release(f);

  /* Up to the lease's end (less a wheel tick and the polls' own time):
   * valid, or told; and Redis keeps at least what is believed. */
  int64_t shown_out = -1; /* ms before the end at which validity first showed nothing */
  for (;;) {
    uint64_t now = relock__now_ns();
    if (now + 15 * 1000000u >= end)
      break;
    int64_t v = validity(&h);
    if (v <= 0 && shown_out < 0)
      shown_out = (int64_t)((end - now) / 1000000u);
    if (v <= 0 && h.told == 0) {
      fx_run_for(loop, 15); /* a lease's end fires on the wheel's next tick */
      if (h.told == 0)
        fail_msg("case %d (%s, %d hold(s), latency %s): validity %lld (%s) %lld ms before the lease's end, "
                 "and no lost callback",
                 n, kind_names[kind], holds, lasting ? "for good" : "once", (long long)v,
                 v < 0 ? relock_err_name((int)v) : "none left", (long long)((end - now) / 1000000u));
    }
    if (v > 0) { /* Redis answers a little later than v was read: that long is its due */
      long long k = kept_ms(&h);
      double late = fx_ms_since(now) + 1; /* and 1 for the server's ms */
      if (k != -1 && (double)k + late < (double)v)
        fail_msg("case %d: the hold is believed valid %lld ms, Redis keeps it %lld ms (%.1f ms later)", n,
                 (long long)v, k, late);
    }
    fx_run_for(loop, 5);
  }
  if (lasting) {
    /* nothing confirms the lease to its end: lost, and told why */
    assert_int_equal(h.told, 1);
    assert_int_equal(h.reason, RELOCK_ETIMEDOUT);
    print_message("# told %lld ms before the end: %s\n", (long long)shown_out, h.why);
    assert_non_null(strstr(h.why, "could not be confirmed"));
  } else {
    /* the check sent again saw the lease whole: nothing was lost */
    if (h.told != 0)
      fail_msg("case %d (%s, %d hold(s)): told lost after a single late answer: %s", n, kind_names[kind], holds, h.why);
  }
  relock_test_proxy_delay(fx->proxy, 0);
  if (h.l != NULL)
    relock_lock_free(h.l);
  else
    relock_permit_semaphore_free(h.s);
  relock_client_free(h.c);
}

static void test_a_fixed_lease_is_kept_to_its_end_or_its_loss_told(void **state) {
  /* Under valgrind every lease is ten times longer: there a seeded few of
   * the cases (both latencies) check the memory of the paths, the others
   * ran in the plain build. */
  uint64_t seed = fx_seed("fixed_lease");
  int every = relock_test_under_valgrind() ? 6 : 1, pick = (int)(seed % (uint64_t)every);
  int n = 0, ran = 0;
  for (kind_t kind = 0; kind < KINDS; kind++)
    for (int holds = 1; holds <= (kind == K_PERMIT ? 1 : 2); holds++, n += 2)
      if ((n / 2) % every == pick)
        for (int lasting = 0; lasting < 2; lasting++, ran++)
          run_case(*state, kind, holds, lasting, n + lasting);
  print_message("# %d of %d cases\n", ran, n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_a_fixed_lease_is_kept_to_its_end_or_its_loss_told, setup, proxied_teardown),
  };
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found: install the Debian package redis-server");
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("fixed_lease", tests, NULL, NULL);
}
