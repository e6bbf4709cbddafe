/* Integration tests of synced replicas (RELOCK_OPT_MIN_REPLICAS_ACKED)
 * against a real master and one real replica: an acquisition is reported
 * only once the replica has it; one that too few replicas acknowledged
 * fails with RELOCK_ENOTREPLICATED and leaves nothing held (reentrant
 * counts included); renewals a paused replica does not acknowledge fail
 * and the lock is lost when its lease runs out; 0 sends no WAIT at all; a
 * connection lost during WAIT retries the pair (counted once); a cancel
 * while WAIT blocks gives the hold back; READONLY (a demoted master) is
 * retried until the node is a master again. */
#include <config.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "support/client_fixture.h"
#include "support/proxy.h"
#include "objects/lock_impl.h"

typedef struct {
  relock_test_redis_t *master;
  relock_test_redis_t *replica;
  relock_options_t *cfg;
  relock_client_t *a;
  relock_client_t *b;
} fx_t;

static fx_t fx_; /* the servers live for the whole group */

/* INFO section's line "name:value" of server r, as a number (-1: absent). */
static long long info_num(relock_test_redis_t *r, const char *section, const char *name) {
  char buf[16384], key[96];
  if (relock_test_redis_cmd(r, buf, sizeof buf, "INFO", section, NULL) != 0)
    return -1;
  snprintf(key, sizeof key, "\n%s", name);
  const char *p = strstr(buf, key);
  return p != NULL ? atoll(p + strlen(key)) : -1;
}

static int replica_in_sync(relock_test_redis_t *master, relock_test_redis_t *replica) {
  char buf[16384];
  if (info_num(master, "replication", "connected_slaves:") != 1)
    return 0;
  if (relock_test_redis_cmd(replica, buf, sizeof buf, "INFO", "replication", NULL) != 0)
    return 0;
  return strstr(buf, "master_link_status:up") != NULL;
}

static void wait_in_sync(void) {
  uint64_t deadline = relock__now_ns() + (uint64_t)fx_slack_ms(10000) * 1000000u;
  while (!replica_in_sync(fx_.master, fx_.replica)) {
    if (relock__now_ns() > deadline)
      fail_msg("the replica did not sync with the master");
    usleep(10000);
  }
}

static int group_setup(void **state) {
  (void)state;
  if ((fx_.master = relock_test_redis_start(NULL)) == NULL)
    return -1;
  char port[16];
  snprintf(port, sizeof port, "%d", relock_test_redis_port(fx_.master));
  const char *const args[] = {"--replicaof", "127.0.0.1", port, NULL};
  relock_test_redis_opts_t opts = {.extra_args = args};
  if ((fx_.replica = relock_test_redis_start(&opts)) == NULL)
    return -1;
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  relock_test_redis_free(fx_.replica);
  relock_test_redis_free(fx_.master);
  return 0;
}

static int setup(void **state) {
  if (relock_test_redis_pid(fx_.replica) != 0)
    relock_test_redis_resume(fx_.replica);
  wait_in_sync();
  relock_test_redis_cmd(fx_.master, NULL, 0, "FLUSHALL", NULL);
  fx_.cfg = fx_options(fx_.master, 1);
  fx_.a = fx_.b = NULL;
  *state = &fx_;
  return 0;
}

static int teardown(void **state) {
  fx_t *fx = *state;
  relock_test_redis_resume(fx->replica); /* a failed test may have left it stopped */
  relock_client_free(fx->a);
  relock_client_free(fx->b);
  relock_options_free(fx->cfg);
  return 0;
}

static relock_lock_t *lock_of(relock_client_t *c, const char *name) {
  relock_lock_t *l = relock_lock_new(c, name, NULL);
  assert_non_null(l);
  return l;
}

static int64_t value_of(relock_future_t *f) {
  assert_non_null(f);
  int r = relock_future_wait(f, fx_slack_ms(10000));
  if (r != 0)
    fail_msg("operation failed: %s (%s)", relock_future_message(f), relock_err_name(r));
  int64_t v = relock_future_value_type(f) == RELOCK_VALUE_BOOL ? relock_future_bool(f) : relock_future_int(f);
  relock_future_release(f);
  return v;
}

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

/* The hold count of owner's field in lock l, as server r has it. */
static long long count_on(relock_test_redis_t *r, relock_lock_t *l, uint64_t owner) {
  char field[RELOCK__FIELD_MAX], buf[128];
  relock__lock_field(l, owner, field);
  assert_int_equal(relock_test_redis_cmd(r, buf, sizeof buf, "HGET", relock_lock_name(l), field, NULL), 0);
  return buf[0] == '$' && buf[1] != '-' ? atoll(strchr(buf, '\n') + 1) : 0;
}

static long long wait_calls(void) {
  long long n = info_num(fx_.master, "commandstats", "cmdstat_wait:calls=");
  return n < 0 ? 0 : n;
}

/* Everything c sent before is done on the server (one connection, in
 * order) - but for a script re-sent as EVAL after NOSCRIPT, which runs
 * after: see gone. */
static void settle(relock_client_t *c) { relock_future_release(FX_CMD(c, "PING")); }

/* Whether key is (or soon is) gone from the master: the undo of a failed
 * acquisition is sent fire-and-forget, and c's loop must turn to send it. */
static int key_gone(void *key) {
  char buf[64];
  assert_int_equal(relock_test_redis_cmd(fx_.master, buf, sizeof buf, "EXISTS", (const char *)key, NULL), 0);
  return strcmp(buf, ":0\r\n") == 0;
}

static int gone(relock_client_t *c, const char *key) {
  return fx_run_until(relock_client_loop(c), key_gone, (void *)key, 1000);
}

typedef struct {
  relock_lock_t *l;
  uint64_t owner;
  long long want;
} count_want_t;

static int count_reached(void *arg) {
  count_want_t *w = arg;
  return count_on(fx_.master, w->l, w->owner) == w->want;
}

/* Whether owner's count on the master is (or soon is) want. */
static int count_becomes(relock_client_t *c, relock_lock_t *l, uint64_t owner, long long want) {
  count_want_t w = {l, owner, want};
  return fx_run_until(relock_client_loop(c), count_reached, &w, 1000);
}

/* -- tests -------------------------------------------------------------------*/

static void test_acquired_lock_is_on_the_replica(void **state) {
  fx_t *fx = *state;
  fx_set_int(fx->cfg, RELOCK_OPT_MIN_REPLICAS_ACKED, 1);
  fx->a = fx_client(fx->cfg);
  relock_lock_t *l = lock_of(fx->a, "res");
  assert_int_equal(ACQUIRE(l, 1, 0, RELOCK_INFINITE), 1);
  /* read from the replica the moment the lock is reported: it is there */
  assert_int_equal(count_on(fx->replica, l, 1), 1);
  settle(fx->a);
  long long waits = wait_calls(); /* two for the first: see test_wait_after_a_script_resent_as_eval */
  assert_int_equal(ACQUIRE(l, 1, 0, RELOCK_INFINITE), 1); /* reentrant, synced too */
  assert_int_equal(count_on(fx->replica, l, 1), 2);
  assert_int_equal(ACQUIRE(l, 2, 0, 60000), 0); /* held by owner 1 */
  settle(fx->a);
  assert_int_equal(wait_calls() - waits, 2);      /* one WAIT per try, in the same round trip */
  assert_int_equal(RELEASE(l, 1), 0);
  assert_int_equal(RELEASE(l, 1), 1);
  settle(fx->a);
  assert_int_equal(wait_calls() - waits, 2);      /* releases send none */
  /* a fixed lease */
  assert_int_equal(ACQUIRE(l, 3, 0, 60000), 1);
  assert_int_equal(count_on(fx->replica, l, 3), 1);
  assert_int_equal(RELEASE(l, 3), 1);
  relock_lock_free(l);
}

static void test_too_few_replicas_fail_and_give_the_hold_back(void **state) {
  fx_t *fx = *state;
  fx_set_int(fx->cfg, RELOCK_OPT_MIN_REPLICAS_ACKED, 2); /* only one replica */
  fx_set_ms(fx->cfg, RELOCK_OPT_MIN_REPLICAS_TIMEOUT, 300);
  fx->a = fx_client(fx->cfg);
  relock_lock_t *l = lock_of(fx->a, "res");
  char msg[512];
  uint64_t t0 = relock__now_ns();
  assert_int_equal(error_of(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE), msg, sizeof msg),
                   RELOCK_ENOTREPLICATED);
  double took = fx_ms_since(t0);
  assert_true(took >= 290 && took < fx_slack_ms(300 + 400));
  assert_non_null(strstr(msg, "lock res written on the master but acknowledged by only 1 of 2 replicas within 300 ms"));
  assert_true(gone(fx->a, "res")); /* given back */
  assert_int_equal(value_of(relock_lock_hold_count_async(l, 1)), 0);
  assert_int_equal(fx->a->ledger.nrenewing, 0);

  /* inside a wait: a failure of its own, reported at once, not waited out */
  t0 = relock__now_ns();
  assert_int_equal(error_of(relock_lock_lock_async(l, 1, 5000, 60000), msg, sizeof msg), RELOCK_ENOTREPLICATED);
  assert_true(fx_ms_since(t0) < fx_slack_ms(300 + 400));
  assert_true(gone(fx->a, "res"));
  relock_lock_free(l);
}

static void test_waiting_for_a_held_lock_needs_no_replicas(void **state) {
  fx_t *fx = *state;
  fx->a = fx_client(fx->cfg); /* no WAIT */
  relock_options_t *synced = fx_copy(fx->cfg);
  fx_set_int(synced, RELOCK_OPT_MIN_REPLICAS_ACKED, 2); /* more than there are */
  /* each WAIT still blocks b's connection that long, answer or not */
  fx_set_ms(synced, RELOCK_OPT_MIN_REPLICAS_TIMEOUT, 100);
  fx->b = fx_client(synced);
  relock_options_free(synced);
  relock_lock_t *la = lock_of(fx->a, "res"), *lb = lock_of(fx->b, "res");
  assert_int_equal(ACQUIRE(la, 1, 0, RELOCK_INFINITE), 1);
  /* "held by another" wrote nothing: believed without enough replicas */
  uint64_t t0 = relock__now_ns();
  assert_int_equal(ACQUIRE(lb, 1, 0, RELOCK_INFINITE), 0);
  assert_true(fx_ms_since(t0) < fx_slack_ms(80)); /* not after WAIT's 100 ms */
  assert_int_equal(ACQUIRE(lb, 1, 300, RELOCK_INFINITE), 0);
  assert_int_equal(RELEASE(la, 1), 1);
  char msg[512];
  assert_int_equal(error_of(relock_lock_lock_async(lb, 1, 0, RELOCK_INFINITE), msg, sizeof msg),
                   RELOCK_ENOTREPLICATED);
  relock_lock_free(la);
  relock_lock_free(lb);
}

static void test_unsynced_reentry_keeps_the_count(void **state) {
  fx_t *fx = *state;
  fx_set_int(fx->cfg, RELOCK_OPT_MIN_REPLICAS_ACKED, 1);
  fx_set_ms(fx->cfg, RELOCK_OPT_MIN_REPLICAS_TIMEOUT, 200);
  fx->a = fx_client(fx->cfg);
  relock_lock_t *l = lock_of(fx->a, "res");
  assert_int_equal(ACQUIRE(l, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(relock_test_redis_pause(fx->replica), 0);
  char msg[512];
  int rc = error_of(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE), msg, sizeof msg);
  int given_back = count_becomes(fx->a, l, 1, 1);
  relock_test_redis_resume(fx->replica);
  assert_int_equal(rc, RELOCK_ENOTREPLICATED);
  assert_non_null(strstr(msg, "acknowledged by only 0 of 1 replicas within 200 ms"));
  assert_true(given_back); /* the re-entry was given back on the master */
  assert_int_equal(value_of(relock_lock_hold_count_async(l, 1)), 1);
  assert_int_equal(RELEASE(l, 1), 1); /* one release frees it */
  assert_true(gone(fx->a, "res"));
  relock_lock_free(l);
}

typedef struct {
  int calls;
  int reason;
  uint64_t at_ns;
  char message[512];
} lost_t;

static void on_lost(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg) {
  (void)lock;
  (void)owner;
  lost_t *l = arg;
  l->calls++;
  l->reason = reason;
  l->at_ns = relock__now_ns();
  snprintf(l->message, sizeof l->message, "%s", message);
}

static int was_lost(void *arg) { return ((lost_t *)arg)->calls > 0; }

static void test_unsynced_renewals_lose_the_lock(void **state) {
  fx_t *fx = *state;
  fx_set_int(fx->cfg, RELOCK_OPT_MIN_REPLICAS_ACKED, 1);
  fx_set_ms(fx->cfg, RELOCK_OPT_MIN_REPLICAS_TIMEOUT, 100);
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 900); /* renewed every 300 ms */
  fx->a = fx_client(fx->cfg);
  relock_lock_t *l = lock_of(fx->a, "res");
  lost_t lost = {0};
  relock_lock_on_lost(l, on_lost, &lost);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(ACQUIRE(l, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(relock_test_redis_pause(fx->replica), 0);
  int ok = fx_run_until(fx->a->loop, was_lost, &lost, 3000);
  uint64_t unsynced = fx->a->renewal.unsynced, renewed = fx->a->renewal.renewed;
  relock_test_redis_resume(fx->replica);
  assert_true(ok);
  assert_int_equal(lost.reason, RELOCK_ETIMEDOUT);
  assert_non_null(strstr(lost.message, "not acknowledged by enough replicas"));
  double at = (double)(lost.at_ns - t0) / 1e6;
  assert_true(at >= 900.0 - (double)relock__validity_margin_ms(900));
  assert_true(at < fx_slack_ms(900 + 300));
  assert_true(unsynced >= 2); /* the renewals at 300 and 600 ms */
  assert_int_equal(renewed, 0);
  relock_stats_t st; /* counted under its cause, the failed renewals too */
  assert_int_equal(relock_client_stats(fx->a, &st, sizeof st), 0);
  assert_int_equal(st.kind[RELOCK_KIND_LOCK].lost[RELOCK_LOSS_UNREPLICATED], 1);
  assert_int_equal(st.kind[RELOCK_KIND_LOCK].lost[RELOCK_LOSS_UNREACHABLE], 0);
  assert_true(st.renewal_failures >= 2);
  char msg[256];
  assert_int_equal(error_of(relock_lock_unlock_async(l, 1), msg, sizeof msg), RELOCK_ELOST);

  /* the replica back: new acquisitions work again, and stay renewed */
  wait_in_sync();
  relock_lock_t *l2 = lock_of(fx->a, "res2");
  assert_int_equal(ACQUIRE(l2, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(count_on(fx->replica, l2, 1), 1);
  uint64_t before = fx->a->renewal.renewed;
  lost_t lost2 = {0};
  relock_lock_on_lost(l2, on_lost, &lost2);
  fx_run_until(fx->a->loop, was_lost, &lost2, 1000);
  assert_int_equal(lost2.calls, 0);
  assert_true(fx->a->renewal.renewed >= before + 2);
  assert_int_equal(RELEASE(l2, 1), 1);
  relock_lock_free(l2);
  relock_lock_free(l);
}

static void test_no_wait_when_off(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 300); /* a renewal or two as well */
  fx->a = fx_client(fx->cfg);
  relock_lock_t *l = lock_of(fx->a, "res");
  long long waits = wait_calls();
  assert_int_equal(ACQUIRE(l, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(ACQUIRE(l, 1, 0, 5000), 1);
  lost_t lost = {0};
  relock_lock_on_lost(l, on_lost, &lost);
  fx_run_until(fx->a->loop, was_lost, &lost, 350);
  assert_true(fx->a->renewal.renewed >= 2);
  assert_int_equal(RELEASE(l, 1), 0);
  assert_int_equal(RELEASE(l, 1), 1);
  settle(fx->a);
  assert_int_equal(wait_calls(), waits);
  relock_lock_free(l);
}

static void test_wait_after_a_script_resent_as_eval(void **state) {
  fx_t *fx = *state;
  fx_set_int(fx->cfg, RELOCK_OPT_MIN_REPLICAS_ACKED, 1);
  fx->a = fx_client(fx->cfg);
  relock_lock_t *l = lock_of(fx->a, "res");
  assert_int_equal(ACQUIRE(l, 1, 0, 60000), 1); /* connected, script cached */
  assert_int_equal(RELEASE(l, 1), 1);
  relock_test_redis_cmd(fx->master, NULL, 0, "SCRIPT", "FLUSH", NULL);
  long long waits = wait_calls();
  /* EVALSHA meets NOSCRIPT and is re-sent as EVAL behind the WAIT, which
   * then ran before the script: a second WAIT must follow it */
  assert_int_equal(ACQUIRE(l, 2, 0, 60000), 1);
  assert_int_equal(count_on(fx->replica, l, 2), 1);
  settle(fx->a);
  assert_int_equal(wait_calls() - waits, 2);
  assert_int_equal(RELEASE(l, 2), 1);
  relock_lock_free(l);
}

static int never(void *arg) {
  (void)arg;
  return 0;
}

/* Runs c's loop for ms. */
static void run_for(relock_client_t *c, int64_t ms) { fx_run_until(relock_client_loop(c), never, NULL, ms); }

static void test_connection_lost_during_wait_retries_the_pair(void **state) {
  fx_t *fx = *state;
  fx_set_int(fx->cfg, RELOCK_OPT_MIN_REPLICAS_ACKED, 1);
  fx_set_ms(fx->cfg, RELOCK_OPT_MIN_REPLICAS_TIMEOUT, fx_slack_ms(400)); /* run_for's 100 ms scale too */
  fx_set_ms(fx->cfg, RELOCK_OPT_RETRY_INTERVAL, 20);
  fx->a = fx_client(fx->cfg);
  relock_lock_t *l = lock_of(fx->a, "res");
  assert_int_equal(ACQUIRE(l, 9, 0, 60000), 1); /* scripts cached, connected */
  assert_int_equal(RELEASE(l, 9), 1);
  assert_int_equal(relock_test_redis_pause(fx->replica), 0);
  relock_future_t *f = relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE);
  run_for(fx->a, 100); /* the script has answered; WAIT blocks */
  assert_false(relock_future_is_done(f));
  assert_int_equal(relock_test_redis_cmd(fx->master, NULL, 0, "CLIENT", "KILL", "TYPE", "normal", NULL), 0);
  relock_test_redis_resume(fx->replica);
  /* the pair again, on the new connection: the latch counts the hold once */
  assert_int_equal(value_of(f), 1);
  assert_int_equal(count_on(fx->master, l, 1), 1);
  assert_int_equal(count_on(fx->replica, l, 1), 1);
  assert_int_equal(RELEASE(l, 1), 1);
  relock_lock_free(l);
}

static void test_cancel_while_wait_blocks_gives_the_hold_back(void **state) {
  fx_t *fx = *state;
  fx_set_int(fx->cfg, RELOCK_OPT_MIN_REPLICAS_ACKED, 2);
  fx_set_ms(fx->cfg, RELOCK_OPT_MIN_REPLICAS_TIMEOUT, fx_slack_ms(300));
  fx->a = fx_client(fx->cfg);
  relock_lock_t *l = lock_of(fx->a, "res");
  relock_future_t *f = relock_lock_lock_async(l, 1, RELOCK_INFINITE, RELOCK_INFINITE);
  run_for(fx->a, 100);
  char buf[64];
  assert_int_equal(relock_test_redis_cmd(fx->master, buf, sizeof buf, "EXISTS", "res", NULL), 0);
  assert_string_equal(buf, ":1\r\n"); /* written on the master, WAIT blocking */
  assert_int_equal(relock_future_cancel(f), 1);
  assert_int_equal(relock_future_state(f), RELOCK_FUTURE_CANCELLED);
  relock_future_release(f);
  assert_true(gone(fx->a, "res"));
  assert_int_equal(value_of(relock_lock_hold_count_async(l, 1)), 0);
  relock_lock_free(l);
}

/* A write to a node that is (now) a replica answers READONLY - a demoted
 * master, until the client learns where the new one is. The lock scripts
 * retry it, never showing it while their retries last: here the replica is
 * promoted during them and the acquisition succeeds there. The client
 * reaches the replica through the test proxy, which counts the READONLY
 * answers it was given (Redis 7 says "-READONLY You can't write ...";
 * Redis 6 says it inside "-ERR Error running script ..."); the server's
 * own count, INFO errorstats, is Redis 6.2's. */
static void test_readonly_is_retried(void **state) {
  fx_t *fx = *state;
  relock_test_proxy_t *proxy =
      relock_test_proxy_start(relock_test_redis_host(fx->replica), relock_test_redis_port(fx->replica));
  assert_non_null(proxy);
  relock_test_proxy_watch(proxy, "READONLY You can't write");
  relock_options_free(fx->cfg);
  fx->cfg = fx_options(fx->replica, 0);
  fx_set_int(fx->cfg, RELOCK_OPT_PORT, relock_test_proxy_port(proxy));
  fx_set_ms(fx->cfg, RELOCK_OPT_RETRY_INTERVAL, 300);
  fx->a = fx_client(fx->cfg);
  relock_lock_t *l = lock_of(fx->a, "ro");
  int errorstats = relock_test_redis_version(fx->replica) >= 60200;
  long long before = info_num(fx->replica, "errorstats", "errorstat_READONLY:count=");
  relock_future_t *f = relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE);
  /* until the replica has refused a write twice: the first try, and a
   * retry */
  uint64_t deadline = relock__now_ns() + (uint64_t)fx_slack_ms(5000) * 1000000u;
  while (relock_test_proxy_seen(proxy) < 2 && !relock_future_is_done(f) && relock__now_ns() < deadline)
    run_for(fx->a, 10);
  if (relock_future_is_done(f))
    fail_msg("READONLY was not retried: %s", relock_future_message(f));
  assert_true(relock_test_proxy_seen(proxy) >= 2);
  if (errorstats)
    assert_true(info_num(fx->replica, "errorstats", "errorstat_READONLY:count=") > (before > 0 ? before : 0));
  char buf[64];
  assert_int_equal(relock_test_redis_cmd(fx->replica, buf, sizeof buf, "REPLICAOF", "NO", "ONE", NULL), 0);
  assert_string_equal(buf, "+OK\r\n");
  assert_int_equal(value_of(f), 1);
  assert_int_equal(count_on(fx->replica, l, 1), 1);
  assert_int_equal(RELEASE(l, 1), 1);
  relock_lock_free(l);
  char port[16];
  snprintf(port, sizeof port, "%d", relock_test_redis_port(fx->master));
  assert_int_equal(relock_test_redis_cmd(fx->replica, buf, sizeof buf, "REPLICAOF", "127.0.0.1", port, NULL), 0);
  relock_client_free(fx->a); /* before its proxy */
  fx->a = NULL;
  relock_test_proxy_stop(proxy);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_acquired_lock_is_on_the_replica),
      T(test_too_few_replicas_fail_and_give_the_hold_back),
      T(test_waiting_for_a_held_lock_needs_no_replicas),
      T(test_unsynced_reentry_keeps_the_count),
      T(test_unsynced_renewals_lose_the_lock),
      T(test_no_wait_when_off),
      T(test_wait_after_a_script_resent_as_eval),
      T(test_connection_lost_during_wait_retries_the_pair),
      T(test_cancel_while_wait_blocks_gives_the_hold_back),
      T(test_readonly_is_retried),
  };
#undef T
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found: install the Debian package redis-server");
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("replicas", tests, group_setup, group_teardown);
}
