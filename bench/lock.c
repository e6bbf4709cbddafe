/* Lock benchmarks against a running Redis (bench/lock.sh starts a private
 * one and prints the figures next to redis-benchmark's, measured in the same
 * run):
 *
 *   bench/lock HOST PORT latency PAIRS
 *       one owner, sequential lock+unlock pairs on one key: p50/p99 in us
 *   bench/lock HOST PORT handoff PROCS SECTIONS PAUSE_US
 *       PROCS processes x SECTIONS critical sections on ONE name, each a
 *       non-atomic GET/SET increment (the final counter must be exact), with
 *       PAUSE_US of work outside the lock between sections: acquisitions/s,
 *       owner switches, wait p99/max, and handoff latency (a release to the
 *       next holder's acquisition, across processes: CLOCK_MONOTONIC is
 *       system-wide).
 *
 * Each prints one JSON object on stdout. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <relock/relock.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static double pct_us(uint64_t *v, size_t n, double p) {
  if (n == 0)
    return 0;
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return (double)v[i] / 1e3;
}

static relock_client_t *open_client(const char *host, int port) {
  relock_config_t cfg;
  relock_config_init(&cfg);
  cfg.host = host;
  cfg.port = port;
  cfg.command_timeout_ms = 10000;
  relock_error_t err;
  relock_client_t *c = relock_client_new(NULL, &cfg, &err);
  if (c == NULL) {
    fprintf(stderr, "client: %s\n", err.message);
    exit(1);
  }
  return c;
}

static void die(const char *what, int err) {
  fprintf(stderr, "%s: %s\n", what, relock_strerror(err));
  exit(1);
}

/* -- uncontended latency ----------------------------------------------------*/

static int latency(const char *host, int port, size_t pairs) {
  relock_client_t *c = open_client(host, port);
  relock_lock_t *l = relock_lock_new(c, "bench:latency", NULL);
  uint64_t *t = malloc(pairs * sizeof(*t));
  for (size_t i = 0; i < pairs + 1000; i++) { /* 1000 to warm up */
    uint64_t t0 = now_ns();
    int r = relock_lock_lock(l, RELOCK_INFINITE);
    if (r != 0)
      die("lock", r);
    if ((r = relock_lock_unlock(l)) != 0)
      die("unlock", r);
    if (i >= 1000)
      t[i - 1000] = now_ns() - t0;
  }
  qsort(t, pairs, sizeof(*t), cmp_u64);
  printf("{\"pairs\":%zu,\"p50_us\":%.1f,\"p99_us\":%.1f}\n", pairs, pct_us(t, pairs, 0.50), pct_us(t, pairs, 0.99));
  free(t);
  relock_lock_free(l);
  relock_client_free(c);
  return 0;
}

/* -- contended handoff ------------------------------------------------------*/

typedef struct {
  uint32_t proc;
  uint64_t asked; /* acquire called */
  uint64_t got;   /* acquired */
  uint64_t freed; /* release answered */
} section_t;

static void spin_us(unsigned us) {
  uint64_t until = now_ns() + (uint64_t)us * 1000u;
  while (now_ns() < until)
    ;
}

static void worker(const char *host, int port, uint32_t proc, size_t sections, unsigned pause_us, int fd) {
  relock_client_t *c = open_client(host, port);
  relock_lock_t *l = relock_lock_new(c, "bench:handoff", NULL);
  for (size_t i = 0; i < sections; i++) {
    section_t s = {proc, now_ns(), 0, 0};
    int r = relock_lock_lock(l, RELOCK_INFINITE);
    if (r != 0)
      die("lock", r);
    s.got = now_ns();
    relock_future_t *f = relock_client_commandf_async(c, "GET bench:counter");
    if ((r = relock_future_wait(f, 10000)) != 0)
      die("GET", r);
    const relock_reply_t *reply = relock_future_reply(f);
    long long v = reply->type == RELOCK_REPLY_STRING ? atoll(reply->str) : 0;
    relock_future_release(f);
    f = relock_client_commandf_async(c, "SET bench:counter %lld", v + 1);
    if ((r = relock_future_wait(f, 10000)) != 0)
      die("SET", r);
    relock_future_release(f);
    /* the release is on the wire now: what the next holder waits from */
    s.freed = now_ns();
    if ((r = relock_lock_unlock(l)) != 0)
      die("unlock", r);
    if (write(fd, &s, sizeof s) != (ssize_t)sizeof s)
      exit(1);
    if (pause_us > 0)
      spin_us(pause_us);
  }
  relock_lock_free(l);
  relock_client_free(c);
  exit(0);
}

static int handoff(const char *host, int port, int procs, size_t sections, unsigned pause_us) {
  relock_client_t *c = open_client(host, port);
  relock_future_t *f = relock_client_commandf_async(c, "DEL bench:counter bench:handoff");
  relock_future_wait(f, 10000);
  relock_future_release(f);
  int fds[2];
  if (pipe(fds) != 0)
    return 1;
  for (int p = 0; p < procs; p++) {
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      worker(host, port, (uint32_t)p, sections, pause_us, fds[1]);
    }
  }
  close(fds[1]);
  size_t n = (size_t)procs * sections, got = 0;
  section_t *s = malloc(n * sizeof(*s));
  while (got < n) {
    ssize_t r = read(fds[0], (char *)s + got * sizeof(*s), (n - got) * sizeof(*s));
    if (r <= 0) {
      if (r < 0 && errno == EINTR)
        continue;
      break;
    }
    got += (size_t)r / sizeof(*s);
  }
  int failed = 0;
  for (int p = 0; p < procs; p++) {
    int status;
    wait(&status);
    failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  if (got != n || failed) {
    fprintf(stderr, "handoff: %zu of %zu sections reported, workers %s\n", got, n, failed ? "failed" : "ok");
    return 1;
  }
  f = relock_client_commandf_async(c, "GET bench:counter");
  relock_future_wait(f, 10000);
  long long counter = relock_future_reply(f) ? atoll(relock_future_reply(f)->str) : -1;
  relock_future_release(f);
  relock_client_free(c);

  /* in acquisition order: consecutive holders, waits, handoffs */
  for (size_t i = 1; i < n; i++) /* insertion sort by s.got: nearly sorted */
    for (size_t j = i; j > 0 && s[j - 1].got > s[j].got; j--) {
      section_t t = s[j];
      s[j] = s[j - 1];
      s[j - 1] = t;
    }
  uint64_t *waits = malloc(n * sizeof(*waits)), *hand = malloc(n * sizeof(*hand));
  size_t nhand = 0, switches = 0;
  for (size_t i = 0; i < n; i++) {
    waits[i] = s[i].got - s[i].asked;
    if (i > 0 && s[i].proc != s[i - 1].proc) {
      switches++;
      /* a real handoff: the next holder was already waiting at the release */
      if (s[i].asked < s[i - 1].freed && s[i].got > s[i - 1].freed)
        hand[nhand++] = s[i].got - s[i - 1].freed;
    }
  }
  double span_s = (double)(s[n - 1].freed - s[0].got) / 1e9;
  qsort(waits, n, sizeof(*waits), cmp_u64);
  qsort(hand, nhand, sizeof(*hand), cmp_u64);
  printf("{\"procs\":%d,\"sections\":%zu,\"pause_us\":%u,\"counter\":%lld,\"exact\":%s,"
         "\"acquisitions_per_s\":%.0f,\"owner_switches\":%zu,\"wait_p99_us\":%.1f,\"wait_max_us\":%.1f,"
         "\"handoffs\":%zu,\"handoff_p50_us\":%.1f,\"handoff_p99_us\":%.1f}\n",
         procs, n, pause_us, counter, counter == (long long)n ? "true" : "false", (double)n / span_s, switches,
         pct_us(waits, n, 0.99), (double)waits[n - 1] / 1e3, nhand, pct_us(hand, nhand, 0.50),
         pct_us(hand, nhand, 0.99));
  free(waits);
  free(hand);
  free(s);
  return counter == (long long)n ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc >= 5 && strcmp(argv[3], "latency") == 0)
    return latency(argv[1], atoi(argv[2]), (size_t)atol(argv[4]));
  if (argc >= 7 && strcmp(argv[3], "handoff") == 0)
    return handoff(argv[1], atoi(argv[2]), atoi(argv[4]), (size_t)atol(argv[5]), (unsigned)atoi(argv[6]));
  fprintf(stderr, "usage: %s HOST PORT latency PAIRS | handoff PROCS SECTIONS PAUSE_US\n", argv[0]);
  return 2;
}
