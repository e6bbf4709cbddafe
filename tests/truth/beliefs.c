/* The truth checker's tables, the beliefs' sequence lock and the trace
 * rings (tests/truth/truth.h). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "truth/truth.h"

const char *const truth_kind_names[K_COUNT] = {"reentrant", "spin",  "fenced",    "multi",  "fair",
                                               "read",      "write", "semaphore", "permit"};
const char *truth_names[N_COUNT] = {"truth:h:0",  "truth:h:1",  "truth:h:2", "truth:f:0", "truth:f:1",
                                    "truth:rw:0", "truth:rw:1", "truth:s:0", "truth:p:0"};
static const char *const tagged_names[N_COUNT] = {
    TRUTH_HASH_TAG ":h:0",  TRUTH_HASH_TAG ":h:1",  TRUTH_HASH_TAG ":h:2", TRUTH_HASH_TAG ":f:0", TRUTH_HASH_TAG ":f:1",
    TRUTH_HASH_TAG ":rw:0", TRUTH_HASH_TAG ":rw:1", TRUTH_HASH_TAG ":s:0", TRUTH_HASH_TAG ":p:0"};
const char *const truth_topology_names[3] = {"single", "sentinel", "cluster"};

void truth_use_topology_names(int topology) {
  if (topology == T_CLUSTER)
    for (int i = 0; i < N_COUNT; i++)
      truth_names[i] = tagged_names[i];
}

void truth_suffix_name(char *out, size_t size, int name, const char *suffix) {
  if (strchr(truth_names[name], '{') != NULL)
    snprintf(out, size, "%s%s", truth_names[name], suffix);
  else
    snprintf(out, size, "{%s}%s", truth_names[name], suffix);
}
const char *const truth_fault_names[F_COUNT] = {
    "DEL of a lock",       "FLUSHALL",          "restart losing data", "force release (a relock client)",
    "restart (AOF)",       "DEBUG SLEEP",       "CLIENT KILL",         "CLIENT PAUSE",
    "SIGSTOP of Redis",    "proxy delay",       "proxy cut",           "proxy stall",
    "proxy black hole",    "SIGSTOP of a client", "a step of a client's wall clock",
    "a client's outage past the watchdog timeout",
    "SENTINEL FAILOVER", "kill -9 of the master", "CLUSTER FAILOVER", "a live migration of the truth slot",
    "CLIENT PAUSE WRITE past the watchdog timeout"};

int truth_kind_first_name(enum truth_kind k) {
  switch (k) {
  case K_FAIR: return N_F0;
  case K_READ:
  case K_WRITE: return N_RW0;
  case K_SEMAPHORE: return N_S0;
  case K_PERMIT: return N_P0;
  default: return N_H0;
  }
}

int truth_kind_name_count(enum truth_kind k) {
  switch (k) {
  case K_FAIR:
  case K_READ:
  case K_WRITE: return 2;
  case K_SEMAPHORE:
  case K_PERMIT: return 1;
  default: return 3;
  }
}

enum truth_group truth_name_group(int name) {
  if (name >= N_F0 && name <= N_F1)
    return G_FAIR;
  if (name >= N_RW0 && name <= N_RW1)
    return G_RW;
  if (name == N_S0)
    return G_SEMAPHORE;
  if (name == N_P0)
    return G_PERMIT;
  return G_HASH;
}

uint64_t truth_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void truth_break_at(truth_break_t *b, enum truth_fault what, uint64_t ns) {
  atomic_store(&b->what, what);
  uint64_t old = atomic_load(&b->at_ns);
  while (old < ns && !atomic_compare_exchange_weak(&b->at_ns, &old, ns))
    ;
}

uint64_t truth_rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static pthread_mutex_t complaint_mu = PTHREAD_MUTEX_INITIALIZER;

/* The fields are shared with other processes and with the worker's other
 * threads: the fences order them against seq, which is all a sequence
 * lock needs, and each is read and written as a relaxed atomic, so that a
 * read racing a write (which seq then makes the reader retry) is no data
 * race for the language - nor for ThreadSanitizer, which halts a worker
 * on one, mid-write, its seq left odd for good. */
#define PUT(lv, v) __atomic_store_n(&(lv), (v), __ATOMIC_RELAXED)
#define GET(lv) __atomic_load_n(&(lv), __ATOMIC_RELAXED)

void truth_belief_write(truth_belief_t *b, const truth_belief_t *value) {
  uint32_t seq = atomic_load_explicit(&b->seq, memory_order_relaxed);
  atomic_store_explicit(&b->seq, seq + 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  PUT(b->name, value->name);
  PUT(b->kind, value->kind);
  PUT(b->count, value->count);
  PUT(b->fixed, value->fixed);
  PUT(b->foreign, value->foreign);
  PUT(b->tracked, value->tracked);
  PUT(b->epoch, value->epoch);
  PUT(b->since_ns, value->since_ns);
  PUT(b->latest_ns, value->latest_ns);
  PUT(b->deadline_ns, value->deadline_ns);
  PUT(b->untold_ns, value->untold_ns);
  PUT(b->lease_ms, value->lease_ms);
  for (size_t i = 0; i < sizeof b->field; i++)
    PUT(b->field[i], value->field[i]);
  atomic_store_explicit(&b->seq, seq + 2, memory_order_release);
}

void truth_complain(truth_shared_t *sh, int w, int name, const char *fmt, ...) {
  truth_worker_slot_t *slot = &sh->w[w];
  char text[240];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  truth_trace(slot, "VIOLATION %s", text);
  pthread_mutex_lock(&complaint_mu);
  if (atomic_load(&slot->complaints) == 0) { /* the first is kept: the observer reports it */
    slot->complaint_name = name;
    memcpy(slot->complaint, text, sizeof slot->complaint);
  }
  atomic_fetch_add(&slot->complaints, 1);
  pthread_mutex_unlock(&complaint_mu);
}

int truth_fault_begin(truth_shared_t *sh, uint64_t start_ns, int victim) {
  int i = atomic_fetch_add(&sh->fault_next, 1) % 64;
  atomic_store(&sh->fault_at[i][1], 0);
  atomic_store(&sh->fault_at[i][2], (uint64_t)(victim + 1));
  atomic_store(&sh->fault_at[i][0], start_ns);
  return i;
}

void truth_fault_end(truth_shared_t *sh, int i, uint64_t end_ns) {
  atomic_store(&sh->fault_at[i][1], end_ns);
}

int truth_fault_near(truth_shared_t *sh, uint64_t from_ns, uint64_t to_ns, int w) {
  for (int i = 0; i < 64; i++) {
    uint64_t a = atomic_load(&sh->fault_at[i][0]), b = atomic_load(&sh->fault_at[i][1]);
    uint64_t v = atomic_load(&sh->fault_at[i][2]);
    if (w >= 0 && v != 0 && v != (uint64_t)w + 1)
      continue;
    if (a != 0 && a <= to_ns && (b == 0 || b >= from_ns))
      return 1;
  }
  return 0;
}

void truth_belief_clear(truth_belief_t *b) {
  truth_belief_t empty = {.name = -1};
  truth_belief_write(b, &empty);
}

uint32_t truth_belief_read(const truth_belief_t *b, truth_belief_t *out) {
  uint32_t spins = 0;
  for (;;) {
    uint32_t s1 = atomic_load_explicit(&b->seq, memory_order_acquire);
    if (s1 & 1u) {
      if (++spins > 100000000u) { /* its writer died mid-write: the slot says nothing */
        memset(out, 0, sizeof *out);
        out->name = -1;
        return s1;
      }
      continue;
    }
    out->name = GET(b->name);
    out->kind = GET(b->kind);
    out->count = GET(b->count);
    out->fixed = GET(b->fixed);
    out->foreign = GET(b->foreign);
    out->tracked = GET(b->tracked);
    out->epoch = GET(b->epoch);
    out->since_ns = GET(b->since_ns);
    out->latest_ns = GET(b->latest_ns);
    out->deadline_ns = GET(b->deadline_ns);
    out->untold_ns = GET(b->untold_ns);
    out->lease_ms = GET(b->lease_ms);
    for (size_t i = 0; i < sizeof out->field; i++)
      out->field[i] = GET(b->field[i]);
    out->field[sizeof out->field - 1] = '\0';
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&b->seq, memory_order_relaxed) == s1)
      return s1;
  }
}

/* The rings are written by several threads of a process (a worker's, or
 * the supervisor's fault lines beside the observer's dump). */
static pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER;

void truth_trace(truth_worker_slot_t *w, const char *fmt, ...) {
  pthread_mutex_lock(&trace_mu);
  int i = atomic_fetch_add(&w->trace_next, 1) % TRUTH_TRACE;
  char *line = w->trace[i];
  int n = snprintf(line, TRUTH_LINE, "%012llu ", (unsigned long long)(truth_now_ns() / 1000000u));
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + n, (size_t)(TRUTH_LINE - n), fmt, ap);
  va_end(ap);
  pthread_mutex_unlock(&trace_mu);
}

static int by_time(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void truth_trace_dump(truth_shared_t *sh, const char *name) {
  static const char *lines[TRUTH_MAX_WORKERS * TRUTH_TRACE];
  static char copies[TRUTH_MAX_WORKERS * TRUTH_TRACE][TRUTH_LINE + 8];
  size_t n = 0;
  pthread_mutex_lock(&trace_mu);
  for (int w = 0; w < sh->nworkers; w++)
    for (int i = 0; i < TRUTH_TRACE; i++) {
      const char *line = sh->w[w].trace[i];
      if (line[0] == '\0' || (name != NULL && strstr(line, name) == NULL && strstr(line, "FAULT") == NULL))
        continue;
      /* the stamp sorts as text; the worker goes after it */
      snprintf(copies[n], sizeof copies[n], "%.13s w%d %s", line, w, line + 13);
      lines[n] = copies[n];
      n++;
    }
  pthread_mutex_unlock(&trace_mu);
  qsort(lines, n, sizeof lines[0], by_time);
  for (size_t i = n > 80 ? n - 80 : 0; i < n; i++) /* the latest 80 */
    printf("#   %s\n", lines[i]);
}

void truth_trace_dump_worker(truth_shared_t *sh, int w, int last) {
  pthread_mutex_lock(&trace_mu);
  int next = atomic_load(&sh->w[w].trace_next);
  for (int i = next - last < 0 ? 0 : next - last; i < next; i++)
    printf("#   %s\n", sh->w[w].trace[i % TRUTH_TRACE]);
  pthread_mutex_unlock(&trace_mu);
}
