/* The truth checker: a seeded, randomized test of relock's safety
 * invariant (docs/SAFETY.md) against a real redis-server under real faults.
 *
 *   truth [--seconds N] [--seed S] [--workers N] [--java N] [--keep-going] [--kinds K,K...]
 *         [--topology single|sentinel|cluster]
 *
 * Worker processes (tests/truth/worker.c), half with an embedded client and
 * half with a threaded one, each with several owners, take, re-enter and
 * release every kind of lock and semaphore on a few shared names, with
 * watchdog and fixed leases, cancels, interrupts, force releases, validity
 * queries and client closes, each through a fault proxy of its own. This
 * process injects faults (tests/truth/faults.c) while an observer thread
 * (tests/truth/observer.c) checks, every few milliseconds, what each
 * owner believes against what Redis keeps. The first violation prints the
 * seed, the state and the trace, and fails the run; the same seed replays
 * the same choices. Output is TAP with the figures as comments.
 *
 * --topology sentinel or cluster: the same against tests/support's Sentinel
 * topology or cluster, through the sentinels or the slot map (no proxies),
 * with their failovers and a slot migration among the faults (README). */
#include <config.h>

#define _GNU_SOURCE /* memfd_create */

#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/proxy.h"
#include "support/redis_server.h"
#include "support/stacks.h"
#include "truth/faults.h"
#include "truth/observer.h"
#include "truth/truth.h"

enum { WORKER_THREADED, WORKER_EMBEDDED, WORKER_JAVA };

static truth_shared_t *sh;
static int shared_fd = -1;
static pid_t pids[TRUTH_MAX_WORKERS];

static void msleep(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* A worker is a fresh exec of this program, not a bare fork: this process
 * runs threads (the proxies', the observer), and a forked child of a
 * threaded process may inherit a lock one of them held. */
static pid_t start_worker(int id, int port, uint64_t seed, int mode) {
  char self[] = "truth", flag[] = "--worker", sid[16], sport[16], sseed[32], sfd[16], semb[4];
  snprintf(sid, sizeof sid, "%d", id);
  snprintf(sport, sizeof sport, "%d", port);
  snprintf(sseed, sizeof sseed, "%llu", (unsigned long long)seed);
  snprintf(sfd, sizeof sfd, "%d", shared_fd);
  snprintf(semb, sizeof semb, "%d", mode);
  char *const args[] = {self, flag, sid, sport, sseed, sfd, semb, NULL};
  pid_t pid = fork();
  if (pid == 0) {
    execv("/proc/self/exe", args);
    _exit(127);
  }
  return pid;
}

static int worker_entry(char **argv) {
  int fd = atoi(argv[5]);
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (sh == MAP_FAILED)
    return 3;
  int id = atoi(argv[2]);
  if (id < 0 || id >= TRUTH_MAX_WORKERS)
    return 3;
  truth_use_topology_names(sh->topology);
  signal(SIGPIPE, SIG_IGN);
  prctl(PR_SET_PDEATHSIG, SIGKILL); /* a worker never outlives its supervisor */
  if (getppid() == 1)
    return 3; /* it died before the line above */
  int mode = atoi(argv[6]);
  if (mode == WORKER_JAVA)
    return truth_java_worker_main(sh, id, atoi(argv[3]), strtoull(argv[4], NULL, 10));
  return truth_worker_main(sh, id, atoi(argv[3]), strtoull(argv[4], NULL, 10), mode == WORKER_EMBEDDED);
}

/* -- the observer thread ----------------------------------------------------*/

static _Atomic int observer_stop;
static _Atomic int found;
static int keep_going; /* --keep-going: survey every violation, do not stop */

static void *observer_main(void *arg) {
  truth_observer_t *o = arg;
  while (!atomic_load(&observer_stop)) {
    if (truth_observer_check(o) && !keep_going) {
      atomic_store(&found, 1);
      break;
    }
    msleep(5);
  }
  return NULL;
}

static void on_move(void *arg, const char *unix_path) {
  truth_observer_set_target(arg, unix_path);
}

/* -- the end ----------------------------------------------------------------*/

static redisReply *direct(const char *unix_path, const char *fmt, ...) {
  struct timeval tv = {2, 0};
  redisContext *c = redisConnectUnixWithTimeout(unix_path, tv);
  if (c == NULL || c->err) {
    if (c != NULL)
      redisFree(c);
    return NULL;
  }
  redisSetTimeout(c, tv);
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(c, fmt, ap);
  va_end(ap);
  redisFree(c);
  return r;
}

/* The permits still taken at the end (id, expiry), with what the workers
 * traced of each: who took it, and what became of it. */
static void print_live_permits(const redisReply *z) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i + 1 < z->elements; i += 2) {
    char id[80];
    size_t n = z->element[i]->len < 32 ? z->element[i]->len : 32;
    for (size_t k = 0; k < n; k++) {
      id[2 * k] = digits[(unsigned char)z->element[i]->str[k] >> 4];
      id[2 * k + 1] = digits[(unsigned char)z->element[i]->str[k] & 15];
    }
    id[2 * n] = '\0';
    printf("# permit %s still taken at the end (until %s)\n", id, z->element[i + 1]->str);
    truth_trace_dump(sh, id);
  }
}

/* What the semaphores and locks hold once everyone released everything and
 * every lease ran out: all permits free, no lock key left. */
static void check_quiet_state(const char *unix_path, char *why, size_t size, int *locks_clear, int *permits_free) {
  static const char lua[] =
      "local n = 0\n"
      "for i = 1, 7 do n = n + redis.call('exists', KEYS[i]) end\n"
      "local free = tonumber(redis.call('get', KEYS[9]) or '0')\n"
      "local t = redis.call('time')\n"
      "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
      "local live = redis.call('zcount', KEYS[10], now + 1, '+inf')\n"
      "free = free + redis.call('zcount', KEYS[10], '-inf', now)\n"
      "return {n, tonumber(redis.call('get', KEYS[8]) or '-1'), free, live,\n"
      "        redis.call('zrangebyscore', KEYS[10], now + 1, '+inf', 'withscores')}\n";
  char zkey[64];
  truth_suffix_name(zkey, sizeof zkey, N_P0, ":timeout");
  redisReply *r = direct(unix_path, "EVAL %s 10 %s %s %s %s %s %s %s %s %s %s", lua, truth_names[0],
                         truth_names[1], truth_names[2], truth_names[3], truth_names[4], truth_names[5],
                         truth_names[6], truth_names[N_S0], truth_names[N_P0], zkey);
  *locks_clear = *permits_free = 0;
  if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 5) {
    snprintf(why, size, "Redis did not answer");
    if (r != NULL)
      freeReplyObject(r);
    return;
  }
  long long keys = r->element[0]->integer, sem = r->element[1]->integer, pfree = r->element[2]->integer,
            plive = r->element[3]->integer;
  print_live_permits(r->element[4]);
  freeReplyObject(r);
  snprintf(why, size,
           "%lld lock keys left, semaphore %lld of %d free (%d failed releases), permits %lld free and %lld live of %d "
           "(closes could not give back %ld acquisitions)",
           keys, sem, TRUTH_PERMITS, atomic_load(&sh->sem_uncertain), pfree, plive, TRUTH_PERMITS,
           (long)atomic_load(&sh->unreturned));
  *locks_clear = keys == 0;
  /* a semaphore release that failed may or may not have given back; what
   * a close could not give back stays taken */
  long uncertain = atomic_load(&sh->sem_uncertain), unreturned = atomic_load(&sh->unreturned);
  *permits_free = sem >= TRUTH_PERMITS - uncertain - unreturned && sem <= TRUTH_PERMITS &&
                  plive <= unreturned && pfree + plive == TRUTH_PERMITS;
}

/* In one script: the observer compares the counts. */
static void reset_semaphores(const char *unix_path) {
  char zkey[64];
  truth_suffix_name(zkey, sizeof zkey, N_P0, ":timeout");
  redisReply *r = direct(unix_path,
                         "EVAL %s 3 %s %s %s %d",
                         "redis.call('set', KEYS[1], ARGV[1]) redis.call('set', KEYS[2], ARGV[1]) "
                         "redis.call('del', KEYS[3]) return 1",
                         truth_names[N_S0], truth_names[N_P0], zkey, TRUTH_PERMITS);
  if (r != NULL)
    freeReplyObject(r);
}

/* Sets the semaphores anew once no permit is believed or being taken. */
static void maybe_reset_semaphores(const char *unix_path) {
  if (atomic_load(&sh->moving) > 0)
    return; /* the truth is between nodes */
  if (!atomic_load(&sh->sem_paused) || atomic_load(&sh->sem_inflight) > 0)
    return;
  for (int w = 0; w < sh->nworkers; w++)
    for (int s = 0; s < TRUTH_SLOTS; s++) {
      truth_belief_t b;
      truth_belief_read(&sh->w[w].beliefs[s], &b);
      if (b.name == N_S0 || b.name == N_P0)
        return;
    }
  reset_semaphores(unix_path);
  atomic_store(&sh->sem_uncertain, 0);
  atomic_store(&sh->sem_paused, 0);
}

/* The interop peer, built (or found up to date) where make check keeps it. */
static int build_java_peer(void) {
  const char *src = getenv("RELOCK_SRCDIR"), *build = getenv("RELOCK_BUILDDIR");
  if (src == NULL || build == NULL) {
    fprintf(stderr, "truth: RELOCK_SRCDIR and RELOCK_BUILDDIR are not set: run it through make check\n");
    return -1;
  }
  char cmd[2200];
  snprintf(cmd, sizeof cmd, "sh '%s/tests/interop/build.sh' '%s/tests/interop/peer' >&2", src, build);
  return system(cmd) == 0 ? 0 : -1;
}

static int wait_java_ready(int first, int n) {
  uint64_t end = truth_now_ns() + 60000000000ull;
  for (int i = first; i < n; i++)
    while (!atomic_load(&sh->w[i].ready)) {
      int status;
      if (truth_now_ns() > end || waitpid(pids[i], &status, WNOHANG) != 0)
        return -1;
      msleep(50);
    }
  return 0;
}

/* "fair,read,write" -> a mask of kinds; 0 when a name is unknown. */
static unsigned parse_kinds(const char *list) {
  unsigned mask = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", list);
  for (char *save = NULL, *k = strtok_r(buf, ",", &save); k != NULL; k = strtok_r(NULL, ",", &save)) {
    int found_kind = -1;
    for (int i = 0; i < K_COUNT; i++)
      if (strcmp(k, truth_kind_names[i]) == 0)
        found_kind = i;
    if (found_kind < 0)
      return 0;
    mask |= 1u << found_kind;
  }
  return mask;
}

static void usage(const char *self) {
  fprintf(stderr,
          "usage: %s [--seconds N] [--seed S] [--workers N] [--java N] [--keep-going] [--kinds K,K...]\n"
          "          [--topology single|sentinel|cluster]\n"
          "  (2 <= workers, workers + java <= %d; Redisson workers on a single node only)\n",
          self, TRUTH_MAX_WORKERS);
  fprintf(stderr, "kinds:");
  for (int i = 0; i < K_COUNT; i++)
    fprintf(stderr, " %s", truth_kind_names[i]);
  fprintf(stderr, "\n");
}

int main(int argc, char **argv) {
  if (argc == 7 && strcmp(argv[1], "--worker") == 0)
    return worker_entry(argv);
  int seconds = 20, nworkers = 4, njava = 0, topology = T_SINGLE;
  unsigned kinds = (1u << K_COUNT) - 1;
  uint64_t seed = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
      seconds = atoi(argv[++i]);
    else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
      seed = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--workers") == 0 && i + 1 < argc)
      nworkers = atoi(argv[++i]);
    else if (strcmp(argv[i], "--java") == 0 && i + 1 < argc)
      njava = atoi(argv[++i]);
    else if (strcmp(argv[i], "--keep-going") == 0)
      keep_going = 1;
    else if (strcmp(argv[i], "--topology") == 0 && i + 1 < argc) {
      i++;
      topology = -1;
      for (int k = 0; k < 3; k++)
        if (strcmp(argv[i], truth_topology_names[k]) == 0)
          topology = k;
      if (topology < 0) {
        usage(argv[0]);
        return 2;
      }
    }
    else if (strcmp(argv[i], "--kinds") == 0 && i + 1 < argc) {
      if ((kinds = parse_kinds(argv[++i])) == 0) {
        usage(argv[0]);
        return 2;
      }
    }
    else {
      usage(argv[0]);
      return 2;
    }
  }
  if (seconds < 1 || nworkers < 2 || njava < 0 || nworkers + njava > TRUTH_MAX_WORKERS ||
      (njava > 0 && topology != T_SINGLE)) {
    usage(argv[0]);
    return 2;
  }
  if (seed == 0)
    seed = truth_now_ns() % 1000000007u + 1;
  signal(SIGPIPE, SIG_IGN);
  if (!relock_test_redis_available()) {
    printf("Bail out! cannot run: redis-server not found\n");
    return 1;
  }
  shared_fd = memfd_create("relock-truth", 0); /* inherited by the workers */
  if (shared_fd < 0 || ftruncate(shared_fd, sizeof *sh) != 0)
    return 1;
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED, shared_fd, 0);
  if (sh == MAP_FAILED)
    return 1;
  truth_topo_t topo = {.kind = topology};
  uint64_t fixture_ns = truth_now_ns();
  if (topology == T_SINGLE) {
    relock_test_redis_opts_t opts = {.aof = 1};
    topo.redis = relock_test_redis_start(&opts);
  } else if (topology == T_SENTINEL) {
    /* a master, one replica (the one a failover promotes), 3 sentinels */
    relock_test_sentinel_opts_t opts = {.replicas = 1};
    topo.sentinel = relock_test_sentinel_start(&opts);
  } else {
    topo.cluster = relock_test_cluster_start(NULL);
  }
  if (topo.redis == NULL && topo.sentinel == NULL && topo.cluster == NULL) {
    printf("Bail out! cannot run: cannot start the checker's %s (tests/support/%s; why on stderr)\n",
           topology == T_SINGLE ? "redis-server" : topology == T_SENTINEL ? "Sentinel topology" : "cluster",
           topology == T_SINGLE ? "redis_server.c" : topology == T_SENTINEL ? "sentinel.c" : "cluster.c");
    return 1;
  }
  fixture_ns = truth_now_ns() - fixture_ns;
  sh->topology = topology;
  truth_use_topology_names(topology);
  if (topology == T_SENTINEL) {
    snprintf(sh->addrs, sizeof sh->addrs, "%s", relock_test_sentinel_addrs(topo.sentinel));
    snprintf(sh->master_name, sizeof sh->master_name, "%s", relock_test_sentinel_master_name(topo.sentinel));
  } else if (topology == T_CLUSTER) {
    snprintf(sh->addrs, sizeof sh->addrs, "%s", relock_test_cluster_seeds(topo.cluster));
  }
  if (njava > 0 && build_java_peer() != 0) {
    printf("Bail out! cannot run: tests/interop/build.sh could not build the Redisson peer (./bootstrap --deps "
           "installs java and maven and fetches Redisson)\n");
    return 1;
  }
  sh->nworkers = nworkers + njava;
  sh->njava = njava;
  sh->kinds = kinds;
  for (int w = 0; w < TRUTH_MAX_WORKERS; w++) {
    for (int i = 0; i < TRUTH_SLOTS; i++)
      sh->w[w].letgo[i].name = -1;
    for (int a = 0; a < TRUTH_MAX_OWNERS; a++)
      sh->w[w].busy[a].name = sh->w[w].abandoned[a].name = -1;
  }
  truth_faults_t *faults = truth_faults_new(sh, &topo, sh->nworkers, seed);
  if (faults == NULL) {
    printf("Bail out! cannot run: the fault injector could not start (the truth slot's master unknown?)\n");
    return 1;
  }
  reset_semaphores(truth_faults_unix_path(faults));
  char topo_arg[64] = "";
  if (topology != T_SINGLE)
    snprintf(topo_arg, sizeof topo_arg, " --topology %s", truth_topology_names[topology]);
  printf("# truth: %d relock workers, %d Redisson workers, %d s, seed %llu (replay: truth --seconds %d --seed %llu "
         "--workers %d --java %d%s)\n",
         nworkers, njava, seconds, (unsigned long long)seed, seconds, (unsigned long long)seed, nworkers, njava,
         topo_arg);
  if (topology != T_SINGLE)
    printf("# %s started in %.1f s: %s\n", topology == T_SENTINEL ? "Sentinel topology (a master, a replica, 3 sentinels)"
                                                                  : "cluster (3 masters, 3 replicas)",
           (double)fixture_ns / 1e9, sh->addrs);
  fflush(stdout);
  uint64_t rng = seed;
  for (int i = 0; i < sh->nworkers; i++) {
    int mode = i >= nworkers ? WORKER_JAVA : i % 2 == 0 ? WORKER_EMBEDDED : WORKER_THREADED;
    pids[i] = start_worker(i, truth_faults_port(faults, i), truth_rnd(&rng), mode);
    truth_faults_set_pid(faults, i, pids[i]);
  }
  if (wait_java_ready(nworkers, sh->nworkers) != 0) {
    printf("Bail out! cannot run: the Redisson peer did not start within 60 s\n");
    atomic_store(&sh->stop, 1);
    return 1;
  }
  truth_observer_t *o = truth_observer_new(sh, truth_faults_unix_path(faults));
  if (topology == T_CLUSTER)
    for (int i = 0; i < relock_test_cluster_nodes(topo.cluster); i++) {
      relock_test_redis_t *node = relock_test_cluster_node(topo.cluster, i);
      truth_observer_add_node(o, relock_test_redis_port(node), relock_test_redis_unix_path(node));
    }
  truth_faults_on_move(faults, on_move, o);
  pthread_t observer;
  pthread_create(&observer, NULL, observer_main, o);

  uint64_t start = truth_now_ns(), end = start + (uint64_t)seconds * 1000000000u;
  /* A fault every 150-500 ms, but for a quiet spell of 2 s every 4-7 s:
   * a wake-up is judged only where no fault came near the release and its
   * waiter (observer.c, check_wakeups), and faults this dense leave none */
  uint64_t quiet_at = start + (uint64_t)(4000 + truth_rnd(&rng) % 3000) * 1000000u;
  while (truth_now_ns() < end && !atomic_load(&found)) {
    msleep(150 + (long)(truth_rnd(&rng) % 350));
    if (truth_now_ns() >= quiet_at) {
      msleep(2000);
      quiet_at = truth_now_ns() + (uint64_t)(4000 + truth_rnd(&rng) % 3000) * 1000000u;
    }
    truth_faults_inject(faults);
    maybe_reset_semaphores(truth_faults_unix_path(faults));
  }
  truth_faults_heal(faults);
  double minutes = (double)(truth_now_ns() - start) / 60e9;

  /* wind down: every worker releases everything it holds and exits */
  uint64_t wind_ns = truth_now_ns();
  atomic_store(&sh->stop, 1);
  int exited = 0;
  for (int i = 0; i < sh->nworkers; i++) {
    int status = 0;
    uint64_t deadline = truth_now_ns() + 30000000000ull;
    while (waitpid(pids[i], &status, WNOHANG) == 0 && truth_now_ns() < deadline) {
      msleep(20);
      maybe_reset_semaphores(truth_faults_unix_path(faults));
    }
    if (truth_now_ns() >= deadline) {
      printf("# worker %d did not wind down within 30 s: killed; its trace:\n", i);
      truth_trace_dump_worker(sh, i, 40);
      relock_test_print_stacks(pids[i], 120);
      kill(pids[i], SIGKILL);
      waitpid(pids[i], &status, 0);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      exited++;
    } else {
      printf("# worker %d ended with status %d\n", i, status);
    }
  }
  atomic_store(&observer_stop, 1);
  pthread_join(observer, NULL);
  const char *unix_path = truth_faults_unix_path(faults);
  maybe_reset_semaphores(unix_path);
  int sem_checked = !atomic_load(&sh->sem_paused);
  /* every lease runs out: the watchdog's and the longest fixed one */
  char quiet_why[200];
  int locks_clear, permits_free;
  uint64_t quiet_ns = truth_now_ns();
  if (topology == T_SINGLE) {
    msleep(TRUTH_MAX_FIXED_LEASE_MS + TRUTH_WATCHDOG_MS + 500);
    check_quiet_state(unix_path, quiet_why, sizeof quiet_why, &locks_clear, &permits_free);
  } else {
    /* the same, sooner: with every worker gone nothing writes any more,
     * so the state only ever moves towards quiet (keys and permits
     * expire): quiet at any moment before that deadline is quiet at it */
    uint64_t quiet_by = truth_now_ns() + (uint64_t)(TRUTH_MAX_FIXED_LEASE_MS + TRUTH_WATCHDOG_MS + 500) * 1000000u;
    for (;;) {
      check_quiet_state(unix_path, quiet_why, sizeof quiet_why, &locks_clear, &permits_free);
      if ((locks_clear && (permits_free || !sem_checked)) || truth_now_ns() >= quiet_by)
        break;
      msleep(100);
    }
    printf("# wound down in %.1f s, quiet %.1f s after\n", (double)(quiet_ns - wind_ns) / 1e9,
           (double)(truth_now_ns() - quiet_ns) / 1e9);
  }

  long ops = 0, acquired = 0, errors = 0, lost = 0, hung = 0, closes = 0, interrupts = 0, cancels = 0, forced = 0,
       foreign_slow = 0;
  uint64_t loss_ms = 0;
  for (int i = 0; i < sh->nworkers; i++) {
    truth_worker_slot_t *w = &sh->w[i];
    ops += w->ops;
    acquired += w->acquired;
    errors += w->errors;
    lost += w->lost;
    hung += w->hung;
    closes += w->closes;
    interrupts += w->interrupts;
    cancels += w->cancels;
    forced += w->force_releases;
    foreign_slow += w->foreign_slow;
    if (w->last_loss_latency_ms > loss_ms)
      loss_ms = w->last_loss_latency_ms;
  }
  long nfaults = truth_faults_total(faults);
  printf("# operations: %ld (%.0f/min), acquisitions %ld, errors with clear codes %ld, cancels %ld, interrupts %ld, "
         "force releases %ld, client closes %ld\n",
         ops, ops / minutes, acquired, errors, cancels, interrupts, forced, closes);
  printf("# acquisitions by kind:");
  int kinds_seen = 0;
  for (int k = 0; k < K_COUNT; k++) {
    printf(" %s %ld", truth_kind_names[k], (long)sh->acquired_by_kind[k]);
    kinds_seen += sh->acquired_by_kind[k] > 0 || !(kinds & (1u << k));
  }
  printf("\n# faults: %ld (%.0f/min):", nfaults, nfaults / minutes);
  truth_faults_print(faults);
  printf("\n# checks: %ld (%.0f/s); beliefs seen exempt after a break: %ld; beliefs outrunning a TTL Redisson "
         "cut: %ld; Redisson beliefs Redis no longer had: %ld; losses reported: %ld, the latest %llu ms after its "
         "break\n",
         truth_observer_checks(o), truth_observer_checks(o) / (minutes * 60), truth_observer_exempt(o),
         truth_observer_cuts(o), truth_observer_foreign_void(o), lost, (unsigned long long)loss_ms);

  truth_observer_print_counts(o);
  if (hung > 0) {
    printf("# operations over their bound (and the faults around them):\n");
    truth_trace_dump(sh, " took ");
  }
  if (atomic_load(&sh->violations) > 0) {
    printf("# violations by kind:\n");
    truth_observer_print_violations(o);
  }
  int t = 0, failed = 0;
#define CHECK(cond, ...)                                                                                     \
  do {                                                                                                       \
    int ok_ = (cond);                                                                                        \
    failed += !ok_;                                                                                          \
    printf("%s %d - ", ok_ ? "ok" : "not ok", ++t);                                                         \
    printf(__VA_ARGS__);                                                                                     \
    printf("\n");                                                                                            \
  } while (0)
  CHECK(atomic_load(&sh->violations) == 0, "the invariant held at every check (seed %llu: %ld violations)",
        (unsigned long long)seed, (long)atomic_load(&sh->violations));
  CHECK(truth_observer_checks(o) > 0 && nfaults > 0 && kinds_seen == K_COUNT,
        "every kind was acquired under faults (%d of %d kinds, %ld faults, %ld checks)", kinds_seen, K_COUNT, nfaults,
        truth_observer_checks(o));
  long wakes, slow_wakes;
  truth_observer_wakes(o, &wakes, &slow_wakes);
  /* under faults a wake-up may be slow; most must not be */
  CHECK(wakes < 10 || slow_wakes * 2 <= wakes,
        "waiters are woken: of %ld releases that freed a lock a relock waiter waited on, %ld left it free %d ms "
        "(at most half may, faults or not)",
        wakes, slow_wakes, TRUTH_WAKE_BOUND_MS);
  CHECK(hung == 0, "no operation overran its bound (%ld did; Redisson's over 10 s, not ours to bound: %ld)", hung,
        foreign_slow);
  CHECK(exited == sh->nworkers, "every worker wound down cleanly (%d of %d)", exited, sh->nworkers);
  /* the semaphores are not checked when a reset was still pending at the
   * end (a break of truth emptied them: their counts are anyone's) */
  CHECK(locks_clear && (permits_free || !sem_checked), "nothing is left held once everyone released: %s%s",
        quiet_why, sem_checked ? "" : " (the semaphores not checked: their reset was pending)");
  if (topology != T_SINGLE) {
    long moves = topology == T_SENTINEL ? truth_faults_count(faults, F_FAILOVER) + truth_faults_count(faults, F_KILL_MASTER)
                                        : truth_faults_count(faults, F_CLUSTER_FAILOVER) +
                                              truth_faults_count(faults, F_SLOT_MIGRATION);
    CHECK(moves > 0 && truth_faults_failures(faults) == 0,
          "the %s's own faults ran under the workers: %ld (%s), %ld of them failed in the fixture",
          truth_topology_names[topology], moves,
          topology == T_SENTINEL ? "SENTINEL FAILOVER, kill -9 of the master" : "CLUSTER FAILOVER, slot migration",
          truth_faults_failures(faults));
  }
  printf("1..%d\n", t);
  if (failed)
    printf("# replay: truth --seconds %d --seed %llu --workers %d --java %d%s\n", seconds, (unsigned long long)seed,
           nworkers, njava, topo_arg);

  truth_observer_free(o);
  truth_faults_free(faults);
  relock_test_redis_free(topo.redis);
  relock_test_sentinel_free(topo.sentinel);
  relock_test_cluster_free(topo.cluster);
  munmap(sh, sizeof *sh);
  return failed ? 1 : 0;
}
