/* The truth checker's observer: with a connection of its own, straight to
 * the server's unix socket, it takes an atomic snapshot of everything the
 * objects keep in Redis (one script: TIME, each lock hash with its PTTL,
 * the read holds' timeout keys, the semaphores) between two readings of
 * every worker's beliefs, and checks the invariant of docs/SAFETY.md on
 * the beliefs that stood unchanged across the snapshot:
 *
 *  1. Redis has the owner's field with at least the believed hold count,
 *     and a TTL not shorter than the belief's remaining validity;
 *  2. exclusive kinds have one owner; a writer no other owner; a
 *     semaphore no more holders than permits;
 *  3. a belief taken before a break of truth (a DEL, a force release, a
 *     FLUSHALL, a restart that lost data) is exempt from 1 and 2 only
 *     until the documented bound after the break: after it, it must have
 *     ended (reported lost) or be true again;
 *  4. a field or permit nobody believes in is gone within a bound.
 *
 * A violation prints the state and the trace of the name and stops the run. */
#include <config.h>

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "truth/observer.h"

#define HASH_NAMES (N_RW1 + 1) /* the names kept as hashes: h, f, rw */
#define MAX_BELIEFS (TRUTH_MAX_WORKERS * TRUTH_SLOTS)
#define MAX_ORPHANS 256
#define TOLERANCE_MS 2 /* PTTL is whole milliseconds */

/* Sentinel: the node must still be the master when the script runs (a
 * demoted one answers from a past the new master has moved on from). A
 * cluster node that does not own the slot answers -MOVED by itself. */
static const char master_check_lua[] =
    "if not string.find(redis.call('info', 'replication'), 'role:master', 1, true) then\n"
    "  return redis.error_reply('NOTMASTER this node is no longer the master')\n"
    "end\n";

static const char snapshot_lua[] =
    "local out = {redis.call('time')}\n"
    "local nh = tonumber(ARGV[1])\n"
    "for i = 1, nh do\n"
    "  if redis.call('type', KEYS[i]).ok == 'hash' then\n"
    "    out[#out + 1] = {redis.call('pttl', KEYS[i]), redis.call('hgetall', KEYS[i])}\n"
    "  else\n"
    "    out[#out + 1] = {-2, {}}\n"
    "  end\n"
    "end\n"
    "out[#out + 1] = redis.call('get', KEYS[nh + 1]) or '-'\n"
    "out[#out + 1] = redis.call('get', KEYS[nh + 2]) or '-'\n"
    "out[#out + 1] = redis.call('zrange', KEYS[nh + 3], 0, -1, 'withscores')\n"
    "local rt = {}\n"
    "for j = 2, #ARGV, 4 do\n"
    "  local m = -2\n"
    "  local held = redis.pcall('hget', KEYS[tonumber(ARGV[j + 3])], ARGV[j + 1])\n"
    "  held = type(held) == 'string' and tonumber(held) or 0\n"
    "  for n = 1, math.max(held, tonumber(ARGV[j + 2])) do\n"
    "    local p = redis.call('pttl', ARGV[j] .. n)\n"
    "    if p == -1 then m = -1 break end\n"
    "    if p > m then m = p end\n"
    "  end\n"
    "  rt[#rt + 1] = m\n"
    "end\n"
    "out[#out + 1] = rt\n"
    "return out\n";

typedef struct seen {
  truth_belief_t b;
  uint32_t seq;
  int worker, slot;
  int stable, exempt, counts, untold;
  int64_t read_timeout_ms; /* a read hold's longest timeout key; -3: n/a */
} seen_t;

typedef struct orphan {
  int name;
  char field[80];
  uint64_t since_ns;
  int seen_now;
} orphan_t;

#define MAX_NODES 16

struct truth_observer {
  truth_shared_t *sh;
  char unix_path[256];
  pthread_mutex_t target_mu; /* unix_path and retarget, set by the supervisor */
  int retarget;
  struct {
    int port;
    char path[256];
  } nodes[MAX_NODES];
  int nnodes;
  long moved_followed, snapshots_refused, surplus_rolled_back, counts_rolled_back, leases_rolled_back;
  uint64_t rollback_seen; /* the latest failover the surplus table was cleared for */
  char script[sizeof snapshot_lua + sizeof master_check_lua];
  redisContext *c;
  seen_t seen[MAX_BELIEFS];
  int nseen;
  orphan_t orphans[MAX_ORPHANS];
  int norphans;
  /* beliefs whose key a Redisson holder's renewal cut shorter (the next
   * check of the holder must bring the belief down: a bounded window) */
  orphan_t cuts[MAX_ORPHANS];
  int ncuts;
  uint64_t foreign_seen_ns[N_COUNT];
  /* Redis counting more holds of an owner than it believes, the owner idle there */
  orphan_t surplus[MAX_ORPHANS];
  int nsurplus;
  truth_belief_t letgo[TRUTH_MAX_WORKERS][TRUTH_SLOTS];
  truth_belief_t busy[TRUTH_MAX_WORKERS][TRUTH_MAX_OWNERS];
  truth_belief_t abandoned[TRUTH_MAX_WORKERS][TRUTH_MAX_OWNERS];
  int complaints_told[TRUTH_MAX_WORKERS];
  int freed_read;
  long sem_ops0;
  uint64_t sem_short_since;
  int sem_still; /* no semaphore operation started or ended across the snapshot */
  uint64_t start_ns;
  uint64_t exec_ns; /* when the snapshot ran in Redis (its TIME on this clock), within [t0, t1] */
  uint64_t t0, t1;
  long checks, failed_snapshots;
  int64_t server_ms;
  redisReply *snap;
  long exempt_seen, cuts_seen, foreign_void;
  long wakes_all, wakes_slow;
  long exec_mapped, letgo_checked, surplus_seen, wakes_judged, sem_checked, beliefs_checked;
};

truth_observer_t *truth_observer_new(truth_shared_t *sh, const char *unix_path) {
  truth_observer_t *o = calloc(1, sizeof *o);
  if (o == NULL)
    return NULL;
  o->sh = sh;
  o->start_ns = truth_now_ns();
  snprintf(o->unix_path, sizeof o->unix_path, "%s", unix_path);
  pthread_mutex_init(&o->target_mu, NULL);
  snprintf(o->script, sizeof o->script, "%s%s", sh->topology == T_SENTINEL ? master_check_lua : "", snapshot_lua);
  return o;
}

void truth_observer_set_target(truth_observer_t *o, const char *unix_path) {
  pthread_mutex_lock(&o->target_mu);
  if (strcmp(o->unix_path, unix_path) != 0) {
    snprintf(o->unix_path, sizeof o->unix_path, "%s", unix_path);
    o->retarget = 1;
  }
  pthread_mutex_unlock(&o->target_mu);
}

void truth_observer_add_node(truth_observer_t *o, int port, const char *unix_path) {
  if (o->nnodes == MAX_NODES)
    return;
  o->nodes[o->nnodes].port = port;
  snprintf(o->nodes[o->nnodes].path, sizeof o->nodes[o->nnodes].path, "%s", unix_path);
  o->nnodes++;
}

long truth_observer_failed_snapshots(const truth_observer_t *o) {
  return o->failed_snapshots;
}

/* "-MOVED slot 127.0.0.1:port": the slot's master is now there. */
static void follow_moved(truth_observer_t *o, const char *err) {
  const char *colon = strrchr(err, ':');
  if (strncmp(err, "MOVED ", 6) != 0 || colon == NULL)
    return;
  int port = atoi(colon + 1);
  for (int i = 0; i < o->nnodes; i++)
    if (o->nodes[i].port == port) {
      truth_observer_set_target(o, o->nodes[i].path);
      o->moved_followed++;
    }
}

void truth_observer_free(truth_observer_t *o) {
  if (o == NULL)
    return;
  pthread_mutex_destroy(&o->target_mu);
  if (o->c != NULL)
    redisFree(o->c);
  if (o->snap != NULL)
    freeReplyObject(o->snap);
  free(o);
}

long truth_observer_checks(const truth_observer_t *o) {
  return o->checks;
}

long truth_observer_exempt(const truth_observer_t *o) {
  return o->exempt_seen;
}

long truth_observer_cuts(const truth_observer_t *o) {
  return o->cuts_seen;
}

long truth_observer_foreign_void(const truth_observer_t *o) {
  return o->foreign_void;
}

void truth_observer_wakes(const truth_observer_t *o, long *all, long *slow) {
  *all = o->wakes_all;
  *slow = o->wakes_slow;
}

void truth_observer_print_counts(const truth_observer_t *o) {
  printf("# beliefs checked against Redis: %ld; let-go holds checked: %ld; Redis counting more than believed (owner "
         "idle): %ld; freed locks judged for a wake-up: %ld; semaphore counts checked: %ld; snapshots timed by Redis's clock: %ld\n",
         o->beliefs_checked, o->letgo_checked, o->surplus_seen, o->wakes_judged, o->sem_checked, o->exec_mapped);
  if (o->sh->topology != T_SINGLE)
    printf("# topology: snapshots refused %ld (not the master, -MOVED, -ASK, -TRYAGAIN), not answered %ld, -MOVED "
           "followed %ld; after a failover: counts short excused %ld, surplus excused %ld, leases short excused %ld\n",
           o->snapshots_refused, o->failed_snapshots - o->snapshots_refused, o->moved_followed, o->counts_rolled_back,
           o->surplus_rolled_back, o->leases_rolled_back);
}

/* The latest break of truth on name; UINT64_MAX while one is under way
 * (sent, not answered: it may run at any moment until then). */
static uint64_t last_break(truth_shared_t *sh, int name) {
  if (atomic_load(&sh->breaks[name].pending) > 0 || atomic_load(&sh->global_break.pending) > 0)
    return UINT64_MAX;
  uint64_t a = atomic_load(&sh->breaks[name].at_ns), g = atomic_load(&sh->global_break.at_ns);
  return a > g ? a : g;
}

static void read_beliefs(truth_observer_t *o) {
  o->nseen = 0;
  o->sem_ops0 = atomic_load(&o->sh->sem_ops);
  o->sem_still = atomic_load(&o->sh->sem_inflight) == 0;
  for (int w = 0; w < o->sh->nworkers; w++)
    for (int s = 0; s < TRUTH_SLOTS; s++) {
      seen_t *x = &o->seen[o->nseen];
      x->seq = truth_belief_read(&o->sh->w[w].beliefs[s], &x->b);
      if (x->b.name < 0 || x->b.name >= N_COUNT || x->b.count <= 0)
        continue;
      x->worker = w;
      x->slot = s;
      x->read_timeout_ms = -3;
      o->nseen++;
    }
}

/* Marks the beliefs that stood unchanged across the snapshot: the same
 * holds (epoch), whatever deadline refreshes came meanwhile - the deadline
 * checked is the one read before the snapshot, which no renewal answered
 * after the snapshot ran can have moved. Reads the let-gos and what each
 * owner has in flight, after the snapshot. */
static void reread_beliefs(truth_observer_t *o) {
  for (int i = 0; i < o->nseen; i++) {
    seen_t *x = &o->seen[i];
    truth_belief_t again;
    truth_belief_read(&o->sh->w[x->worker].beliefs[x->slot], &again);
    x->stable = again.name == x->b.name && again.epoch == x->b.epoch && strcmp(again.field, x->b.field) == 0;
    x->untold = x->b.untold_ns != 0 || again.untold_ns != 0;
    if (x->b.foreign)
      o->foreign_seen_ns[x->b.name] = o->t1;
    x->counts = x->stable && x->b.deadline_ns > o->t1 && !x->untold;
    uint64_t brk = last_break(o->sh, x->b.name);
    /* every hold of it taken before the break (a re-entry sent after it
     * must have found the loss, or be true) */
    x->exempt = brk != 0 && (x->b.latest_ns != 0 ? x->b.latest_ns : x->b.since_ns) < brk;
    if (x->exempt) {
      enum truth_group g = truth_name_group(x->b.name);
      /* a semaphore's permits and a permit without a lease are not
       * tracked, and Redisson tells its threads of no loss: nothing can
       * tell those holders; a watched or leased permit's holder is told
       * as a lock's is */
      if (g != G_SEMAPHORE && (g != G_PERMIT || x->b.tracked) && !x->b.foreign && brk != UINT64_MAX &&
          o->t1 > brk + (uint64_t)TRUTH_BREAK_BOUND_MS * 1000000u)
        x->exempt = 0;
    }
  }
  for (int w = 0; w < o->sh->nworkers; w++) {
    for (int s = 0; s < TRUTH_SLOTS; s++)
      truth_belief_read(&o->sh->w[w].letgo[s], &o->letgo[w][s]);
    for (int a = 0; a < TRUTH_MAX_OWNERS; a++) {
      truth_belief_read(&o->sh->w[w].busy[a], &o->busy[w][a]);
      truth_belief_read(&o->sh->w[w].abandoned[a], &o->abandoned[w][a]);
    }
  }
  o->sem_still = o->sem_still && atomic_load(&o->sh->sem_inflight) == 0 && atomic_load(&o->sh->sem_ops) == o->sem_ops0;
}

static int is_read_hold(const seen_t *x) {
  size_t n = strlen(x->b.field);
  return x->b.kind == K_READ && !(n > 6 && strcmp(x->b.field + n - 6, ":write") == 0);
}

static int take_snapshot(truth_observer_t *o) {
  pthread_mutex_lock(&o->target_mu);
  char path[256];
  snprintf(path, sizeof path, "%s", o->unix_path);
  if (o->retarget && o->c != NULL) {
    redisFree(o->c);
    o->c = NULL;
  }
  o->retarget = 0;
  pthread_mutex_unlock(&o->target_mu);
  if (o->c == NULL) {
    struct timeval tv = {1, 0};
    o->c = redisConnectUnixWithTimeout(path, tv);
    if (o->c == NULL || o->c->err) {
      if (o->c != NULL)
        redisFree(o->c);
      o->c = NULL;
      return -1;
    }
    redisSetTimeout(o->c, tv);
  }
  const char *argv[4 + HASH_NAMES + 3 + 4 * MAX_BELIEFS];
  static char keybuf[MAX_BELIEFS][160], countbuf[MAX_BELIEFS][16], indexbuf[MAX_BELIEFS][16];
  char nh[16], nkeys[16], zkey[64];
  int argc = 0;
  argv[argc++] = "EVAL";
  argv[argc++] = o->script;
  snprintf(nkeys, sizeof nkeys, "%d", HASH_NAMES + 3);
  argv[argc++] = nkeys;
  for (int n = 0; n < HASH_NAMES; n++)
    argv[argc++] = truth_names[n];
  truth_suffix_name(zkey, sizeof zkey, N_P0, ":timeout");
  argv[argc++] = truth_names[N_S0];
  argv[argc++] = truth_names[N_P0];
  argv[argc++] = zkey;
  snprintf(nh, sizeof nh, "%d", HASH_NAMES);
  argv[argc++] = nh;
  int nread = 0;
  for (int i = 0; i < o->nseen; i++) {
    seen_t *x = &o->seen[i];
    if (!is_read_hold(x))
      continue;
    /* the owner's timeout keys, as many as Redis or the owner counts (a
     * release in flight deletes the last and keeps the longest expiry) */
    char suffix[120];
    snprintf(suffix, sizeof suffix, ":%s:rwlock_timeout:", x->b.field);
    truth_suffix_name(keybuf[nread], sizeof keybuf[nread], x->b.name, suffix);
    snprintf(countbuf[nread], sizeof countbuf[nread], "%d", x->b.count);
    snprintf(indexbuf[nread], sizeof indexbuf[nread], "%d", x->b.name + 1);
    argv[argc++] = keybuf[nread];
    argv[argc++] = x->b.field;
    argv[argc++] = countbuf[nread];
    argv[argc++] = indexbuf[nread];
    nread++;
  }
  if (o->snap != NULL)
    freeReplyObject(o->snap);
  o->t0 = truth_now_ns();
  o->snap = redisCommandArgv(o->c, argc, argv, NULL);
  o->t1 = truth_now_ns();
  if (o->snap == NULL || o->snap->type != REDIS_REPLY_ARRAY || o->snap->elements != (size_t)HASH_NAMES + 5) {
    if (o->snap == NULL) {
      redisFree(o->c); /* timed out or cut: a fresh connection next time */
      o->c = NULL;
    } else if (o->snap->type == REDIS_REPLY_ERROR) {
      o->snapshots_refused++;
      follow_moved(o, o->snap->str);
    }
    o->failed_snapshots++;
    return -1;
  }
  redisReply *t = o->snap->element[0];
  o->server_ms = strtoll(t->element[0]->str, NULL, 10) * 1000 + strtoll(t->element[1]->str, NULL, 10) / 1000;
  /* when the script ran, on this clock: Redis's TIME (the same machine's
   * wall clock) less the wall clock's lead over the monotonic one */
  struct timespec wall, mt;
  clock_gettime(CLOCK_REALTIME, &wall);
  clock_gettime(CLOCK_MONOTONIC, &mt);
  int64_t lead = ((int64_t)wall.tv_sec - (int64_t)mt.tv_sec) * 1000000000 + (wall.tv_nsec - mt.tv_nsec);
  int64_t server_ns =
      strtoll(t->element[0]->str, NULL, 10) * 1000000000 + strtoll(t->element[1]->str, NULL, 10) * 1000;
  int64_t exec = server_ns - lead;
  /* outside [t0, t1] the mapping is not to be trusted (a server stopped
   * and resumed can answer TIME from before): the latest it can be then */
  /* and only for a quick snapshot: TIME and PTTL need not read one clock
   * (a busy server), so the mapping may err by the snapshot's time: within
   * the tolerance, it cannot make a violation */
  o->exec_ns = exec < (int64_t)o->t0 || exec > (int64_t)o->t1 || o->t1 - o->t0 > TOLERANCE_MS * 1000000u
                   ? o->t1
                   : (uint64_t)exec;
  if (o->exec_ns != o->t1)
    o->exec_mapped++;
  redisReply *rt = o->snap->element[HASH_NAMES + 4];
  nread = 0;
  for (int i = 0; i < o->nseen; i++)
    if (is_read_hold(&o->seen[i]) && (size_t)nread < rt->elements)
      o->seen[i].read_timeout_ms = rt->element[nread++]->integer;
  return 0;
}

/* The hash of name in the snapshot: its PTTL and field/value pairs. */
static redisReply *hash_of(truth_observer_t *o, int name, long long *pttl) {
  redisReply *h = o->snap->element[1 + name];
  *pttl = h->element[0]->integer;
  return h->element[1];
}

static long long field_count(redisReply *pairs, const char *field) {
  for (size_t i = 0; i + 1 < pairs->elements; i += 2)
    if (strcmp(pairs->element[i]->str, field) == 0)
      return strtoll(pairs->element[i + 1]->str, NULL, 10);
  return 0;
}

static void hex16(const char *bytes, size_t len, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < len; i++) {
    out[2 * i] = digits[(unsigned char)bytes[i] >> 4];
    out[2 * i + 1] = digits[(unsigned char)bytes[i] & 15];
  }
  out[2 * len] = '\0';
}

/* A permit's remaining life on the server (ms), -2 when it is not taken. */
static long long permit_left(truth_observer_t *o, const char *id) {
  redisReply *z = o->snap->element[HASH_NAMES + 3];
  char hex[80];
  for (size_t i = 0; i + 1 < z->elements; i += 2) {
    hex16(z->element[i]->str, z->element[i]->len < 32 ? z->element[i]->len : 32, hex);
    if (strcasecmp(hex, id) == 0) {
      long long score = strtoll(z->element[i + 1]->str, NULL, 10);
      return score >= 922337203685477LL ? -1 : score - o->server_ms;
    }
  }
  return -2;
}

static const char *lease_word(const seen_t *x) {
  if (x->b.fixed)
    return "fixed";
  return x->b.kind == K_PERMIT && !x->b.tracked ? "no" : "watchdog";
}

static void print_state(truth_observer_t *o, int name) {
  printf("#   Redis (server time %" PRId64 " ms): ", o->server_ms);
  enum truth_group g = truth_name_group(name);
  if (g == G_SEMAPHORE) {
    printf("%s = %s\n", truth_names[name], o->snap->element[HASH_NAMES + 1]->str);
  } else if (g == G_PERMIT) {
    redisReply *z = o->snap->element[HASH_NAMES + 3];
    printf("%s = %s, %zu permits taken:", truth_names[name], o->snap->element[HASH_NAMES + 2]->str, z->elements / 2);
    for (size_t i = 0; i + 1 < z->elements; i += 2) {
      char hex[80];
      hex16(z->element[i]->str, z->element[i]->len < 32 ? z->element[i]->len : 32, hex);
      printf(" %s until %s", hex, z->element[i + 1]->str);
    }
    printf("\n");
  } else {
    long long pttl;
    redisReply *pairs = hash_of(o, name, &pttl);
    printf("%s PTTL %lld {", truth_names[name], pttl);
    for (size_t i = 0; i + 1 < pairs->elements; i += 2)
      printf(" %s: %s", pairs->element[i]->str, pairs->element[i + 1]->str);
    printf(" }\n");
  }
  uint64_t brk = last_break(o->sh, name);
  printf("#   last break of truth on it: %s%s\n", brk == UINT64_MAX ? "(one under way) " : "",
         brk == 0 ? "none" : truth_fault_names[atomic_load(&o->sh->breaks[name].at_ns) >= brk
                                                    ? atomic_load(&o->sh->breaks[name].what)
                                                    : atomic_load(&o->sh->global_break.what)]);
  if (brk != 0 && brk != UINT64_MAX)
    printf("#     at %llu ms (now %llu ms)\n", (unsigned long long)(brk / 1000000u),
           (unsigned long long)(o->t1 / 1000000u));
  for (int i = 0; i < o->nseen; i++) {
    seen_t *x = &o->seen[i];
    if (x->b.name != name)
      continue;
    printf("#   belief: worker %d slot %d %s %s count %d %s lease, since %llu ms, valid for %lld ms%s%s\n", x->worker,
           x->slot, truth_kind_names[x->b.kind], x->b.field, x->b.count, lease_word(x),
           (unsigned long long)(x->b.since_ns / 1000000u),
           x->b.deadline_ns == UINT64_MAX ? -1LL : (long long)((int64_t)(x->b.deadline_ns - o->t1) / 1000000),
           x->stable ? "" : " (changed during the snapshot)", x->exempt ? " (exempt: taken before a break)" : "");
  }
}

static int violation(truth_observer_t *o, int name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The kinds of violation seen (their format), for the summary. */
static const char *classes[32];
static long class_count[32];

static int violation(truth_observer_t *o, int name, const char *fmt, ...) {
  atomic_fetch_add(&o->sh->violations, 1);
  /* with --keep-going: each kind of violation is printed twice at most */
  int k = 0;
  while (k < 31 && classes[k] != NULL && classes[k] != fmt)
    k++;
  classes[k] = fmt;
  if (++class_count[k] > 2)
    return 1;
  printf("# VIOLATION at %llu ms (%.1f s into the run): ", (unsigned long long)(o->t1 / 1000000u),
         (double)(o->t1 - o->start_ns) / 1e9);
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
  print_state(o, name);
  printf("#   trace of %s:\n", truth_names[name]);
  truth_trace_dump(o->sh, truth_names[name]);
  fflush(stdout);
  return 1;
}

/* How long (name, field) has been seen so, in a table of such entries
 * (entries not seen at a check are dropped by sweep()). */
static uint64_t seen_for_ns(truth_observer_t *o, orphan_t *table, int *n, int name, const char *field) {
  orphan_t *x = NULL;
  for (int i = 0; i < *n && x == NULL; i++)
    if (table[i].name == name && strcmp(table[i].field, field) == 0)
      x = &table[i];
  if (x == NULL) {
    if (*n == MAX_ORPHANS)
      return 0;
    x = &table[(*n)++];
    x->name = name;
    snprintf(x->field, sizeof x->field, "%s", field);
    x->since_ns = o->t0;
  }
  x->seen_now = 1;
  return o->t1 - x->since_ns;
}

static void sweep(orphan_t *table, int *n) {
  int k = 0;
  for (int i = 0; i < *n; i++)
    if (table[i].seen_now) {
      table[i].seen_now = 0;
      table[k++] = table[i];
    }
  *n = k;
}

/* A Redisson holder of the same name may have cut the key's TTL (its
 * renewal is a plain PEXPIRE): relock cannot stop that, only bring its own
 * belief down at its next check. Such a shortfall is tolerated for the
 * bound of a break of truth, and a violation after it. A Redisson
 * acquisition or unlock in flight counts as a holder seen: it may hold,
 * and be renewed, while the Java worker states no belief. */
static int cut_by_redisson(truth_observer_t *o, const seen_t *x) {
  uint64_t seen = o->foreign_seen_ns[x->b.name];
  uint64_t trying = atomic_load(&o->sh->foreign_trying_ns[x->b.name]);
  if (trying != 0 && (trying < o->t1 ? trying : o->t1) > seen)
    seen = trying < o->t1 ? trying : o->t1;
  if (seen == 0 || o->t1 - seen > (uint64_t)TRUTH_BREAK_BOUND_MS * 1000000u)
    return 0;
  o->cuts_seen++;
  return seen_for_ns(o, o->cuts, &o->ncuts, x->b.name, x->b.field) <= (uint64_t)TRUTH_BREAK_BOUND_MS * 1000000u;
}

/* 1: Redis keeps what each standing belief counts on. */
/* Whether the owner of worker w's slot s has an operation in flight on name. */
static int owner_busy_on(truth_observer_t *o, int w, int s, int name) {
  const truth_belief_t *b = &o->busy[w][s / TRUTH_SLOTS_PER_OWNER];
  return b->name >= 0 && (b->name == name || (b->kind == K_MULTI && b->name + 1 == name));
}

/* A failover that lost writes may have lost a re-entry of a hold that
 * survived it: Redis counts fewer than its owner believes, but the field is
 * there, and renewals and checks find it - nothing can tell the owner
 * until a release frees what it still believes in (the library reports
 * that as lost, at once). Excused for a belief with a hold from before the
 * failover: a count short but not naught, or naught while its owner's
 * release is in flight there (the one that frees it). */
static int rolled_back_count(truth_observer_t *o, const seen_t *x, long long count) {
  uint64_t rb = atomic_load(&o->sh->rollback.at_ns);
  if (rb == 0 || x->b.since_ns >= rb)
    return 0;
  if (count == 0 && !owner_busy_on(o, x->worker, x->slot, x->b.name))
    return 0;
  o->counts_rolled_back++;
  return 1;
}

/* A failover that lost writes may have lost the lease a fixed re-entry
 * set (its count and its release too, or not): Redis keeps the key less
 * than its owner was told, and a re-entry sent after the failover cannot
 * see it (its count is true). The library's check of fixed leases finds
 * such a cut within a cycle: excused for a belief with a hold from before
 * the failover until the bound of a break. */
static int rolled_back_lease(truth_observer_t *o, const seen_t *x) {
  uint64_t rb = atomic_load(&o->sh->rollback.at_ns);
  if (rb == 0 || x->b.since_ns >= rb || o->t1 > rb + (uint64_t)TRUTH_BREAK_BOUND_MS * 1000000u)
    return 0;
  o->leases_rolled_back++;
  return 1;
}

static int check_truth(truth_observer_t *o, seen_t *x) {
  o->beliefs_checked++;
  /* its validity left when the snapshot ran */
  int64_t left = ((int64_t)x->b.deadline_ns - (int64_t)o->exec_ns) / 1000000 - TOLERANCE_MS;
  enum truth_group g = truth_name_group(x->b.name);
  if (g == G_SEMAPHORE || x->b.foreign)
    return 0;
  if (g == G_PERMIT) {
    long long p = permit_left(o, x->b.field);
    if (p == -2)
      return violation(o, x->b.name, "permit %s believed (%lld ms left) is not taken in Redis", x->b.field,
                       x->b.deadline_ns == UINT64_MAX ? -1LL : (long long)left);
    if (p != -1 && (x->b.deadline_ns == UINT64_MAX || p < left))
      return violation(o, x->b.name, "permit %s: Redis keeps it %lld ms, its holder believes %lld ms", x->b.field, p,
                       x->b.deadline_ns == UINT64_MAX ? -1LL : (long long)left);
    return 0;
  }
  long long pttl;
  redisReply *pairs = hash_of(o, x->b.name, &pttl);
  long long count = field_count(pairs, x->b.field);
  if (count < x->b.count && rolled_back_count(o, x, count))
    count = x->b.count;
  if (count < x->b.count)
    return violation(o, x->b.name, "%s: Redis counts %lld holds, its owner believes %d", x->b.field, count,
                     x->b.count);
  if (x->b.foreign) /* how long Redisson keeps its holds is its own business */
    return 0;
  int short_key = pttl != -1 && pttl < left;
  int short_timeouts = is_read_hold(x) && x->read_timeout_ms != -1 && x->read_timeout_ms < left;
  if ((short_key || short_timeouts) && (cut_by_redisson(o, x) || rolled_back_lease(o, x)))
    return 0;
  if (short_key)
    return violation(o, x->b.name, "%s: the key expires in %lld ms, its owner believes %lld ms", x->b.field, pttl,
                     (long long)left);
  if (short_timeouts)
    return violation(o, x->b.name, "%s: its read timeout keys expire in %lld ms, its owner believes %lld ms",
                     x->b.field, (long long)x->read_timeout_ms, (long long)left);
  return 0;
}

static void owner_base(const char *field, char *out, size_t size) {
  snprintf(out, size, "%s", field);
  size_t n = strlen(out);
  if (n > 6 && strcmp(out + n - 6, ":write") == 0)
    out[n - 6] = '\0';
}

/* A Redisson thread's belief whose field Redis no longer has: Redisson
 * lost it by itself (its read unlock deletes the last timeout key, not the
 * released hold's, and sets the lock's expiry from the others) and tells
 * its thread nothing; another owner may rightly take the lock then. Such a
 * belief does not count against others. (That relock's scripts never take
 * a Redisson hold away is tests/interop's to show.) */
static int void_foreign(truth_observer_t *o, const seen_t *x) {
  enum truth_group g = truth_name_group(x->b.name);
  if (!x->b.foreign || g == G_SEMAPHORE || g == G_PERMIT)
    return 0;
  long long pttl;
  if (field_count(hash_of(o, x->b.name, &pttl), x->b.field) >= x->b.count)
    return 0;
  o->foreign_void++;
  return 1;
}

/* 2: no two owners where the kind allows one. */
static int check_exclusion(truth_observer_t *o, int name) {
  enum truth_group g = truth_name_group(name);
  int permits = 0;
  const seen_t *first = NULL, *writer = NULL;
  for (int i = 0; i < o->nseen; i++) {
    seen_t *x = &o->seen[i];
    if (x->b.name != name || !x->counts || x->exempt || void_foreign(o, x))
      continue;
    permits += x->b.count;
    size_t n = strlen(x->b.field);
    if (g == G_RW && n > 6 && strcmp(x->b.field + n - 6, ":write") == 0)
      writer = x;
    if ((g == G_HASH || g == G_FAIR) && first != NULL && strcmp(first->b.field, x->b.field) != 0)
      return violation(o, name, "two owners hold it: %s and %s", first->b.field, x->b.field);
    if (first == NULL)
      first = x;
  }
  if ((g == G_SEMAPHORE || g == G_PERMIT) && permits > TRUTH_PERMITS)
    return violation(o, name, "%s: %d permits believed held, %d exist", truth_names[name], permits,
                     TRUTH_PERMITS);
  if (writer != NULL) {
    char wb[96], xb[96];
    owner_base(writer->b.field, wb, sizeof wb);
    for (int i = 0; i < o->nseen; i++) {
      seen_t *x = &o->seen[i];
      if (x->b.name != name || !x->counts || x->exempt || void_foreign(o, x))
        continue;
      owner_base(x->b.field, xb, sizeof xb);
      if (strcmp(wb, xb) != 0)
        return violation(o, name, "writer %s and another owner %s at once", writer->b.field, x->b.field);
    }
  }
  return 0;
}

static int believed(truth_observer_t *o, int name, const char *field) {
  for (int i = 0; i < o->nseen; i++)
    if (o->seen[i].b.name == name && strcasecmp(o->seen[i].b.field, field) == 0)
      return 1;
  return 0;
}

static int track_orphan(truth_observer_t *o, int name, const char *field) {
  uint64_t for_ns = seen_for_ns(o, o->orphans, &o->norphans, name, field);
  if (for_ns > (uint64_t)TRUTH_ORPHAN_BOUND_MS * 1000000u)
    return violation(o, name, "%s is held in Redis although nobody has believed in it for %lld ms (bound %d)",
                     field, (long long)(for_ns / 1000000u), TRUTH_ORPHAN_BOUND_MS);
  return 0;
}

/* 4: holds nobody believes in go away. */
static int check_orphans(truth_observer_t *o) {
  int bad = 0;
  for (int n = 0; n < HASH_NAMES && !bad; n++) {
    long long pttl;
    redisReply *pairs = hash_of(o, n, &pttl);
    for (size_t i = 0; i + 1 < pairs->elements && !bad; i += 2) {
      const char *f = pairs->element[i]->str;
      if (strcmp(f, "mode") != 0 && !believed(o, n, f))
        bad = track_orphan(o, n, f);
    }
  }
  /* a permit without a lease that a client's close could not give back is
   * taken for good, as documented: as many as the closes said are allowed */
  long allowed = atomic_load(&o->sh->unreturned);
  redisReply *z = o->snap->element[HASH_NAMES + 3];
  for (size_t i = 0; i + 1 < z->elements && !bad; i += 2) {
    char hex[80];
    hex16(z->element[i]->str, z->element[i]->len < 32 ? z->element[i]->len : 32, hex);
    long long score = strtoll(z->element[i + 1]->str, NULL, 10);
    /* a failover that lost writes may bring back a permit without a lease
     * given back meanwhile: taken for good, until the reset it brought on */
    if (atomic_load(&o->sh->sem_paused) && atomic_load(&o->sh->rollback.at_ns) != 0)
      break;
    if (score > o->server_ms && !believed(o, N_P0, hex) &&
        !(score >= 922337203685477LL && allowed-- > 0))
      bad = track_orphan(o, N_P0, hex);
  }
  sweep(o->orphans, &o->norphans);
  return bad;
}

/* Whether an owner's operation in flight is on (name, field). */
static int busy_on_field(truth_observer_t *o, int name, const char *field) {
  char want[96], have[96];
  owner_base(field, want, sizeof want);
  for (int w = 0; w < o->sh->nworkers; w++)
    for (int a = 0; a < TRUTH_MAX_OWNERS; a++) {
      const truth_belief_t *b = &o->busy[w][a];
      if (b->name < 0 || !(b->name == name || (b->kind == K_MULTI && b->name + 1 == name)))
        continue;
      owner_base(b->field, have, sizeof have);
      if (strcmp(want, have) == 0)
        return 1;
    }
  return 0;
}

/* Redis counts of a field no more holds than its owner believes, and one
 * more while the owner has an operation in flight there (a re-entry sent,
 * a release not yet run): an excess past that, held on for
 * TRUTH_SURPLUS_BOUND_MS, is a hold its owner does not know of - counted
 * twice, never given back - believed or not (across the owner's releases
 * and acquisitions of the field: a leftover is not forgotten). */
/* A failover that lost writes (sh->rollback) may bring back what a lost
 * release of a re-entry took away: Redis then counts one more than its
 * owner believes, renewed with the hold, for as long as it holds - or, if
 * the owner let go of the rest, a field nobody believes in that its owner
 * may take again (one more again). A surplus first seen within
 * TRUTH_SURPLUS_BOUND_MS of the failover (the surplus table starts afresh
 * at each) is that, and excused for as long as it lasts. */
static int rolled_back_surplus(truth_observer_t *o, uint64_t for_ns) {
  uint64_t rb = atomic_load(&o->sh->rollback.at_ns);
  if (rb == 0)
    return 0;
  if (o->t1 - for_ns >= rb + (uint64_t)TRUTH_SURPLUS_BOUND_MS * 1000000u)
    return 0;
  o->surplus_rolled_back++;
  return 1;
}

static int check_excess(truth_observer_t *o) {
  uint64_t rb = atomic_load(&o->sh->rollback.at_ns);
  if (rb != o->rollback_seen) { /* a failover since: the surplus seen so far is to be judged afresh */
    o->rollback_seen = rb;
    o->nsurplus = 0;
  }
  for (int n = 0; n < HASH_NAMES; n++) {
    long long pttl;
    redisReply *pairs = hash_of(o, n, &pttl);
    for (size_t i = 0; i + 1 < pairs->elements; i += 2) {
      const char *f = pairs->element[i]->str;
      if (strcmp(f, "mode") == 0)
        continue;
      long long count = strtoll(pairs->element[i + 1]->str, NULL, 10), believed = 0;
      int foreign = 0;
      for (int k = 0; k < o->nseen; k++)
        if (o->seen[k].b.name == n && strcmp(o->seen[k].b.field, f) == 0) {
          believed += o->seen[k].b.count;
          foreign |= o->seen[k].b.foreign;
        }
      if (foreign)
        continue;
      long long allowed = believed + busy_on_field(o, n, f);
      if (count <= allowed)
        continue;
      o->surplus_seen++;
      uint64_t for_ns = seen_for_ns(o, o->surplus, &o->nsurplus, n, f);
      if (for_ns > (uint64_t)TRUTH_SURPLUS_BOUND_MS * 1000000u && !rolled_back_surplus(o, for_ns))
        return violation(o, n, "%s: Redis counts %lld holds, its owner believes %lld (%lld with what it has in flight), "
                         "for %lld ms", f, count, believed, allowed, (long long)(for_ns / 1000000u));
    }
  }
  return 0;
}

/* A hold let go (its owner asked to release it, whatever the answer) is
 * believed by nobody: it must not be renewed, so it is gone from Redis
 * within its lease and a margin of its release being asked - unless the
 * same field is held again, or its owner is at it again. */
static int check_let_go_hold(truth_observer_t *o, int w, int s, const truth_belief_t *g, const char *what) {
  if (g->name < 0 || g->name >= N_COUNT || g->since_ns == 0 || g->foreign || g->lease_ms <= 0)
    return 0;
  enum truth_group grp = truth_name_group(g->name);
  if (grp == G_SEMAPHORE || owner_busy_on(o, w, s, g->name))
    return 0;
  for (int i = 0; i < o->nseen; i++)
    if (o->seen[i].b.name == g->name && strcmp(o->seen[i].b.field, g->field) == 0)
      return 0; /* held again */
  for (int k = 0; k < TRUTH_SLOTS; k++) { /* or since (its owner publishes it before it stops being busy) */
    truth_belief_t b;
    truth_belief_read(&o->sh->w[w].beliefs[k], &b);
    if (b.name == g->name && strcmp(b.field, g->field) == 0)
      return 0;
  }
  const truth_belief_t *ab = &o->abandoned[w][s / TRUTH_SLOTS_PER_OWNER];
  if (ab != g && ab->name == g->name && strcmp(ab->field, g->field) == 0 && ab->since_ns > g->since_ns)
    return 0; /* an acquisition given up on since: its own bound applies */
  uint64_t bound = g->since_ns + (uint64_t)(g->lease_ms + TRUTH_LETGO_MARGIN_MS) * 1000000u;
  if (o->t0 < bound)
    return 0;
  long long count = 0, pttl = -2;
  if (grp == G_PERMIT) {
    pttl = permit_left(o, g->field);
    count = pttl != -2 && (pttl == -1 || pttl > 0);
  } else {
    count = field_count(hash_of(o, g->name, &pttl), g->field);
  }
  o->letgo_checked++;
  if (count <= 0)
    return 0;
  char who[16];
  snprintf(who, sizeof who, " a%d ", s / TRUTH_SLOTS_PER_OWNER);
  printf("#   what the owner did (lines of every worker's a%d):\n", s / TRUTH_SLOTS_PER_OWNER);
  truth_trace_dump(o->sh, who);
  return violation(o, g->name,
                   "%s %s: its owner (worker %d) %s %lld ms ago (lease %lld ms) and Redis still holds it (count %lld, "
                   "%lld ms left): renewed, or never given back",
                   truth_kind_names[g->kind], g->field, w, what, (long long)((o->t1 - g->since_ns) / 1000000u),
                   (long long)g->lease_ms, count, pttl);
}

static int check_letgo(truth_observer_t *o) {
  for (int w = 0; w < o->sh->nworkers; w++) {
    for (int s = 0; s < TRUTH_SLOTS; s++)
      if (check_let_go_hold(o, w, s, &o->letgo[w][s], "asked to release it"))
        return 1;
    for (int a = 0; a < TRUTH_MAX_OWNERS; a++)
      if (check_let_go_hold(o, w, a * TRUTH_SLOTS_PER_OWNER, &o->abandoned[w][a],
                            "gave up acquiring it (an error)"))
        return 1;
  }
  return 0;
}

/* What a worker found by itself. */
static int check_complaints(truth_observer_t *o) {
  for (int w = 0; w < o->sh->nworkers; w++) {
    int n = atomic_load(&o->sh->w[w].complaints);
    if (n <= o->complaints_told[w])
      continue;
    o->complaints_told[w] = n;
    const char *text = o->sh->w[w].complaint;
    int name = o->sh->w[w].complaint_name;
    if (name < 0 || name >= N_COUNT)
      name = 0;
    if (strstr(text, "never told") != NULL)
      return violation(o, name, "worker %d: %s", w, text);
    if (strstr(text, "token") != NULL)
      return violation(o, name, "worker %d (fencing): %s", w, text);
    return violation(o, name, "worker %d (late): %s", w, text);
  }
  return 0;
}

/* The semaphores' counts, while no operation on them started or ended
 * across the snapshot: the free permits and those believed held make the
 * permits (less a release that failed, which may or may not have given
 * back, and what closes could not give back); the permit-expirable
 * semaphore's free count and its taken permits make them exactly. */
static int check_counts(truth_observer_t *o) {
  if (!o->sem_still || atomic_load(&o->sh->sem_paused) || last_break(o->sh, N_S0) == UINT64_MAX)
    return 0;
  const char *sv = o->snap->element[HASH_NAMES + 1]->str, *pv = o->snap->element[HASH_NAMES + 2]->str;
  if (sv == NULL || pv == NULL || strcmp(sv, "-") == 0 || strcmp(pv, "-") == 0)
    return 0;
  long believed = 0;
  for (int i = 0; i < o->nseen; i++)
    if (o->seen[i].b.name == N_S0 && o->seen[i].stable && !o->seen[i].exempt)
      believed += o->seen[i].b.count;
    else if (o->seen[i].b.name == N_S0)
      return 0; /* one changing, or exempt after a break: the count is anyone's */
  long free_s = strtol(sv, NULL, 10), free_p = strtol(pv, NULL, 10);
  long slack = atomic_load(&o->sh->sem_uncertain) + atomic_load(&o->sh->unreturned);
  redisReply *z = o->snap->element[HASH_NAMES + 3];
  long taken = (long)(z->elements / 2);
  o->sem_checked++;
  /* more free than the permits less those believed is at once wrong;
   * fewer may be a give-back under way (of an acquisition cancelled or
   * timed out): for a bound */
  if (free_s < 0 || free_s + believed > TRUTH_PERMITS)
    return violation(o, N_S0, "%s: %ld permits free and %ld believed held, of %d", truth_names[N_S0], free_s,
                     believed, TRUTH_PERMITS);
  if (free_s + believed < TRUTH_PERMITS - slack) {
    if (o->sem_short_since == 0)
      o->sem_short_since = o->t0;
    if (o->t1 - o->sem_short_since > (uint64_t)TRUTH_SURPLUS_BOUND_MS * 1000000u)
      return violation(o, N_S0, "%s: %ld permits free and %ld believed held, of %d (%ld uncertain), for %lld ms",
                       truth_names[N_S0], free_s, believed, TRUTH_PERMITS, slack,
                       (long long)((o->t1 - o->sem_short_since) / 1000000u));
  } else {
    o->sem_short_since = 0;
  }
  if (free_p < 0 || free_p + taken != TRUTH_PERMITS)
    return violation(o, N_P0, "%s: %ld permits free and %ld taken, of %d", truth_names[N_P0], free_p, taken,
                     TRUTH_PERMITS);
  return 0;
}

/* A lock freed by a release is taken by a relock waiter (reentrant or
 * fenced: they are woken by the release's message) within
 * TRUTH_WAKE_BOUND_MS, when no fault came near it: judged once per
 * release, on the h names (Redisson workers take them unseen: not then). */
/* Whether a fault came near [from, to] on the server (every worker) or on
 * one of the workers (bit w of mask). */
static int fault_on(truth_shared_t *sh, uint64_t from, uint64_t to, uint64_t mask) {
  if (truth_fault_near(sh, from, to, TRUTH_MAX_WORKERS)) /* no worker has that id: the server's faults alone */
    return 1;
  for (int w = 0; w < sh->nworkers; w++)
    if ((mask >> w) & 1u && truth_fault_near(sh, from, to, w))
      return 1;
  return 0;
}

static int check_wakeups(truth_observer_t *o) {
  if (o->sh->njava > 0)
    return 0;
  int next = atomic_load(&o->sh->freed_next);
  if (next - o->freed_read > 256)
    o->freed_read = next - 256; /* overrun: the oldest are gone */
  for (; o->freed_read < next; o->freed_read++) {
    int i = o->freed_read % 256;
    uint64_t f = atomic_load(&o->sh->freed[i][1]);
    int n = (int)atomic_load(&o->sh->freed[i][0]);
    if (f == 0 || n < N_H0 || n > N_H2)
      continue;
    if (o->t0 < f + (uint64_t)TRUTH_WAKE_BOUND_MS * 1000000u)
      break; /* not yet: the ring is in time order (nearly) */
    uint64_t brk = last_break(o->sh, n);
    if (brk == UINT64_MAX || brk + 3000000000ull > f)
      continue;
    uint64_t waiter = atomic_load(&o->sh->freed[i][2]);
    if (waiter == 0)
      continue;
    int ww = (int)((waiter - 1) / 16), wa = (int)((waiter - 1) % 16);
    if (ww >= o->sh->nworkers || wa >= TRUTH_MAX_OWNERS)
      continue;
    /* a hand-off goes to the process registered longest: a fault on a
     * worker busy on the name (or the releaser) may hold it up (its
     * fallback then), as a fault of the server may; one on another worker
     * cannot; the run's end neither (workers closing) */
    uint64_t involved = atomic_load(&o->sh->freed[i][3]);
    int quiet = !atomic_load(&o->sh->stop) && !fault_on(o->sh, f - 100000000u, o->t1, involved);
    long long pttl;
    int taken = atomic_load(&o->sh->taken_ns[n]) >= f || hash_of(o, n, &pttl)->elements > 0;
    /* every such release, faults or not, for the run's share of slow ones */
    o->wakes_all++;
    o->wakes_slow += !taken;
    const truth_belief_t *wb = &o->busy[ww][wa];
    /* judged at once when nothing came near: taken, or the waiter waits
     * on (one that gave up meanwhile proves nothing) */
    if (!quiet || (!taken && (wb->name != n || wb->deadline_ns == 0)))
      continue;
    o->wakes_judged++;
    if (taken)
      continue;
    const truth_belief_t *waiter_b = wb;
    o->freed_read++;
    return violation(o, n,
                     "%s: freed %lld ms ago and still free, while worker %d's %s acquisition (%s) had waited %lld ms "
                     "before it and waits on: the waiter was not woken",
                     truth_names[n], (long long)((o->t1 - f) / 1000000u), ww, truth_kind_names[waiter_b->kind],
                     waiter_b->field, (long long)((f - waiter_b->since_ns) / 1000000u));
  }
  return 0;
}

void truth_observer_print_violations(const truth_observer_t *o) {
  (void)o;
  for (int k = 0; k < 32 && classes[k] != NULL; k++)
    printf("#   %ld x \"%s\"\n", class_count[k], classes[k]);
}

int truth_observer_check(truth_observer_t *o) {
  /* the truth between two nodes (a Sentinel failover under way): no
   * snapshot of either is the truth; the checks after it judge the outcome */
  if (atomic_load(&o->sh->moving) > 0)
    return 0;
  read_beliefs(o);
  if (take_snapshot(o) != 0 || atomic_load(&o->sh->moving) > 0)
    return 0;
  reread_beliefs(o);
  o->checks++;
  int bad = check_complaints(o);
  for (int i = 0; i < o->nseen && !bad; i++) {
    seen_t *x = &o->seen[i];
    if (x->exempt)
      o->exempt_seen++;
    if (x->counts && !x->exempt)
      bad = check_truth(o, x);

  }
  for (int n = 0; n < N_COUNT && !bad; n++)
    bad = check_exclusion(o, n);
  sweep(o->cuts, &o->ncuts);
  if (!bad)
    bad = check_excess(o);
  sweep(o->surplus, &o->nsurplus);
  if (!bad)
    bad = check_letgo(o);
  if (!bad)
    bad = check_counts(o);
  if (!bad)
    bad = check_wakeups(o);
  if (!bad)
    bad = check_orphans(o);
  return bad;
}
