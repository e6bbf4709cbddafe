/* Threaded-mode benchmarks against a running Redis (bench/run's part
 * "threads" prints them next to references measured in the same run): a
 * client made without a loop, called from several threads of the program.
 *
 *   bench/threads HOST PORT pairs THREADS NAMES SECONDS blocking|async
 *       one threaded client, THREADS threads, each with its own NAMES /
 *       THREADS lock names, doing uncontended lock+unlock pairs for SECONDS
 *       after a warm-up: blocking, relock_lock_lock / relock_lock_unlock on
 *       one name after another; async, all its names' acquisitions in
 *       flight at once and waited for, then all their releases. Pairs/s,
 *       with the client's and the server's CPU time meanwhile.
 *   bench/threads HOST PORT contend OWNERS SECTIONS PAUSE_US
 *       OWNERS x SECTIONS critical sections on ONE name, each a non-atomic
 *       GET/SET increment of a Redis counter and of a counter in memory
 *       (both must end exact), with PAUSE_US asleep outside the lock between
 *       sections; twice: OWNERS threads blocking on one threaded client,
 *       then OWNERS owners chained asynchronously on ONE embedded client on
 *       this program's loop (one thread; the pause is an ev_timer).
 *       Acquisitions/s, owner switches, handoff latency (a release to the
 *       next holder's acquisition) of each, prefixed threaded_ / embedded_.
 *   bench/threads HOST PORT overhead CALLS ROUNDS
 *       ROUNDS rounds, each CALLS blocking relock_lock_is_locked calls from
 *       this (non-loop) thread on a threaded client, then CALLS
 *       relock_lock_is_locked_async calls chained on an embedded client's
 *       loop (the same command, no thread crossed): p50 of each and the
 *       difference, the cost of crossing to the loop thread and back.
 *
 * Each prints one JSON object on stdout. It uses the public API only. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <ev.h>

#include <relock/relock.h>

#include "bench.h"

#define WARMUP_S 0.5
#define MAX_THREADS 64

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0)
    ;
}

static void sleep_us(unsigned us) {
  struct timespec ts = {0, (long)us * 1000};
  while (nanosleep(&ts, &ts) != 0)
    ;
}

/* Waits for a command's future (from any thread but its loop's callbacks). */
static relock_future_t *waited(const char *what, relock_future_t *f) {
  int r = f != NULL ? relock_future_wait(f, 30000) : RELOCK_ENOMEM;
  if (r != 0)
    bench_die(what, r);
  return f;
}

/* The server's CPU time so far (INFO cpu), -1 if it cannot be read. */
static double server_cpu(relock_client_t *c) {
  relock_future_t *f = waited("INFO cpu", relock_client_commandf_async(c, "INFO cpu"));
  double total = bench_info_cpu(relock_future_reply(f));
  relock_future_release(f);
  return total;
}

/* Context switches of the whole process so far (every thread's). */
static double context_switches(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_nvcsw + (double)ru.ru_nivcsw;
}

static relock_lock_t *lock_new(relock_client_t *c, const char *name) {
  relock_error_t err;
  relock_lock_t *l = relock_lock_new(c, name, &err);
  if (l == NULL)
    bench_die("lock_new", err.code);
  return l;
}

/* -- uncontended pairs from many threads --------------------------------------*/

typedef struct pairs_thread {
  relock_client_t *client;
  size_t first, names; /* its names: bench:threads:pairs:first .. first+names-1 */
  int async;
  int *stop;
  uint64_t pairs;      /* read by the main thread while it runs */
  char pad[64];        /* one cache line each */
} pairs_thread_t;

static void *pairs_blocking(pairs_thread_t *t, relock_lock_t **locks) {
  for (size_t i = 0; !__atomic_load_n(t->stop, __ATOMIC_RELAXED); i = (i + 1) % t->names) {
    int r = relock_lock_lock(locks[i], RELOCK_INFINITE);
    if (r != 0)
      bench_die("lock", r);
    if ((r = relock_lock_unlock(locks[i])) != 0)
      bench_die("unlock", r);
    __atomic_add_fetch(&t->pairs, 1, __ATOMIC_RELAXED);
  }
  return NULL;
}

static int wait_bool(relock_future_t *f, const char *what) {
  int r = f != NULL ? relock_future_wait(f, 30000) : RELOCK_ENOMEM;
  if (r != 0)
    bench_die(what, r);
  int v = relock_future_bool(f);
  relock_future_release(f);
  return v;
}

/* Every name's acquisition in flight at once, then every release: the
 * thread's names pipelined like bench/lock's chains, NAMES deep. */
static void *pairs_async(pairs_thread_t *t, relock_lock_t **locks) {
  relock_future_t *f[MAX_THREADS];
  uint64_t owner = relock_thread_owner();
  while (!__atomic_load_n(t->stop, __ATOMIC_RELAXED)) {
    for (size_t i = 0; i < t->names; i++)
      f[i] = relock_lock_lock_async(locks[i], owner, RELOCK_INFINITE, RELOCK_INFINITE);
    for (size_t i = 0; i < t->names; i++)
      if (!wait_bool(f[i], "lock"))
        bench_die("lock not acquired", RELOCK_ENOTACQUIRED);
    for (size_t i = 0; i < t->names; i++)
      f[i] = relock_lock_unlock_async(locks[i], owner);
    for (size_t i = 0; i < t->names; i++)
      if (!wait_bool(f[i], "unlock"))
        bench_die("unlock left the lock held", RELOCK_EPROTO);
    __atomic_add_fetch(&t->pairs, t->names, __ATOMIC_RELAXED);
  }
  return NULL;
}

static void *pairs_main(void *arg) {
  pairs_thread_t *t = arg;
  relock_lock_t *locks[MAX_THREADS];
  for (size_t i = 0; i < t->names; i++) {
    char name[64];
    snprintf(name, sizeof name, "bench:threads:pairs:%zu", t->first + i);
    locks[i] = lock_new(t->client, name);
  }
  if (t->async)
    pairs_async(t, locks);
  else
    pairs_blocking(t, locks);
  for (size_t i = 0; i < t->names; i++)
    relock_lock_free(locks[i]);
  return NULL;
}

static uint64_t pairs_sum(pairs_thread_t *t, int n) {
  uint64_t sum = 0;
  for (int i = 0; i < n; i++)
    sum += __atomic_load_n(&t[i].pairs, __ATOMIC_RELAXED);
  return sum;
}

static int pairs(const char *host, int port, int threads, size_t names, double seconds, int async) {
  if (threads < 1 || threads > MAX_THREADS || names % (size_t)threads != 0 || names / (size_t)threads > MAX_THREADS) {
    fprintf(stderr, "pairs: THREADS must divide NAMES, at most %d each\n", MAX_THREADS);
    return 2;
  }
  relock_client_t *c = bench_client(NULL, host, port, 0);
  bench_command(c, "PING"); /* connected */
  int stop = 0;
  pairs_thread_t t[MAX_THREADS];
  pthread_t tid[MAX_THREADS];
  for (int i = 0; i < threads; i++) {
    t[i] = (pairs_thread_t){.client = c, .names = names / (size_t)threads, .async = async, .stop = &stop};
    t[i].first = (size_t)i * t[i].names;
    if (pthread_create(&tid[i], NULL, pairs_main, &t[i]) != 0)
      bench_die("pthread_create", RELOCK_ENOMEM);
  }
  sleep_s(WARMUP_S);
  double srv0 = server_cpu(c), cpu0 = bench_cpu_s(), cs0 = context_switches();
  uint64_t n0 = pairs_sum(t, threads), t0 = bench_now_ns();
  sleep_s(seconds);
  uint64_t n1 = pairs_sum(t, threads), t1 = bench_now_ns();
  double cpu1 = bench_cpu_s(), cs1 = context_switches(), srv1 = server_cpu(c);
  __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < threads; i++)
    pthread_join(tid[i], NULL);
  double span = (double)(t1 - t0) / 1e9;
  printf("{\"threads\":%d,\"names\":%zu,\"mode\":\"%s\",\"seconds\":%.2f,\"pairs\":%llu,\"pairs_per_s\":%.0f,"
         "\"client_cpu\":%.2f,\"server_cpu\":%.2f,\"context_switches_per_pair\":%.1f}\n",
         threads, names, async ? "async" : "blocking", span, (unsigned long long)(n1 - n0),
         (double)(n1 - n0) / span, (cpu1 - cpu0) / span, srv0 >= 0 && srv1 >= 0 ? (srv1 - srv0) / span : -1.0,
         n1 > n0 ? (cs1 - cs0) / (double)(n1 - n0) : 0.0);
  relock_client_free(c);
  return 0;
}

/* -- contention on one name ----------------------------------------------------*/

typedef struct section {
  uint32_t owner;
  uint64_t asked; /* acquire called */
  uint64_t got;   /* acquired */
  uint64_t freed; /* release about to be sent */
} section_t;

typedef struct contend {
  relock_client_t *client;
  relock_lock_t *lock;
  size_t sections; /* per owner */
  unsigned pause_us;
  long memory_counter; /* incremented non-atomically under the lock */
  section_t *s;        /* owners x sections, owner-major */
} contend_t;

typedef struct stats {
  double per_s, handoff_p50_us, handoff_p99_us;
  size_t switches, handoffs;
  long long counter;
  long memory;
} stats_t;

/* As bench/lock's handoff: in acquisition order, consecutive holders and
 * the real handoffs (the next holder already waiting at the release). */
static stats_t analyse(section_t *s, size_t n) {
  stats_t st = {0};
  for (size_t i = 1; i < n; i++) /* insertion sort by got: nearly sorted per owner */
    for (size_t j = i; j > 0 && s[j - 1].got > s[j].got; j--) {
      section_t t = s[j];
      s[j] = s[j - 1];
      s[j - 1] = t;
    }
  uint64_t *hand = malloc(n * sizeof(*hand));
  if (hand == NULL)
    bench_die("contend", RELOCK_ENOMEM);
  for (size_t i = 1; i < n; i++)
    if (s[i].owner != s[i - 1].owner) {
      st.switches++;
      if (s[i].asked < s[i - 1].freed && s[i].got > s[i - 1].freed)
        hand[st.handoffs++] = s[i].got - s[i - 1].freed;
    }
  qsort(hand, st.handoffs, sizeof(*hand), bench_cmp_u64);
  st.per_s = (double)n / ((double)(s[n - 1].freed - s[0].got) / 1e9);
  st.handoff_p50_us = bench_pct_us(hand, st.handoffs, 0.50);
  st.handoff_p99_us = bench_pct_us(hand, st.handoffs, 0.99);
  free(hand);
  return st;
}

static long long redis_counter(relock_client_t *c) {
  relock_future_t *f = waited("GET", relock_client_commandf_async(c, "GET bench:threads:counter"));
  const relock_reply_t *reply = relock_future_reply(f);
  long long v = reply != NULL && reply->type == RELOCK_REPLY_STRING ? atoll(reply->str) : 0;
  relock_future_release(f);
  return v;
}

static void reset(relock_client_t *c) {
  relock_future_release(
      waited("DEL", relock_client_commandf_async(c, "DEL bench:threads:counter bench:threads:contend")));
}

/* threaded: one thread per owner, blocking calls */

typedef struct owner_thread {
  contend_t *ct;
  uint32_t index;
} owner_thread_t;

static void *owner_main(void *arg) {
  owner_thread_t *o = arg;
  contend_t *ct = o->ct;
  for (size_t i = 0; i < ct->sections; i++) {
    section_t *s = &ct->s[o->index * ct->sections + i];
    s->owner = o->index;
    s->asked = bench_now_ns();
    int r = relock_lock_lock(ct->lock, RELOCK_INFINITE);
    if (r != 0)
      bench_die("lock", r);
    s->got = bench_now_ns();
    long long v = redis_counter(ct->client);
    relock_future_release(
        waited("SET", relock_client_commandf_async(ct->client, "SET bench:threads:counter %lld", v + 1)));
    long m = ct->memory_counter; /* a second holder would tear this */
    ct->memory_counter = m + 1;
    s->freed = bench_now_ns();
    if ((r = relock_lock_unlock(ct->lock)) != 0)
      bench_die("unlock", r);
    if (ct->pause_us > 0)
      sleep_us(ct->pause_us);
  }
  return NULL;
}

static stats_t contend_threaded(const char *host, int port, int owners, size_t sections, unsigned pause_us) {
  contend_t ct = {.sections = sections, .pause_us = pause_us};
  ct.client = bench_client(NULL, host, port, 0);
  reset(ct.client);
  ct.lock = lock_new(ct.client, "bench:threads:contend");
  size_t n = (size_t)owners * sections;
  ct.s = calloc(n, sizeof(*ct.s));
  owner_thread_t o[MAX_THREADS];
  pthread_t tid[MAX_THREADS];
  if (ct.s == NULL)
    bench_die("contend", RELOCK_ENOMEM);
  for (int i = 0; i < owners; i++) {
    o[i] = (owner_thread_t){&ct, (uint32_t)i};
    if (pthread_create(&tid[i], NULL, owner_main, &o[i]) != 0)
      bench_die("pthread_create", RELOCK_ENOMEM);
  }
  for (int i = 0; i < owners; i++)
    pthread_join(tid[i], NULL);
  stats_t st = analyse(ct.s, n);
  st.counter = redis_counter(ct.client);
  st.memory = ct.memory_counter;
  free(ct.s);
  relock_lock_free(ct.lock);
  relock_client_free(ct.client);
  return st;
}

/* embedded: the owners as asynchronous chains on one loop */

typedef struct chain {
  contend_t *ct;
  struct ev_loop *loop;
  uint32_t owner;
  size_t done;
  section_t *s; /* the current one */
  ev_timer pause;
  int *active;
} chain_t;

static void chain_start(chain_t *ch);

static void on_released(relock_future_t *f, void *arg) {
  chain_t *ch = arg;
  if (relock_future_error(f) != 0)
    bench_die("unlock", relock_future_error(f));
  relock_future_release(f);
  if (++ch->done == ch->ct->sections) {
    if (--*ch->active == 0)
      ev_break(ch->loop, EVBREAK_ALL);
  } else if (ch->ct->pause_us > 0) {
    ev_timer_set(&ch->pause, ch->ct->pause_us / 1e6, 0);
    ev_timer_start(ch->loop, &ch->pause);
  } else {
    chain_start(ch);
  }
}

static void on_set(relock_future_t *f, void *arg) {
  chain_t *ch = arg;
  if (relock_future_error(f) != 0)
    bench_die("SET", relock_future_error(f));
  relock_future_release(f);
  ch->ct->memory_counter++;
  ch->s->freed = bench_now_ns();
  relock_future_t *r = relock_lock_unlock_async(ch->ct->lock, ch->owner + 1);
  if (r == NULL)
    bench_die("unlock", RELOCK_ENOMEM);
  relock_future_on_done(r, on_released, ch);
}

static void on_get(relock_future_t *f, void *arg) {
  chain_t *ch = arg;
  if (relock_future_error(f) != 0)
    bench_die("GET", relock_future_error(f));
  const relock_reply_t *reply = relock_future_reply(f);
  long long v = reply->type == RELOCK_REPLY_STRING ? atoll(reply->str) : 0;
  relock_future_release(f);
  relock_future_t *g = relock_client_commandf_async(ch->ct->client, "SET bench:threads:counter %lld", v + 1);
  if (g == NULL)
    bench_die("SET", RELOCK_ENOMEM);
  relock_future_on_done(g, on_set, ch);
}

static void on_acquired(relock_future_t *f, void *arg) {
  chain_t *ch = arg;
  if (relock_future_error(f) != 0 || !relock_future_bool(f))
    bench_die("lock", relock_future_error(f) ? relock_future_error(f) : RELOCK_ENOTACQUIRED);
  relock_future_release(f);
  ch->s->got = bench_now_ns();
  relock_future_t *g = relock_client_commandf_async(ch->ct->client, "GET bench:threads:counter");
  if (g == NULL)
    bench_die("GET", RELOCK_ENOMEM);
  relock_future_on_done(g, on_get, ch);
}

static void chain_start(chain_t *ch) {
  ch->s = &ch->ct->s[ch->owner * ch->ct->sections + ch->done];
  ch->s->owner = ch->owner;
  ch->s->asked = bench_now_ns();
  relock_future_t *f = relock_lock_lock_async(ch->ct->lock, ch->owner + 1, RELOCK_INFINITE, RELOCK_INFINITE);
  if (f == NULL)
    bench_die("lock", RELOCK_ENOMEM);
  relock_future_on_done(f, on_acquired, ch);
}

static void on_pause_over(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  chain_start(w->data);
}

static stats_t contend_embedded(const char *host, int port, int owners, size_t sections, unsigned pause_us) {
  struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
  if (loop == NULL)
    bench_die("ev_loop_new", RELOCK_ENOMEM);
  contend_t ct = {.sections = sections, .pause_us = pause_us};
  ct.client = bench_client(loop, host, port, 0);
  reset(ct.client);
  ct.lock = lock_new(ct.client, "bench:threads:contend");
  size_t n = (size_t)owners * sections;
  ct.s = calloc(n, sizeof(*ct.s));
  chain_t *ch = calloc((size_t)owners, sizeof(*ch));
  if (ct.s == NULL || ch == NULL)
    bench_die("contend", RELOCK_ENOMEM);
  int active = owners;
  for (int i = 0; i < owners; i++) {
    ch[i] = (chain_t){.ct = &ct, .loop = loop, .owner = (uint32_t)i, .active = &active};
    ev_timer_init(&ch[i].pause, on_pause_over, 0, 0);
    ch[i].pause.data = &ch[i];
  }
  for (int i = 0; i < owners; i++)
    chain_start(&ch[i]);
  ev_run(loop, 0);
  stats_t st = analyse(ct.s, n);
  st.counter = redis_counter(ct.client);
  st.memory = ct.memory_counter;
  free(ch);
  free(ct.s);
  relock_lock_free(ct.lock);
  relock_client_free(ct.client);
  ev_loop_destroy(loop);
  return st;
}

static void print_stats(const char *prefix, const stats_t *st) {
  printf("\"%s_acquisitions_per_s\":%.0f,\"%s_owner_switches\":%zu,\"%s_handoffs\":%zu,"
         "\"%s_handoff_p50_us\":%.1f,\"%s_handoff_p99_us\":%.1f,\"%s_counter\":%lld,\"%s_memory_counter\":%ld",
         prefix, st->per_s, prefix, st->switches, prefix, st->handoffs, prefix, st->handoff_p50_us, prefix,
         st->handoff_p99_us, prefix, st->counter, prefix, st->memory);
}

static int contend(const char *host, int port, int owners, size_t sections, unsigned pause_us) {
  if (owners < 1 || owners > MAX_THREADS || sections < 1) {
    fprintf(stderr, "contend: 1 to %d owners, at least 1 section\n", MAX_THREADS);
    return 2;
  }
  stats_t t = contend_threaded(host, port, owners, sections, pause_us);
  stats_t e = contend_embedded(host, port, owners, sections, pause_us);
  long long n = (long long)owners * (long long)sections;
  int exact = t.counter == n && t.memory == n && e.counter == n && e.memory == n;
  printf("{\"owners\":%d,\"sections\":%lld,\"pause_us\":%u,", owners, n, pause_us);
  print_stats("threaded", &t);
  putchar(',');
  print_stats("embedded", &e);
  printf(",\"exact\":%s}\n", exact ? "true" : "false");
  return exact ? 0 : 1;
}

/* -- the cost of crossing threads -------------------------------------------*/

typedef struct probe {
  relock_lock_t *lock;
  struct ev_loop *loop;
  uint64_t *t;
  size_t n, i;
  uint64_t t0;
} probe_t;

static void probe_next(probe_t *p);

static void on_probe(relock_future_t *f, void *arg) {
  probe_t *p = arg;
  if (relock_future_error(f) != 0)
    bench_die("is_locked", relock_future_error(f));
  relock_future_release(f);
  p->t[p->i++] = bench_now_ns() - p->t0;
  if (p->i == p->n)
    ev_break(p->loop, EVBREAK_ALL);
  else
    probe_next(p);
}

static void probe_next(probe_t *p) {
  p->t0 = bench_now_ns();
  relock_future_t *f = relock_lock_is_locked_async(p->lock);
  if (f == NULL)
    bench_die("is_locked", RELOCK_ENOMEM);
  relock_future_on_done(f, on_probe, p);
}

/* calls chained on the embedded client's loop, timed into t */
static void embedded_calls(relock_lock_t *l, struct ev_loop *loop, uint64_t *t, size_t calls) {
  probe_t p = {.lock = l, .loop = loop, .t = t, .n = calls};
  probe_next(&p);
  ev_run(loop, 0);
}

/* blocking calls from this thread on the threaded client, timed into t */
static void threaded_calls(relock_lock_t *l, uint64_t *t, size_t calls) {
  for (size_t i = 0; i < calls; i++) {
    int locked, r;
    uint64_t t0 = bench_now_ns();
    if ((r = relock_lock_is_locked(l, &locked)) != 0)
      bench_die("is_locked", r);
    t[i] = bench_now_ns() - t0;
  }
}

static int overhead(const char *host, int port, size_t calls, int rounds) {
  if (calls < 1 || rounds < 1) {
    fprintf(stderr, "overhead: at least 1 call and 1 round\n");
    return 2;
  }
  struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
  if (loop == NULL)
    bench_die("ev_loop_new", RELOCK_ENOMEM);
  relock_client_t *tc = bench_client(NULL, host, port, 0), *ec = bench_client(loop, host, port, 0);
  relock_lock_t *tl = lock_new(tc, "bench:threads:probe"), *el = lock_new(ec, "bench:threads:probe");
  size_t n = calls * (size_t)rounds;
  uint64_t *tt = malloc((n > 500 ? n : 500) * sizeof(*tt)), *et = malloc((n > 500 ? n : 500) * sizeof(*et));
  if (tt == NULL || et == NULL)
    bench_die("overhead", RELOCK_ENOMEM);
  threaded_calls(tl, tt, 500); /* warm-up: connected, caches warm */
  embedded_calls(el, loop, et, 500);
  for (int r = 0; r < rounds; r++) {
    threaded_calls(tl, tt + (size_t)r * calls, calls);
    embedded_calls(el, loop, et + (size_t)r * calls, calls);
  }
  double tsum = 0, esum = 0;
  for (size_t i = 0; i < n; i++) {
    tsum += (double)tt[i];
    esum += (double)et[i];
  }
  qsort(tt, n, sizeof(*tt), bench_cmp_u64);
  qsort(et, n, sizeof(*et), bench_cmp_u64);
  double t50 = bench_pct_us(tt, n, 0.50), e50 = bench_pct_us(et, n, 0.50);
  printf("{\"calls\":%zu,\"threaded_p50_us\":%.1f,\"threaded_p99_us\":%.1f,\"threaded_mean_us\":%.1f,"
         "\"embedded_p50_us\":%.1f,\"embedded_p99_us\":%.1f,\"embedded_mean_us\":%.1f,\"overhead_p50_us\":%.1f}\n",
         n, t50, bench_pct_us(tt, n, 0.99), tsum / (double)n / 1e3, e50, bench_pct_us(et, n, 0.99),
         esum / (double)n / 1e3, t50 - e50);
  free(tt);
  free(et);
  relock_lock_free(tl);
  relock_lock_free(el);
  relock_client_free(tc);
  relock_client_free(ec);
  ev_loop_destroy(loop);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 8 && strcmp(argv[3], "pairs") == 0 && (strcmp(argv[7], "blocking") == 0 || strcmp(argv[7], "async") == 0))
    return pairs(argv[1], atoi(argv[2]), atoi(argv[4]), (size_t)atol(argv[5]), atof(argv[6]),
                 strcmp(argv[7], "async") == 0);
  if (argc >= 7 && strcmp(argv[3], "contend") == 0)
    return contend(argv[1], atoi(argv[2]), atoi(argv[4]), (size_t)atol(argv[5]), (unsigned)atoi(argv[6]));
  if (argc >= 6 && strcmp(argv[3], "overhead") == 0)
    return overhead(argv[1], atoi(argv[2]), (size_t)atol(argv[4]), atoi(argv[5]));
  fprintf(stderr,
          "usage: %s HOST PORT pairs THREADS NAMES SECONDS blocking|async | contend OWNERS SECTIONS PAUSE_US\n"
          "       | overhead CALLS ROUNDS\n",
          argv[0]);
  return 2;
}
