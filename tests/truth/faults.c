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
  relock_test_redis_t *redis; /* single node */
  truth_topo_t topo;
  int slot;                   /* cluster: the truth slot, and its master's index */
  int owner;
  uint64_t next_topo_ns;      /* sentinel, cluster: when the next failover or migration is due */
  int topo_turn;              /* which of the two comes next */
  long failures;
  void (*on_move)(void *arg, const char *unix_path);
  void *on_move_arg;
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

/* Sentinel and cluster: the faults of one node that make sense on the
 * truth's node (no proxies, no restarts: the failovers are the
 * topology's own, scheduled apart - see inject). */
static const int topo_weight[F_COUNT] = {
    [F_DEL] = 8,         [F_FLUSHALL] = 2,   [F_DEBUG_SLEEP] = 6, [F_CLIENT_KILL] = 10, [F_CLIENT_PAUSE] = 6,
    [F_SERVER_STOP] = 6, [F_WORKER_STOP] = 8, [F_CLOCK_STEP] = 6, [F_WRITE_PAUSE] = 3};

/* The first failover or migration this long into the run, the next this
 * long after one ended (ms): two or three in a 10 s run. */
#define TOPO_FIRST_MS 1000
#define TOPO_GAP_MS 1500
/* How long a fixture may take to fail over, settle, migrate. */
#define TOPO_TIMEOUT_MS 15000

static void msleep(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static int below(truth_faults_t *f, int n) {
  return (int)(truth_rnd(&f->rng) % (uint64_t)n);
}

truth_faults_t *truth_faults_new(truth_shared_t *sh, const truth_topo_t *topo, int nworkers, uint64_t seed) {
  truth_faults_t *f = calloc(1, sizeof *f);
  if (f == NULL)
    return NULL;
  f->sh = sh;
  f->topo = *topo;
  f->redis = topo->redis;
  f->nworkers = nworkers;
  f->rng = seed ^ 0x9e3779b97f4a7c15ull;
  f->slot = f->owner = -1;
  if (topo->kind == T_SINGLE) {
    for (int i = 0; i < nworkers; i++)
      f->proxies[i] = relock_test_proxy_start(relock_test_redis_host(f->redis), relock_test_redis_port(f->redis));
  } else {
    f->next_topo_ns = truth_now_ns() + (uint64_t)TOPO_FIRST_MS * 1000000u;
    f->topo_turn = below(f, 2);
  }
  if (topo->kind == T_CLUSTER) {
    f->slot = relock_test_cluster_keyslot(topo->cluster, TRUTH_HASH_TAG, strlen(TRUTH_HASH_TAG));
    f->owner = f->slot >= 0 ? relock_test_cluster_owner(topo->cluster, f->slot) : -1;
    if (f->owner < 0) {
      fprintf(stderr, "truth: the truth slot %d has no master\n", f->slot);
      free(f);
      return NULL;
    }
  }
  return f;
}

void truth_faults_free(truth_faults_t *f) {
  if (f == NULL)
    return;
  for (int i = 0; i < f->nworkers; i++)
    if (f->proxies[i] != NULL)
      relock_test_proxy_stop(f->proxies[i]);
  free(f);
}

int truth_faults_port(const truth_faults_t *f, int worker) {
  return f->proxies[worker] != NULL ? relock_test_proxy_port(f->proxies[worker]) : 0;
}

relock_test_redis_t *truth_faults_node(truth_faults_t *f) {
  switch (f->topo.kind) {
  case T_SENTINEL: {
    relock_test_redis_t *m = relock_test_sentinel_master_node(f->topo.sentinel);
    return m != NULL ? m : relock_test_sentinel_node(f->topo.sentinel, 0);
  }
  case T_CLUSTER: return relock_test_cluster_node(f->topo.cluster, f->owner);
  default: return f->redis;
  }
}

const char *truth_faults_unix_path(truth_faults_t *f) {
  return relock_test_redis_unix_path(truth_faults_node(f));
}

void truth_faults_on_move(truth_faults_t *f, void (*cb)(void *arg, const char *unix_path), void *arg) {
  f->on_move = cb;
  f->on_move_arg = arg;
}

long truth_faults_failures(const truth_faults_t *f) {
  return f->failures;
}

static void moved(truth_faults_t *f) {
  if (f->on_move != NULL)
    f->on_move(f->on_move_arg, truth_faults_unix_path(f));
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
  relock_test_redis_cmd(truth_faults_node(f), NULL, 0, a, b, c, d, NULL);
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
  const int *wt = f->topo.kind == T_SINGLE ? weight : topo_weight;
  int sum = 0;
  for (int i = 0; i < F_COUNT; i++)
    sum += wt[i];
  int r = below(f, sum);
  for (int i = 0; i < F_COUNT; i++) {
    if (r < wt[i])
      return (enum truth_fault)i;
    r -= wt[i];
  }
  return F_CLIENT_KILL;
}

static char topo_detail[96]; /* what the latest failover or migration did */

static void fixture_failed(truth_faults_t *f, const char *what) {
  f->failures++;
  printf("# FIXTURE FAILURE: %s did not complete (see stderr): the run fails\n", what);
  truth_trace(&f->sh->w[0], "FAULT %s: the fixture failed", what);
  fflush(stdout);
}

/* A Sentinel failover, forced or by a kill -9 of the master: the truth
 * moves to a replica that may lack what the old master acknowledged last
 * (asynchronous replication; a forced failover does not even pause the
 * old master's writes), which is a break of truth for every name, like a
 * restart that lost data - announced before, over once the sentinels agree
 * and the old master follows the new one (settle: a killed one restarted
 * first). The observer takes no snapshot meanwhile (sh->moving). */
static void sentinel_failover(truth_faults_t *f, enum truth_fault what) {
  relock_test_sentinel_t *t = f->topo.sentinel;
  int old = relock_test_sentinel_master(t);
  trace_all(f, truth_fault_names[what], "(every name)");
  atomic_store(&f->sh->sem_paused, 1);
  atomic_fetch_add(&f->sh->moving, 1);
  announce(&f->sh->global_break, what);
  announce(&f->sh->rollback, what);
  int64_t took = what == F_FAILOVER ? relock_test_sentinel_failover(t, TOPO_TIMEOUT_MS, NULL)
                                    : relock_test_sentinel_kill_master(t, TOPO_TIMEOUT_MS, NULL);
  int ok = took >= 0;
  if (what == F_KILL_MASTER && old >= 0 && relock_test_sentinel_restart_node(t, old) != 0)
    ok = 0;
  if (relock_test_sentinel_settle(t, TOPO_TIMEOUT_MS) < 0)
    ok = 0;
  if (!ok)
    fixture_failed(f, truth_fault_names[what]);
  char detail[64];
  snprintf(detail, sizeof detail, "node %d -> node %d in %lld ms", old, relock_test_sentinel_master(t), (long long)took);
  trace_all(f, truth_fault_names[what], detail);
  snprintf(topo_detail, sizeof topo_detail, "%s", detail);
  moved(f);
  done(&f->sh->rollback, what);
  done(&f->sh->global_break, what);
  atomic_fetch_sub(&f->sh->moving, 1);
  for (int n = 0; n < N_COUNT; n++) /* the fenced locks' tokens may go back */
    atomic_store(&f->sh->max_token[n], 0);
}

/* CLUSTER FAILOVER on a replica of the truth slot's master: a manual
 * failover, coordinated - the master stops its clients' writes until the
 * replica has everything it acknowledged, then the replica takes over.
 * Nothing acknowledged is lost: no break of truth, every rule holds
 * across it. The observer follows the slot (MOVED). */
static void cluster_failover(truth_faults_t *f) {
  relock_test_cluster_t *t = f->topo.cluster;
  int old = f->owner;
  trace_all(f, truth_fault_names[F_CLUSTER_FAILOVER], "(the truth slot's master)");
  int m = relock_test_cluster_failover(t, old, TOPO_TIMEOUT_MS);
  if (m < 0) {
    fixture_failed(f, truth_fault_names[F_CLUSTER_FAILOVER]);
    m = relock_test_cluster_owner(t, f->slot);
  }
  if (m >= 0)
    f->owner = m;
  char detail[64];
  snprintf(detail, sizeof detail, "node %d -> node %d", old, f->owner);
  trace_all(f, truth_fault_names[F_CLUSTER_FAILOVER], detail);
  snprintf(topo_detail, sizeof topo_detail, "%s", detail);
  moved(f);
}

/* The truth slot moved, live, to another master: IMPORTING and MIGRATING,
 * a while of -ASK for keys not on the source, MIGRATE of every key, a
 * while more, SETSLOT NODE. No break: MIGRATE keeps every key and its TTL.
 * The observer's script fails meanwhile (-ASK, -TRYAGAIN: no check) and
 * follows the slot (MOVED) after. */
static void slot_migration(truth_faults_t *f) {
  relock_test_cluster_t *t = f->topo.cluster;
  int from = f->owner, to = relock_test_cluster_other_master(t, from);
  char detail[64];
  snprintf(detail, sizeof detail, "slot %d: node %d -> node %d", f->slot, from, to);
  trace_all(f, truth_fault_names[F_SLOT_MIGRATION], detail);
  snprintf(topo_detail, sizeof topo_detail, "%s", detail);
  int ok = to >= 0 && relock_test_cluster_migrate_begin(t, f->slot, to) == 0;
  if (ok) {
    msleep(100 + below(f, 400));
    ok = relock_test_cluster_migrate_keys(t, f->slot) == 0;
    msleep(50 + below(f, 200));
    ok = relock_test_cluster_migrate_end(t, f->slot, to) == 0 && ok;
  }
  if (!ok)
    fixture_failed(f, truth_fault_names[F_SLOT_MIGRATION]);
  int m = relock_test_cluster_owner(t, f->slot);
  if (m >= 0)
    f->owner = m;
  trace_all(f, truth_fault_names[F_SLOT_MIGRATION], ok ? "done" : "failed");
  moved(f);
}

/* The topology's own fault, when one is due: the two kinds in turn. */
static int topology_fault(truth_faults_t *f) {
  if (f->topo.kind == T_SINGLE || truth_now_ns() < f->next_topo_ns)
    return 0;
  enum truth_fault what = f->topo.kind == T_SENTINEL ? (f->topo_turn ? F_KILL_MASTER : F_FAILOVER)
                                                     : (f->topo_turn ? F_SLOT_MIGRATION : F_CLUSTER_FAILOVER);
  f->topo_turn = !f->topo_turn;
  uint64_t start = truth_now_ns();
  int entry = truth_fault_begin(f->sh, start, -1);
  if (what == F_FAILOVER || what == F_KILL_MASTER)
    sentinel_failover(f, what);
  else if (what == F_CLUSTER_FAILOVER)
    cluster_failover(f);
  else
    slot_migration(f);
  uint64_t end = truth_now_ns();
  truth_fault_end(f->sh, entry, end + 1000000000u); /* reconnections, resubscriptions */
  printf("# %s: %s, %llu ms in all\n", truth_fault_names[what], topo_detail,
         (unsigned long long)((end - start) / 1000000u));
  fflush(stdout);
  f->next_topo_ns = end + (uint64_t)(TOPO_GAP_MS + below(f, 1000)) * 1000000u;
  f->count[what]++;
  return 1;
}

void truth_faults_inject(truth_faults_t *f) {
  if (topology_fault(f))
    return;
  enum truth_fault what = draw(f);
  int topo = f->topo.kind != T_SINGLE;
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
    /* not near a second on a topology: its sentinels and cluster bus
     * would take the master for down (down-after, node timeout 1 s) */
    static const char *const secs[] = {"0.05", "0.3", "0.8"};
    cmd(f, "DEBUG", "SLEEP", secs[below(f, topo ? 2 : 3)], NULL);
    break;
  }
  case F_CLIENT_KILL: cmd(f, "CLIENT", "KILL", "TYPE", below(f, 2) ? "normal" : "pubsub"); break;
  case F_CLIENT_PAUSE: {
    char ms[16];
    snprintf(ms, sizeof ms, "%d", 100 + below(f, topo ? 400 : 700));
    cmd(f, "CLIENT", "PAUSE", ms, NULL);
    lasting_ms += atoi(ms);
    break;
  }
  case F_WRITE_PAUSE: {
    /* every client's commands that write wait (renewals, releases,
     * acquisitions): holds are lost by timeout, answers come late */
    char ms[16];
    snprintf(ms, sizeof ms, "%d", 2300 + below(f, 1000));
    cmd(f, "CLIENT", "PAUSE", ms, "WRITE");
    msleep(atoi(ms));
    break;
  }
  case F_SERVER_STOP: {
    relock_test_redis_t *node = truth_faults_node(f);
    relock_test_redis_pause(node);
    msleep(100 + below(f, topo ? 400 : 700));
    relock_test_redis_resume(node);
    break;
  }
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
    if (f->proxies[i] != NULL) {
      relock_test_proxy_delay(f->proxies[i], 0);
      relock_test_proxy_stall(f->proxies[i], 0);
    }
    if (f->pids[i] > 0)
      kill(f->pids[i], SIGCONT);
  }
  relock_test_redis_resume(truth_faults_node(f));
}

long truth_faults_total(const truth_faults_t *f) {
  long n = 0;
  for (int i = 0; i < F_COUNT; i++)
    n += f->count[i];
  return n;
}

long truth_faults_count(const truth_faults_t *f, enum truth_fault what) {
  return f->count[what];
}

void truth_faults_print(const truth_faults_t *f) {
  for (int i = 0; i < F_COUNT; i++)
    if (f->count[i] > 0)
      printf(" %s %ld,", truth_fault_names[i], f->count[i]);
}
