/* What the failover benchmarks (bench/sentinel, bench/cluster) share: a
 * thread that tries a lock in a loop all along (try once, release), noting
 * the end of the first success that began after a given time (the kill),
 * and the median of the figures. */
#ifndef RELOCK_BENCH_FAILOVER_H
#define RELOCK_BENCH_FAILOVER_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <relock/relock.h>

static inline int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct {
  relock_lock_t *lock;
  volatile int stop;
  pthread_mutex_t mu;
  int64_t after;     /* a success counts when its try began after this */
  int64_t first_ok;  /* the end of that success; 0: none yet */
  long tries, errors;
} trier_t;

static inline void *trier_main(void *arg) {
  trier_t *t = arg;
  while (!t->stop) {
    int64_t begin = now_ms();
    relock_future_t *f = relock_lock_lock_async(t->lock, 1, 0, 5000);
    int r = relock_future_wait(f, 10000), got = r == 0 && relock_future_bool(f);
    relock_future_release(f);
    if (got) {
      f = relock_lock_unlock_async(t->lock, 1);
      relock_future_wait(f, 10000);
      relock_future_release(f);
    }
    int64_t end = now_ms();
    pthread_mutex_lock(&t->mu);
    t->tries++;
    if (r != 0)
      t->errors++;
    if (got && t->after > 0 && begin > t->after && t->first_ok == 0)
      t->first_ok = end;
    pthread_mutex_unlock(&t->mu);
    if (!got)
      usleep(1000); /* a refused try comes back at once: do not spin */
  }
  return NULL;
}

static inline int cmp(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static inline int64_t median(int64_t *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* From now on, a success counts when its try began after `after` (0:
 * none counts). */
static inline void trier_count_from(trier_t *t, int64_t after) {
  pthread_mutex_lock(&t->mu);
  t->after = after;
  t->first_ok = 0;
  pthread_mutex_unlock(&t->mu);
}

/* The end of the first success counted, waiting up to timeout_ms; 0: none. */
static inline int64_t trier_first_ok(trier_t *t, int64_t timeout_ms) {
  int64_t got = 0, deadline = now_ms() + timeout_ms;
  for (;;) {
    pthread_mutex_lock(&t->mu);
    got = t->first_ok;
    pthread_mutex_unlock(&t->mu);
    if (got > 0 || now_ms() >= deadline)
      return got;
    usleep(1000);
  }
}

#endif /* RELOCK_BENCH_FAILOVER_H */
