/* bench/run part 11 (cluster), on a private Redis Cluster of its own
 * (tests/support/cluster.h: 3 masters with a replica each, node timeout
 * 1 s, every process stopped by pid):
 *
 *   - throughput: bench/lock's throughput mode (uncontended lock+unlock
 *     pairs over 1,024 names from one client) against the cluster, next to
 *     the ceiling measured on the same cluster before and after it:
 *     redis-benchmark --cluster -P 16 -c 50 running the acquire script
 *     (EVALSHA, keys with a {tag} per node), whose rate / 2 is pairs/s;
 *     and what bounds either, per pair: the servers' CPU and the
 *     client's;
 *   - failover: kill -9 of a master while a thread tries a lock whose slot
 *     it serves all along (try once, release): the end of the first
 *     success that began after the kill, next to the cluster's own
 *     promotion time (the kill -> the replica's ROLE saying master), for
 *     each of FAILOVERS kills (the old master rejoins as a replica between
 *     them).
 *
 * Prints one JSON line.
 *
 *   bench/cluster LOCK SCRIPT SECONDS FAILOVERS
 *     LOCK    the bench/lock program; SCRIPT  lua/lock_acquire.lua */
#include <config.h>

#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include <relock/relock.h>

#include "bench/failover.h"
#include "support/cluster.h"

/* The first line of cmd's output that contains key, copied into out. */
static int run_and_find(const char *cmd, const char *key, char *out, size_t size) {
  FILE *p = popen(cmd, "r");
  if (p == NULL)
    return -1;
  char line[4096];
  int found = 0;
  while (fgets(line, sizeof line, p) != NULL)
    if (!found && strstr(line, key) != NULL) {
      snprintf(out, size, "%s", line);
      found = 1;
    }
  int st = pclose(p);
  return found && st == 0 ? 0 : -1;
}

/* What bounds the throughput: each side's CPU per pair, on the servers
 * (every node's, replicas included: they apply the writes; from /proc, as
 * in-command times grow with every preemption on a busy machine) and in the
 * client (the children's rusage: redis-benchmark or bench/lock). The pairs:
 * EVALSHA calls / 2, from INFO commandstats (bench/lock's warm-up
 * included: its CPU is too). cost_start resets the counts. */
typedef struct {
  double server_us, calls, client_us;
} cost_t;

/* CPU µs node i has used so far; 0 when /proc cannot tell. */
static double node_cpu_us(relock_test_cluster_t *topo, int i) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)relock_test_redis_pid(relock_test_cluster_node(topo, i)));
  FILE *f = fopen(path, "r");
  size_t n = f != NULL ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f != NULL)
    fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* after the command's name: state, then 11 fields to utime */
  unsigned long long ut, st;
  if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
    return 0;
  return (double)(ut + st) * 1e6 / (double)sysconf(_SC_CLK_TCK);
}

static double nodes_cpu_us(relock_test_cluster_t *topo) {
  double t = 0;
  for (int i = 0; i < relock_test_cluster_nodes(topo); i++)
    t += node_cpu_us(topo, i);
  return t;
}

static double children_cpu_us(void) {
  struct rusage ru;
  getrusage(RUSAGE_CHILDREN, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static void cost_start(relock_test_cluster_t *topo, cost_t *c) {
  for (int i = 0; i < relock_test_cluster_nodes(topo); i++)
    relock_test_redis_cmd(relock_test_cluster_node(topo, i), NULL, 0, "CONFIG", "RESETSTAT", NULL);
  c->client_us = children_cpu_us();
  c->server_us = nodes_cpu_us(topo);
}

/* Ends the count: per pair (two EVALSHAs) from then on. */
static void cost_end(relock_test_cluster_t *topo, cost_t *c) {
  c->client_us = children_cpu_us() - c->client_us;
  c->server_us = nodes_cpu_us(topo) - c->server_us;
  c->calls = 0;
  for (int i = 0; i < relock_test_cluster_nodes(topo); i++) {
    static char info[16384];
    long long calls;
    const char *e;
    if (relock_test_redis_cmd(relock_test_cluster_node(topo, i), info, sizeof info, "INFO", "commandstats", NULL) ==
            0 &&
        (e = strstr(info, "cmdstat_evalsha:")) != NULL && sscanf(e, "cmdstat_evalsha:calls=%lld", &calls) == 1)
      c->calls += (double)calls;
  }
  double pairs = c->calls / 2;
  c->server_us = pairs > 0 ? c->server_us / pairs : -1;
  c->client_us = pairs > 0 ? c->client_us / pairs : -1;
}

/* redis-benchmark's rate (requests/s) for the acquire script on the
 * cluster, pipelined; -1 on failure. On a busy machine redis-benchmark
 * --cluster now and then never ends (its clients idle, one thread waiting
 * for requests that will never be sent): 90 s at most, then once more. */
static double ceiling(relock_test_cluster_t *topo, const char *sha) {
  char cmd[1024], line[4096];
  snprintf(cmd, sizeof cmd,
           "timeout 90 redis-benchmark --cluster -h 127.0.0.1 -p %d -P 16 -c 50 -n 300000 -r 100000000 --csv EVALSHA %s "
           "2 'ref:{tag}:__rand_int__' 'latch:{tag}:__rand_int__' 30000 field 30000 2>/dev/null",
           relock_test_redis_port(relock_test_cluster_node(topo, 0)), sha);
  if (run_and_find(cmd, "EVALSHA", line, sizeof line) != 0) {
    fprintf(stderr, "cluster: redis-benchmark --cluster failed or hung; once more\n");
    if (run_and_find(cmd, "EVALSHA", line, sizeof line) != 0)
      return -1;
  }
  /* "EVALSHA ...","12345.67",... */
  const char *q = strstr(line, "\",\"");
  return q != NULL ? atof(q + 3) : -1;
}

static double relock_pairs(relock_test_cluster_t *topo, const char *lock, int seconds) {
  char cmd[2048], line[4096];
  snprintf(cmd, sizeof cmd, "%s 'redis+cluster://%s' 0 throughput 1024 %d", lock, relock_test_cluster_seeds(topo),
           seconds);
  if (run_and_find(cmd, "pairs_per_s", line, sizeof line) != 0)
    return -1;
  fprintf(stderr, "cluster: bench/lock: %s", line);
  const char *v = strstr(line, "\"pairs_per_s\":");
  return v != NULL ? atof(v + 14) : -1;
}

/* Loads the script on every node; its SHA in sha (41 bytes). */
static int load_script(relock_test_cluster_t *topo, const char *path, char sha[41]) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return -1;
  static char body[65536];
  size_t n = fread(body, 1, sizeof body - 1, f);
  fclose(f);
  body[n] = '\0';
  for (int i = 0; i < relock_test_cluster_nodes(topo); i++) {
    char reply[128];
    if (relock_test_redis_cmd(relock_test_cluster_node(topo, i), reply, sizeof reply, "SCRIPT", "LOAD", body, NULL) !=
            0 ||
        reply[0] != '$')
      return -1;
    const char *s = strchr(reply, '\n');
    snprintf(sha, 41, "%.40s", s != NULL ? s + 1 : "");
  }
  return 0;
}

/* A lock name in a slot master m serves. */
static void name_on(relock_test_cluster_t *topo, int m, char *out, size_t size) {
  for (int i = 0;; i++) {
    snprintf(out, size, "bench-failover-%d", i);
    if (relock_test_cluster_owner(topo, relock_test_cluster_keyslot(topo, out, strlen(out))) == m)
      return;
  }
}

static int failovers(relock_test_cluster_t *topo, int n, int64_t *relock_ms, int64_t *promo_ms, long *tries,
                     long *errors) {
  relock_error_t err;
  relock_options_t *opts = relock_options_new(NULL);
  relock_options_set_string(opts, RELOCK_OPT_CLUSTER_NODES, relock_test_cluster_seeds(topo), &err);
  relock_options_set_ms(opts, RELOCK_OPT_COMMAND_TIMEOUT, 1000, &err);
  relock_options_set_ms(opts, RELOCK_OPT_CONNECT_TIMEOUT, 1000, &err);
  relock_client_t *c = relock_client_new(NULL, opts, &err);
  relock_options_free(opts);
  if (c == NULL) {
    fprintf(stderr, "cluster: %s\n", err.message);
    return -1;
  }
  char name[64];
  int m = relock_test_cluster_owner(topo, 0);
  name_on(topo, m, name, sizeof name);
  trier_t t = {.lock = relock_lock_new(c, name, &err)};
  pthread_mutex_init(&t.mu, NULL);
  pthread_t th;
  pthread_create(&th, NULL, trier_main, &t);
  int done = 0;
  for (int i = 0; i < n; i++) {
    if (relock_test_cluster_wait_ok(topo, 30000) != 0)
      break;
    m = relock_test_cluster_owner(topo, relock_test_cluster_keyslot(topo, name, strlen(name)));
    trier_count_from(&t, 0);
    int promo = -1, nm = -1;
    if (relock_test_cluster_kill9_master(topo, m) == 0) {
      trier_count_from(&t, now_ms()); /* tries that began after the kill */
      nm = relock_test_cluster_await_promotion(topo, 30000, &promo);
    }
    int64_t kill_at = relock_test_cluster_last_kill_ms(topo);
    int64_t got = trier_first_ok(&t, 30000);
    if (nm < 0 || promo < 0 || got == 0) {
      fprintf(stderr, "cluster: failover %d: new master %d, promotion %d ms, relock %s\n", i + 1, nm, promo,
              got ? "ok" : "never acquired");
      break;
    }
    relock_ms[done] = got - kill_at;
    promo_ms[done] = promo;
    fprintf(stderr, "cluster: failover %d: promotion %d ms, relock acquired %lld ms\n", i + 1, promo,
            (long long)relock_ms[done]);
    done++;
    relock_test_cluster_restart(topo, m, 30000);
  }
  t.stop = 1;
  pthread_join(th, NULL);
  *tries = t.tries;
  *errors = t.errors;
  relock_lock_free(t.lock);
  relock_client_free(c);
  return done;
}

int main(int argc, char **argv) {
  int seconds = argc > 3 ? atoi(argv[3]) : 5, n = argc > 4 ? atoi(argv[4]) : 3;
  if (argc < 3 || seconds < 1 || n < 1 || n > 20) {
    fprintf(stderr, "usage: %s LOCK SCRIPT [SECONDS] [FAILOVERS]\n", argv[0]);
    return 2;
  }
  relock_test_cluster_t *topo = relock_test_cluster_start(NULL);
  if (topo == NULL) {
    fprintf(stderr, "cluster: the cluster did not start\n");
    return 1;
  }
  char sha[41];
  int rc = 1;
  if (load_script(topo, argv[2], sha) != 0) {
    fprintf(stderr, "cluster: cannot load %s\n", argv[2]);
    goto out;
  }
  cost_t k0, k1, kr;
  cost_start(topo, &k0);
  double c0 = ceiling(topo, sha);
  cost_end(topo, &k0);
  cost_start(topo, &kr);
  double pairs = relock_pairs(topo, argv[1], seconds);
  cost_end(topo, &kr);
  cost_start(topo, &k1);
  double c1 = ceiling(topo, sha);
  cost_end(topo, &k1);
  if (c0 <= 0 || c1 <= 0 || pairs <= 0) {
    fprintf(stderr, "cluster: throughput: ceiling %.0f / %.0f, relock %.0f\n", c0, c1, pairs);
    goto out;
  }
  int64_t relock_ms[20], promo_ms[20];
  long tries = 0, errors = 0;
  int done = failovers(topo, n, relock_ms, promo_ms, &tries, &errors);
  if (done < n)
    goto out;
  printf("{\"pairs_per_s\":%.0f,\"ceiling_evalsha_per_s\":%.0f,\"ceiling_each\":\"%.0f %.0f\",\"failovers\":%d,"
         "\"server_us_per_pair\":%.1f,\"ceiling_server_us_per_pair\":%.1f,\"client_us_per_pair\":%.1f,"
         "\"ceiling_client_us_per_pair\":%.1f,\"relock_each_ms\":\"",
         pairs, (c0 + c1) / 2, c0, c1, done, kr.server_us, (k0.server_us + k1.server_us) / 2, kr.client_us,
         (k0.client_us + k1.client_us) / 2);
  for (int i = 0; i < done; i++)
    printf("%s%lld", i ? " " : "", (long long)relock_ms[i]);
  printf("\",\"promotion_each_ms\":\"");
  for (int i = 0; i < done; i++)
    printf("%s%lld", i ? " " : "", (long long)promo_ms[i]);
  printf("\",\"tries\":%ld,\"errors\":%ld,\"relock_p50_ms\":%lld,\"promotion_p50_ms\":%lld}\n", tries, errors,
         (long long)median(relock_ms, done), (long long)median(promo_ms, done));
  rc = 0;
out:
  relock_test_cluster_free(topo);
  return rc;
}
