/* Tests of the Redis Cluster the integration tests use
 * (tests/support/cluster.h): it starts whole with the masters first, hash
 * slots are Redis's own, a slot resharded in phases takes its key along
 * (with -ASK in between), CLUSTER FAILOVER and a kill -9 of a master end
 * with a promoted replica every node agrees on, the killed master comes
 * back as a replica, set_down makes nodes answer -CLUSTERDOWN and recover,
 * it works with TLS and a password, and free (or a failed start) leaves no
 * process behind. */
#include <config.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support/cluster.h"
#include "support/test.h"

static relock_test_cluster_t *topo;

static double ms_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static int group_setup(void **state) {
  (void)state;
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("no redis-server (set REDIS_SERVER or install redis-server)");
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  topo = relock_test_cluster_start(NULL);
  if (topo == NULL)
    RELOCK_TEST_CANNOT_RUN("the cluster did not start (see above)");
  printf("# cluster ready in %.0f ms: seeds %s\n", ms_since(&t0), relock_test_cluster_seeds(topo));
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  relock_test_cluster_free(topo);
  return 0;
}

static relock_test_redis_t *node(int i) { return relock_test_cluster_node(topo, i); }

/* Whether ROLE's first element is role ("master", "slave"). */
static int role_is(relock_test_redis_t *r, const char *role) {
  char reply[4096], want[32];
  const char *first;
  snprintf(want, sizeof want, "$%zu\r\n%s\r\n", strlen(role), role);
  if (relock_test_redis_cmd(r, reply, sizeof reply, "ROLE", NULL) != 0 || (first = strchr(reply, '\n')) == NULL)
    return 0;
  return strncmp(first + 1, want, strlen(want)) == 0;
}

static int slot_of(const char *key) { return relock_test_cluster_keyslot(topo, key, strlen(key)); }

static void test_started_whole(void **state) {
  (void)state;
  assert_int_equal(relock_test_cluster_nodes(topo), 6);
  /* redis-cli made the first three the masters and one replica each. */
  for (int i = 0; i < 3; i++) {
    assert_true(role_is(node(i), "master"));
    assert_true(role_is(node(3 + i), "slave"));
    assert_true(relock_test_cluster_replica_of(topo, i) >= 3);
    assert_true(relock_test_cluster_other_master(topo, i) >= 0);
    assert_int_not_equal(relock_test_cluster_other_master(topo, i), i);
  }
  /* "127.0.0.1:p,..." naming every node's port, and node_by_port finds it. */
  const char *seeds = relock_test_cluster_seeds(topo);
  for (int i = 0; i < 6; i++) {
    char want[32];
    int port = relock_test_redis_port(node(i));
    snprintf(want, sizeof want, "127.0.0.1:%d", port);
    assert_non_null(strstr(seeds, want));
    assert_int_equal(relock_test_cluster_node_by_port(topo, port), i);
    assert_int_equal(strlen(relock_test_cluster_node_id(topo, i)), 40);
  }
  assert_int_equal(relock_test_cluster_node_by_port(topo, 1), -1);
  assert_int_equal(relock_test_cluster_wait_ok(topo, 1000), 0);
}

static void test_keyslot(void **state) {
  (void)state;
  assert_int_equal(slot_of("foo"), 12182);
  assert_int_equal(slot_of("bar"), 5061);
  assert_int_equal(slot_of("{user1000}.following"), slot_of("{user1000}.followers"));
  /* Counted: a key with a NUL in it. */
  assert_int_equal(relock_test_cluster_keyslot(topo, "a\0b", 3), relock_test_cluster_keyslot(topo, "a\0b", 3));
  assert_true(relock_test_cluster_keyslot(topo, "a\0b", 3) != slot_of("a"));
}

/* Each owner serves its slot; another master sends the client there. */
static void test_owner(void **state) {
  (void)state;
  const char *keys[] = {"foo", "bar", "{user1000}.following", "k0", "k1", "k2"};
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
    char reply[256], moved[64];
    int slot = slot_of(keys[k]), owner = relock_test_cluster_owner(topo, slot);
    int other = relock_test_cluster_other_master(topo, owner);
    assert_true(owner >= 0 && owner < 3);
    assert_int_equal(relock_test_redis_cmd(node(owner), reply, sizeof reply, "SET", keys[k], "v", NULL), 0);
    assert_string_equal(reply, "+OK\r\n");
    assert_int_equal(relock_test_redis_cmd(node(other), reply, sizeof reply, "GET", keys[k], NULL), 0);
    snprintf(moved, sizeof moved, "-MOVED %d 127.0.0.1:%d\r\n", slot, relock_test_redis_port(node(owner)));
    assert_string_equal(reply, moved);
  }
  assert_int_equal(relock_test_cluster_owner(topo, -1), -1);
  assert_int_equal(relock_test_cluster_owner(topo, 16384), -1);
}

static void test_migrate_slot(void **state) {
  (void)state;
  char reply[256], ask[64];
  int slot = slot_of("foo"), from = relock_test_cluster_owner(topo, slot);
  int to = relock_test_cluster_other_master(topo, from);
  assert_int_equal(relock_test_redis_cmd(node(from), reply, sizeof reply, "SET", "foo", "moved", NULL), 0);
  assert_int_equal(relock_test_cluster_migrate_slot(topo, slot, to), 0);
  assert_int_equal(relock_test_cluster_owner(topo, slot), to);
  assert_int_equal(relock_test_redis_cmd(node(to), reply, sizeof reply, "GET", "foo", NULL), 0);
  assert_string_equal(reply, "$5\r\nmoved\r\n");
  assert_int_equal(relock_test_redis_cmd(node(from), reply, sizeof reply, "GET", "foo", NULL), 0);
  assert_int_equal(strncmp(reply, "-MOVED 12182 ", 13), 0);

  /* In phases: the source serves a key it still has, sends -ASK once it
   * has moved, and the target takes the slot at the end. */
  slot = slot_of("bar");
  from = relock_test_cluster_owner(topo, slot);
  to = relock_test_cluster_other_master(topo, from);
  assert_int_equal(relock_test_redis_cmd(node(from), reply, sizeof reply, "SET", "bar", "b", NULL), 0);
  assert_int_equal(relock_test_cluster_migrate_begin(topo, slot, to), 0);
  assert_int_equal(relock_test_redis_cmd(node(from), reply, sizeof reply, "GET", "bar", NULL), 0);
  assert_string_equal(reply, "$1\r\nb\r\n");
  assert_int_equal(relock_test_cluster_migrate_keys(topo, slot), 0);
  assert_int_equal(relock_test_redis_cmd(node(from), reply, sizeof reply, "GET", "bar", NULL), 0);
  snprintf(ask, sizeof ask, "-ASK %d 127.0.0.1:%d\r\n", slot, relock_test_redis_port(node(to)));
  assert_string_equal(reply, ask);
  assert_int_equal(relock_test_cluster_owner(topo, slot), from);
  assert_int_equal(relock_test_cluster_migrate_end(topo, slot, to), 0);
  assert_int_equal(relock_test_cluster_owner(topo, slot), to);
  assert_int_equal(relock_test_redis_cmd(node(to), reply, sizeof reply, "GET", "bar", NULL), 0);
  assert_string_equal(reply, "$1\r\nb\r\n");
  /* No migration under way: nothing to move. */
  assert_int_equal(relock_test_cluster_migrate_keys(topo, slot), -1);
}

static void test_set_down(void **state) {
  (void)state;
  char reply[256];
  int slot = slot_of("foo"), owner = relock_test_cluster_owner(topo, slot);
  int other = relock_test_cluster_other_master(topo, owner);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  /* One master down: it refuses keyed commands, the others serve theirs. */
  assert_int_equal(relock_test_cluster_set_down(topo, owner, 1), 0);
  assert_int_equal(relock_test_redis_cmd(node(owner), reply, sizeof reply, "GET", "foo", NULL), 0);
  assert_int_equal(strncmp(reply, "-CLUSTERDOWN ", 13), 0);
  assert_int_equal(relock_test_redis_cmd(node(owner), reply, sizeof reply, "PING", NULL), 0);
  assert_string_equal(reply, "+PONG\r\n");
  int k0 = relock_test_cluster_owner(topo, slot_of("k0"));
  if (k0 != owner) {
    assert_int_equal(relock_test_redis_cmd(node(k0), reply, sizeof reply, "GET", "k0", NULL), 0);
    assert_string_equal(reply, "$1\r\nv\r\n");
  }
  assert_int_equal(relock_test_cluster_set_down(topo, owner, 1), -1); /* one at a time */
  assert_int_equal(relock_test_cluster_set_down(topo, owner, 0), 0);
  assert_int_equal(relock_test_redis_cmd(node(owner), reply, sizeof reply, "GET", "foo", NULL), 0);
  assert_string_equal(reply, "$5\r\nmoved\r\n");

  /* Every node down, then back. */
  assert_int_equal(relock_test_cluster_set_down(topo, -1, 1), 0);
  for (int i = 0; i < relock_test_cluster_nodes(topo); i++) {
    assert_int_equal(relock_test_redis_cmd(node(i), reply, sizeof reply, "GET", "foo", NULL), 0);
    assert_int_equal(strncmp(reply, "-CLUSTERDOWN ", 13), 0);
  }
  assert_int_equal(relock_test_redis_cmd(node(other), reply, sizeof reply, "SET", "k", "v", NULL), 0);
  assert_int_equal(strncmp(reply, "-CLUSTERDOWN ", 13), 0);
  assert_int_equal(relock_test_cluster_set_down(topo, -1, 0), 0);
  assert_int_equal(relock_test_redis_cmd(node(owner), reply, sizeof reply, "GET", "foo", NULL), 0);
  assert_string_equal(reply, "$5\r\nmoved\r\n");
  printf("# set_down of one node and of all, and back: %.0f ms\n", ms_since(&t0));
}

static void test_failover(void **state) {
  (void)state;
  int m = relock_test_cluster_owner(topo, slot_of("foo"));
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int r = relock_test_cluster_failover(topo, m, 15000);
  printf("# CLUSTER FAILOVER: whole again in %.0f ms\n", ms_since(&t0));
  assert_true(r >= 0 && r != m);
  assert_true(role_is(node(r), "master"));
  assert_true(role_is(node(m), "slave"));
  assert_int_equal(relock_test_cluster_replica_of(topo, r), m);
  assert_int_equal(relock_test_cluster_owner(topo, slot_of("foo")), r);
  assert_int_equal(relock_test_cluster_wait_ok(topo, 1000), 0);
  char reply[256];
  assert_int_equal(relock_test_redis_cmd(node(r), reply, sizeof reply, "GET", "foo", NULL), 0);
  assert_string_equal(reply, "$5\r\nmoved\r\n");
}

static void test_kill_master_and_restart(void **state) {
  (void)state;
  int m = relock_test_cluster_owner(topo, slot_of("foo")), promotion_ms = -1;
  pid_t pid = relock_test_redis_pid(node(m));
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int r = relock_test_cluster_kill_master(topo, m, 20000, &promotion_ms);
  printf("# kill -9 of a master: promoted after %d ms, whole again in %.0f ms\n", promotion_ms, ms_since(&t0));
  assert_true(r >= 0 && r != m);
  assert_true(promotion_ms > 0);
  assert_false(relock_test_redis_running(node(m)));
  assert_int_equal(kill(pid, 0), -1); /* reaped: gone */
  assert_int_equal(relock_test_cluster_owner(topo, slot_of("foo")), r);
  assert_int_equal(relock_test_cluster_replica_of(topo, r), -1);
  /* Back as a replica of the node that took its slots. */
  clock_gettime(CLOCK_MONOTONIC, &t0);
  assert_int_equal(relock_test_cluster_restart(topo, m, 20000), 0);
  printf("# restart of the killed master: whole again in %.0f ms\n", ms_since(&t0));
  assert_true(role_is(node(m), "slave"));
  assert_int_equal(relock_test_cluster_replica_of(topo, r), m);
  /* A replica is no master to kill: refused, nothing killed. */
  assert_int_equal(relock_test_cluster_kill_master(topo, m, 1000, &promotion_ms), -1);
  assert_int_equal(promotion_ms, -1);
  assert_true(relock_test_redis_running(node(m)));
}

static void test_free_stops_everything(void **state) {
  (void)state;
  pid_t pids[16];
  int n = relock_test_cluster_nodes(topo);
  for (int i = 0; i < n; i++) pids[i] = relock_test_redis_pid(node(i));
  relock_test_cluster_free(topo);
  topo = NULL;
  for (int i = 0; i < n; i++) {
    assert_true(pids[i] > 0);
    assert_int_equal(kill(pids[i], 0), -1);
    assert_int_equal(errno, ESRCH);
  }
}

/* A start that fails returns NULL having stopped what it started (the
 * safety net of redis_server.c would say so at exit otherwise). */
static void test_failed_start(void **state) {
  (void)state;
  relock_test_cluster_opts_t two = {.masters = 2};
  assert_null(relock_test_cluster_start(&two)); /* redis-cli wants 3 */
  const char *cli = getenv("REDIS_CLI");
  char saved[256];
  snprintf(saved, sizeof saved, "%s", cli != NULL ? cli : "");
  setenv("REDIS_CLI", "false", 1);
  relock_test_cluster_opts_t none = {.replicas = -1};
  assert_null(relock_test_cluster_start(&none));
  if (cli != NULL)
    setenv("REDIS_CLI", saved, 1);
  else
    unsetenv("REDIS_CLI");
}

/* TLS on every port (bus and replication too) and a password: the
 * cluster starts, and a slot's key moves with MIGRATE over TLS with AUTH. */
static void test_tls_and_password(void **state) {
  (void)state;
  char certs[128], cmd[512], reply[256];
  const char *base = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
  snprintf(certs, sizeof certs, "%s/relock-tls-XXXXXX", base);
  assert_non_null(mkdtemp(certs));
  snprintf(cmd, sizeof cmd, "sh '%s' '%s'", RELOCK_TLS_SH, certs);
  assert_int_equal(system(cmd), 0);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  relock_test_cluster_opts_t o = {.password = "cluster-secret", .tls_dir = certs};
  relock_test_cluster_t *t = relock_test_cluster_start(&o);
  assert_non_null(t);
  printf("# with TLS and a password: ready in %.0f ms\n", ms_since(&t0));
  relock_test_redis_t *n0 = relock_test_cluster_node(t, 0);
  assert_int_equal(relock_test_redis_cmd(n0, reply, sizeof reply, "CONFIG", "GET", "tls-cluster", NULL), 0);
  assert_non_null(strstr(reply, "yes"));
  int slot = relock_test_cluster_keyslot(t, "foo", 3), from = relock_test_cluster_owner(t, slot);
  int to = relock_test_cluster_other_master(t, from);
  assert_int_equal(relock_test_redis_cmd(relock_test_cluster_node(t, from), reply, sizeof reply, "SET", "foo", "tls",
                                         NULL), 0);
  assert_int_equal(relock_test_cluster_migrate_slot(t, slot, to), 0);
  assert_int_equal(relock_test_redis_cmd(relock_test_cluster_node(t, to), reply, sizeof reply, "GET", "foo", NULL), 0);
  assert_string_equal(reply, "$3\r\ntls\r\n");
  relock_test_cluster_free(t);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", certs);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_started_whole),
      cmocka_unit_test(test_keyslot),
      cmocka_unit_test(test_owner),
      cmocka_unit_test(test_migrate_slot),
      cmocka_unit_test(test_set_down),
      cmocka_unit_test(test_failover),
      cmocka_unit_test(test_kill_master_and_restart),
      cmocka_unit_test(test_free_stops_everything),
      cmocka_unit_test(test_failed_start),
      cmocka_unit_test(test_tls_and_password),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, group_setup, group_teardown);
}
