/* The library against a real Redis Cluster (tests/support/cluster.h: three
 * masters, a replica each, node timeout 1 s): locks on names spread over
 * every master, waiting and wake-up on each (sharded pub/sub, and classic
 * on a cluster that hides PUBSUB; classic everywhere on servers before
 * Redis 7.0, which have no sharded pub/sub), a slot resharded under a held and
 * waited-on lock (ASK, then MOVED), a slot moved twice quickly, CLUSTER
 * FAILOVER and kill -9 of a master under held locks, the counter test
 * (8 processes, 16 names) across a failover, CLUSTERDOWN (and a wait that
 * ends in it, naming it), MOVED back and
 * forth between two masters, a dead seed, no seed at all, a name whose
 * keys cannot share a slot, the URL, TLS with a password; a fresh client's
 * (and the relock tool's) first force release, semaphore release and
 * count-down heard at once by sharded subscribers; a fresh client's first
 * acquisition that too few replicas acknowledged given back at once, even
 * when the client (or the tool) closes right after; the masters listed
 * and a command sent to each, the tool's list of every master's locks;
 * seeds that are standalone servers refused.
 *
 * Clients are threaded; the test looks at the nodes directly
 * (relock_test_redis_cmd), never through the library. */
#include <config.h>

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/cluster.h"
#include "support/threaded_fixture.h"

static relock_test_cluster_t *topo; /* for the whole group */

/* Renewed every 1 s: renewals are seen within the test's patience, and a
 * lease (3 s) outlives a failover's ~2 s only just: kill -9 tests accept a
 * reported loss, never a silent one. */
#define WATCHDOG_MS 3000

static relock_options_t *cluster_options(const char *seeds) {
  relock_options_t *opts = relock_options_new(NULL);
  assert_non_null(opts);
  fx_set_str(opts, RELOCK_OPT_CLUSTER_NODES, seeds != NULL ? seeds : relock_test_cluster_seeds(topo));
  fx_set_ms(opts, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(1000));
  fx_set_ms(opts, RELOCK_OPT_CONNECT_TIMEOUT, fx_slack_ms(1000));
  fx_set_ms(opts, RELOCK_OPT_RECONNECT_MIN, 10);
  fx_set_ms(opts, RELOCK_OPT_RECONNECT_MAX, 200);
  fx_set_ms(opts, RELOCK_OPT_WATCHDOG_TIMEOUT, WATCHDOG_MS);
  return opts;
}

static relock_client_t *cluster_client(void) {
  relock_options_t *opts = cluster_options(NULL);
  relock_client_t *c = client_of(opts);
  relock_options_free(opts);
  return c;
}

static int slot_of(const char *name) { return relock_test_cluster_keyslot(topo, name, strlen(name)); }

static relock_test_redis_t *owner_node(const char *name) {
  int m = relock_test_cluster_owner(topo, slot_of(name));
  assert_true(m >= 0);
  return relock_test_cluster_node(topo, m);
}

/* A name "<prefix>-<n>" whose slot master m serves. */
static void name_on_master(int m, const char *prefix, char *out, size_t size) {
  for (int n = 0; n < 100000; n++) {
    snprintf(out, size, "%s-%d", prefix, n);
    if (relock_test_cluster_owner(topo, slot_of(out)) == m)
      return;
  }
  fail_msg("no name for master %d", m);
}

static long long shardnumsub(relock_test_redis_t *r, const char *cmd, const char *channel) {
  char buf[256];
  if (relock_test_redis_cmd(r, buf, sizeof buf, cmd, "SHARDNUMSUB", channel, NULL) != 0)
    return -1;
  const char *p = strrchr(buf, ':');
  return p != NULL ? atoll(p + 1) : -1;
}

/* Whether the cluster's servers have sharded pub/sub (Redis 7.0+). Before
 * 7.0 relock falls back to classic pub/sub: a SUBSCRIBE on any node, which
 * a PUBLISH on any node reaches. */
static int sharded_servers(void) { return relock_test_redis_version(relock_test_cluster_node(topo, 0)) >= 70000; }

/* The classic subscribers of channel on every node together (NUMSUB). */
static long long classic_subscribers(const char *cmd, const char *channel) {
  long long sum = 0;
  for (int i = 0; i < relock_test_cluster_nodes(topo); i++) {
    char buf[256];
    const char *p;
    if (relock_test_redis_cmd(relock_test_cluster_node(topo, i), buf, sizeof buf, cmd, "NUMSUB", channel, NULL) != 0 ||
        (p = strrchr(buf, ':')) == NULL)
      return -1;
    sum += atoll(p + 1);
  }
  return sum;
}

/* Waits until channel has n subscribers within 3 s; the last count seen.
 * With sharded pub/sub they are sharded subscribers on r (SHARDNUMSUB),
 * the channel's master; without it (before Redis 7.0) classic ones on any
 * node - and relock's use of the classic path is what this checks there:
 * a sharded subscription would be refused, a waiter would not be counted. */
static long long await_subscribers(relock_test_redis_t *r, const char *channel, long long n) {
  int64_t deadline = now_ms() + fx_slack_ms(3000);
  long long got;
  int sharded = sharded_servers();
  while ((got = sharded ? shardnumsub(r, "PUBSUB", channel) : classic_subscribers("PUBSUB", channel)) != n &&
         now_ms() < deadline)
    pause_ms(10);
  return got;
}

/* b, waiting for a's lock, is woken by the release within 1 s (its lease
 * would let it try again only 3 s later). */
static void release_wakes(relock_lock_t *la, uint64_t a, relock_future_t *waiter, relock_lock_t *lb, uint64_t b) {
  int64_t t0 = now_ms();
  assert_int_equal(RELEASE(la, a), 1);
  int64_t got = -1;
  char msg[256];
  int r = outcome(waiter, 1000, &got, msg, sizeof msg);
  if (r != 0)
    fail_msg("waiter not woken within 1 s of the release: %s (%s)", msg, relock_err_name(r));
  assert_int_equal(got, 1);
  printf("# woken %lld ms after the release\n", (long long)(now_ms() - t0));
  assert_int_equal(RELEASE(lb, b), 1);
}

/* Whether the lock's remaining TTL, as the library reads it (following
 * MOVED and ASK), is seen to jump up within timeout_ms: a renewal. */
static int renewed_through(relock_lock_t *l, int timeout_ms) {
  int64_t deadline = now_ms() + fx_slack_ms(timeout_ms), last = -1;
  while (now_ms() < deadline) {
    int64_t ttl = value_of(relock_lock_remaining_ttl_async(l));
    if (last > 0 && ttl > last + 20)
      return 1;
    last = ttl;
    pause_ms(10);
  }
  return 0;
}

static int masters(void) {
  int m = 0;
  for (int s = 0; s < 16384; s += 128) { /* the fixture's masters are the nodes that own slots */
    int o = relock_test_cluster_owner(topo, s);
    if (o + 1 > m)
      m = o + 1;
  }
  return m;
}

/* A lock on name taken and released through c, seen on its slot's master. */
static void lock_unlock_on_owner(relock_client_t *c, const char *name) {
  relock_lock_t *l = lock_of(c, name);
  assert_int_equal(ACQUIRE(l, 1, 0), 1);
  assert_int_equal(field_on(owner_node(name), l, 1), 1);
  assert_int_equal(RELEASE(l, 1), 1);
}

/* For each master of the current topology: a holds a lock there, b waits
 * for it subscribed (SSUBSCRIBE on that master; before Redis 7.0 SUBSCRIBE
 * on any node), and is woken by the release. */
static void wake_on_every_master(relock_client_t *a, relock_client_t *b, const char *prefix) {
  for (int m = 0; m < masters(); m++) {
    char name[64], channel[128];
    name_on_master(m, prefix, name, sizeof name);
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    relock_lock_t *la = lock_of(a, name), *lb = lock_of(b, name);
    assert_int_equal(ACQUIRE(la, 1, 0), 1);
    assert_int_equal(field_on(relock_test_cluster_node(topo, m), la, 1), 1);
    relock_future_t *waiter = relock_lock_lock_async(lb, 2, RELOCK_INFINITE, RELOCK_INFINITE);
    assert_non_null(waiter);
    assert_int_equal(await_subscribers(relock_test_cluster_node(topo, m), channel, 1), 1);
    release_wakes(la, 1, waiter, lb, 2);
  }
}

/* A lock named name taken by c (owner 1), its losses counted in *lost. */
static relock_lock_t *held_watched(relock_client_t *c, const char *name, lost_t *lost) {
  relock_lock_t *l = lock_of(c, name);
  memset(lost, 0, sizeof *lost);
  relock_lock_on_lost(l, on_lost, lost);
  assert_int_equal(ACQUIRE(l, 1, 0), 1);
  return l;
}

/* -- fixtures -----------------------------------------------------------------*/

static int group_setup(void **state) {
  (void)state;
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("no redis-server (set REDIS_SERVER or install redis-server)");
  if ((topo = relock_test_cluster_start(NULL)) == NULL)
    RELOCK_TEST_CANNOT_RUN("the cluster did not start (see above)");
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  relock_test_cluster_free(topo);
  return 0;
}

/* Every test starts from a whole cluster: every node running and agreeing,
 * no keys. */
static int setup(void **state) {
  (void)state;
  for (int i = 0; i < relock_test_cluster_nodes(topo); i++) {
    relock_test_redis_t *r = relock_test_cluster_node(topo, i);
    relock_test_redis_resume(r);
    if (!relock_test_redis_running(r) && relock_test_cluster_restart(topo, i, 30000) != 0)
      return -1;
  }
  if (relock_test_cluster_wait_ok(topo, 30000) != 0)
    return -1;
  for (int i = 0; i < relock_test_cluster_nodes(topo); i++)
    relock_test_redis_cmd(relock_test_cluster_node(topo, i), NULL, 0, "FLUSHALL", NULL); /* replicas refuse */
  return 0;
}

/* -- a. locks on every master ---------------------------------------------------*/

static void test_locks_on_every_master(void **state) {
  (void)state;
  relock_client_t *c = cluster_client();
  int seen[16] = {0};
  char name[64];
  for (int i = 0; i < 48; i++) { /* 48 names: every master gets some */
    snprintf(name, sizeof name, "spread-%d", i);
    relock_lock_t *l = relock_lock_new(c, name, NULL);
    assert_non_null(l);
    assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE)), 1);
    int m = relock_test_cluster_owner(topo, slot_of(name));
    assert_true(m >= 0 && m < 16);
    seen[m]++;
    /* the hold is on the master of the name's slot, nowhere else */
    assert_int_equal(field_on(relock_test_cluster_node(topo, m), l, 1), 1);
    assert_int_equal(value_of(relock_lock_unlock_async(l, 1)), 1);
    assert_int_equal(fx_raw_int(relock_test_cluster_node(topo, m), "EXISTS", name, NULL), 0);
    relock_lock_free(l);
  }
  int used = 0;
  for (int m = 0; m < 16; m++)
    used += seen[m] > 0;
  assert_int_equal(used, masters());
}

/* Renewals of locks on every master, some sharing a slot (equal tags):
 * a renewal batch holds keys of one slot only (a script with keys of two
 * slots is refused with CROSSSLOT, and its locks would be lost). */
static void test_renewals_batched_per_slot(void **state) {
  (void)state;
  relock_client_t *c = cluster_client();
  static lost_t lost;
  memset(&lost, 0, sizeof lost);
  enum { N = 14 };
  relock_lock_t *l[N];
  for (int i = 0; i < N; i++) {
    char name[32];
    if (i < 10)
      snprintf(name, sizeof name, "renew-%d", i);
    else
      snprintf(name, sizeof name, "{renew-tag}%d", i); /* four in one slot */
    l[i] = lock_of(c, name);
    relock_lock_on_lost(l[i], on_lost, &lost);
    assert_int_equal(ACQUIRE(l[i], 1, 0), 1);
  }
  /* two rounds of renewals (every second), seen on the owners */
  for (int i = 0; i < N; i += 3)
    assert_true(renewed_on(owner_node(relock_lock_name(l[i])), relock_lock_name(l[i]), WATCHDOG_MS));
  pause_ms((int)fx_slack_ms(WATCHDOG_MS)); /* a whole lease: nothing may be lost */
  assert_int_equal(lost_count(&lost), 0);
  for (int i = 0; i < N; i++) {
    assert_int_equal(field_on(owner_node(relock_lock_name(l[i])), l[i], 1), 1);
    assert_int_equal(RELEASE(l[i], 1), 1);
  }
}

/* Waiting for a lock held on each master, woken by the release through the
 * lock's sharded channel on that master - or, on a server without sharded
 * pub/sub (before 7.0), through its classic channel: the fallback, seen to
 * be taken (await_subscribers) and to wake. */
static void test_wait_and_wake_on_every_master_sharded(void **state) {
  (void)state;
  wake_on_every_master(cluster_client(), cluster_client(), "wake");
}

/* A cluster without sharded pub/sub (PUBSUB hidden by rename-command, so
 * the probe fails as on Redis 6): classic SUBSCRIBE on one node, and the
 * release's PUBLISH reaches it from every master. */
static void test_wait_and_wake_on_every_master_classic(void **state) {
  (void)state;
  static const char *const hide[] = {"--rename-command", "PUBSUB", "PUBSUB_HIDDEN", NULL};
  relock_test_cluster_opts_t o = {.extra_args = hide};
  relock_test_cluster_t *own = relock_test_cluster_start(&o);
  assert_non_null(own);
  relock_test_cluster_t *shared = topo;
  topo = own; /* the helpers above look at this one now */
  relock_client_t *a = cluster_client(), *b = cluster_client();
  for (int m = 0; m < masters(); m++) {
    char name[64], channel[128];
    name_on_master(m, "classic", name, sizeof name);
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    relock_lock_t *la = lock_of(a, name), *lb = lock_of(b, name);
    assert_int_equal(ACQUIRE(la, 1, 0), 1);
    relock_future_t *waiter = relock_lock_lock_async(lb, 2, RELOCK_INFINITE, RELOCK_INFINITE);
    assert_non_null(waiter);
    long long subscribed = -1;
    int64_t deadline = now_ms() + fx_slack_ms(3000);
    while (subscribed != 1 && now_ms() < deadline) { /* on one node, any */
      subscribed = 0;
      for (int i = 0; i < relock_test_cluster_nodes(own); i++) {
        char buf[256];
        if (relock_test_redis_cmd(relock_test_cluster_node(own, i), buf, sizeof buf, "PUBSUB_HIDDEN", "NUMSUB", channel,
                                  NULL) == 0 && strrchr(buf, ':') != NULL)
          subscribed += atoll(strrchr(buf, ':') + 1);
      }
      if (subscribed != 1)
        pause_ms(10);
    }
    assert_int_equal(subscribed, 1);
    /* no sharded subscriber anywhere (before 7.0 the servers have none:
     * the subcommand is unknown there) */
    for (int i = 0; i < relock_test_cluster_nodes(own); i++)
      assert_int_equal(shardnumsub(relock_test_cluster_node(own, i), "PUBSUB_HIDDEN", channel),
                       sharded_servers() ? 0 : -1);
    release_wakes(la, 1, waiter, lb, 2);
  }
  teardown(NULL);
  topo = shared;
  relock_test_cluster_free(own);
}

/* -- b. resharding --------------------------------------------------------------*/

/* A held lock whose slot is migrated, in phases: renewed on the target
 * while migrating (ASK), then as its owner (MOVED); the waiter, subscribed
 * on the old owner, follows the channel and is woken by the release. */
static void test_reshard_under_held_and_waited_lock(void **state) {
  (void)state;
  relock_client_t *a = cluster_client(), *b = cluster_client();
  static lost_t lost; /* static: the callback may come until teardown */
  relock_lock_t *la = held_watched(a, "reshard", &lost), *lb = lock_of(b, "reshard");
  relock_future_t *waiter = relock_lock_lock_async(lb, 2, RELOCK_INFINITE, RELOCK_INFINITE);
  int slot = slot_of("reshard");
  int from = relock_test_cluster_owner(topo, slot), to = relock_test_cluster_other_master(topo, from);
  relock_test_redis_t *src = relock_test_cluster_node(topo, from), *dst = relock_test_cluster_node(topo, to);
  assert_int_equal(await_subscribers(src, "redisson_lock__channel:{reshard}", 1), 1);

  assert_int_equal(relock_test_cluster_migrate_begin(topo, slot, to), 0);
  assert_int_equal(relock_test_cluster_migrate_keys(topo, slot), 0);
  /* The key is on the target, which serves it only after ASKING: a
   * direct look gets MOVED, the library's (ASK followed) sees the hold
   * and its renewals. */
  char buf[128];
  assert_int_equal(relock_test_redis_cmd(dst, buf, sizeof buf, "PTTL", "reshard", NULL), 0);
  assert_non_null(strstr(buf, "MOVED"));
  assert_int_equal(value_of(relock_lock_is_held_by_thread_async(la, 1)), 1);
  assert_true(renewed_through(la, WATCHDOG_MS));
  assert_int_equal(lost_count(&lost), 0);
  relock_stats_t st;
  assert_int_equal(relock_client_stats(a, &st, sizeof st), 0);
  assert_true(st.redirections >= 1); /* ASK followed, counted */
  assert_int_equal(st.failovers, 0);  /* a resharding is no failover */
  assert_int_equal(relock_test_cluster_migrate_end(topo, slot, to), 0);
  assert_int_equal(field_on(dst, la, 1), 1);
  assert_true(renewed_on(dst, "reshard", WATCHDOG_MS)); /* the owner now: MOVED followed */
  assert_int_equal(lost_count(&lost), 0);
  /* the waiter's channel followed the slot */
  assert_int_equal(await_subscribers(dst, "redisson_lock__channel:{reshard}", 1), 1);
  assert_false(relock_future_is_done(waiter));
  release_wakes(la, 1, waiter, lb, 2);
  /* back where it was, for the next tests */
  assert_int_equal(relock_test_cluster_migrate_slot(topo, slot, from), 0);
}

/* A slot moved twice in a row, the second right after the first: the
 * held lock follows both moves and is released where it ends. */
static void test_slot_moves_twice(void **state) {
  (void)state;
  relock_client_t *a = cluster_client();
  static lost_t lost; /* static: the callback may come until teardown */
  relock_lock_t *la = held_watched(a, "twice", &lost);
  int slot = slot_of("twice");
  int first = relock_test_cluster_owner(topo, slot);
  int second = relock_test_cluster_other_master(topo, first);
  int third = -1;
  for (int m = 0; m < masters(); m++)
    if (m != first && m != second)
      third = m;
  assert_true(third >= 0);
  assert_int_equal(relock_test_cluster_migrate_slot(topo, slot, second), 0);
  assert_int_equal(relock_test_cluster_migrate_slot(topo, slot, third), 0);
  relock_test_redis_t *end = relock_test_cluster_node(topo, third);
  assert_true(renewed_on(end, "twice", WATCHDOG_MS));
  assert_int_equal(lost_count(&lost), 0);
  assert_int_equal(RELEASE(la, 1), 1);
  assert_int_equal(fx_raw_int(end, "EXISTS", "twice", NULL), 0);
  assert_int_equal(relock_test_cluster_migrate_slot(topo, slot, first), 0);
}

/* -- c. failover ----------------------------------------------------------------*/

static void test_cluster_failover_under_held_lock(void **state) {
  (void)state;
  relock_client_t *a = cluster_client(), *b = cluster_client();
  static lost_t lost; /* static: the callback may come until teardown */
  relock_lock_t *la = held_watched(a, "fo", &lost), *lb = lock_of(b, "fo");
  relock_future_t *waiter = relock_lock_lock_async(lb, 2, RELOCK_INFINITE, RELOCK_INFINITE);
  int old = relock_test_cluster_owner(topo, slot_of("fo"));
  assert_int_equal(await_subscribers(relock_test_cluster_node(topo, old), "redisson_lock__channel:{fo}", 1), 1);
  int64_t t0 = now_ms();
  int nm = relock_test_cluster_failover(topo, old, 15000);
  assert_true(nm >= 0 && nm != old);
  printf("# CLUSTER FAILOVER %d -> %d in %lld ms\n", old, nm, (long long)(now_ms() - t0));
  relock_test_redis_t *m = relock_test_cluster_node(topo, nm);
  assert_int_equal(field_on(m, la, 1), 1);
  assert_true(renewed_on(m, "fo", WATCHDOG_MS));
  assert_int_equal(lost_count(&lost), 0);
  assert_true(followed_failover(a, 5000)); /* counted: the promoted replica serves the old master's slots */
  assert_int_equal(await_subscribers(m, "redisson_lock__channel:{fo}", 1), 1);
  assert_false(relock_future_is_done(waiter));
  release_wakes(la, 1, waiter, lb, 2);
}

/* kill -9 of the master under a held lock: renewed on the promoted replica
 * or reported lost - and b gets the lock only in the second case. */
static void test_kill_master_under_held_lock(void **state) {
  (void)state;
  relock_client_t *a = cluster_client(), *b = cluster_client();
  static lost_t lost; /* static: the callback may come until teardown */
  relock_lock_t *la = held_watched(a, "kill", &lost), *lb = lock_of(b, "kill");
  pause_ms(50); /* replicated (asynchronously: usually within a millisecond) */
  int old = relock_test_cluster_owner(topo, slot_of("kill"));
  int promotion = -1;
  int nm = relock_test_cluster_kill_master(topo, old, 20000, &promotion);
  assert_true(nm >= 0);
  printf("# kill -9 of master %d: node %d promoted after %d ms\n", old, nm, promotion);
  /* The hold's fate is settled once its lease could have run out since the
   * kill: renewed on the new master in time, or lost. Deciding earlier
   * raced the loss when the promotion took nearly the lease (2.8 s of 3 s
   * under ThreadSanitizer). */
  int64_t settle = relock_test_cluster_last_kill_ms(topo) + WATCHDOG_MS + 100 - now_ms();
  if (settle > 0)
    pause_ms((int)settle);
  relock_test_redis_t *m = relock_test_cluster_node(topo, nm);
  int64_t got = -1;
  char msg[256];
  int r = outcome(relock_lock_lock_async(lb, 2, 0, RELOCK_INFINITE), 5000, &got, msg, sizeof msg);
  assert_int_equal(r, 0);
  if (lost_count(&lost) == 0) {
    assert_int_equal(got, 0); /* still a's */
    assert_int_equal(field_on(m, la, 1), 1);
    assert_true(renewed_on(m, "kill", WATCHDOG_MS));
    assert_int_equal(lost_count(&lost), 0);
    assert_int_equal(RELEASE(la, 1), 1);
  } else {
    printf("# a was told its lock was lost: %s\n", relock_err_name(lost.reason));
    if (got == 1)
      assert_int_equal(RELEASE(lb, 2), 1);
  }
}

/* Watched permits on every master, some semaphores sharing a slot: their
 * renewal batches (lua/lock_renew.lua) reach the "{name}:timeout" zset in
 * the name's slot, so a whole lease later none is lost and Redis still
 * has each; a permit taken away there is told lost. */
static int permits_lost;
static void on_permit_lost(relock_permit_semaphore_t *s, const char *id, int reason, const char *msg, void *arg) {
  (void)s, (void)id, (void)reason, (void)arg;
  printf("# %s\n", msg);
  __atomic_add_fetch(&permits_lost, 1, __ATOMIC_SEQ_CST);
}

static void test_watched_permits_on_every_master(void **state) {
  (void)state;
  relock_client_t *c = cluster_client();
  __atomic_store_n(&permits_lost, 0, __ATOMIC_SEQ_CST);
  enum { N = 8 };
  relock_permit_semaphore_t *s[N];
  char ids[N][RELOCK_PERMIT_ID_SIZE];
  for (int i = 0; i < N; i++) {
    char name[32];
    if (i < 5)
      snprintf(name, sizeof name, "permits-%d", i);
    else
      snprintf(name, sizeof name, "{permits-tag}%d", i); /* three in one slot */
    assert_non_null(s[i] = relock_permit_semaphore_new(c, name, NULL));
    assert_int_equal(relock_permit_semaphore_on_lost(s[i], on_permit_lost, NULL), 0);
    assert_int_equal(relock_permit_semaphore_try_set_permits(s[i], 1, NULL), 0);
    assert_int_equal(relock_permit_semaphore_acquire(s[i], 0, RELOCK_INFINITE, ids[i]), 0);
    assert_true(ids[i][0] != '\0');
  }
  pause_ms((int)fx_slack_ms(WATCHDOG_MS + WATCHDOG_MS / 2)); /* past the first lease: renewed, or gone */
  assert_int_equal(__atomic_load_n(&permits_lost, __ATOMIC_SEQ_CST), 0);
  for (int i = 0; i < N; i++) {
    assert_true(relock_permit_semaphore_validity_ms(s[i], ids[i]) > 0);
    relock_future_t *f = relock_permit_semaphore_validate_async(s[i], ids[i]);
    assert_int_equal(relock_future_wait(f, fx_slack_ms(10000)), 0);
    assert_true(relock_future_bool(f)); /* Redis has it */
    relock_future_release(f);
  }
  /* taken away on its master (another client's release of its id) */
  relock_client_t *other = cluster_client();
  relock_permit_semaphore_t *theirs = relock_permit_semaphore_new(other, relock_permit_semaphore_name(s[0]), NULL);
  int released = 0;
  assert_int_equal(relock_permit_semaphore_release(theirs, ids[0], &released), 0);
  assert_int_equal(released, 1);
  for (int64_t t0 = now_ms(); __atomic_load_n(&permits_lost, __ATOMIC_SEQ_CST) == 0;) {
    if (now_ms() - t0 > fx_slack_ms(WATCHDOG_MS))
      fail_msg("a permit taken away on its master was not told lost within a lease");
    pause_ms(20);
  }
  assert_int_equal(relock_permit_semaphore_release(s[0], ids[0], NULL), RELOCK_ELOST);
  for (int i = 1; i < N; i++) {
    assert_int_equal(relock_permit_semaphore_release(s[i], ids[i], &released), 0);
    assert_int_equal(released, 1);
  }
  assert_int_equal(__atomic_load_n(&permits_lost, __ATOMIC_SEQ_CST), 1);
  relock_permit_semaphore_free(theirs);
  for (int i = 0; i < N; i++)
    relock_permit_semaphore_free(s[i]); /* the clients go with the teardown */
}

/* The counter test: 8 processes increment counters under locks on 16
 * names spread over the slots (GET, then SET one more: not atomic) while a
 * master fails over. With no lock reported lost, every counter ends exact.
 *
 * A SET the failover answers with an error (CLUSTERDOWN while the slot
 * changes hands: RELOCK_ESERVER) did not run; one with no answer (timed
 * out, connection lost) may have run, and is sent again under the same
 * hold until answered: SET of the same value, so the counter holds n + 1
 * whether the first ran or not. Only an outcome still unknown then counts
 * as unsure, and the sum of the counters checks every case. */
#define WORKERS 8
#define NAMES 16

/* One line about what worker w saw, on stderr (the test's log) in a single
 * write, so that a failed run names its cause. */
static void said(int w, int64_t t0, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void said(int w, int64_t t0, const char *fmt, ...) {
  char line[512];
  int len = snprintf(line, sizeof line, "# worker %d at %lld ms: ", w, (long long)(now_ms() - t0));
  va_list ap;
  va_start(ap, fmt);
  len += vsnprintf(line + len, sizeof line - (size_t)len - 1, fmt, ap);
  va_end(ap);
  if (len > (int)sizeof line - 2)
    len = (int)sizeof line - 2;
  line[len++] = '\n';
  if (write(2, line, (size_t)len) != len)
    return; /* a diagnostic only */
}

/* Waits for f (10 s); its error, said as worker w's with what. */
static int worker_wait(int w, int64_t t0, relock_future_t *f, const char *what, const char *name) {
  int r = relock_future_wait(f, fx_slack_ms(10000));
  if (r != 0)
    said(w, t0, "%s %s: %s (%s)", what, name, relock_err_name(r), relock_future_message(f));
  return r;
}

/* SET key v, worker w holding the key's lock: 0 done, RELOCK_ESERVER
 * refused (not run), else unknown. A SET with no answer is sent again
 * (*resent counts it) until one is answered OK within 10 s: the same
 * value, so done whether the first ran or not; an error answer after it
 * leaves the first one's outcome unknown, so it is sent again too. */
static int set_under_hold(int w, int64_t t0, relock_client_t *c, const char *key, const char *v, long *resent) {
  const char *set[] = {"SET", key, v};
  int64_t give_up = now_ms() + fx_slack_ms(10000);
  int unknown = 0;
  for (;;) {
    relock_future_t *f = relock_client_command_async(c, 3, set, NULL);
    int r = worker_wait(w, t0, f, unknown ? "SET again" : "SET", key);
    relock_future_release(f);
    if (r == 0 || (r == RELOCK_ESERVER && !unknown))
      return r;
    unknown |= r != RELOCK_ESERVER;
    if (now_ms() >= give_up)
      return RELOCK_ETIMEDOUT;
    (*resent)++;
    pause_ms(50); /* a back-off: the failover is settling */
  }
}

static void worker(int w, int fd, int ms) {
  int64_t t0 = now_ms();
  relock_options_t *opts = cluster_options(NULL);
  relock_error_t err;
  relock_client_t *c = relock_client_new(NULL, opts, &err);
  relock_options_free(opts);
  long incs = 0, lost = 0, unsure = 0, refused = 0, resent = 0;
  if (c == NULL) {
    said(w, t0, "relock_client_new: %s (%s)", err.message, relock_err_name(err.code));
    _exit(3);
  }
  relock_lock_t *locks[NAMES];
  for (int i = 0; i < NAMES; i++) {
    char name[32];
    snprintf(name, sizeof name, "counter-%d", i);
    if ((locks[i] = relock_lock_new(c, name, NULL)) == NULL)
      _exit(3);
  }
  uint64_t me = (uint64_t)getpid();
  int64_t end = now_ms() + ms;
  for (unsigned k = (unsigned)getpid(); now_ms() < end; k = k * 1103515245u + 12345u) {
    relock_lock_t *l = locks[(k >> 8) % NAMES];
    const char *name = relock_lock_name(l);
    relock_future_t *f = relock_lock_lock_async(l, me, 5000, RELOCK_INFINITE);
    if (worker_wait(w, t0, f, "lock", name) != 0 || !relock_future_bool(f)) {
      relock_future_release(f);
      continue; /* not acquired: nothing done */
    }
    relock_future_release(f);
    char key[64];
    snprintf(key, sizeof key, "{%s}:n", name);
    const char *get[] = {"GET", key};
    f = relock_client_command_async(c, 2, get, NULL);
    long n = -1;
    if (worker_wait(w, t0, f, "GET", key) == 0) {
      const relock_reply_t *rep = relock_future_reply(f);
      n = rep->type == RELOCK_REPLY_NIL ? 0 : atol(rep->str);
    }
    relock_future_release(f);
    if (n >= 0) {
      char v[32];
      snprintf(v, sizeof v, "%ld", n + 1);
      int r = set_under_hold(w, t0, c, key, v, &resent);
      if (r == 0)
        incs++;
      else if (r == RELOCK_ESERVER)
        refused++; /* answered with an error: it did not run */
      else
        unsure++; /* did it run? only Redis knows */
    }
    f = relock_lock_unlock_async(l, me);
    if (worker_wait(w, t0, f, "unlock", name) == RELOCK_ELOST)
      lost++;
    relock_future_release(f);
  }
  for (int i = 0; i < NAMES; i++)
    relock_lock_free(locks[i]);
  relock_client_free(c);
  said(w, t0, "%ld increments (%ld SETs sent again), %ld SETs refused, %ld lost, %ld unsure", incs, resent, refused,
       lost, unsure);
  char line[96];
  int len = snprintf(line, sizeof line, "%ld %ld %ld %ld %ld\n", incs, lost, unsure, refused, resent);
  _exit(write(fd, line, (size_t)len) == len ? 0 : 4);
}

static void test_counter_across_failover(void **state) {
  (void)state;
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  int run_ms = (int)fx_slack_ms(4000);
  pid_t pids[WORKERS];
  fflush(stdout);
  fflush(stderr);
  for (int w = 0; w < WORKERS; w++) {
    if ((pids[w] = fork()) == 0) {
      close(fds[0]);
      worker(w, fds[1], run_ms);
    }
    assert_true(pids[w] > 0);
  }
  close(fds[1]);
  int64_t t0 = now_ms();
  pause_ms(run_ms / 3);
  int old = relock_test_cluster_owner(topo, slot_of("counter-0"));
  int nm = relock_test_cluster_failover(topo, old, 15000);
  printf("# CLUSTER FAILOVER of master %d (holding counter-0's slot) -> %d during the run, done at %lld ms\n", old, nm,
         (long long)(now_ms() - t0));
  fflush(stdout);
  long incs = 0, lost = 0, unsure = 0, refused = 0, resent = 0;
  FILE *in = fdopen(fds[0], "r");
  for (int w = 0; w < WORKERS; w++) {
    long i, l, u, r, a;
    int st;
    assert_int_equal(waitpid(pids[w], &st, 0), pids[w]);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      fail_msg("worker %d ended with %s %d (see its lines above)", w, WIFEXITED(st) ? "exit status" : "signal",
               WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    assert_int_equal(fscanf(in, "%ld %ld %ld %ld %ld", &i, &l, &u, &r, &a), 5);
    incs += i, lost += l, unsure += u, refused += r, resent += a;
  }
  fclose(in);
  printf("# workers done at %lld ms\n", (long long)(now_ms() - t0));
  if (nm < 0)
    fail_msg("CLUSTER FAILOVER of master %d failed (the cluster's state is above)", old);
  long total = 0;
  for (int i = 0; i < NAMES; i++) {
    char key[64], buf[64];
    snprintf(key, sizeof key, "{counter-%d}:n", i);
    relock_test_redis_t *o = owner_node(key);
    assert_int_equal(relock_test_redis_cmd(o, buf, sizeof buf, "GET", key, NULL), 0);
    total += buf[0] == '$' && buf[1] != '-' ? atol(strchr(buf, '\n') + 1) : 0;
  }
  printf("# %ld increments by %d processes on %d names (%ld SETs sent again, %ld refused), %ld lost, %ld unsure; "
         "counters sum to %ld\n",
         incs, WORKERS, NAMES, resent, refused, lost, unsure, total);
  if (incs <= 100)
    fail_msg("only %ld increments in %d ms", incs, run_ms);
  if (lost != 0 || unsure != 0)
    fail_msg("%ld holds lost, %ld SETs of unknown outcome (the workers' lines above say which)", lost, unsure);
  if (total != incs)
    fail_msg("the counters sum to %ld, %ld increments were made: %s", total, incs,
             total < incs ? "increments lost" : "a SET ran that its worker does not count");
}

/* -- d. errors ------------------------------------------------------------------*/

/* Keyed commands answered CLUSTERDOWN are retried within the deadline:
 * an acquisition that waits succeeds once the cluster is up again. */
static void test_clusterdown_then_up(void **state) {
  (void)state;
  relock_client_t *c = cluster_client();
  relock_lock_t *l = lock_of(c, "down");
  assert_int_equal(ACQUIRE(l, 1, 0), 1);
  assert_int_equal(RELEASE(l, 1), 1);
  int m = relock_test_cluster_owner(topo, slot_of("down"));
  assert_int_equal(relock_test_cluster_set_down(topo, m, 1), 0); /* its master alone */
  relock_future_t *f = relock_lock_lock_async(l, 1, 10000, RELOCK_INFINITE);
  pause_ms(300);
  assert_false(relock_future_is_done(f)); /* still trying */
  assert_int_equal(relock_test_cluster_set_down(topo, m, 0), 0);
  int64_t got = -1;
  char msg[256];
  int r = outcome(f, 10000, &got, msg, sizeof msg);
  if (r != 0)
    fail_msg("acquisition after CLUSTERDOWN: %s (%s)", msg, relock_err_name(r));
  assert_int_equal(got, 1);
  assert_int_equal(RELEASE(l, 1), 1);
}

static int run_tool_out(const char *const *args, char *out, size_t size);
static const char *tool_seeds(void);

/* A cluster answering CLUSTERDOWN to every try of a bounded wait: the
 * acquisition ends at the wait's end with an error that names what the
 * cluster answered - it answered every time - not "did not answer"; the
 * tool says the same. */
static void test_clusterdown_named_at_deadline(void **state) {
  (void)state;
  relock_client_t *c = cluster_client();
  relock_lock_t *l = lock_of(c, "down-wait");
  assert_int_equal(ACQUIRE(l, 1, 0), 1);
  assert_int_equal(RELEASE(l, 1), 1);
  assert_int_equal(relock_test_cluster_set_down(topo, -1, 1), 0); /* every node */
  char msg[512];
  int r = outcome(relock_lock_lock_async(l, 1, 1000, RELOCK_INFINITE), 5000, NULL, msg, sizeof msg);
  printf("# %s (%s)\n", msg, relock_err_name(r));
  char out[2048];
  const char *args[] = {"relock", "-o", tool_seeds(), "-w", "1s", "down-wait", "--", "true", NULL};
  int code = run_tool_out(args, out, sizeof out);
  printf("# relock: %s", out);
  assert_int_equal(relock_test_cluster_set_down(topo, -1, 0), 0);
  assert_int_equal(r, RELOCK_ETIMEDOUT);
  assert_null(strstr(msg, "did not answer"));
  assert_non_null(strstr(msg, "CLUSTERDOWN"));
  assert_non_null(strstr(msg, "until the 1000 ms wait ran out"));
  assert_int_equal(code, 69);
  assert_null(strstr(out, "did not answer"));
  assert_non_null(strstr(out, "CLUSTERDOWN"));
}

/* Two masters that each say the other serves a slot (one gave it away
 * with CLUSTER SETSLOT ... NODE, which nobody else claims, so gossip
 * keeps the other's stale view): MOVED back and forth. The acquisition
 * ends after 5 redirections with an error that says so, instead of
 * bouncing forever. */
static void test_redirect_loop_bounded(void **state) {
  (void)state;
  relock_client_t *c = cluster_client();
  relock_lock_t *l = lock_of(c, "bounce");
  int slot = slot_of("bounce");
  int a = relock_test_cluster_owner(topo, slot), b = relock_test_cluster_other_master(topo, a);
  char s[8], reply[256];
  snprintf(s, sizeof s, "%d", slot);
  relock_test_redis_t *ra = relock_test_cluster_node(topo, a), *rb = relock_test_cluster_node(topo, b);
  assert_int_equal(relock_test_redis_cmd(ra, reply, sizeof reply, "CLUSTER", "SETSLOT", s, "NODE",
                                         relock_test_cluster_node_id(topo, b), NULL), 0);
  assert_non_null(strstr(reply, "OK"));
  assert_int_equal(relock_test_redis_cmd(rb, reply, sizeof reply, "GET", "bounce", NULL), 0);
  assert_non_null(strstr(reply, "MOVED")); /* b still sends it to a */
  char msg[512];
  int r = outcome(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE), 5000, NULL, msg, sizeof msg);
  printf("# %s (%s)\n", msg, relock_err_name(r));
  /* a takes the slot back */
  assert_int_equal(relock_test_redis_cmd(ra, reply, sizeof reply, "CLUSTER", "SETSLOT", s, "NODE",
                                         relock_test_cluster_node_id(topo, a), NULL), 0);
  assert_int_equal(r, RELOCK_ESERVER);
  assert_non_null(strstr(msg, "after 5 redirections"));
  assert_int_equal(relock_test_cluster_wait_ok(topo, 10000), 0);
  assert_int_equal(ACQUIRE(l, 1, 0), 1); /* and it works again */
  assert_int_equal(RELEASE(l, 1), 1);
}

static void test_dead_seed_first(void **state) {
  (void)state;
  char seeds[512];
  snprintf(seeds, sizeof seeds, "127.0.0.1:%d,%s", dead_port(), relock_test_cluster_seeds(topo));
  relock_options_t *opts = cluster_options(seeds);
  relock_client_t *c = client_of(opts);
  relock_options_free(opts);
  lock_unlock_on_owner(c, "seed");
}

static void test_no_seed_reachable(void **state) {
  (void)state;
  char seeds[128];
  snprintf(seeds, sizeof seeds, "127.0.0.1:%d,127.0.0.1:%d", dead_port(), dead_port());
  relock_options_t *opts = cluster_options(seeds);
  relock_client_t *c = client_of(opts);
  relock_options_free(opts);
  relock_lock_t *l = lock_of(c, "nowhere");
  int64_t t0 = now_ms();
  char msg[512];
  int r = outcome(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE), 5000, NULL, msg, sizeof msg);
  printf("# %s (%s) after %lld ms\n", msg, relock_err_name(r), (long long)(now_ms() - t0));
  assert_int_equal(r, RELOCK_ECONNREFUSED);
  assert_non_null(strstr(msg, "no node of the cluster answers"));
  assert_true(now_ms() - t0 < fx_slack_ms(1000)); /* at once, not after timeouts */
}

/* A name with '{' but no non-empty tag: its channel and latch hash
 * elsewhere, so its scripts could never run (CROSSSLOT). Refused before
 * anything is sent, naming the rule. */
static void test_name_without_usable_tag(void **state) {
  (void)state;
  relock_client_t *c = cluster_client();
  relock_lock_t *l = lock_of(c, "odd{}name");
  char msg[512];
  int r = outcome(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE), 5000, NULL, msg, sizeof msg);
  printf("# %s\n", msg);
  assert_int_equal(r, RELOCK_EINVAL);
  assert_non_null(strstr(msg, "hash tag"));
  /* one with a tag is fine: its keys share the tag's slot */
  relock_lock_t *t = lock_of(c, "odd{tag}name");
  assert_int_equal(ACQUIRE(t, 1, 0), 1);
  assert_int_equal(RELEASE(t, 1), 1);
}

static void test_url(void **state) {
  (void)state;
  char url[512];
  relock_error_t err;
  snprintf(url, sizeof url, "redis+cluster://%s", relock_test_cluster_seeds(topo));
  relock_options_t *opts = relock_options_new(NULL);
  if (relock_options_set_url(opts, url, &err) != 0)
    fail_msg("%s: %s", url, err.message);
  relock_client_t *c = client_of(opts);
  relock_options_free(opts);
  lock_unlock_on_owner(c, "by-url");
}

/* -- e. TLS and a password -------------------------------------------------------*/

/* A cluster of its own with TLS on every port (and the bus) and a
 * password: over rediss+cluster:// a lock on each master, a waiter woken
 * through its sharded channel, and a CLUSTER FAILOVER under a held lock.
 * A build without TLS refuses the URL (RELOCK_ETLS). */
static void test_tls_and_password(void **state) {
  (void)state;
  relock_options_t *opts = relock_options_new(NULL);
  assert_non_null(opts);
  relock_error_t err;
  if (!relock_tls_available()) {
    assert_int_equal(relock_options_set_url(opts, "rediss+cluster://127.0.0.1:1", &err), RELOCK_ETLS);
    printf("# no TLS in this build: rediss+cluster:// is refused (%s)\n", err.message);
    relock_options_free(opts);
    return;
  }
  char certs[128], cmd[512], url[640], ca[160];
  const char *base = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
  snprintf(certs, sizeof certs, "%s/relock-tls-XXXXXX", base);
  assert_non_null(mkdtemp(certs));
  snprintf(cmd, sizeof cmd, "sh '%s' '%s' >/dev/null 2>&1", RELOCK_TLS_SH, certs);
  assert_int_equal(system(cmd), 0);
  relock_test_cluster_opts_t o = {.password = "cluster-secret", .tls_dir = certs};
  relock_test_cluster_t *own = relock_test_cluster_start(&o);
  assert_non_null(own);
  relock_test_cluster_t *shared = topo;
  topo = own;
  snprintf(url, sizeof url, "rediss+cluster://:cluster-secret@%s", relock_test_cluster_seeds(own));
  snprintf(ca, sizeof ca, "%s/ca.crt", certs);
  if (relock_options_set_url(opts, url, &err) != 0)
    fail_msg("%s", err.message);
  fx_set_str(opts, RELOCK_OPT_TLS_CA_FILE, ca);
  fx_set_ms(opts, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(1000));
  fx_set_ms(opts, RELOCK_OPT_RECONNECT_MAX, 200);
  fx_set_ms(opts, RELOCK_OPT_WATCHDOG_TIMEOUT, WATCHDOG_MS);
  relock_client_t *a = client_of(opts), *b = client_of(opts);
  relock_options_free(opts);
  wake_on_every_master(a, b, "tls");
  relock_lock_t *held = lock_of(a, "tls-held");
  assert_int_equal(ACQUIRE(held, 1, 0), 1);
  int old = relock_test_cluster_owner(own, slot_of("tls-held"));
  int nm = relock_test_cluster_failover(own, old, 15000);
  assert_true(nm >= 0 && nm != old);
  assert_true(renewed_on(relock_test_cluster_node(own, nm), "tls-held", WATCHDOG_MS));
  assert_int_equal(RELEASE(held, 1), 1);
  teardown(NULL); /* the clients go before their servers */
  topo = shared;
  relock_test_cluster_free(own);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", certs);
  assert_int_equal(system(cmd), 0);
}

/* -- f. a fresh client's first calls ---------------------------------------------*/

/* The relock tool with args (argv[0] included, NULL-terminated): its exit
 * status, -1 if it did not exit. */
static int run_tool(const char *const *args) {
  const char *bin = getenv("RELOCK") != NULL ? getenv("RELOCK") : "tools/relock";
  fflush(stdout);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    execv(bin, (char *const *)args);
    _exit(127);
  }
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* "cluster-nodes=<seeds>", the tool's option for this cluster. */
static const char *tool_seeds(void) {
  static char opt[512];
  snprintf(opt, sizeof opt, "cluster-nodes=%s", relock_test_cluster_seeds(topo));
  return opt;
}

/* Waits up to ms for what(arg); whether it came. */
static int within(int ms, int (*what)(void *), void *arg) {
  int64_t deadline = now_ms() + fx_slack_ms(ms);
  while (!what(arg) && now_ms() < deadline)
    pause_ms(2);
  return what(arg);
}

static int was_lost(void *arg) { return lost_count(arg) > 0; }

/* A force release by a client that has just been made (fresh_api) or by
 * the relock tool (a process of its own, made for it): a waiter is woken,
 * and the watched holder told of its loss, within 200 ms - not at the
 * waiter's next try or the holder's next renewal (1 s and more here).
 * Their subscriptions are sharded (SSUBSCRIBE): the release must publish
 * with SPUBLISH, though the fresh client has not yet heard whether the
 * cluster has sharded pub/sub when it is asked - and with PUBLISH where it
 * has none (before 7.0), the subscriptions being classic there. */
static void force_release_is_heard(const char *name, int by_tool) {
  relock_client_t *a = cluster_client(), *b = cluster_client();
  static lost_t lost; /* static: the callback may come until teardown */
  memset(&lost, 0, sizeof lost);
  relock_lock_t *la = lock_of(a, name), *lb = lock_of(b, name);
  relock_lock_on_lost(la, on_lost, &lost);
  assert_int_equal(relock_lock_watch_loss(la, 1), 0);
  assert_int_equal(ACQUIRE(la, 1, 0), 1);
  relock_future_t *waiter = relock_lock_lock_async(lb, 2, RELOCK_INFINITE, RELOCK_INFINITE);
  assert_non_null(waiter);
  char channel[128];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
  assert_int_equal(await_subscribers(owner_node(name), channel, 2), 2); /* a's watch, b's wait */
  if (by_tool) {
    const char *args[] = {"relock", "-o", tool_seeds(), "release", "--force", name, NULL};
    assert_int_equal(run_tool(args), 0);
  } else {
    relock_lock_t *fresh = lock_of(cluster_client(), name);
    assert_int_equal(value_of(relock_lock_force_unlock_async(fresh)), 1);
  }
  int64_t t0 = now_ms();
  int64_t got = -1;
  char msg[256];
  int r = outcome(waiter, 200, &got, msg, sizeof msg);
  if (r != 0)
    fail_msg("waiter not woken within 200 ms of the force release: %s (%s)", msg, relock_err_name(r));
  assert_int_equal(got, 1);
  printf("# waiter woken %lld ms after the force release\n", (long long)(now_ms() - t0));
  if (!within(200, was_lost, &lost))
    fail_msg("the holder was not told of its loss within 200 ms of the force release");
  printf("# holder told %lld ms after the force release\n", (long long)(lost.at_ms - t0));
  assert_int_equal(lost.reason, RELOCK_ELOST);
  assert_int_equal(RELEASE(lb, 2), 1);
}

static void test_fresh_client_force_release_is_heard(void **state) {
  (void)state;
  force_release_is_heard("fresh-force", 0);
}

static void test_tool_force_release_is_heard(void **state) {
  (void)state;
  force_release_is_heard("tool-force", 1);
}

/* A fresh client's first semaphore release and first count-down wake the
 * waiters at once, through their sharded channels (classic before 7.0). */
static void test_fresh_client_semaphore_and_latch_wake(void **state) {
  (void)state;
  relock_client_t *b = cluster_client();
  relock_semaphore_t *sb = relock_semaphore_new(b, "fresh-sem", NULL);
  assert_non_null(sb);
  relock_future_t *waiter = relock_semaphore_acquire_async(sb, 1, 10000);
  assert_non_null(waiter);
  assert_int_equal(await_subscribers(owner_node("fresh-sem"), "redisson_sc:{fresh-sem}", 1), 1);
  relock_semaphore_t *sc = relock_semaphore_new(cluster_client(), "fresh-sem", NULL);
  assert_non_null(sc);
  value_of(relock_semaphore_release_async(sc, 1));
  int64_t t0 = now_ms(), got = -1;
  char msg[256];
  int r = outcome(waiter, 200, &got, msg, sizeof msg);
  relock_semaphore_free(sc);
  relock_semaphore_free(sb);
  if (r != 0)
    fail_msg("semaphore waiter not woken within 200 ms of the release: %s (%s)", msg, relock_err_name(r));
  assert_int_equal(got, 1);
  printf("# semaphore waiter woken %lld ms after the release\n", (long long)(now_ms() - t0));

  relock_latch_t *lb = relock_latch_new(b, "fresh-latch", NULL);
  assert_non_null(lb);
  assert_int_equal(value_of(relock_latch_try_set_count_async(lb, 1)), 1);
  waiter = relock_latch_await_async(lb, 10000);
  assert_non_null(waiter);
  assert_int_equal(await_subscribers(owner_node("fresh-latch"), "redisson_countdownlatch__channel__{fresh-latch}", 1), 1);
  relock_latch_t *lc = relock_latch_new(cluster_client(), "fresh-latch", NULL);
  assert_non_null(lc);
  value_of(relock_latch_count_down_async(lc));
  t0 = now_ms();
  r = outcome(waiter, 200, &got, msg, sizeof msg);
  relock_latch_free(lc);
  relock_latch_free(lb);
  if (r != 0)
    fail_msg("latch waiter not woken within 200 ms of the count-down: %s (%s)", msg, relock_err_name(r));
  assert_int_equal(got, 1);
  printf("# latch waiter woken %lld ms after the count-down\n", (long long)(now_ms() - t0));
}

/* Options asking 2 replicas to acknowledge (each master has 1), of a
 * client whose first connection goes to name's master: its first
 * acquisition runs there, on the seed connection, before the slot map is
 * known. */
static relock_options_t *unreplicated_options(const char *name) {
  char seeds[512];
  snprintf(seeds, sizeof seeds, "127.0.0.1:%d,%s", relock_test_redis_port(owner_node(name)),
           relock_test_cluster_seeds(topo));
  relock_options_t *opts = cluster_options(seeds);
  fx_set_int(opts, RELOCK_OPT_MIN_REPLICAS_ACKED, 2);
  fx_set_ms(opts, RELOCK_OPT_MIN_REPLICAS_TIMEOUT, 300);
  return opts;
}

static int key_gone(void *name) { return fx_raw_int(owner_node(name), "EXISTS", (const char *)name, NULL) == 0; }

/* A fresh client's first acquisition, which too few replicas acknowledged,
 * fails with RELOCK_ENOTREPLICATED and is given back at once, not at the
 * end of its lease: while the client lives, and when it is freed right
 * after the failure (the give-back, routed to the master's own connection
 * that is not open yet, is sent before the close completes). The relock
 * tool likewise exits 69 and leaves nothing held. */
static void test_unreplicated_first_acquisition_given_back(void **state) {
  (void)state;
  const char *name = "unsynced";
  relock_options_t *opts = unreplicated_options(name);
  char msg[512];
  /* the client lives on */
  relock_lock_t *l = lock_of(client_of(opts), name);
  assert_int_equal(outcome(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE), 5000, NULL, msg, sizeof msg),
                   RELOCK_ENOTREPLICATED);
  printf("# %s\n", msg);
  assert_true(within(1000, key_gone, (void *)name));
  /* freed at once (an embedded client: no loop turn between the failure
   * and the close) */
  relock_client_t *c = fx_client(opts);
  relock_options_free(opts);
  l = relock_lock_new(c, name, NULL);
  assert_non_null(l);
  int r = outcome(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE), 5000, NULL, msg, sizeof msg);
  relock_lock_free(l);
  relock_client_free(c);
  assert_int_equal(r, RELOCK_ENOTREPLICATED);
  assert_int_equal(fx_raw_int(owner_node(name), "EXISTS", name, NULL), 0);
  /* the tool */
  char seeds[512];
  snprintf(seeds, sizeof seeds, "cluster-nodes=127.0.0.1:%d,%s", relock_test_redis_port(owner_node(name)),
           relock_test_cluster_seeds(topo));
  const char *args[] = {"relock", "-o", seeds, "-o", "min-replicas-acked=2", "-o", "min-replicas-timeout=300",
                        name, "--", "true", NULL};
  assert_int_equal(run_tool(args), 69);
  assert_int_equal(fx_raw_int(owner_node(name), "EXISTS", name, NULL), 0);
}

/* -- g. the tool's list, and seeds that are no cluster ----------------------------*/

/* The tool with args, its stdout and stderr into out (NUL-terminated, cut
 * to size): its exit status, -1 if it did not exit. */
static int run_tool_out(const char *const *args, char *out, size_t size) {
  FILE *tmp = tmpfile(); /* anonymous, in $TMPDIR: gone when closed */
  assert_non_null(tmp);
  int fd = fileno(tmp);
  const char *bin = getenv("RELOCK") != NULL ? getenv("RELOCK") : "tools/relock";
  fflush(stdout);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    execv(bin, (char *const *)args);
    _exit(127);
  }
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  ssize_t n = pread(fd, out, size - 1, 0);
  out[n > 0 ? n : 0] = '\0';
  fclose(tmp);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* How many times what occurs in text. */
static int lines_with(const char *text, const char *what) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, what)) != NULL; p += strlen(what))
    n++;
  return n;
}

/* The masters of the current topology (whatever failovers did), by node
 * index, into m (at most max): how many. */
static int current_masters(int *m, int max) {
  int n = 0;
  for (int s = 0; s < RELOCK_TEST_CLUSTER_SLOTS; s += 64) {
    int o = relock_test_cluster_owner(topo, s), known = 0;
    for (int i = 0; i < n; i++)
      known |= m[i] == o;
    if (o >= 0 && !known && n < max)
      m[n++] = o;
  }
  return n;
}

/* relock list on a cluster: every master's locks, not only those of the
 * node the "any" connection happens to be on (SCAN answers for one node).
 * 8 locks, at least one on each master; text and JSON. */
static void test_tool_list_covers_every_master(void **state) {
  (void)state;
  relock_client_t *c = cluster_client();
  char names[8][64];
  int m[16], n = current_masters(m, 16);
  assert_true(n >= 3 && n < 8);
  for (int i = 0; i < 8; i++) {
    if (i < n)
      name_on_master(m[i], "listed", names[i], sizeof names[i]);
    else
      snprintf(names[i], sizeof names[i], "listed-x%d", i);
    assert_int_equal(ACQUIRE(lock_of(c, names[i]), 1, 0), 1);
  }
  char out[8192];
  const char *text[] = {"relock", "-o", tool_seeds(), "list", "listed-*", NULL};
  int code = run_tool_out(text, out, sizeof out);
  printf("# relock list:\n%s", out);
  assert_int_equal(code, 0);
  assert_int_equal(lines_with(out, ": held by "), 8);
  for (int i = 0; i < 8; i++) {
    char line[128];
    snprintf(line, sizeof line, "%.63s: held by ", names[i]);
    if (strstr(out, line) == NULL)
      fail_msg("%s (on master %d) not listed", names[i], relock_test_cluster_owner(topo, slot_of(names[i])));
  }
  const char *json[] = {"relock", "-o", tool_seeds(), "--json", "list", "listed-*", NULL};
  code = run_tool_out(json, out, sizeof out);
  assert_int_equal(code, 0);
  assert_int_equal(lines_with(out, "\"held\":true"), 8);
  for (int i = 0; i < 8; i++) {
    char item[128];
    snprintf(item, sizeof item, "{\"name\":\"%.63s\",", names[i]);
    if (strstr(out, item) == NULL)
      fail_msg("%s not in the JSON list:\n%s", names[i], out);
  }
}

/* relock top on a cluster: the locks of every master, one look (--once,
 * plain lines: not a terminal), and their waiters: one waiting client on
 * the first lock (subscribed on its master, sharded where the servers have
 * it), none on the others (held by the library, which watches nothing). */
static void test_tool_top_covers_every_master(void **state) {
  (void)state;
  relock_client_t *c = cluster_client(), *w = cluster_client();
  char names[8][64];
  int m[16], n = current_masters(m, 16);
  assert_true(n >= 3 && n < 8);
  for (int i = 0; i < n; i++) {
    name_on_master(m[i], "topped", names[i], sizeof names[i]);
    assert_int_equal(ACQUIRE(lock_of(c, names[i]), 1, 0), 1);
  }
  relock_future_t *waiter = relock_lock_lock_async(lock_of(w, names[0]), 2, RELOCK_INFINITE, RELOCK_INFINITE);
  assert_non_null(waiter);
  char channel[128];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", names[0]);
  int64_t deadline = now_ms() + fx_slack_ms(3000);
  while (now_ms() < deadline &&
         (sharded_servers() ? shardnumsub(owner_node(names[0]), "PUBSUB", channel) : classic_subscribers("PUBSUB", channel)) != 1)
    pause_ms(10);
  char out[8192];
  const char *top[] = {"relock", "-o", tool_seeds(), "top", "--once", "topped-*", NULL};
  int code = run_tool_out(top, out, sizeof out);
  printf("# relock top --once:\n%s", out);
  assert_int_equal(code, 0);
  assert_int_equal(lines_with(out, " kind=lock holds=1 "), n);
  for (int i = 0; i < n; i++) {
    char line[160];
    snprintf(line, sizeof line, "\n%.63s kind=lock holds=1 ", names[i]);
    const char *at = strstr(out, line);
    if (at == NULL)
      fail_msg("%s (on master %d) not shown", names[i], m[i]);
    const char *want = i == 0 ? " waiters=1 " : " waiters=0 ";
    const char *end = strchr(at + 1, '\n');
    const char *found = strstr(at, want);
    if (found == NULL || (end != NULL && found > end))
      fail_msg("%s: not%s:\n%s", names[i], want, out);
  }
  /* sorted by waiters: the waited-for lock first */
  assert_true(strncmp(strchr(out, '\n') + 1, names[0], strlen(names[0])) == 0);
  relock_future_cancel(waiter);
  relock_future_release(waiter);
}

/* relock_client_masters_async lists every master of the map (each once,
 * whatever node the client started on), and relock_client_command_at_async
 * asks each for its own keys: their DBSIZEs add up to every key (a held
 * lock's and its acquisition's latch, in the same slot). An
 * address the client does not know is refused. */
static void test_masters_and_command_at(void **state) {
  (void)state;
  relock_client_t *c = cluster_client();
  for (int i = 0; i < 8; i++) {
    char name[32];
    snprintf(name, sizeof name, "counted-%d", i);
    assert_int_equal(ACQUIRE(lock_of(c, name), 1, 0), 1);
  }
  relock_future_t *f = relock_client_masters_async(c);
  assert_non_null(f);
  assert_int_equal(relock_future_wait(f, fx_slack_ms(5000)), 0);
  const relock_reply_t *list = relock_future_reply(f);
  assert_non_null(list);
  assert_int_equal(list->type, RELOCK_REPLY_ARRAY);
  int m[16], nm = current_masters(m, 16);
  assert_int_equal((int)list->elements, nm);
  long long keys = 0;
  for (size_t i = 0; i < list->elements; i++) {
    const char *address = list->element[i]->str;
    printf("# master %s\n", address);
    const char *colon = strrchr(address, ':');
    assert_non_null(colon);
    int node = relock_test_cluster_node_by_port(topo, atoi(colon + 1));
    int is_master = 0;
    for (int k = 0; k < nm; k++)
      is_master |= m[k] == node;
    assert_true(is_master);
    for (size_t k = 0; k < i; k++)
      assert_string_not_equal(list->element[k]->str, address);
    const char *argv[] = {"DBSIZE"};
    relock_future_t *n = relock_client_command_at_async(c, address, 1, argv, NULL);
    assert_non_null(n);
    assert_int_equal(relock_future_wait(n, fx_slack_ms(5000)), 0);
    assert_int_equal(relock_future_reply(n)->integer, fx_raw_int(relock_test_cluster_node(topo, node), "DBSIZE", NULL));
    keys += relock_future_reply(n)->integer;
    relock_future_release(n);
  }
  relock_future_release(f);
  assert_int_equal(keys, 16); /* 8 locks, and the latch each acquisition left for its release to take over */
  const char *argv[] = {"DBSIZE"};
  char msg[512];
  int r = outcome(relock_client_command_at_async(c, "127.0.0.1:1", 1, argv, NULL), 5000, NULL, msg, sizeof msg);
  printf("# %s\n", msg);
  assert_int_equal(r, RELOCK_EINVAL);
  assert_non_null(strstr(msg, "127.0.0.1:1 is not a node this client knows"));
  /* bad arguments: an error, at once */
  assert_int_equal(outcome(relock_client_masters_async(NULL), 0, NULL, NULL, 0), RELOCK_EINVAL);
  assert_int_equal(outcome(relock_client_command_at_async(NULL, "127.0.0.1:1", 1, argv, NULL), 0, NULL, NULL, 0),
                   RELOCK_EINVAL);
  assert_int_equal(outcome(relock_client_command_at_async(c, NULL, 1, argv, NULL), 0, NULL, NULL, 0), RELOCK_EINVAL);
  assert_int_equal(outcome(relock_client_command_at_async(c, "127.0.0.1:1", 0, argv, NULL), 0, NULL, NULL, 0),
                   RELOCK_EINVAL);
  assert_int_equal(outcome(relock_client_command_at_async(c, "127.0.0.1:1", 1, NULL, NULL), 0, NULL, NULL, 0),
                   RELOCK_EINVAL);
}

/* Cluster seeds that are standalone servers (cluster support disabled):
 * refused with a clear error naming the server, never used as if they
 * were one node each - two clients seeded in opposite orders would each
 * take the same lock on "their" server. Nothing is written anywhere; the
 * tool exits 69 saying so. */
static void test_standalone_seeds_refused(void **state) {
  (void)state;
  relock_test_redis_t *s1 = relock_test_redis_start(NULL), *s2 = relock_test_redis_start(NULL);
  assert_non_null(s1);
  assert_non_null(s2);
  char ab[128], ba[128];
  snprintf(ab, sizeof ab, "127.0.0.1:%d,127.0.0.1:%d", relock_test_redis_port(s1), relock_test_redis_port(s2));
  snprintf(ba, sizeof ba, "127.0.0.1:%d,127.0.0.1:%d", relock_test_redis_port(s2), relock_test_redis_port(s1));
  const char *seeds[] = {ab, ba};
  for (int i = 0; i < 2; i++) {
    relock_options_t *opts = cluster_options(seeds[i]);
    relock_client_t *c = client_of(opts);
    relock_options_free(opts);
    relock_lock_t *l = lock_of(c, "standalone");
    char msg[512];
    int64_t t0 = now_ms();
    int r = outcome(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE), 5000, NULL, msg, sizeof msg);
    printf("# %s (%s) after %lld ms\n", msg, relock_err_name(r), (long long)(now_ms() - t0));
    assert_int_equal(r, RELOCK_EINVAL);
    assert_non_null(strstr(msg, "redis+cluster:// names a server that is not in cluster mode: 127.0.0.1:"));
    assert_true(now_ms() - t0 < fx_slack_ms(1000)); /* at once, not after timeouts */
  }
  char url[160];
  snprintf(url, sizeof url, "redis+cluster://%s", ab);
  const char *args[] = {"relock", "-u", url, "standalone", "--", "true", NULL};
  char out[2048];
  int code = run_tool_out(args, out, sizeof out);
  printf("# relock: %s", out);
  assert_int_equal(code, 69);
  assert_non_null(strstr(out, "not in cluster mode"));
  const char *list[] = {"relock", "-u", url, "list", "*", NULL};
  assert_int_equal(run_tool_out(list, out, sizeof out), 69);
  assert_non_null(strstr(out, "not in cluster mode"));
  teardown(NULL); /* the clients go before their servers */
  assert_int_equal(fx_raw_int(s1, "DBSIZE", NULL), 0);
  assert_int_equal(fx_raw_int(s2, "DBSIZE", NULL), 0);
  relock_test_redis_free(s1);
  relock_test_redis_free(s2);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_locks_on_every_master, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fresh_client_force_release_is_heard, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tool_force_release_is_heard, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fresh_client_semaphore_and_latch_wake, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unreplicated_first_acquisition_given_back, setup, teardown),
      cmocka_unit_test_setup_teardown(test_renewals_batched_per_slot, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wait_and_wake_on_every_master_sharded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wait_and_wake_on_every_master_classic, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reshard_under_held_and_waited_lock, setup, teardown),
      cmocka_unit_test_setup_teardown(test_slot_moves_twice, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cluster_failover_under_held_lock, setup, teardown),
      cmocka_unit_test_setup_teardown(test_kill_master_under_held_lock, setup, teardown),
      cmocka_unit_test_setup_teardown(test_watched_permits_on_every_master, setup, teardown),
      cmocka_unit_test_setup_teardown(test_counter_across_failover, setup, teardown),
      cmocka_unit_test_setup_teardown(test_clusterdown_then_up, setup, teardown),
      cmocka_unit_test_setup_teardown(test_clusterdown_named_at_deadline, setup, teardown),
      cmocka_unit_test_setup_teardown(test_redirect_loop_bounded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dead_seed_first, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_seed_reachable, setup, teardown),
      cmocka_unit_test_setup_teardown(test_name_without_usable_tag, setup, teardown),
      cmocka_unit_test_setup_teardown(test_url, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tool_list_covers_every_master, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tool_top_covers_every_master, setup, teardown),
      cmocka_unit_test_setup_teardown(test_masters_and_command_at, setup, teardown),
      cmocka_unit_test_setup_teardown(test_standalone_seeds_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tls_and_password, NULL, teardown),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, group_setup, group_teardown);
}
