/* Tests of the Sentinel topology the integration tests use
 * (tests/support/sentinel.h): it starts with every sentinel agreeing, a
 * SENTINEL FAILOVER and a kill -9 of the master each end with a new master
 * the sentinels agree on, the old master comes back as a replica, and free
 * leaves no process behind. */
#include <config.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support/sentinel.h"
#include "support/test.h"

static relock_test_sentinel_t *topo;

static int group_setup(void **state) {
  (void)state;
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("no redis-server (set REDIS_SERVER or install redis-server)");
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  topo = relock_test_sentinel_start(NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (topo == NULL)
    RELOCK_TEST_CANNOT_RUN("the Sentinel topology did not start (see above)");
  printf("# topology ready in %.0f ms: sentinels %s\n",
         (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
         relock_test_sentinel_addrs(topo));
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  relock_test_sentinel_free(topo);
  return 0;
}

static void test_started_and_agreed(void **state) {
  (void)state;
  assert_int_equal(relock_test_sentinel_nodes(topo), 3);
  assert_int_equal(relock_test_sentinel_sentinels(topo), 3);
  assert_int_equal(relock_test_sentinel_master(topo), 0);
  assert_int_equal(relock_test_sentinel_agree_now(topo), 0);
  assert_string_equal(relock_test_sentinel_master_name(topo), "mymaster");
  /* "127.0.0.1:p,127.0.0.1:p,127.0.0.1:p" naming each sentinel's port */
  const char *addrs = relock_test_sentinel_addrs(topo);
  for (int s = 0; s < 3; s++) {
    char want[32];
    snprintf(want, sizeof want, "127.0.0.1:%d", relock_test_redis_port(relock_test_sentinel_sentinel(topo, s)));
    assert_non_null(strstr(addrs, want));
  }
  /* The master takes writes and the replicas follow it. */
  char reply[256];
  assert_int_equal(relock_test_redis_cmd(relock_test_sentinel_master_node(topo), reply, sizeof reply, "SET", "k", "v", NULL), 0);
  assert_string_equal(reply, "+OK\r\n");
  assert_int_equal(relock_test_redis_cmd(relock_test_sentinel_master_node(topo), reply, sizeof reply, "WAIT", "2", "2000", NULL), 0);
  assert_string_equal(reply, ":2\r\n");
  assert_int_equal(relock_test_redis_cmd(relock_test_sentinel_node(topo, 1), reply, sizeof reply, "GET", "k", NULL), 0);
  assert_string_equal(reply, "$1\r\nv\r\n");
}

static void test_sentinel_failover(void **state) {
  (void)state;
  int old = relock_test_sentinel_master(topo);
  int64_t sw = -1, took = relock_test_sentinel_failover(topo, 15000, &sw);
  printf("# SENTINEL FAILOVER: agreed in %lld ms, +switch-master heard after %lld ms\n", (long long)took, (long long)sw);
  assert_true(took >= 0);
  assert_true(sw >= 0 && sw <= took + 20);
  int m = relock_test_sentinel_master(topo);
  assert_true(m >= 0 && m != old);
  /* The old master is made a replica at once (not ~10 s later). */
  assert_int_equal(relock_test_sentinel_settle(topo, 20000), m);
  char reply[256];
  assert_int_equal(relock_test_redis_cmd(relock_test_sentinel_node(topo, old), reply, sizeof reply, "ROLE", NULL), 0);
  assert_non_null(strstr(reply, "slave"));
}

static void test_kill_master(void **state) {
  (void)state;
  int old = relock_test_sentinel_master(topo);
  pid_t pid = relock_test_redis_pid(relock_test_sentinel_node(topo, old));
  int64_t sw = -1, took = relock_test_sentinel_kill_master(topo, 20000, &sw);
  printf("# kill -9 of the master: agreed in %lld ms, +switch-master heard after %lld ms\n", (long long)took, (long long)sw);
  assert_true(took >= 0);
  assert_true(sw >= 0 && sw <= took + 20);
  assert_false(relock_test_redis_running(relock_test_sentinel_node(topo, old)));
  assert_int_equal(kill(pid, 0), -1); /* reaped: gone */
  int m = relock_test_sentinel_master(topo);
  assert_true(m >= 0 && m != old);
  /* Settled with the old master down: the other replica follows m. */
  assert_int_equal(relock_test_sentinel_settle(topo, 20000), m);
  /* Back as a replica of the new master, not as a second master. */
  assert_int_equal(relock_test_sentinel_restart_node(topo, old), 0);
  assert_int_equal(relock_test_sentinel_settle(topo, 20000), m);
  char reply[256];
  assert_int_equal(relock_test_redis_cmd(relock_test_sentinel_node(topo, old), reply, sizeof reply, "ROLE", NULL), 0);
  assert_non_null(strstr(reply, "slave"));
}

static void test_free_stops_everything(void **state) {
  (void)state;
  pid_t pids[16];
  int n = 0;
  for (int i = 0; i < relock_test_sentinel_nodes(topo); i++)
    pids[n++] = relock_test_redis_pid(relock_test_sentinel_node(topo, i));
  for (int s = 0; s < relock_test_sentinel_sentinels(topo); s++)
    pids[n++] = relock_test_redis_pid(relock_test_sentinel_sentinel(topo, s));
  relock_test_sentinel_free(topo);
  topo = NULL;
  for (int i = 0; i < n; i++) {
    assert_true(pids[i] > 0);
    assert_int_equal(kill(pids[i], 0), -1);
    assert_int_equal(errno, ESRCH);
  }
}

/* Passwords on the data nodes and on the sentinels, TLS on every port:
 * one replica, the sentinels agree, and SENTINEL FAILOVER works over it. */
static void test_tls_and_passwords(void **state) {
  (void)state;
  char certs[128], cmd[512];
  const char *base = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
  snprintf(certs, sizeof certs, "%s/relock-tls-XXXXXX", base);
  assert_non_null(mkdtemp(certs));
  snprintf(cmd, sizeof cmd, "sh '%s' '%s'", RELOCK_TLS_SH, certs);
  assert_int_equal(system(cmd), 0);
  relock_test_sentinel_opts_t o = {.replicas = 1, .password = "data-secret", .sentinel_password = "sentinel-secret",
                                   .tls_dir = certs};
  relock_test_sentinel_t *t = relock_test_sentinel_start(&o);
  assert_non_null(t);
  char reply[256];
  /* _cmd authenticates with each one's own password. */
  assert_int_equal(relock_test_redis_cmd(relock_test_sentinel_sentinel(t, 0), reply, sizeof reply, "PING", NULL), 0);
  assert_string_equal(reply, "+PONG\r\n");
  assert_int_equal(relock_test_redis_cmd(relock_test_sentinel_node(t, 0), reply, sizeof reply, "PING", NULL), 0);
  assert_string_equal(reply, "+PONG\r\n");
  assert_int_equal(relock_test_redis_cmd(relock_test_sentinel_node(t, 0), reply, sizeof reply, "CONFIG", "GET",
                                         "tls-replication", NULL), 0);
  assert_non_null(strstr(reply, "yes"));
  int64_t took = relock_test_sentinel_failover(t, 15000, NULL);
  printf("# with TLS and passwords: SENTINEL FAILOVER agreed in %lld ms\n", (long long)took);
  assert_true(took >= 0);
  assert_int_equal(relock_test_sentinel_master(t), 1);
  assert_int_equal(relock_test_sentinel_settle(t, 20000), 1);
  relock_test_sentinel_free(t);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", certs);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_started_and_agreed),
      cmocka_unit_test(test_sentinel_failover),
      cmocka_unit_test(test_kill_master),
      cmocka_unit_test(test_free_stops_everything),
      cmocka_unit_test(test_tls_and_passwords),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, group_setup, group_teardown);
}
