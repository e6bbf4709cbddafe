/* Lock benchmarks against a running Redis (bench/run starts a private one
 * and prints the figures next to references measured in the same run):
 *
 *   bench/lock HOST PORT latency PAIRS
 *       one owner, sequential lock+unlock pairs on one key: p50/p99/mean in us
 *   bench/lock HOST PORT throughput NAMES SECONDS
 *       one client, NAMES independent locks each driven by its own owner in
 *       an asynchronous chain acquire -> release -> acquire ... (watchdog
 *       lease, as lock() takes by default): pairs/s over SECONDS after a
 *       warm-up, with the client's and the server's CPU time meanwhile
 *   bench/lock HOST PORT handoff PROCS SECTIONS PAUSE_US
 *       PROCS processes x SECTIONS critical sections on ONE name, each a
 *       non-atomic GET/SET increment (the final counter must be exact), with
 *       PAUSE_US of work outside the lock between sections: acquisitions/s,
 *       owner switches, wait p99/max, and handoff latency (a release to the
 *       next holder's acquisition, across processes: CLOCK_MONOTONIC is
 *       system-wide).
 *   bench/lock HOST PORT waiters NAMES PER_NAME
 *       NAMES locks held by a second client, PER_NAME pending acquires on
 *       each from one client: its subscriptions (its own count, and Redis's
 *       PUBSUB NUMSUB per channel), heap per waiter, then the holders
 *       release and every waiter acquires and releases at once: the time
 *       from the last holder's release to the last acquisition.
 *
 * latency and handoff take the lock's kind from $BENCH_LOCK_KIND: lock (the
 * default), fair, read, write, fenced or spin.
 *
 * Each prints one JSON object on stdout. The waiters mode reads the client's
 * insides (its subscription count and pending timers), so this program links
 * the library's core rather than the installed library. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

#include <relock/relock.h>

#include "bench.h"
#include "client/client_impl.h" /* the waiters' subscriptions and pending timers */

/* Embedded on bench_loop(): throughput and waiters run the loop themselves
 * and read the client's insides; the latencies are measured the same way,
 * so every figure compares with the others and with earlier results. */
static relock_client_t *open_client(const char *host, int port) {
  return bench_client(bench_loop(), host, port, 0);
}

/* The kind latency and handoff measure: $BENCH_LOCK_KIND. */
static relock_lock_t *kind_lock(relock_client_t *c, const char *name) {
  static const struct {
    const char *kind;
    relock_lock_t *(*make)(relock_client_t *, const char *, relock_error_t *);
  } kinds[] = {{"lock", relock_lock_new},          {"fair", relock_fair_lock_new},
               {"read", relock_read_lock_new},     {"write", relock_write_lock_new},
               {"fenced", relock_fenced_lock_new}, {"spin", relock_spin_lock_new}};
  const char *want = getenv("BENCH_LOCK_KIND");
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (want == NULL || strcmp(want, kinds[i].kind) == 0)
      return kinds[i].make(c, name, NULL);
  fprintf(stderr, "BENCH_LOCK_KIND: no kind %s (lock fair read write fenced spin)\n", want);
  exit(2);
}

/* -- uncontended latency ----------------------------------------------------*/

static int latency(const char *host, int port, size_t pairs) {
  relock_client_t *c = open_client(host, port);
  relock_lock_t *l = kind_lock(c, "bench:latency");
  uint64_t *t = malloc(pairs * sizeof(*t));
  for (size_t i = 0; i < pairs + 1000; i++) { /* 1000 to warm up */
    uint64_t t0 = bench_now_ns();
    int r = relock_lock_lock(l, RELOCK_INFINITE);
    if (r != 0)
      bench_die("lock", r);
    if ((r = relock_lock_unlock(l)) != 0)
      bench_die("unlock", r);
    if (i >= 1000)
      t[i - 1000] = bench_now_ns() - t0;
  }
  double sum = 0;
  for (size_t i = 0; i < pairs; i++)
    sum += (double)t[i];
  qsort(t, pairs, sizeof(*t), bench_cmp_u64);
  printf("{\"pairs\":%zu,\"p50_us\":%.1f,\"p99_us\":%.1f,\"mean_us\":%.1f}\n", pairs, bench_pct_us(t, pairs, 0.50),
         bench_pct_us(t, pairs, 0.99), sum / (double)pairs / 1e3);
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
  uint64_t until = bench_now_ns() + (uint64_t)us * 1000u;
  while (bench_now_ns() < until)
    ;
}

static void worker(const char *host, int port, uint32_t proc, size_t sections, unsigned pause_us, int fd) {
  /* A forked child: a loop of its own (the parent's bench_loop shares its
   * epoll set with the parent). */
  struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
  if (loop == NULL)
    exit(1);
  relock_client_t *c = bench_client(loop, host, port, 0);
  relock_lock_t *l = kind_lock(c, "bench:handoff");
  for (size_t i = 0; i < sections; i++) {
    section_t s = {proc, bench_now_ns(), 0, 0};
    int r = relock_lock_lock(l, RELOCK_INFINITE);
    if (r != 0)
      bench_die("lock", r);
    s.got = bench_now_ns();
    relock_future_t *f = relock_client_commandf_async(c, "GET bench:counter");
    if ((r = relock_future_wait(f, 10000)) != 0)
      bench_die("GET", r);
    const relock_reply_t *reply = relock_future_reply(f);
    long long v = reply->type == RELOCK_REPLY_STRING ? atoll(reply->str) : 0;
    relock_future_release(f);
    f = relock_client_commandf_async(c, "SET bench:counter %lld", v + 1);
    if ((r = relock_future_wait(f, 10000)) != 0)
      bench_die("SET", r);
    relock_future_release(f);
    /* the release is on the wire now: what the next holder waits from */
    s.freed = bench_now_ns();
    if ((r = relock_lock_unlock(l)) != 0)
      bench_die("unlock", r);
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
  relock_future_t *f = relock_client_commandf_async(c, "DEL bench:counter bench:handoff redisson_lock_queue:{bench:handoff} "
                                                      "redisson_lock_timeout:{bench:handoff}");
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
  qsort(waits, n, sizeof(*waits), bench_cmp_u64);
  qsort(hand, nhand, sizeof(*hand), bench_cmp_u64);
  printf("{\"procs\":%d,\"sections\":%zu,\"pause_us\":%u,\"counter\":%lld,\"exact\":%s,"
         "\"acquisitions_per_s\":%.0f,\"owner_switches\":%zu,\"wait_p99_us\":%.1f,\"wait_max_us\":%.1f,"
         "\"handoffs\":%zu,\"handoff_p50_us\":%.1f,\"handoff_p99_us\":%.1f}\n",
         procs, n, pause_us, counter, counter == (long long)n ? "true" : "false", (double)n / span_s, switches,
         bench_pct_us(waits, n, 0.99), (double)waits[n - 1] / 1e3, nhand, bench_pct_us(hand, nhand, 0.50),
         bench_pct_us(hand, nhand, 0.99));
  free(waits);
  free(hand);
  free(s);
  return counter == (long long)n ? 0 : 1;
}

/* -- throughput -------------------------------------------------------------*/

#define WARMUP_S 0.5

typedef struct tp tp_t;

typedef struct chain { /* one lock name, driven by its own owner */
  tp_t *tp;
  relock_lock_t *lock;
  uint64_t owner;
} chain_t;

struct tp {
  struct ev_loop *loop;
  relock_client_t *client;
  int running;        /* chains start another pair while set */
  size_t active;      /* chains not stopped yet */
  int info_due;       /* INFO replies still to come */
  uint64_t pairs;     /* completed lock+unlock pairs */
  uint64_t pairs0, pairs1, t0, t1;
  double cpu0, cpu1, srv0, srv1;
};

static void chain_start(chain_t *ch);

/* Done once every chain has stopped and both INFO replies are in, in
 * whichever order they come. */
static void tp_maybe_done(tp_t *tp) {
  if (tp->active == 0 && tp->info_due == 0)
    ev_break(tp->loop, EVBREAK_ALL);
}

static void on_tp_info(void *arg) { tp_maybe_done(arg); }

static void on_tp_released(relock_future_t *f, void *arg) {
  chain_t *ch = arg;
  tp_t *tp = ch->tp;
  int err = relock_future_error(f);
  if (err != 0)
    bench_die("unlock", err);
  if (!relock_future_bool(f))
    bench_die("unlock left the lock held", RELOCK_EPROTO);
  relock_future_release(f);
  tp->pairs++;
  if (tp->running)
    chain_start(ch);
  else
    tp->active--;
  tp_maybe_done(tp);
}

static void on_tp_acquired(relock_future_t *f, void *arg) {
  chain_t *ch = arg;
  int err = relock_future_error(f);
  if (err != 0)
    bench_die("lock", err);
  if (!relock_future_bool(f))
    bench_die("lock not acquired", RELOCK_ENOTACQUIRED);
  relock_future_release(f);
  relock_future_t *r = relock_lock_unlock_async(ch->lock, ch->owner);
  if (r == NULL)
    bench_die("unlock", RELOCK_ENOMEM);
  relock_future_on_done(r, on_tp_released, ch);
}

static void chain_start(chain_t *ch) {
  relock_future_t *f = relock_lock_lock_async(ch->lock, ch->owner, RELOCK_INFINITE, RELOCK_INFINITE);
  if (f == NULL)
    bench_die("lock", RELOCK_ENOMEM);
  relock_future_on_done(f, on_tp_acquired, ch);
}

static void on_tp_window_start(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  tp_t *tp = w->data;
  tp->pairs0 = tp->pairs;
  tp->t0 = bench_now_ns();
  tp->cpu0 = bench_cpu_s();
  bench_server_cpu_async(tp->client, &tp->srv0, &tp->info_due, NULL, NULL);
}

static void on_tp_window_end(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  tp_t *tp = w->data;
  tp->pairs1 = tp->pairs;
  tp->t1 = bench_now_ns();
  tp->cpu1 = bench_cpu_s();
  tp->running = 0; /* the pairs in flight finish; no new ones start */
  bench_server_cpu_async(tp->client, &tp->srv1, &tp->info_due, on_tp_info, tp);
}

static int throughput(const char *host, int port, size_t names, double seconds) {
  tp_t tp = {0};
  tp.client = open_client(host, port);
  tp.loop = relock_client_loop(tp.client);
  bench_command(tp.client, "PING"); /* connected */
  chain_t *chains = calloc(names, sizeof(*chains));
  if (chains == NULL)
    bench_die("throughput", RELOCK_ENOMEM);
  for (size_t i = 0; i < names; i++) {
    char name[64];
    snprintf(name, sizeof name, "bench:throughput:%zu", i);
    chains[i].tp = &tp;
    chains[i].owner = i + 1;
    if ((chains[i].lock = relock_lock_new(tp.client, name, NULL)) == NULL)
      bench_die("lock_new", RELOCK_ENOMEM);
  }
  ev_timer start, end;
  ev_timer_init(&start, on_tp_window_start, WARMUP_S, 0);
  ev_timer_init(&end, on_tp_window_end, WARMUP_S + seconds, 0);
  start.data = end.data = &tp;
  ev_now_update(tp.loop);
  ev_timer_start(tp.loop, &start);
  ev_timer_start(tp.loop, &end);
  tp.running = 1;
  tp.active = names;
  for (size_t i = 0; i < names; i++)
    chain_start(&chains[i]);
  ev_run(tp.loop, 0);

  double span = (double)(tp.t1 - tp.t0) / 1e9;
  printf("{\"names\":%zu,\"seconds\":%.2f,\"pairs\":%llu,\"pairs_per_s\":%.0f,\"client_cpu\":%.2f,"
         "\"server_cpu\":%.2f}\n",
         names, span, (unsigned long long)(tp.pairs1 - tp.pairs0), (double)(tp.pairs1 - tp.pairs0) / span,
         (tp.cpu1 - tp.cpu0) / span, tp.srv0 >= 0 && tp.srv1 >= 0 ? (tp.srv1 - tp.srv0) / span : -1.0);
  for (size_t i = 0; i < names; i++)
    relock_lock_free(chains[i].lock);
  free(chains);
  relock_client_free(tp.client);
  return 0;
}

/* -- waiters at scale -------------------------------------------------------*/

#define SETTLE_LIMIT_S 60.0

typedef struct wt wt_t;

typedef struct waiter {
  wt_t *wt;
  size_t name;
  uint64_t owner;
} waiter_t;

struct wt {
  struct ev_loop *loop;
  relock_client_t *holder, *client; /* the holders' client; the waiters' */
  relock_lock_t **held, **wanted;   /* per name: the holder's object, the waiters' */
  size_t names, total;
  unsigned char *busy;              /* per name: a waiter holds it */
  int overlap;                      /* two waiters held one name at once */
  size_t countdown;                 /* holder acquisitions still due */
  size_t holders_released, acquired, released;
  size_t timers_before;             /* the waiters' wheel before they start */
  uint64_t t_issue, t_settled, t_release, t_last_release, t_all_acquired;
};

static void on_holder_acquired(relock_future_t *f, void *arg) {
  wt_t *wt = arg;
  if (relock_future_error(f) != 0 || !relock_future_bool(f))
    bench_die("holder lock", relock_future_error(f) ? relock_future_error(f) : RELOCK_ENOTACQUIRED);
  relock_future_release(f);
  if (--wt->countdown == 0)
    ev_break(wt->loop, EVBREAK_ALL);
}

static void wt_maybe_done(wt_t *wt) {
  if (wt->released == wt->total && wt->holders_released == wt->names)
    ev_break(wt->loop, EVBREAK_ALL);
}

static void on_holder_released(relock_future_t *f, void *arg) {
  wt_t *wt = arg;
  if (relock_future_error(f) != 0)
    bench_die("holder unlock", relock_future_error(f));
  relock_future_release(f);
  if (++wt->holders_released == wt->names)
    wt->t_last_release = bench_now_ns();
  wt_maybe_done(wt);
}

static void on_waiter_released(relock_future_t *f, void *arg) {
  waiter_t *w = arg;
  wt_t *wt = w->wt;
  if (relock_future_error(f) != 0)
    bench_die("waiter unlock", relock_future_error(f));
  relock_future_release(f);
  wt->busy[w->name] = 0;
  wt->released++;
  wt_maybe_done(wt);
}

/* Acquired: count it and release at once, so the next local waiter of the
 * name gets it. The release's reply always comes before the next waiter's
 * acquisition reply (one connection, in order), so busy[] is exact. */
static void on_waiter_acquired(relock_future_t *f, void *arg) {
  waiter_t *w = arg;
  wt_t *wt = w->wt;
  if (relock_future_error(f) != 0 || !relock_future_bool(f))
    bench_die("waiter lock", relock_future_error(f) ? relock_future_error(f) : RELOCK_ENOTACQUIRED);
  relock_future_release(f);
  if (wt->t_release == 0)
    bench_die("a waiter acquired a lock that was still held", RELOCK_EPROTO);
  if (wt->busy[w->name])
    wt->overlap = 1;
  wt->busy[w->name] = 1;
  if (++wt->acquired == wt->total)
    wt->t_all_acquired = bench_now_ns();
  relock_future_t *r = relock_lock_unlock_async(wt->wanted[w->name], w->owner);
  if (r == NULL)
    bench_die("waiter unlock", RELOCK_ENOMEM);
  relock_future_on_done(r, on_waiter_released, w);
}

/* Every waiter is parked once nothing is in flight on the command
 * connection and each has its wait timer (the holder's TTL) pending: the
 * waiters' client then has exactly one wheel timer per waiter (confirmation
 * timeouts of subscriptions and command timeouts are gone by then), besides
 * the connections' health checks. */
static void on_settle_poll(struct ev_loop *loop, ev_timer *t, int revents) {
  (void)revents;
  wt_t *wt = t->data;
  relock_client_t *c = wt->client;
  /* The subscriber connection opened meanwhile: its health-check timer. */
  size_t health = relock__timer_pending(&c->redis.pubsub.conn.health_timer) ? 1 : 0;
  if (c->redis.cmd.ninflight == 0 && c->redis.cmd.nwaiting == 0 &&
      relock__wheel_count(&c->wheel) == wt->timers_before + wt->total + health &&
      relock__pubsub_channels(&c->redis.pubsub) == wt->names) {
    wt->t_settled = bench_now_ns();
    ev_timer_stop(loop, t);
    ev_break(loop, EVBREAK_ALL);
  } else if ((double)(bench_now_ns() - wt->t_issue) / 1e9 > SETTLE_LIMIT_S) {
    bench_die("waiters did not settle", RELOCK_ETIMEDOUT);
  }
}

/* PUBSUB NUMSUB of every lock's channel: how many name one subscriber. */
static size_t count_single_subscribers(wt_t *wt) {
  size_t argc = 2 + wt->names;
  const char **argv = calloc(argc, sizeof(*argv));
  char (*channels)[96] = calloc(wt->names, sizeof(*channels));
  if (argv == NULL || channels == NULL)
    bench_die("numsub", RELOCK_ENOMEM);
  argv[0] = "PUBSUB";
  argv[1] = "NUMSUB";
  for (size_t i = 0; i < wt->names; i++) {
    snprintf(channels[i], sizeof channels[i], "redisson_lock__channel:{%s}", relock_lock_name(wt->wanted[i]));
    argv[2 + i] = channels[i];
  }
  relock_future_t *f = relock_client_command_async(wt->holder, (int)argc, argv, NULL);
  int r = f != NULL ? relock_future_wait(f, 30000) : RELOCK_ENOMEM;
  if (r != 0)
    bench_die("PUBSUB NUMSUB", r);
  const relock_reply_t *reply = relock_future_reply(f);
  size_t ones = 0;
  for (size_t i = 1; reply->type == RELOCK_REPLY_ARRAY && i < reply->elements; i += 2)
    ones += reply->element[i]->type == RELOCK_REPLY_INTEGER && reply->element[i]->integer == 1;
  relock_future_release(f);
  free(channels);
  free(argv);
  return ones;
}

static int waiters(const char *host, int port, size_t names, size_t per_name) {
  wt_t wt = {0};
  wt.client = open_client(host, port);
  wt.loop = relock_client_loop(wt.client);
  wt.holder = bench_client(wt.loop, host, port, 0);
  wt.names = names;
  wt.total = names * per_name;
  wt.held = calloc(names, sizeof(*wt.held));
  wt.wanted = calloc(names, sizeof(*wt.wanted));
  wt.busy = calloc(names, 1);
  waiter_t *ws = calloc(wt.total, sizeof(*ws));
  if (wt.held == NULL || wt.wanted == NULL || wt.busy == NULL || ws == NULL)
    bench_die("waiters", RELOCK_ENOMEM);
  for (size_t i = 0; i < names; i++) {
    char name[64];
    snprintf(name, sizeof name, "bench:waiters:%zu", i);
    wt.held[i] = relock_lock_new(wt.holder, name, NULL);
    wt.wanted[i] = relock_lock_new(wt.client, name, NULL);
    if (wt.held[i] == NULL || wt.wanted[i] == NULL)
      bench_die("lock_new", RELOCK_ENOMEM);
  }
  /* the holders take every name */
  wt.countdown = names;
  for (size_t i = 0; i < names; i++) {
    relock_future_t *f = relock_lock_lock_async(wt.held[i], 1, 0, RELOCK_INFINITE);
    if (f == NULL)
      bench_die("holder lock", RELOCK_ENOMEM);
    relock_future_on_done(f, on_holder_acquired, &wt);
  }
  ev_run(wt.loop, 0);
  bench_command(wt.client, "PING"); /* the waiters' client is connected */

  /* the waiters line up */
  wt.timers_before = relock__wheel_count(&wt.client->wheel);
  long long heap0 = bench_heap_bytes();
  wt.t_issue = bench_now_ns();
  for (size_t k = 0; k < wt.total; k++) {
    waiter_t *w = &ws[k];
    w->wt = &wt;
    w->name = k / per_name;
    w->owner = 1 + k;
    relock_future_t *f = relock_lock_lock_async(wt.wanted[w->name], w->owner, RELOCK_INFINITE, RELOCK_INFINITE);
    if (f == NULL)
      bench_die("waiter lock", RELOCK_ENOMEM);
    relock_future_on_done(f, on_waiter_acquired, w);
  }
  ev_timer poll;
  ev_timer_init(&poll, on_settle_poll, 0.001, 0.001);
  poll.data = &wt;
  ev_timer_start(wt.loop, &poll);
  ev_run(wt.loop, 0);
  long long heap1 = bench_heap_bytes();
  size_t channels = relock__pubsub_channels(&wt.client->redis.pubsub);
  size_t single = count_single_subscribers(&wt);

  /* the holders let go; every waiter acquires in turn */
  wt.t_release = bench_now_ns();
  for (size_t i = 0; i < names; i++) {
    relock_future_t *f = relock_lock_unlock_async(wt.held[i], 1);
    if (f == NULL)
      bench_die("holder unlock", RELOCK_ENOMEM);
    relock_future_on_done(f, on_holder_released, &wt);
  }
  ev_run(wt.loop, 0);

  printf("{\"names\":%zu,\"waiters\":%zu,\"client_channels\":%zu,\"numsub_single\":%zu,"
         "\"heap_per_waiter_bytes\":%.0f,\"heap_source\":\"%s\",\"settle_ms\":%.1f,"
         "\"from_last_release_ms\":%.1f,\"from_first_release_ms\":%.1f,\"acquired\":%zu,\"exclusive\":%s}\n",
         names, wt.total, channels, single, (double)(heap1 - heap0) / (double)wt.total, bench_heap_source(),
         (double)(wt.t_settled - wt.t_issue) / 1e6, (double)(wt.t_all_acquired - wt.t_last_release) / 1e6,
         (double)(wt.t_all_acquired - wt.t_release) / 1e6, wt.acquired, wt.overlap ? "false" : "true");
  for (size_t i = 0; i < names; i++) {
    relock_lock_free(wt.held[i]);
    relock_lock_free(wt.wanted[i]);
  }
  free(wt.held);
  free(wt.wanted);
  free(wt.busy);
  free(ws);
  relock_client_free(wt.holder);
  relock_client_free(wt.client);
  return wt.overlap || channels != names || single != names ? 1 : 0;
}

/* -- a loss noticed ------------------------------------------------------------*/

static uint64_t lost_at;

static void on_lost_notice(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg) {
  (void)lock, (void)owner, (void)reason, (void)message, (void)arg;
  lost_at = bench_now_ns();
}

/* ROUNDS times: a watched hold (relock_lock_watch_loss) force-released by
 * another client; how long until its lost callback ran. */
static int loss_notice(const char *host, int port, size_t rounds) {
  relock_client_t *holder = open_client(host, port), *other = open_client(host, port);
  relock_lock_t *l = relock_lock_new(holder, "bench:loss", NULL), *o = relock_lock_new(other, "bench:loss", NULL);
  relock_lock_on_lost(l, on_lost_notice, NULL);
  if (relock_lock_watch_loss(l, 1) != 0)
    bench_die("watch", RELOCK_ENOMEM);
  uint64_t *t = malloc(rounds * sizeof(*t));
  for (size_t i = 0; i < rounds; i++) {
    if (bench_value(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE), "acquire") != 1)
      bench_die("not acquired", RELOCK_EPROTO);
    /* listening: the subscription confirmed and its first check back */
    while (relock__pubsub_channels(&holder->redis.pubsub) == 0 ||
           holder->redis.pubsub.nsent > 0)
      ev_run(bench_loop(), EVRUN_ONCE);
    bench_value(relock_lock_validate_async(l, 1), "validate");
    lost_at = 0;
    uint64_t t0 = bench_now_ns();
    relock_future_t *f = relock_lock_force_unlock_async(o);
    while (lost_at == 0)
      ev_run(bench_loop(), EVRUN_ONCE);
    t[i] = lost_at - t0;
    bench_value(f, "force release");
    relock_future_t *r = relock_lock_unlock_async(l, 1); /* ELOST: ends the lost hold's bookkeeping */
    relock_future_wait(r, 30000);
    relock_future_release(r);
  }
  qsort(t, rounds, sizeof(*t), bench_cmp_u64);
  printf("{\"rounds\":%zu,\"p50_us\":%.1f,\"p99_us\":%.1f}\n", rounds, bench_pct_us(t, rounds, 0.50),
         bench_pct_us(t, rounds, 0.99));
  free(t);
  relock_lock_free(o);
  relock_lock_free(l);
  relock_client_free(other);
  relock_client_free(holder);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 5 && strcmp(argv[3], "lossnotice") == 0)
    return loss_notice(argv[1], atoi(argv[2]), (size_t)atol(argv[4]));
  if (argc >= 5 && strcmp(argv[3], "latency") == 0)
    return latency(argv[1], atoi(argv[2]), (size_t)atol(argv[4]));
  if (argc >= 6 && strcmp(argv[3], "throughput") == 0)
    return throughput(argv[1], atoi(argv[2]), (size_t)atol(argv[4]), atof(argv[5]));
  if (argc >= 7 && strcmp(argv[3], "handoff") == 0)
    return handoff(argv[1], atoi(argv[2]), atoi(argv[4]), (size_t)atol(argv[5]), (unsigned)atoi(argv[6]));
  if (argc >= 6 && strcmp(argv[3], "waiters") == 0)
    return waiters(argv[1], atoi(argv[2]), (size_t)atol(argv[4]), (size_t)atol(argv[5]));
  fprintf(stderr,
          "usage: %s HOST PORT latency PAIRS | throughput NAMES SECONDS | handoff PROCS SECTIONS PAUSE_US\n"
          "       | waiters NAMES PER_NAME | lossnotice ROUNDS\n",
          argv[0]);
  return 2;
}
