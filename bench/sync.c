/* The semaphore, the count-down latch and RedLock, timed (bench/run part 13):
 *   sync HOST PORT semaphore N       N uncontended acquire(1)+release(1)
 *                                    pairs, one after the other
 *   sync HOST PORT redlock N P2 P3 P4 P5
 *                                    N uncontended RedLock acquire+release
 *                                    pairs over the 5 servers on ports PORT,
 *                                    P2..P5, each next to a lock pair on the
 *                                    first alone (interleaved)
 *   sync HOST PORT permit N          N uncontended acquire+release pairs of
 *                                    a watched permit (lease RELOCK_INFINITE),
 *                                    each next to a reentrant lock's
 *                                    lock+unlock pair (watchdog lease) of the
 *                                    same client (interleaved)
 *   sync HOST PORT latch ROUNDS K    K awaiting processes; each round the
 *                                    last count-down is sent and the time
 *                                    until the last awaiter is through taken
 * Prints one JSON object: p50/p99 in microseconds. */
#include <signal.h>
#include <sys/wait.h>

#include "bench.h"

static void pair_p(relock_semaphore_t *s) {
  int ok = 0, rc = relock_semaphore_acquire(s, 1, 0, &ok);
  if (rc != 0 || !ok)
    bench_die("semaphore acquire", rc != 0 ? rc : RELOCK_EPROTO);
  if ((rc = relock_semaphore_release(s, 1)) != 0)
    bench_die("semaphore release", rc);
}

static int semaphore(relock_client_t *c, int n) {
  relock_semaphore_t *s = relock_semaphore_new(c, "bench-sem", NULL);
  int set = 0, rc = s != NULL ? relock_semaphore_try_set_permits(s, 1000, &set) : RELOCK_ENOMEM;
  if (rc != 0)
    bench_die("semaphore", rc);
  for (int i = 0; i < 200; i++) /* warm: scripts cached, connection up */
    pair_p(s);
  uint64_t *v = malloc(sizeof(*v) * (size_t)n);
  for (int i = 0; i < n; i++) {
    uint64_t t0 = bench_now_ns();
    pair_p(s);
    v[i] = bench_now_ns() - t0;
  }
  qsort(v, (size_t)n, sizeof(*v), bench_cmp_u64);
  printf("{\"pairs\":%d,\"p50_us\":%.1f,\"p99_us\":%.1f}\n", n, bench_pct_us(v, (size_t)n, 0.5),
         bench_pct_us(v, (size_t)n, 0.99));
  free(v);
  relock_semaphore_free(s);
  return 0;
}

/* A watched permit's pair, and a lock's pair, taken in turn by one client:
 * both track what they hold for the watchdog, so the permit's costs beyond
 * the lock's (its id, its script) show in the ratio. */
static int permit(relock_client_t *c, int n) {
  relock_permit_semaphore_t *s = relock_permit_semaphore_new(c, "bench-permits", NULL);
  relock_lock_t *l = relock_lock_new(c, "bench-single", NULL);
  int set = 0, rc = s != NULL && l != NULL ? relock_permit_semaphore_try_set_permits(s, 1000, &set) : RELOCK_ENOMEM;
  if (rc != 0)
    bench_die("permit semaphore", rc);
  uint64_t *vl = malloc(sizeof(*vl) * (size_t)n), *vp = malloc(sizeof(*vp) * (size_t)n);
  for (int i = -200; i < n; i++) { /* 200 warm-up rounds: scripts cached, connection up */
    uint64_t t0 = bench_now_ns();
    if (bench_value(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE), "lock") != 1)
      bench_die("lock not acquired", RELOCK_EPROTO);
    bench_value(relock_lock_unlock_async(l, 1), "unlock");
    uint64_t t1 = bench_now_ns();
    relock_future_t *f = relock_permit_semaphore_acquire_async(s, 0, RELOCK_INFINITE);
    if (f == NULL || relock_future_wait(f, 30000) != 0)
      bench_die("permit acquire", f != NULL ? relock_future_error(f) : RELOCK_ENOMEM);
    if (relock_future_value_type(f) != RELOCK_VALUE_STRING)
      bench_die("no permit free", RELOCK_EPROTO);
    char id[RELOCK_PERMIT_ID_SIZE];
    snprintf(id, sizeof id, "%s", relock_future_string(f, NULL));
    relock_future_release(f);
    if (bench_value(relock_permit_semaphore_release_async(s, id), "permit release") != 1)
      bench_die("permit not released", RELOCK_EPROTO);
    uint64_t t2 = bench_now_ns();
    if (i >= 0) {
      vl[i] = t1 - t0;
      vp[i] = t2 - t1;
    }
  }
  qsort(vl, (size_t)n, sizeof(*vl), bench_cmp_u64);
  qsort(vp, (size_t)n, sizeof(*vp), bench_cmp_u64);
  printf("{\"pairs\":%d,\"lock_p50_us\":%.1f,\"lock_p99_us\":%.1f,\"permit_p50_us\":%.1f,"
         "\"permit_p99_us\":%.1f}\n",
         n, bench_pct_us(vl, (size_t)n, 0.5), bench_pct_us(vl, (size_t)n, 0.99), bench_pct_us(vp, (size_t)n, 0.5),
         bench_pct_us(vp, (size_t)n, 0.99));
  free(vl);
  free(vp);
  relock_lock_free(l);
  relock_permit_semaphore_free(s);
  return 0;
}

/* An awaiting process: each round's latch in turn, writing when it got
 * through (CLOCK_MONOTONIC ns) to fd. */
static void awaiter(const char *host, int port, int rounds, int fd) {
  relock_client_t *c = bench_client(NULL, host, port, 0);
  for (int r = 0; r < rounds; r++) {
    char name[64];
    snprintf(name, sizeof name, "bench-latch-%d", r);
    relock_latch_t *l = relock_latch_new(c, name, NULL);
    int open = 0;
    if (l == NULL || relock_latch_await(l, 60000, &open) != 0 || !open)
      _exit(2);
    uint64_t through = bench_now_ns();
    if (write(fd, &through, sizeof through) != (ssize_t)sizeof through)
      _exit(3);
    relock_latch_free(l);
  }
  relock_client_free(c);
  _exit(0);
}

static long long listeners(relock_client_t *c, const char *channel) {
  relock_future_t *f = relock_client_commandf_async(c, "PUBSUB NUMSUB %s", channel);
  if (f == NULL || relock_future_wait(f, 30000) != 0)
    bench_die("PUBSUB NUMSUB", f != NULL ? relock_future_error(f) : RELOCK_ENOMEM);
  const relock_reply_t *r = relock_future_reply(f);
  long long n = r->elements == 2 ? r->element[1]->integer : -1;
  relock_future_release(f);
  return n;
}

static int latch(const char *host, int port, relock_client_t *c, int rounds, int k) {
  for (int r = 0; r < rounds; r++) { /* every round's count first: a latch never set is open */
    char cmd[96];
    snprintf(cmd, sizeof cmd, "SET bench-latch-%d 1", r);
    bench_command(c, cmd);
  }
  int fds[2];
  if (pipe(fds) != 0)
    return 1;
  pid_t *pids = calloc((size_t)k, sizeof(*pids));
  for (int i = 0; i < k; i++)
    if ((pids[i] = fork()) == 0) {
      close(fds[0]);
      awaiter(host, port, rounds, fds[1]);
    }
  close(fds[1]);
  uint64_t *v = malloc(sizeof(*v) * (size_t)rounds);
  for (int r = 0; r < rounds; r++) {
    char name[64], channel[128];
    snprintf(name, sizeof name, "bench-latch-%d", r);
    snprintf(channel, sizeof channel, "redisson_countdownlatch__channel__{%s}", name);
    while (listeners(c, channel) < k)
      usleep(200);
    relock_latch_t *l = relock_latch_new(c, name, NULL);
    uint64_t t0 = bench_now_ns(), last = 0;
    int rc = relock_latch_count_down(l, NULL);
    if (rc != 0)
      bench_die("count down", rc);
    for (int i = 0; i < k; i++) {
      uint64_t through;
      if (read(fds[0], &through, sizeof through) != (ssize_t)sizeof through)
        bench_die("an awaiter died", RELOCK_EPROTO);
      if (through > last)
        last = through;
    }
    v[r] = last > t0 ? last - t0 : 0;
    relock_latch_free(l);
  }
  for (int i = 0; i < k; i++)
    waitpid(pids[i], NULL, 0);
  qsort(v, (size_t)rounds, sizeof(*v), bench_cmp_u64);
  printf("{\"rounds\":%d,\"awaiters\":%d,\"wake_p50_us\":%.1f,\"wake_p99_us\":%.1f}\n", rounds, k,
         bench_pct_us(v, (size_t)rounds, 0.5), bench_pct_us(v, (size_t)rounds, 0.99));
  free(v);
  free(pids);
  return 0;
}

#define NODES 5

static int redlock(const char *host, const int *ports, int n) {
  relock_client_t *c[NODES];
  relock_lock_t *locks[NODES];
  for (int i = 0; i < NODES; i++) {
    c[i] = bench_client(bench_loop(), host, ports[i], 0); /* embedded, all on one loop */
    locks[i] = relock_lock_new(c[i], "bench-redlock", NULL);
  }
  relock_lock_t *single = relock_lock_new(c[0], "bench-single", NULL);
  relock_error_t err;
  relock_multi_lock_t *m = relock_redlock_new(locks, NODES, &err);
  if (m == NULL) {
    fprintf(stderr, "redlock: %s\n", err.message);
    return 1;
  }
  uint64_t *vs = malloc(sizeof(*vs) * (size_t)n), *vr = malloc(sizeof(*vr) * (size_t)n);
  uint64_t *v1 = malloc(sizeof(*v1) * (size_t)n), *v5 = malloc(sizeof(*v5) * (size_t)n);
  static const char *const eval[] = {"EVAL", "return 1", "0"};
  for (int i = -200; i < n; i++) {
    /* Untimed: the last RedLock's late answers in, and what they gave back
     * through (one EVAL behind it on every connection). */
    for (int settled = 0; !settled;) {
      int results[NODES];
      relock_multi_lock_results(m, results, NODES);
      settled = 1;
      for (int k = 0; k < NODES; k++)
        settled &= results[k] != RELOCK_EPENDING;
      if (!settled)
        ev_run(bench_loop(), EVRUN_ONCE);
    }
    relock_future_t *fs[NODES];
    for (int k = 0; k < NODES; k++)
      fs[k] = relock_client_command_async(c[k], 3, eval, NULL);
    for (int k = 0; k < NODES; k++)
      bench_value(fs[k], "EVAL");
    /* the floor: one EVAL round trip to the first server, then one to all
     * five at once (what this machine's CPUs make of "in parallel") */
    uint64_t f0 = bench_now_ns();
    bench_value(relock_client_command_async(c[0], 3, eval, NULL), "EVAL");
    uint64_t f1 = bench_now_ns();
    for (int k = 0; k < NODES; k++)
      fs[k] = relock_client_command_async(c[k], 3, eval, NULL);
    for (int k = 0; k < NODES; k++)
      bench_value(fs[k], "EVAL");
    uint64_t f2 = bench_now_ns(); /* 200 warm-up rounds: scripts cached, connections up */
    uint64_t t0 = bench_now_ns();
    if (bench_value(relock_lock_lock_async(single, 1, 0, RELOCK_INFINITE), "lock") != 1)
      bench_die("lock not acquired", RELOCK_EPROTO);
    bench_value(relock_lock_unlock_async(single, 1), "unlock");
    uint64_t t1 = bench_now_ns();
    if (bench_value(relock_multi_lock_lock_async(m, 1, 0, RELOCK_INFINITE), "redlock") != 1)
      bench_die("redlock not acquired", RELOCK_EPROTO);
    bench_value(relock_multi_lock_unlock_async(m, 1), "redlock release");
    uint64_t t2 = bench_now_ns();
    if (i >= 0) {
      vs[i] = t1 - t0;
      vr[i] = t2 - t1;
      v1[i] = f1 - f0;
      v5[i] = f2 - f1;
    }
  }
  qsort(v1, (size_t)n, sizeof(*v1), bench_cmp_u64);
  qsort(v5, (size_t)n, sizeof(*v5), bench_cmp_u64);
  qsort(vs, (size_t)n, sizeof(*vs), bench_cmp_u64);
  qsort(vr, (size_t)n, sizeof(*vr), bench_cmp_u64);
  printf("{\"pairs\":%d,\"single_p50_us\":%.1f,\"single_p99_us\":%.1f,\"redlock_p50_us\":%.1f,"
         "\"redlock_p99_us\":%.1f,\"eval1_p50_us\":%.1f,\"eval5_p50_us\":%.1f}\n",
         n, bench_pct_us(vs, (size_t)n, 0.5), bench_pct_us(vs, (size_t)n, 0.99), bench_pct_us(vr, (size_t)n, 0.5),
         bench_pct_us(vr, (size_t)n, 0.99), bench_pct_us(v1, (size_t)n, 0.5), bench_pct_us(v5, (size_t)n, 0.5));
  free(v1);
  free(v5);
  free(vs);
  free(vr);
  relock_multi_lock_free(m);
  relock_lock_free(single);
  for (int i = 0; i < NODES; i++)
    relock_client_free(c[i]);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr,
            "usage: sync HOST PORT semaphore N | permit N | latch ROUNDS AWAITERS | redlock N P2 P3 P4 P5\n");
    return 2;
  }
  const char *host = argv[1];
  int port = atoi(argv[2]);
  if (strcmp(argv[3], "latch") == 0 && argc >= 6) {
    relock_client_t *c = bench_client(NULL, host, port, 0);
    int rc = latch(host, port, c, atoi(argv[4]), atoi(argv[5]));
    relock_client_free(c);
    return rc;
  }
  if (strcmp(argv[3], "redlock") == 0 && argc >= 9) {
    int ports[NODES] = {port, atoi(argv[5]), atoi(argv[6]), atoi(argv[7]), atoi(argv[8])};
    return redlock(host, ports, atoi(argv[4]));
  }
  relock_client_t *c = bench_client(bench_loop(), host, port, 0); /* embedded, as bench/lock's pairs */
  int rc = strcmp(argv[3], "permit") == 0 ? permit(c, atoi(argv[4])) : semaphore(c, atoi(argv[4]));
  relock_client_free(c);
  return rc;
}
