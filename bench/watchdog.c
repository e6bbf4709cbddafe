/* Benchmark: the watchdog at scale. One client takes LOCKS locks with the
 * watchdog lease, its watchdog timeout shortened to WATCHDOG_MS so that the
 * renewal cycle (every third of it) comes round several times in HOLD_MS,
 * and holds them:
 *
 *   bench/watchdog HOST PORT LOCKS WATCHDOG_MS HOLD_MS
 *
 * It measures, over whole renewal cycles only (from the end of one cycle's
 * batching to the end of a later one's, so every cycle counted was sent and
 * answered inside the window):
 *   - script calls per cycle (the renewal's batches) and locks renewed per
 *     cycle, from the renewal registry's counters;
 *   - the client's CPU time (getrusage) per cycle and per second of holding,
 *     and the loop iterations per cycle (how often the process woke);
 *   - heap per held lock: the heap growth from before the lock objects were
 *     made to when every lock is held and nothing is in flight (the lock
 *     object included: a hold keeps its object alive even after the caller
 *     frees it), split into the lock object and the hold (the renewal
 *     registry's entry); see bench_heap_bytes for the source.
 * Holding costs nothing between cycles (the wheel arms its timer for the
 * next cycle only), so the CPU of the default 30 s watchdog, renewed every
 * 10 s, is the CPU per cycle divided by 10 s; the JSON says so.
 *
 * It reads the client's renewal statistics, so it links the library's core. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include <relock/relock.h>

#include "bench.h"
#include "client/client_impl.h"

#define WINDOW 4096              /* acquisitions in flight at once */
#define DEFAULT_CYCLE_S 10.0     /* the default watchdog (30 s) renews every 10 s */

typedef struct snapshot {
  uint64_t cycles, batches, renewed, lost;
  double cpu;
  uint64_t ns;
  unsigned iterations;
} snapshot_t;

typedef struct bench {
  struct ev_loop *loop;
  relock_client_t *client;
  relock_lock_t **locks;
  size_t n, issued, acquired;
  uint64_t seen_cycles;
  int holding;
  snapshot_t first, last;   /* at the end of the first and the latest cycle counted */
  int have_first;
} bench_t;

static void take(bench_t *b, snapshot_t *s) {
  const relock__renewal_t *r = &b->client->renewal;
  const relock__ledger_t *l = &b->client->ledger;
  s->cycles = r->cycles;
  s->batches = r->batches;
  s->renewed = r->renewed;
  s->lost = l->lost;
  s->cpu = bench_cpu_s();
  s->ns = bench_now_ns();
  s->iterations = ev_iteration(b->loop);
}

static void issue(bench_t *b);

static void on_acquired(relock_future_t *f, void *arg) {
  bench_t *b = arg;
  if (relock_future_error(f) != 0 || !relock_future_bool(f))
    bench_die("lock", relock_future_error(f) ? relock_future_error(f) : RELOCK_ENOTACQUIRED);
  relock_future_release(f);
  if (++b->acquired == b->n)
    ev_break(b->loop, EVBREAK_ALL);
  else
    issue(b);
}

static void issue(bench_t *b) {
  if (b->issued == b->n)
    return;
  relock_future_t *f = relock_lock_lock_async(b->locks[b->issued++], 1, 0, RELOCK_INFINITE);
  if (f == NULL)
    bench_die("lock", RELOCK_ENOMEM);
  relock_future_on_done(f, on_acquired, b);
}

/* Runs after every loop iteration's callbacks: a cycle that ran in this
 * iteration has sent all its batches by now (the replies of the cycle before
 * came long ago). From one such moment to a later one, the window holds as
 * many cycles' sending as their replies. */
static void on_prepare(struct ev_loop *loop, ev_prepare *p, int revents) {
  (void)loop;
  (void)revents;
  bench_t *b = p->data;
  const relock__renewal_t *r = &b->client->renewal;
  if (!b->holding || r->cycles == b->seen_cycles)
    return;
  b->seen_cycles = r->cycles;
  if (!b->have_first) {
    take(b, &b->first);
    b->have_first = 1;
  } else {
    take(b, &b->last);
  }
}

static int idle(const bench_t *b) { return b->client->redis.cmd.ninflight == 0 && b->client->redis.cmd.nwaiting == 0; }

static void on_idle_check(struct ev_loop *loop, ev_prepare *p, int revents) {
  (void)revents;
  if (idle(p->data))
    ev_break(loop, EVBREAK_ALL);
}

/* Runs the loop until nothing is in flight (a renewal cycle may have come
 * during the acquisitions), so that the heap holds the holds and nothing
 * transient. */
static void run_until_idle(bench_t *b) {
  if (idle(b))
    return;
  ev_prepare p;
  ev_prepare_init(&p, on_idle_check);
  p.data = b;
  ev_prepare_start(b->loop, &p);
  ev_run(b->loop, 0);
  ev_prepare_stop(b->loop, &p);
}

static void on_hold_over(struct ev_loop *loop, ev_timer *t, int revents) {
  (void)t;
  (void)revents;
  ev_break(loop, EVBREAK_ALL);
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: %s HOST PORT LOCKS WATCHDOG_MS HOLD_MS\n", argv[0]);
    return 2;
  }
  bench_t b = {0};
  b.n = (size_t)atol(argv[3]);
  int64_t watchdog_ms = atoll(argv[4]);
  double hold_s = (double)atoll(argv[5]) / 1e3;
  if (b.n == 0 || watchdog_ms < 3 || hold_s <= 0) {
    fprintf(stderr, "bench/watchdog: LOCKS, WATCHDOG_MS (>= 3) and HOLD_MS must be positive\n");
    return 2;
  }
  b.client = bench_client(bench_loop(), argv[1], atoi(argv[2]), watchdog_ms); /* it runs the loop itself */
  b.loop = relock_client_loop(b.client);
  bench_command(b.client, "PING"); /* connected */
  if ((b.locks = calloc(b.n, sizeof(*b.locks))) == NULL)
    bench_die("locks", RELOCK_ENOMEM);

  long long heap0 = bench_heap_bytes();
  for (size_t i = 0; i < b.n; i++) {
    char name[64];
    snprintf(name, sizeof name, "bench:watchdog:%zu", i);
    if ((b.locks[i] = relock_lock_new(b.client, name, NULL)) == NULL)
      bench_die("lock_new", RELOCK_ENOMEM);
  }
  long long heap1 = bench_heap_bytes();
  uint64_t t_acquire = bench_now_ns();
  for (size_t i = 0; i < WINDOW; i++)
    issue(&b);
  ev_run(b.loop, 0);
  double acquire_s = (double)(bench_now_ns() - t_acquire) / 1e9;
  run_until_idle(&b);
  long long heap2 = bench_heap_bytes();

  ev_prepare prepare;
  ev_prepare_init(&prepare, on_prepare);
  prepare.data = &b;
  ev_prepare_start(b.loop, &prepare);
  ev_timer over;
  ev_timer_init(&over, on_hold_over, hold_s, 0);
  ev_now_update(b.loop);
  ev_timer_start(b.loop, &over);
  b.seen_cycles = b.client->renewal.cycles;
  b.holding = 1;
  ev_run(b.loop, 0);
  ev_prepare_stop(b.loop, &prepare);

  uint64_t cycles = b.have_first ? b.last.cycles - b.first.cycles : 0;
  if (cycles == 0) {
    fprintf(stderr, "bench/watchdog: fewer than two renewal cycles in %.1f s: hold longer\n", hold_s);
    return 1;
  }
  double span_s = (double)(b.last.ns - b.first.ns) / 1e9, cpu_s = b.last.cpu - b.first.cpu;
  double cpu_per_cycle = cpu_s / (double)cycles;
  double calls_per_cycle = (double)(b.last.batches - b.first.batches) / (double)cycles;
  printf("{\"locks\":%zu,\"watchdog_ms\":%lld,\"acquire_s\":%.2f,\"cycles\":%llu,\"span_s\":%.2f,"
         "\"calls_per_cycle\":%.1f,\"calls_per_100_locks\":%.3f,\"renewed_per_cycle\":%.0f,\"lost\":%llu,"
         "\"iterations_per_cycle\":%.1f,\"cpu_per_cycle_ms\":%.2f,\"cpu_fraction\":%.4f,"
         "\"cpu_fraction_default_30s\":%.5f,\"extrapolation\":\"cpu_per_cycle / 10 s\","
         "\"heap_per_lock_bytes\":%.1f,\"heap_per_lock_object_bytes\":%.1f,\"heap_per_hold_bytes\":%.1f,\"heap_source\":\"%s\"}\n",
         b.n, (long long)watchdog_ms, acquire_s, (unsigned long long)cycles, span_s, calls_per_cycle,
         calls_per_cycle / ((double)b.n / 100.0), (double)(b.last.renewed - b.first.renewed) / (double)cycles,
         (unsigned long long)b.last.lost, (double)(b.last.iterations - b.first.iterations) / (double)cycles,
         cpu_per_cycle * 1e3, cpu_s / span_s, cpu_per_cycle / DEFAULT_CYCLE_S,
         (double)(heap2 - heap0) / (double)b.n, (double)(heap1 - heap0) / (double)b.n, (double)(heap2 - heap1) / (double)b.n, bench_heap_source());
  for (size_t i = 0; i < b.n; i++)
    relock_lock_free(b.locks[i]);
  free(b.locks);
  relock_client_free(b.client);
  return b.last.lost == 0 ? 0 : 1;
}
