/* bench/run part 10 (sentinel): how soon after kill -9 of the master a
 * relock client that was already running acquires a lock on the new master,
 * next to Sentinel's own promotion time measured in the same failovers
 * (kill -9 -> the first +switch-master a sentinel publishes).
 *
 * A private topology (tests/support/sentinel.h: a master, two replicas,
 * three sentinels, down-after-milliseconds 1000), every process stopped by
 * pid. A thread tries the lock (try once, fixed lease, release) in a loop
 * all along; for each failover, the figure is the end of the first
 * successful try that began after the kill. Prints one JSON line.
 *
 *   bench/sentinel [FAILOVERS]   (default 5) */
#include <config.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <relock/relock.h>

#include "bench/failover.h"
#include "support/sentinel.h"

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 5;
  if (n < 1 || n > 50) {
    fprintf(stderr, "usage: %s [FAILOVERS]\n", argv[0]);
    return 2;
  }
  relock_test_sentinel_t *topo = relock_test_sentinel_start(NULL);
  if (topo == NULL) {
    fprintf(stderr, "sentinel: the topology did not start\n");
    return 1;
  }
  relock_error_t err;
  relock_options_t *opts = relock_options_new(NULL);
  relock_options_set_string(opts, RELOCK_OPT_SENTINELS, relock_test_sentinel_addrs(topo), &err);
  relock_options_set_string(opts, RELOCK_OPT_SENTINEL_MASTER, relock_test_sentinel_master_name(topo), &err);
  relock_options_set_ms(opts, RELOCK_OPT_COMMAND_TIMEOUT, 1000, &err);
  relock_options_set_ms(opts, RELOCK_OPT_CONNECT_TIMEOUT, 1000, &err);
  relock_client_t *c = relock_client_new(NULL, opts, &err);
  relock_options_free(opts);
  if (c == NULL) {
    fprintf(stderr, "sentinel: %s\n", err.message);
    relock_test_sentinel_free(topo);
    return 1;
  }
  trier_t t = {.lock = relock_lock_new(c, "bench-failover", &err)};
  pthread_mutex_init(&t.mu, NULL);
  pthread_t th;
  pthread_create(&th, NULL, trier_main, &t);
  int64_t relock_ms[50], switch_ms[50], agreed_ms[50];
  int done = 0, rc = 0;
  for (int i = 0; i < n; i++) {
    int old = relock_test_sentinel_settle(topo, 30000);
    if (old < 0) {
      rc = 1;
      break;
    }
    trier_count_from(&t, 0);
    int64_t sw = -1, agreed = relock_test_sentinel_kill_master(topo, 30000, &sw);
    int64_t kill_at = relock_test_sentinel_last_start_ms(topo);
    trier_count_from(&t, kill_at);
    int64_t got = trier_first_ok(&t, 30000);
    if (agreed < 0 || sw < 0 || got == 0) {
      fprintf(stderr, "sentinel: failover %d: agreed %lld, switch %lld, relock %s\n", i + 1, (long long)agreed,
              (long long)sw, got ? "ok" : "never acquired");
      rc = 1;
      break;
    }
    relock_ms[done] = got - kill_at;
    switch_ms[done] = sw;
    agreed_ms[done] = agreed;
    fprintf(stderr, "sentinel: failover %d: +switch-master %lld ms, all agree %lld ms, relock acquired %lld ms\n",
            i + 1, (long long)sw, (long long)agreed, (long long)relock_ms[done]);
    done++;
    relock_test_sentinel_restart_node(topo, old);
  }
  t.stop = 1;
  pthread_join(th, NULL);
  if (done > 0) {
    printf("{\"failovers\":%d,\"relock_each_ms\":\"", done);
    for (int i = 0; i < done; i++)
      printf("%s%lld", i ? " " : "", (long long)relock_ms[i]);
    printf("\",\"switch_each_ms\":\"");
    for (int i = 0; i < done; i++)
      printf("%s%lld", i ? " " : "", (long long)switch_ms[i]);
    printf("\",\"tries\":%ld,\"errors\":%ld", t.tries, t.errors);
    int64_t r50 = median(relock_ms, done), s50 = median(switch_ms, done), a50 = median(agreed_ms, done);
    printf(",\"relock_p50_ms\":%lld,\"switch_p50_ms\":%lld,\"agreed_p50_ms\":%lld}\n", (long long)r50,
           (long long)s50, (long long)a50);
  }
  relock_lock_free(t.lock);
  relock_client_free(c);
  relock_test_sentinel_free(topo);
  return rc;
}
