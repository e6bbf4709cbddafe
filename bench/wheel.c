/* Benchmark: the hashed-wheel timer against libev's own ev_timer (a heap).
 *
 * For 1k, 100k and 1M pending timers it measures
 *   schedule+cancel: with N timers pending (random timeouts of 1..60 s),
 *     M rounds of starting one more timer (its timeout varies) and stopping
 *     it again, which is what a command timeout does on every request;
 *     wall time on CLOCK_MONOTONIC, one op = one start + one stop;
 *   restart random: with the same N pending, M rounds of stopping a random
 *     pending timer and starting it again with a new timeout: requests
 *     completing in any order, each cancelling a timeout started long ago
 *     (the extra timer above is always the newest, a heap's best case);
 *   schedule+expire: N timers with timeouts spread over 200 ms, scheduled
 *     and run until every one has fired; CPU time of the process (the loop
 *     sleeps in between), one op = one timer scheduled and fired.
 * and prints a markdown table and a JSON line.
 *
 * Usage: bench/wheel [-m rounds] [-j file.json] */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

#include "loop/wheel.h"

#define MAX_TIMEOUT_MS 60000
#define EXPIRE_SPREAD_MS 200
#define REPEATS 3 /* schedule+cancel is timed this many times; the best counts */

static const size_t populations[] = {1000, 100000, 1000000};
#define NPOP (sizeof populations / sizeof populations[0])

typedef struct result {
  const char *name;
  size_t n;
  double wheel;   /* ops/s */
  double ev;      /* ops/s */
} result_t;

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint32_t next_random(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 11);
}

/* Timeouts of the extra timer, the same for both contenders and cheap to
 * fetch inside the timed loop. */
#define NVARY 4096
static int64_t vary_ms[NVARY];

static void die(const char *what) {
  fprintf(stderr, "bench/wheel: %s\n", what);
  exit(1);
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n, size);
  if (p == NULL)
    die("out of memory");
  return p;
}

/* -- callbacks ---------------------------------------------------------------- */

static size_t fired;

static void on_wheel_timer(relock__timer_t *timer, int status, void *arg) {
  (void)timer;
  (void)status;
  (void)arg;
  fired++;
}

static void on_ev_timer(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)w;
  (void)revents;
  fired++;
}

/* -- schedule+cancel and restart random --------------------------------------- */

/* Index of the pending timer a restart-random round picks: the same
 * sequence for both contenders. */
static size_t pick(uint64_t *state, size_t n) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return (size_t)(*state % n);
}

static double elapsed_rate(double t0, size_t rounds) {
  return (double)rounds / (clock_s(CLOCK_MONOTONIC) - t0);
}

/* What a schedule+cancel round does to the pending population. */
enum pattern {
  NEWEST, /* start one extra timer, cancel it again (a heap's best case) */
  RANDOM, /* restart a random pending timer */
  FIFO    /* cancel the oldest, start it again with the same timeout: what
             request timeouts and lease renewals do */
};

#define FIFO_TIMEOUT_MS 3000
/* libev reads the clock once per loop iteration; a server handles a batch of
 * events per iteration. */
#define EVENTS_PER_ITERATION 64

static int64_t initial_timeout_ms(enum pattern pattern) {
  return pattern == FIFO ? FIFO_TIMEOUT_MS : 1000 + (int64_t)(next_random() % (MAX_TIMEOUT_MS - 1000));
}

static double wheel_cancel(size_t n, size_t rounds, enum pattern pattern) {
  struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
  relock__wheel_t wheel;
  if (loop == NULL || relock__wheel_init(&wheel, loop, RELOCK__WHEEL_DEFAULT_TICK_MS,
                                          RELOCK__WHEEL_DEFAULT_SLOTS) != 0)
    die("cannot set up the wheel");
  relock__timer_t *timers = xcalloc(n, sizeof *timers), extra;
  for (size_t i = 0; i < n; i++) {
    relock__timer_init(&timers[i], on_wheel_timer, NULL);
    relock__timer_start(&wheel, &timers[i], initial_timeout_ms(pattern));
  }
  relock__timer_init(&extra, on_wheel_timer, NULL);

  double best = 0;
  size_t oldest = 0;
  for (int r = 0; r < REPEATS; r++) {
    uint64_t state = 0x2545f4914f6cdd1du;
    double t0 = clock_s(CLOCK_MONOTONIC), rate;
    for (size_t i = 0; i < rounds; i++) {
      if (pattern == NEWEST) {
        relock__timer_start(&wheel, &extra, vary_ms[i % NVARY]);
        relock__timer_stop(&extra);
      } else if (pattern == RANDOM) {
        relock__timer_t *t = &timers[pick(&state, n)];
        relock__timer_stop(t);
        relock__timer_start(&wheel, t, vary_ms[i % NVARY]);
      } else {
        relock__timer_t *t = &timers[oldest];
        oldest = oldest + 1 == n ? 0 : oldest + 1;
        relock__timer_stop(t);
        relock__timer_start(&wheel, t, FIFO_TIMEOUT_MS);
      }
    }
    rate = elapsed_rate(t0, rounds);
    if (rate > best)
      best = rate;
  }
  if (relock__wheel_count(&wheel) != n)
    die("wheel: wrong number of pending timers");
  for (size_t i = 0; i < n; i++)
    relock__timer_stop(&timers[i]);
  relock__wheel_close(&wheel);
  free(timers);
  ev_loop_destroy(loop);
  return best;
}

static double ev_cancel(size_t n, size_t rounds, enum pattern pattern) {
  struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
  if (loop == NULL)
    die("cannot create a loop");
  ev_timer *timers = xcalloc(n, sizeof *timers), extra;
  for (size_t i = 0; i < n; i++) {
    ev_timer_init(&timers[i], on_ev_timer, (double)initial_timeout_ms(pattern) / 1e3, 0.0);
    ev_timer_start(loop, &timers[i]);
    if (pattern == FIFO && i % EVENTS_PER_ITERATION == 0)
      ev_now_update(loop); /* later timers expire later, as in a running server */
  }
  ev_timer_init(&extra, on_ev_timer, 1.0, 0.0);

  double best = 0;
  size_t oldest = 0;
  for (int r = 0; r < REPEATS; r++) {
    uint64_t state = 0x2545f4914f6cdd1du;
    double t0 = clock_s(CLOCK_MONOTONIC), rate;
    for (size_t i = 0; i < rounds; i++) {
      if (pattern == NEWEST) {
        ev_timer_set(&extra, (double)vary_ms[i % NVARY] / 1e3, 0.0);
        ev_timer_start(loop, &extra);
        ev_timer_stop(loop, &extra);
      } else if (pattern == RANDOM) {
        ev_timer *t = &timers[pick(&state, n)];
        ev_timer_stop(loop, t);
        ev_timer_set(t, (double)vary_ms[i % NVARY] / 1e3, 0.0);
        ev_timer_start(loop, t);
      } else {
        ev_timer *t = &timers[oldest];
        oldest = oldest + 1 == n ? 0 : oldest + 1;
        ev_timer_stop(loop, t);
        ev_timer_set(t, FIFO_TIMEOUT_MS / 1e3, 0.0);
        ev_timer_start(loop, t);
        if (i % EVENTS_PER_ITERATION == 0)
          ev_now_update(loop);
      }
    }
    rate = elapsed_rate(t0, rounds);
    if (rate > best)
      best = rate;
  }
  for (size_t i = 0; i < n; i++)
    ev_timer_stop(loop, &timers[i]);
  free(timers);
  ev_loop_destroy(loop);
  return best;
}

/* -- schedule+expire ---------------------------------------------------------- */

static double wheel_schedule_expire(size_t n) {
  struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
  relock__wheel_t wheel;
  if (loop == NULL || relock__wheel_init(&wheel, loop, RELOCK__WHEEL_DEFAULT_TICK_MS,
                                          RELOCK__WHEEL_DEFAULT_SLOTS) != 0)
    die("cannot set up the wheel");
  relock__timer_t *timers = xcalloc(n, sizeof *timers);
  fired = 0;
  double t0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  for (size_t i = 0; i < n; i++) {
    relock__timer_init(&timers[i], on_wheel_timer, NULL);
    relock__timer_start(&wheel, &timers[i], next_random() % EXPIRE_SPREAD_MS);
  }
  ev_run(loop, 0); /* returns once the wheel is idle: its watcher stops */
  double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - t0;
  if (fired != n)
    die("wheel: not every timer fired");
  relock__wheel_close(&wheel);
  free(timers);
  ev_loop_destroy(loop);
  return (double)n / cpu;
}

static double ev_schedule_expire(size_t n) {
  struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
  if (loop == NULL)
    die("cannot create a loop");
  ev_timer *timers = xcalloc(n, sizeof *timers);
  fired = 0;
  ev_now_update(loop);
  double t0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  for (size_t i = 0; i < n; i++) {
    ev_timer_init(&timers[i], on_ev_timer, (next_random() % EXPIRE_SPREAD_MS) / 1e3, 0.0);
    ev_timer_start(loop, &timers[i]);
  }
  ev_run(loop, 0);
  double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - t0;
  if (fired != n)
    die("ev_timer: not every timer fired");
  free(timers);
  ev_loop_destroy(loop);
  return (double)n / cpu;
}

/* -- report ------------------------------------------------------------------- */

static void print_table(const result_t *r, size_t count) {
  printf("| case | N | wheel ops/s | ev_timer ops/s | ratio (wheel/ev_timer) |\n");
  printf("|---|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < count; i++)
    printf("| %s | %zu | %.3g | %.3g | %.2f |\n", r[i].name, r[i].n, r[i].wheel, r[i].ev,
           r[i].wheel / r[i].ev);
}

static void write_json(FILE *out, const result_t *r, size_t count, size_t rounds) {
  fprintf(out, "{\"bench\":\"wheel\",\"rounds\":%zu,\"tick_ms\":%d,\"slots\":%d,\"results\":[", rounds,
          RELOCK__WHEEL_DEFAULT_TICK_MS, RELOCK__WHEEL_DEFAULT_SLOTS);
  for (size_t i = 0; i < count; i++)
    fprintf(out, "%s{\"case\":\"%s\",\"n\":%zu,\"wheel_ops_per_s\":%.0f,\"ev_timer_ops_per_s\":%.0f,"
                 "\"ratio\":%.3f}",
            i ? "," : "", r[i].name, r[i].n, r[i].wheel, r[i].ev, r[i].wheel / r[i].ev);
  fprintf(out, "]}\n");
}

static void usage(void) {
  fprintf(stderr, "usage: bench/wheel [-m rounds] [-j file.json]\n"
                  "  -m  schedule+cancel rounds per measurement (default 1000000)\n"
                  "  -j  also write the JSON results to this file\n");
  exit(2);
}

int main(int argc, char **argv) {
  size_t rounds = 1000000;
  const char *json_path = NULL;
  int opt;
  while ((opt = getopt(argc, argv, "m:j:h")) != -1) {
    if (opt == 'm') {
      char *end;
      errno = 0;
      unsigned long long v = strtoull(optarg, &end, 10);
      if (errno || *end || v == 0)
        usage();
      rounds = (size_t)v;
    } else if (opt == 'j') {
      json_path = optarg;
    } else {
      usage();
    }
  }
  for (size_t i = 0; i < NVARY; i++)
    vary_ms[i] = 1000 + next_random() % (MAX_TIMEOUT_MS - 1000);

  result_t results[4 * NPOP];
  size_t count = 0;
  static const struct {
    const char *name;
    enum pattern pattern;
  } cases[] = {{"schedule+cancel (request timeouts: cancel oldest)", FIFO},
               {"schedule+cancel (newest: heap's best case)", NEWEST},
               {"schedule+cancel (random pending)", RANDOM}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    for (size_t p = 0; p < NPOP; p++) {
      size_t n = populations[p];
      result_t r = {cases[c].name, n, wheel_cancel(n, rounds, cases[c].pattern),
                    ev_cancel(n, rounds, cases[c].pattern)};
      results[count++] = r;
    }
  }
  for (size_t p = 0; p < NPOP; p++) {
    size_t n = populations[p];
    result_t r = {"schedule+expire", n, wheel_schedule_expire(n), ev_schedule_expire(n)};
    results[count++] = r;
  }

  print_table(results, count);
  printf("\n");
  write_json(stdout, results, count, rounds);
  if (json_path != NULL) {
    FILE *f = fopen(json_path, "w");
    if (f == NULL)
      die("cannot write the JSON file");
    write_json(f, results, count, rounds);
    fclose(f);
  }
  return 0;
}
