/* Helpers shared by the lock benchmarks (bench/lock.c, bench/watchdog.c):
 * clocks, the process's CPU time and heap use, percentiles, the server's CPU
 * time from INFO, and a client for HOST PORT. Header-only: every function is
 * static, so each program takes what it uses. */
#ifndef RELOCK_BENCH_H
#define RELOCK_BENCH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#include <malloc.h>
#define BENCH_HAVE_MALLINFO2 1
#endif

#include <ev.h>

#include <relock/relock.h>

static inline uint64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPU time of this process so far (user + system), from getrusage. */
static inline double bench_cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Resident set size in bytes, from /proc/self/statm (-1 if unreadable). */
static inline long long bench_rss_bytes(void) {
  long long pages_total = 0, pages_rss = -1;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL)
    return -1;
  if (fscanf(f, "%lld %lld", &pages_total, &pages_rss) != 2)
    pages_rss = -1;
  fclose(f);
  return pages_rss < 0 ? -1 : pages_rss * (long long)sysconf(_SC_PAGESIZE);
}

/* Bytes of heap in use: malloc's own count where glibc has it (mallinfo2:
 * uordblks, the chunks handed out with their headers and padding, plus
 * hblkhd, the large blocks malloc took with mmap, such as a big hash table's
 * bucket array), the resident set size otherwise. bench_heap_source() says
 * which. */
static inline long long bench_heap_bytes(void) {
#ifdef BENCH_HAVE_MALLINFO2
  struct mallinfo2 mi = mallinfo2();
  return (long long)(mi.uordblks + mi.hblkhd);
#else
  return bench_rss_bytes();
#endif
}

static inline const char *bench_heap_source(void) {
#ifdef BENCH_HAVE_MALLINFO2
  return "mallinfo2";
#else
  return "rss";
#endif
}

static inline int bench_cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The p-quantile of n sorted nanosecond values, in microseconds. */
static inline double bench_pct_us(const uint64_t *v, size_t n, double p) {
  if (n == 0)
    return 0;
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return (double)v[i] / 1e3;
}

static inline void bench_die(const char *what, int err) {
  fprintf(stderr, "%s: %s\n", what, relock_strerror(err));
  exit(1);
}

/* Waits for f, which must succeed (else dies naming what); its value (a
 * boolean or an integer). */
static inline int64_t bench_value(relock_future_t *f, const char *what) {
  if (f == NULL || relock_future_wait(f, 30000) != 0)
    bench_die(what, f != NULL ? relock_future_error(f) : RELOCK_ENOMEM);
  int64_t v = relock_future_value_type(f) == RELOCK_VALUE_BOOL ? relock_future_bool(f) : relock_future_int(f);
  relock_future_release(f);
  return v;
}

/* The loop of the benchmarks that run it themselves (ev_run) and read the
 * client's insides between turns: their clients are embedded ones on it,
 * on the main thread. A client made with a NULL loop runs its loop on a
 * thread of its own, where neither would be safe. One loop for the
 * process, made on first use. */
static inline struct ev_loop *bench_loop(void) {
  static struct ev_loop *loop;
  if (loop == NULL && (loop = ev_loop_new(EVFLAG_AUTO)) == NULL) {
    fprintf(stderr, "ev_loop_new failed\n");
    exit(1);
  }
  return loop;
}

/* A client for host:port (or for host alone when it is a URL) on loop
 * (NULL: threaded, on a loop thread of its own), with a command timeout long enough for the deep pipelines the
 * benchmarks build. With BENCH_TLS_CA set (a CA file), over TLS: bench/run's
 * TLS part runs the same modes, with the same arguments, on a TLS port. With
 * BENCH_MIN_REPLICAS_ACKED set (a number), with that many synced replicas
 * (RELOCK_OPT_MIN_REPLICAS_ACKED): bench/run's replicas part. */
static inline relock_client_t *bench_client(struct ev_loop *loop, const char *host, int port, int64_t watchdog_ms) {
  relock_error_t err;
  relock_options_t *opts = relock_options_new(&err);
  const char *ca = getenv("BENCH_TLS_CA");
  const char *acked = getenv("BENCH_MIN_REPLICAS_ACKED");
  const char *stats = getenv("BENCH_STATISTICS"); /* 0: statistics off, to measure what they cost (part stats) */
  int url = strstr(host, "://") != NULL; /* a URL (bench/cluster: redis+cluster://...); port unused */
  if (opts == NULL || (url && relock_options_set_url(opts, host, &err) != 0) ||
      (!url && relock_options_set_string(opts, RELOCK_OPT_HOST, host, &err) != 0) ||
      (!url && relock_options_set_int(opts, RELOCK_OPT_PORT, port, &err) != 0) ||
      relock_options_set_ms(opts, RELOCK_OPT_COMMAND_TIMEOUT, 30000, &err) != 0 ||
      (watchdog_ms > 0 && relock_options_set_ms(opts, RELOCK_OPT_WATCHDOG_TIMEOUT, watchdog_ms, &err) != 0) ||
      (ca != NULL && (relock_options_set_int(opts, RELOCK_OPT_TLS, 1, &err) != 0 ||
                      relock_options_set_string(opts, RELOCK_OPT_TLS_CA_FILE, ca, &err) != 0)) ||
      (acked != NULL && relock_options_set(opts, RELOCK_OPT_MIN_REPLICAS_ACKED, acked, &err) != 0) ||
      (stats != NULL && relock_options_set(opts, RELOCK_OPT_STATISTICS, stats, &err) != 0)) {
    fprintf(stderr, "options: %s\n", err.message);
    exit(1);
  }
  relock_client_t *c = relock_client_new(loop, opts, &err);
  relock_options_free(opts);
  if (c == NULL) {
    fprintf(stderr, "client: %s\n", err.message);
    exit(1);
  }
  return c;
}

/* Runs a plain command and waits for it (not from inside a callback). */
static inline void bench_command(relock_client_t *c, const char *cmd) {
  relock_future_t *f = relock_client_commandf_async(c, cmd);
  int r = f != NULL ? relock_future_wait(f, 30000) : RELOCK_ENOMEM;
  if (r != 0)
    bench_die(cmd, r);
  relock_future_release(f);
}

/* The server's CPU time (used_cpu_sys + used_cpu_user of INFO cpu), stored
 * into *dst when the reply comes; *pending counts replies still due, and
 * then(arg) (if not NULL) runs after each reply. */
typedef struct bench_server_cpu {
  double *dst;
  int *pending;
  void (*then)(void *arg);
  void *arg;
} bench_server_cpu_t;

/* The server's CPU seconds (system + user) in an INFO cpu reply; -1 when
 * the reply has none. */
static inline double bench_info_cpu(const relock_reply_t *reply) {
  if (reply == NULL || reply->type != RELOCK_REPLY_STRING)
    return -1;
  const char *sys = strstr(reply->str, "used_cpu_sys:"), *user = strstr(reply->str, "used_cpu_user:");
  if (sys == NULL || user == NULL)
    return -1;
  return atof(sys + strlen("used_cpu_sys:")) + atof(user + strlen("used_cpu_user:"));
}

static inline void bench_on_info(relock_future_t *f, void *arg) {
  bench_server_cpu_t *q = arg;
  *q->dst = bench_info_cpu(relock_future_reply(f));
  (*q->pending)--;
  if (q->then != NULL)
    q->then(q->arg);
  free(q);
  relock_future_release(f);
}

static inline void bench_server_cpu_async(relock_client_t *c, double *dst, int *pending, void (*then)(void *arg),
                                          void *arg) {
  bench_server_cpu_t *q = malloc(sizeof(*q));
  relock_future_t *f = relock_client_commandf_async(c, "INFO cpu");
  if (q == NULL || f == NULL)
    bench_die("INFO cpu", RELOCK_ENOMEM);
  q->dst = dst;
  q->pending = pending;
  q->then = then;
  q->arg = arg;
  (*pending)++;
  relock_future_on_done(f, bench_on_info, q);
}

#endif /* RELOCK_BENCH_H */
