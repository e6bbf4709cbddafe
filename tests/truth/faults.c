/* The truth checker's faults: what Redis, the network and a client's host
 * do to a lock in production, injected at random (seeded). Faults that make
 * Redis forget holds - a DEL, FLUSHALL, a restart that lost its data - are
 * announced in the shared block (truth_break_t) before they happen and
 * again once done (the command ran somewhere in between), so that the
 * observer holds the beliefs they break to the documented bound and no
 * further. */
#include <config.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support/proxy.h"
#include "truth/faults.h"

struct truth_faults {
  truth_shared_t *sh;
  relock_test_redis_t *redis;
  int nworkers;
  uint64_t rng;
  relock_test_proxy_t *proxies[TRUTH_MAX_WORKERS];
  pid_t pids[TRUTH_MAX_WORKERS];
  long count[F_COUNT];
};

/* How often each fault is drawn (out of the sum): breaks of truth are rare
 * enough that most beliefs are checked most of the time. */
static const int weight[F_COUNT] = {
    [F_DEL] = 20,          [F_FLUSHALL] = 2,      [F_RESTART_LOST] = 2, [F_FORCE_RELEASE] = 0, /* workers do it */
    [F_RESTART_AOF] = 4,   [F_DEBUG_SLEEP] = 8,   [F_CLIENT_KILL] = 10, [F_CLIENT_PAUSE] = 6,
    [F_SERVER_STOP] = 6,   [F_PROXY_DELAY] = 10,  [F_PROXY_CUT] = 10,   [F_PROXY_STALL] = 8,
    [F_PROXY_BLACKHOLE] = 6, [F_WORKER_STOP] = 8,  [F_CLOCK_STEP] = 6, [F_PROXY_OUTAGE] = 14};

static void msleep(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static int below(truth_faults_t *f, int n) {
  return (int)(truth_rnd(&f->rng) % (uint64_t)n);
}

truth_faults_t *truth_faults_new(truth_shared_t *sh, relock_test_redis_t *redis, int nworkers, uint64_t seed) {
  truth_faults_t *f = calloc(1, sizeof *f);
  if (f == NULL)
    return NULL;
  f->sh = sh;
  f->redis = redis;
  f->nworkers = nworkers;
  f->rng = seed ^ 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < nworkers; i++)
    f->proxies[i] = relock_test_proxy_start(relock_test_redis_host(redis), relock_test_redis_port(redis));
  return f;
}

void truth_faults_free(truth_faults_t *f) {
  if (f == NULL)
    return;
  for (int i = 0; i < f->nworkers; i++)
    relock_test_proxy_stop(f->proxies[i]);
  free(f);
}

int truth_faults_port(const truth_faults_t *f, int worker) {
  return relock_test_proxy_port(f->proxies[worker]);
}

void truth_faults_set_pid(truth_faults_t *f, int worker, pid_t pid) {
  f->pids[worker] = pid;
}

/* Before the command: the break is under way; after it: it happened by now. */
static void announce(truth_break_t *b, enum truth_fault what) {
  atomic_fetch_add(&b->pending, 1);
  truth_break_at(b, what, truth_now_ns());
}

static void done(truth_break_t *b, enum truth_fault what) {
  truth_break_at(b, what, truth_now_ns());
  atomic_fetch_sub(&b->pending, 1);
}

static void cmd(truth_faults_t *f, const char *a, const char *b, const char *c, const char *d) {
  relock_test_redis_cmd(f->redis, NULL, 0, a, b, c, d, NULL);
}

static void trace_all(truth_faults_t *f, const char *what, const char *detail) {
  /* into worker 0's ring, where the dump merges it by time */
  truth_trace(&f->sh->w[0], "FAULT %s %s", what, detail);
}

/* A restart that loses everything: a crash, and the data files gone (a
 * server without persistence, or a disk replaced). */
static void restart_losing_data(truth_faults_t *f) {
  relock_test_redis_kill9(f->redis);
  char path[512];
  const char *dir = relock_test_redis_dir(f->redis);
  static const char *const files[] = {"appendonly.aof", "dump.rdb"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  snprintf(path, sizeof path, "rm -rf '%s/appendonlydir'", dir);
  if (system(path) != 0)
    fprintf(stderr, "truth: could not remove %s/appendonlydir\n", dir);
  relock_test_redis_restart(f->redis);
}

/* A lock name a relock owner has held, renewed by the watchdog, for a
 * second or more (a long hold: it goes on for seconds), or -1. A DEL aimed
 * there outlasts the exemption bound while its holder holds on: a library
 * that does not hear the loss at the next renewal (or hears it and keeps
 * believing) shows in the checks after the bound, which a DEL of a name
 * nobody holds long can never do. */
static int long_renewed_hold(truth_faults_t *f) {
  uint64_t now = truth_now_ns();
  int picks[TRUTH_MAX_WORKERS * TRUTH_SLOTS], n = 0;
  for (int w = 0; w < f->sh->nworkers; w++)
    for (int s = 0; s < TRUTH_SLOTS; s++) {
      truth_belief_t b;
      truth_belief_read(&f->sh->w[w].beliefs[s], &b);
      if (b.name >= 0 && b.name <= N_RW1 && !b.fixed && !b.foreign && b.since_ns + 1000000000u < now)
        picks[n++] = b.name;
    }
  return n > 0 ? picks[below(f, n)] : -1;
}

static enum truth_fault draw(truth_faults_t *f) {
  int sum = 0;
  for (int i = 0; i < F_COUNT; i++)
    sum += weight[i];
  int r = below(f, sum);
  for (int i = 0; i < F_COUNT; i++) {
    if (r < weight[i])
      return (enum truth_fault)i;
    r -= weight[i];
  }
  return F_CLIENT_KILL;
}

void truth_faults_inject(truth_faults_t *f) {
  enum truth_fault what = draw(f);
  int victim = below(f, f->nworkers);
  char detail[64] = "";
  uint64_t start = truth_now_ns();
  int64_t lasting_ms = 300; /* reconnections, resubscriptions */
  /* a proxy's fault or a stop touches one worker; the others every one */
  int one = what == F_PROXY_DELAY || what == F_PROXY_CUT || what == F_PROXY_STALL || what == F_PROXY_BLACKHOLE ||
            what == F_WORKER_STOP || what == F_PROXY_OUTAGE;
  int entry = what != F_CLOCK_STEP ? truth_fault_begin(f->sh, start, one ? victim : -1) : -1;
  switch (what) {
  case F_DEL: {
    int name = below(f, 4) != 0 ? long_renewed_hold(f) : -1;
    if (name < 0)
      name = below(f, N_RW1 + 1); /* a lock's key */
    snprintf(detail, sizeof detail, "%s", truth_names[name]);
    trace_all(f, truth_fault_names[what], detail);
    announce(&f->sh->breaks[name], what);
    cmd(f, "DEL", truth_names[name], NULL, NULL);
    done(&f->sh->breaks[name], what);
    break;
  }
  case F_FLUSHALL:
    trace_all(f, truth_fault_names[what], "(every name)");
    atomic_store(&f->sh->sem_paused, 1);
    announce(&f->sh->global_break, what);
    cmd(f, "FLUSHALL", NULL, NULL, NULL);
    done(&f->sh->global_break, what);
    for (int n = 0; n < N_COUNT; n++) /* the fenced locks' tokens start afresh */
      atomic_store(&f->sh->max_token[n], 0);
    break;
  case F_RESTART_LOST:
    trace_all(f, truth_fault_names[what], "(every name)");
    atomic_store(&f->sh->sem_paused, 1);
    announce(&f->sh->global_break, what);
    restart_losing_data(f);
    done(&f->sh->global_break, what);
    for (int n = 0; n < N_COUNT; n++)
      atomic_store(&f->sh->max_token[n], 0);
    lasting_ms = 1000;
    break;
  case F_RESTART_AOF:
    relock_test_redis_restart(f->redis);
    lasting_ms = 1000;
    break;
  case F_DEBUG_SLEEP: {
    static const char *const secs[] = {"0.05", "0.3", "0.8"};
    cmd(f, "DEBUG", "SLEEP", secs[below(f, 3)], NULL);
    break;
  }
  case F_CLIENT_KILL: cmd(f, "CLIENT", "KILL", "TYPE", below(f, 2) ? "normal" : "pubsub"); break;
  case F_CLIENT_PAUSE: {
    char ms[16];
    snprintf(ms, sizeof ms, "%d", 100 + below(f, 700));
    cmd(f, "CLIENT", "PAUSE", ms, NULL);
    lasting_ms += atoi(ms);
    break;
  }
  case F_SERVER_STOP:
    relock_test_redis_pause(f->redis);
    msleep(100 + below(f, 700));
    relock_test_redis_resume(f->redis);
    break;
  case F_PROXY_DELAY:
    relock_test_proxy_delay(f->proxies[victim], 20 + below(f, 200));
    msleep(300 + below(f, 1200));
    relock_test_proxy_delay(f->proxies[victim], 0);
    break;
  case F_PROXY_CUT: relock_test_proxy_cut(f->proxies[victim]); break;
  case F_PROXY_STALL:
    relock_test_proxy_stall(f->proxies[victim], 1);
    msleep(200 + below(f, 1000));
    relock_test_proxy_stall(f->proxies[victim], 0);
    break;
  case F_PROXY_OUTAGE:
    /* past the watchdog's timeout: its holds are lost by timeout (told),
     * releases fail, answers come late */
    relock_test_proxy_stall(f->proxies[victim], 1);
    msleep(2300 + below(f, 1000));
    relock_test_proxy_stall(f->proxies[victim], 0);
    break;
  case F_PROXY_BLACKHOLE: relock_test_proxy_blackhole_current(f->proxies[victim]); break;
  case F_WORKER_STOP:
    if (f->pids[victim] > 0) {
      atomic_fetch_add(&f->sh->w[victim].stops, 1); /* odd while stopped */
      kill(f->pids[victim], SIGSTOP);
      msleep(100 + below(f, 1400));
      kill(f->pids[victim], SIGCONT);
      atomic_fetch_add(&f->sh->w[victim].stops, 1);
    }
    break;
  case F_CLOCK_STEP: {
    /* a minute to two hours, either way: relock's deadlines must not care */
    int64_t step_s = 60 + below(f, 7140);
    atomic_fetch_add(&f->sh->w[victim].wall_offset_ns, (below(f, 2) ? step_s : -step_s) * 1000000000);
    break;
  }
  default: break;
  }
  if (what != F_DEL && what != F_FLUSHALL && what != F_RESTART_LOST)
    truth_trace(&f->sh->w[0], "FAULT %s (worker %d)", truth_fault_names[what], victim);
  if (entry >= 0)
    truth_fault_end(f->sh, entry, truth_now_ns() + (uint64_t)lasting_ms * 1000000u);
  f->count[what]++;
}

void truth_faults_heal(truth_faults_t *f) {
  for (int i = 0; i < f->nworkers; i++) {
    relock_test_proxy_delay(f->proxies[i], 0);
    relock_test_proxy_stall(f->proxies[i], 0);
    if (f->pids[i] > 0)
      kill(f->pids[i], SIGCONT);
  }
  relock_test_redis_resume(f->redis);
}

long truth_faults_total(const truth_faults_t *f) {
  long n = 0;
  for (int i = 0; i < F_COUNT; i++)
    n += f->count[i];
  return n;
}

void truth_faults_print(const truth_faults_t *f) {
  for (int i = 0; i < F_COUNT; i++)
    if (f->count[i] > 0)
      printf(" %s %ld,", truth_fault_names[i], f->count[i]);
}
