/* A truth checker worker: one process, one relock client (embedded on its
 * own libev loop, or threaded), several owners ("actors") doing random
 * operations on every kind of object, each publishing what it believes it
 * holds (tests/truth/truth.h) for the observer to check against Redis.
 *
 * An actor holds one object at a time, with re-entries: of the same object,
 * of another object of the same name, or of another kind on the same hash
 * (a spin or fenced lock inside a reentrant one: one field in Redis). A
 * belief is published only after Redis granted it, and withdrawn before a
 * release is sent, so that without faults Redis always has at least what
 * is published. Its deadline is the library's own validity
 * (relock_lock_validity_ms), refreshed every few milliseconds.
 *
 * What an owner does next, and doing it, is tests/truth/operations.c.
 *
 * Rule for the two locks here: the worker's mutex is never held while the
 * library is called (in threaded mode the library calls back into
 * on_lost with its own lock held). */
#include <config.h>

#define _GNU_SOURCE /* pthread_tryjoin_np */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support/wall_clock.h"
#include "truth/worker.h"

void msleep(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

int rnd_below(uint64_t *rng, int n) {
  return n <= 0 ? 0 : (int)(truth_rnd(rng) % (uint64_t)n);
}
/* -- beliefs ----------------------------------------------------------------*/

void publish(worker_t *w, int slot) {
  truth_belief_write(&w->slot->beliefs[slot], &w->mine[slot].b);
}

/* The actor's slot for (name, field), or a free one; -1 if none is free. */
static int slot_for(actor_t *a, int name, const char *field) {
  int free_slot = -1;
  for (int j = 0; j < SLOTS_PER_ACTOR; j++) {
    int s = a->idx * SLOTS_PER_ACTOR + j;
    truth_belief_t *b = &a->w->mine[s].b;
    if (b->name == name && strcmp(b->field, field) == 0)
      return s;
    if (b->name < 0 && free_slot < 0)
      free_slot = s;
  }
  return free_slot;
}

int64_t drift_margin_ms(int64_t lease_ms) {
  return lease_ms / 100 + 2;
}

/* Slot s's fixed leases have all ended (and no watchdog hold was among
 * them): its program knew it from the start, and the library forgets such
 * a hold - a later acquisition counts afresh. The actor still releases the
 * holds later, as programs do (the release of a hold that ran out, which
 * another owner may hold by now). */
static void leases_ended(worker_t *w, int s) {
  actor_t *a = &w->actors[s / SLOTS_PER_ACTOR];
  for (int i = 0; i < a->depth; i++) {
    if (a->holds[i].slot == s)
      a->holds[i].slot = -1;
    if (a->holds[i].slot2 == s)
      a->holds[i].slot2 = -1;
  }
  disbelieve(w, s, 1 << 20);
}

/* Adds one hold (or permits) to a belief; called with w->mu held. What
 * the program was told: acquired, with this lease (RELOCK_INFINITE: the
 * watchdog's; a fixed one promises since + lease less the drift margin). */
int believe(actor_t *a, int target, int name, const char *field, int count, int64_t lease_ms,
                   uint64_t since_ns, uint64_t deadline_ns) {
  worker_t *w = a->w;
  int s = slot_for(a, name, field);
  if (s < 0)
    return -1;
  local_belief_t *l = &w->mine[s];
  /* sent after the slot's fixed leases had all ended (before a refresh
   * saw it): those holds are gone, this one counts afresh */
  if (l->b.name >= 0 && l->natural_end_ns != UINT64_MAX && l->natural_end_ns <= since_ns)
    leases_ended(w, s);
  if (l->b.name < 0) {
    uint32_t epoch = l->b.epoch;
    memset(l, 0, sizeof *l);
    l->b.epoch = epoch;
    l->b.name = name;
    l->b.kind = (int32_t)w->targets[target].kind;
    l->b.since_ns = since_ns;
    l->b.lease_ms = -1;
    snprintf(l->b.field, sizeof l->b.field, "%s", field);
    l->target = target;
    l->natural_end_ns = 0;
  }
  l->b.epoch++;
  l->b.count += count;
  l->b.latest_ns = since_ns;
  l->b.fixed = lease_ms > 0;
  l->b.tracked = w->targets[target].permit != NULL && permit_tracked(lease_ms);
  if (deadline_ns > l->b.deadline_ns)
    l->b.deadline_ns = deadline_ns;
  int64_t kept = lease_ms > 0 ? lease_ms : lease_ms == RELOCK_INFINITE ? TRUTH_WATCHDOG_MS : -1;
  if (kept > l->b.lease_ms)
    l->b.lease_ms = kept;
  if (lease_ms > 0) {
    uint64_t end = since_ns + (uint64_t)(lease_ms - drift_margin_ms(lease_ms)) * 1000000u;
    if (l->natural_end_ns != UINT64_MAX && end > l->natural_end_ns)
      l->natural_end_ns = end;
  } else {
    l->natural_end_ns = UINT64_MAX; /* a watchdog hold keeps it */
  }
  publish(w, s);
  /* held again: an earlier let-go of the same field, or an acquisition
   * given up on, is this belief's now */
  for (int j = 0; j < SLOTS_PER_ACTOR; j++) {
    truth_belief_t *g = &w->slot->letgo[a->idx * SLOTS_PER_ACTOR + j];
    if (g->name == name && strcmp(g->field, field) == 0)
      truth_belief_clear(g);
  }
  truth_belief_t *ab = &w->slot->abandoned[a->idx];
  if (ab->name == name && strcmp(ab->field, field) == 0)
    truth_belief_clear(ab);
  return s;
}

void disbelieve(worker_t *w, int s, int count) {
  if (s < 0 || w->mine[s].b.name < 0)
    return;
  local_belief_t *l = &w->mine[s];
  l->b.count -= count;
  l->b.epoch++;
  if (l->b.count <= 0) {
    uint32_t epoch = l->b.epoch;
    memset(l, 0, sizeof *l);
    l->b.name = -1;
    l->b.epoch = epoch;
  }
  publish(w, s);
}

/* The owner asks to release the last hold of slot s: from now on nobody
 * believes in it, whatever the answer (called before disbelieve). */
void let_go(worker_t *w, int s) {
  if (s < 0 || w->mine[s].b.name < 0 || w->mine[s].b.count != 1)
    return;
  truth_belief_t g = w->mine[s].b;
  g.since_ns = truth_now_ns();
  g.deadline_ns = 0;
  g.count = 0;
  truth_belief_write(&w->slot->letgo[s], &g);
}

/* The program was told of (name, field): a lost callback, or a release
 * answered 0 (the hold was there). */
void told(worker_t *w, int name, const char *field) {
  int k = 0;
  for (int i = 0; i < w->nuntold; i++)
    if (!(w->untold[i].name == name && strcmp(w->untold[i].field, field) == 0))
      w->untold[k++] = w->untold[i];
  w->nuntold = k;
}

/* What the actor's operation in flight is on, for the observer. */
void set_busy(actor_t *a, const op_t *op) {
  worker_t *w = a->w;
  target_t *t = &w->targets[op->target];
  truth_belief_t b = {.name = t->name, .kind = (int32_t)t->kind, .since_ns = op->start_ns, .count = op->type};
  if (t->lock != NULL)
    relock_lock_field(t->lock, a->owner, b.field, sizeof b.field);
  else if (w->client != NULL)
    snprintf(b.field, sizeof b.field, "%s:%llu", relock_client_id(w->client), (unsigned long long)a->owner);
  if (op->type == OP_ACQUIRE && op->wait_ms > 0 && (t->kind == K_REENTRANT || t->kind == K_FENCED) && a->depth == 0)
    b.deadline_ns = op->start_ns + (uint64_t)op->wait_ms * 1000000u;
  if (op->type == OP_ACQUIRE && op->wait_ms > 0 && t->name >= 0) {
    uint64_t until = op->start_ns + (uint64_t)op->wait_ms * 1000000u; /* it may wait that long */
    atomic_store(&w->sh->busy_at[t->name][w->id], until);
    if (t->name2 >= 0)
      atomic_store(&w->sh->busy_at[t->name2][w->id], until);
  }
  truth_belief_write(&w->slot->busy[a->idx], &b);
}

/* An acquisition that ended in an error (a timeout, a cancel, an
 * interrupt, a lost connection) took nothing the program knows of: what it
 * may have taken in Redis is the library's to give back, within its lease
 * (no renewal) and a margin - as a hold let go. */
void abandon(actor_t *a, const op_t *op, const char *field) {
  worker_t *w = a->w;
  target_t *t = &w->targets[op->target];
  int64_t lease = op->lease_ms > 0 ? op->lease_ms : op->lease_ms == RELOCK_INFINITE ? TRUTH_WATCHDOG_MS : -1;
  if (lease < 0 || t->kind == K_SEMAPHORE)
    return;
  for (int j = 0; j < SLOTS_PER_ACTOR; j++) {
    truth_belief_t *b = &w->mine[a->idx * SLOTS_PER_ACTOR + j].b;
    if (b->name == t->name || (t->name2 >= 0 && b->name == t->name2))
      return; /* a re-entry: its field stays held anyway (a surplus is checked) */
  }
  truth_belief_t g = {.name = t->name, .kind = (int32_t)t->kind, .lease_ms = lease, .since_ns = truth_now_ns()};
  snprintf(g.field, sizeof g.field, "%s", field);
  truth_belief_write(&w->slot->abandoned[a->idx], &g);
}

void clear_busy(actor_t *a) {
  truth_belief_clear(&a->w->slot->busy[a->idx]);
}

/* Drops every hold of the actor that counts on slot s (its loss). */
static void forget_slot(actor_t *a, int s) {
  int k = 0;
  for (int i = 0; i < a->depth; i++)
    if (a->holds[i].slot != s && a->holds[i].slot2 != s)
      a->holds[k++] = a->holds[i];
    else if (a->holds[i].slot2 >= 0) /* a multi-lock: its other name goes too */
      disbelieve(a->w, a->holds[i].slot == s ? a->holds[i].slot2 : a->holds[i].slot, 1 << 20);
  a->depth = k;
  disbelieve(a->w, s, 1 << 20);
}

static actor_t *actor_of(worker_t *w, uint64_t owner) {
  for (int i = 0; i < w->nactors; i++)
    if (w->actors[i].owner == owner)
      return &w->actors[i];
  return NULL;
}

static void note_loss(worker_t *w, int name, const char *what) {
  uint64_t now = truth_now_ns(), brk = atomic_load(&w->sh->breaks[name].at_ns);
  uint64_t g = atomic_load(&w->sh->global_break.at_ns);
  if (g > brk)
    brk = g;
  uint64_t ms = brk != 0 && now > brk ? (now - brk) / 1000000u : 0;
  if (ms < 60000 && ms > atomic_load(&w->slot->last_loss_latency_ms))
    atomic_store(&w->slot->last_loss_latency_ms, ms);
  atomic_fetch_add(&w->slot->lost, 1);
  truth_trace(w->slot, "%s lost %s (%llu ms after the last break)", what, truth_names[name], (unsigned long long)ms);
}

static void on_lost(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg) {
  (void)reason;
  (void)message;
  worker_t *w = arg;
  char field[96];
  relock_lock_field(lock, owner, field, sizeof field);
  pthread_mutex_lock(&w->mu);
  actor_t *a = actor_of(w, owner);
  int name = -1;
  for (int t = 0; t < w->ntargets; t++)
    if (w->targets[t].lock == lock)
      name = w->targets[t].name; /* a write lock's field ends in ":write" */
  if (a != NULL && name >= 0) {
    told(w, name, field);
    int s = slot_for(a, name, field);
    if (s >= 0 && w->mine[s].b.name == name) {
      note_loss(w, name, field);
      /* taken again at once, now and then: a re-acquisition after a loss */
      if (a->reacquire < 0 && rnd_below(&w->lost_rng, 2) == 0)
        a->reacquire = w->mine[s].target;
      forget_slot(a, s);
    }
  }
  pthread_mutex_unlock(&w->mu);
}

static void on_multi_lost(relock_multi_lock_t *m, uint64_t owner, int reason, const char *message, void *arg) {
  (void)reason;
  (void)message;
  worker_t *w = arg;
  pthread_mutex_lock(&w->mu);
  actor_t *a = actor_of(w, owner);
  for (int i = 0; a != NULL && i < a->depth; i++) {
    target_t *t = &w->targets[a->holds[i].target];
    if (t->multi == m) {
      char field[96];
      snprintf(field, sizeof field, "%s:%llu", relock_client_id(w->client), (unsigned long long)owner);
      told(w, t->name, field);
      told(w, t->name2, field);
      note_loss(w, t->name, "multi");
      forget_slot(a, a->holds[i].slot);
      break;
    }
  }
  pthread_mutex_unlock(&w->mu);
}

/* A permit's loss: the actor holding it (it may be releasing it: then
 * nobody) forgets it. */
static void on_permit_lost(relock_permit_semaphore_t *s, const char *id, int reason, const char *message,
                           void *arg) {
  (void)s;
  (void)reason;
  (void)message;
  worker_t *w = arg;
  pthread_mutex_lock(&w->mu);
  told(w, N_P0, id);
  for (int i = 0; i < w->nactors; i++) {
    actor_t *a = &w->actors[i];
    int slot = slot_for(a, N_P0, id);
    if (slot >= 0 && w->mine[slot].b.name == N_P0) {
      note_loss(w, N_P0, id);
      forget_slot(a, slot);
      break;
    }
  }
  pthread_mutex_unlock(&w->mu);
}

/* Whether a permit of this lease is the library's to watch or track (its
 * loss reported, its validity known): all but RELOCK_PERMIT_NO_LEASE. */
int permit_tracked(int64_t lease_ms) {
  return lease_ms == RELOCK_INFINITE || lease_ms >= RELOCK_MIN_LEASE_MS;
}

/* The library's validity for a belief, asked without the mutex. */
int64_t validity_of(worker_t *w, int target, uint64_t owner) {
  target_t *t = &w->targets[target];
  if (t->multi != NULL)
    return relock_multi_lock_validity_ms(t->multi, owner);
  if (t->lock != NULL)
    return relock_lock_validity_ms(t->lock, owner);
  return INT64_MAX; /* semaphores: no lease (permits: their own deadline) */
}

/* Called with w->mu held (a threaded actor sets its owner under it). */
static uint64_t owner_of_slot(worker_t *w, int s) {
  return w->actors[s / SLOTS_PER_ACTOR].owner;
}

/* A loss shown and not told: the observer no longer counts the belief
 * (its program would not act on it, if it asked), and its lost callback
 * must come within TRUTH_UNTOLD_TICKS refreshes. */
static void note_untold(worker_t *w, int s, int64_t v, uint64_t now) {
  local_belief_t *l = &w->mine[s];
  if (l->b.untold_ns == 0) {
    l->b.untold_ns = now;
    l->b.deadline_ns = now;
    publish(w, s);
    truth_trace(w->slot, "%s %s: validity %lld, no lost callback yet", truth_names[l->b.name], l->b.field,
                (long long)v);
  }
  for (int i = 0; i < w->nuntold; i++)
    if (w->untold[i].name == l->b.name && strcmp(w->untold[i].field, l->b.field) == 0)
      return;
  if (w->nuntold < TRUTH_SLOTS) {
    untold_t *u = &w->untold[w->nuntold++];
    u->name = l->b.name;
    u->slot = s;
    u->ticks = 0;
    u->since_ns = now;
    snprintf(u->field, sizeof u->field, "%s", l->b.field);
  }
}

/* One refresh: every loss shown and not told yet ages a tick. */
static void age_untold(worker_t *w) {
  pthread_mutex_lock(&w->mu);
  for (int i = 0; i < w->nuntold; i++) {
    untold_t *u = &w->untold[i];
    if (++u->ticks == TRUTH_UNTOLD_TICKS)
      truth_complain(w->sh, w->id, u->name,
                     "%s %s: the library holds it no more (validity 0 since %llu ms ago) and its program was never "
                     "told (no lost callback in %d refreshes)",
                     truth_names[u->name], u->field, (unsigned long long)((truth_now_ns() - u->since_ns) / 1000000u),
                     TRUTH_UNTOLD_TICKS);
  }
  pthread_mutex_unlock(&w->mu);
}

/* How near a fixed lease's end (as this program counts it, from before
 * the ask) the library may end it without telling: by a tick of its
 * wheel (10 ms), by which any lease's end may come early or late, and 2
 * for the rounding of milliseconds. */
#define LEASE_END_SLACK_NS (12 * 1000000u)

/* Brings each lock belief's deadline to the library's validity now. A
 * belief ends only as its program is told: a lost callback, a release it
 * asked for, or its fixed lease's end (less the drift margin) passing. The
 * library showing it holds a hold no more (validity 0) before then, with
 * no lost callback, is a loss not told yet (note_untold). */
static void refresh_all(worker_t *w) {
  age_untold(w);
  for (int s = 0; s < w->nactors * SLOTS_PER_ACTOR; s++) {
    pthread_mutex_lock(&w->mu);
    int target = w->mine[s].b.name >= 0 ? w->mine[s].target : -1;
    int tracked_permit = target >= 0 && w->mine[s].b.tracked;
    char id[RELOCK_PERMIT_ID_SIZE];
    snprintf(id, sizeof id, "%s", w->mine[s].b.field);
    uint32_t gen = atomic_load(&w->slot->beliefs[s].seq);
    uint64_t owner = owner_of_slot(w, s);
    pthread_mutex_unlock(&w->mu);
    if (target < 0 || (w->targets[target].lock == NULL && w->targets[target].multi == NULL && !tracked_permit))
      continue;
    uint64_t now = truth_now_ns();
    int64_t v = tracked_permit ? relock_permit_semaphore_validity_ms(w->targets[target].permit, id)
                               : validity_of(w, target, owner);
    pthread_mutex_lock(&w->mu);
    local_belief_t *l = &w->mine[s];
    if (atomic_load(&w->slot->beliefs[s].seq) == gen && l->b.name >= 0) {
      if (v > 0 && l->b.untold_ns == 0) {
        l->b.deadline_ns = now + (uint64_t)v * 1000000u;
        publish(w, s);
      } else if (v <= 0 && l->natural_end_ns != UINT64_MAX && now + LEASE_END_SLACK_NS >= l->natural_end_ns) {
        leases_ended(w, s);
      } else if (v <= 0) {
        /* lost (the library says so), a renewed hold it holds no more, or
         * a fixed one it stopped vouching for before the lease's end (a
         * check answered late): its lost callback must come */
        note_untold(w, s, v, now);
      }
    }
    pthread_mutex_unlock(&w->mu);
  }
}

/* -- objects ----------------------------------------------------------------*/

static void add_target(worker_t *w, enum truth_kind kind, int name) {
  target_t *t = &w->targets[w->ntargets++];
  memset(t, 0, sizeof *t);
  t->kind = kind;
  t->name = name;
  t->name2 = -1;
  relock_error_t err;
  const char *n = truth_names[name];
  switch (kind) {
  case K_REENTRANT: t->lock = relock_lock_new(w->client, n, &err); break;
  case K_SPIN: t->lock = relock_spin_lock_new(w->client, n, &err); break;
  case K_FENCED: t->lock = relock_fenced_lock_new(w->client, n, &err); break;
  case K_FAIR: t->lock = relock_fair_lock_new(w->client, n, &err); break;
  case K_READ: t->lock = relock_read_lock_new(w->client, n, &err); break;
  case K_WRITE: t->lock = relock_write_lock_new(w->client, n, &err); break;
  case K_SEMAPHORE: t->sem = relock_semaphore_new(w->client, n, &err); break;
  case K_PERMIT:
    t->permit = relock_permit_semaphore_new(w->client, n, &err);
    if (t->permit != NULL)
      relock_permit_semaphore_on_lost(t->permit, on_permit_lost, w);
    break;
  case K_MULTI: {
    relock_lock_t *members[2] = {relock_lock_new(w->client, truth_names[name], &err),
                                 relock_lock_new(w->client, truth_names[name + 1], &err)};
    t->name2 = name + 1;
    t->multi = relock_multi_lock_new(members, 2, &err);
    /* the group owns its members from here on */
    if (t->multi != NULL)
      relock_multi_lock_on_lost(t->multi, on_multi_lost, w);
    break;
  }
  default: break;
  }
  if (t->lock != NULL) {
    relock_lock_on_lost(t->lock, on_lost, w);
    relock_lock_watch_loss(t->lock, 1);
  }
  if (t->lock == NULL && t->multi == NULL && t->sem == NULL && t->permit == NULL) {
    fprintf(stderr, "truth worker %d: cannot make a %s: %s\n", w->id, truth_kind_names[kind], err.message);
    _exit(2);
  }
}

static void open_client(worker_t *w) {
  relock_options_t *o = relock_options_new(NULL);
  if (w->sh->topology == T_SENTINEL) { /* the master, through the sentinels */
    relock_options_set_string(o, RELOCK_OPT_SENTINELS, w->sh->addrs, NULL);
    relock_options_set_string(o, RELOCK_OPT_SENTINEL_MASTER, w->sh->master_name, NULL);
  } else if (w->sh->topology == T_CLUSTER) {
    relock_options_set_string(o, RELOCK_OPT_CLUSTER_NODES, w->sh->addrs, NULL);
  } else {
    relock_options_set_string(o, RELOCK_OPT_HOST, "127.0.0.1", NULL);
    relock_options_set_int(o, RELOCK_OPT_PORT, w->port, NULL);
  }
  relock_options_set_ms(o, RELOCK_OPT_COMMAND_TIMEOUT, TRUTH_COMMAND_TIMEOUT_MS, NULL);
  relock_options_set_ms(o, RELOCK_OPT_CONNECT_TIMEOUT, TRUTH_COMMAND_TIMEOUT_MS, NULL);
  relock_options_set_ms(o, RELOCK_OPT_RETRY_INTERVAL, 150, NULL);
  relock_options_set_ms(o, RELOCK_OPT_RECONNECT_MIN, 20, NULL);
  relock_options_set_ms(o, RELOCK_OPT_RECONNECT_MAX, 300, NULL);
  relock_options_set_ms(o, RELOCK_OPT_WATCHDOG_TIMEOUT, TRUTH_WATCHDOG_MS, NULL);
  relock_options_set_ms(o, RELOCK_OPT_PING_INTERVAL, 300, NULL);
  relock_error_t err;
  w->client = relock_client_new(w->embedded ? w->loop : NULL, o, &err);
  relock_options_free(o);
  if (w->client == NULL) {
    fprintf(stderr, "truth worker %d: client: %s\n", w->id, err.message);
    _exit(2);
  }
  w->ntargets = 0;
  for (int n = N_H0; n <= N_H2; n++) {
    add_target(w, K_REENTRANT, n);
    add_target(w, K_REENTRANT, n);
    add_target(w, K_SPIN, n);
    add_target(w, K_FENCED, n);
  }
  add_target(w, K_MULTI, N_H0);
  add_target(w, K_MULTI, N_H1);
  for (int n = N_F0; n <= N_F1; n++) {
    add_target(w, K_FAIR, n);
    add_target(w, K_FAIR, n);
  }
  for (int n = N_RW0; n <= N_RW1; n++) {
    add_target(w, K_READ, n);
    add_target(w, K_READ, n);
    add_target(w, K_WRITE, n);
  }
  add_target(w, K_SEMAPHORE, N_S0);
  add_target(w, K_PERMIT, N_P0);
}

static void on_closed(relock_client_t *client, void *arg) {
  atomic_store((_Atomic size_t *)arg, relock_client_unreturned(client) + 1); /* + 1: done */
}

/* Closes the client and waits for the close (its bound: a command timeout
 * or so), then says how many give-backs it could not make. */
static size_t close_and_count(worker_t *w) {
  _Atomic size_t done = 0;
  if (relock_client_close(w->client, on_closed, (void *)&done) != 0)
    return 0;
  uint64_t end = truth_now_ns() + 10000000000ull;
  while (atomic_load(&done) == 0 && truth_now_ns() < end) {
    if (w->embedded)
      ev_run(w->loop, EVRUN_ONCE);
    else
      msleep(5);
  }
  size_t n = atomic_load(&done);
  return n > 0 ? n - 1 : 0;
}

static void close_client(worker_t *w) {
  pthread_mutex_lock(&w->mu);
  for (int s = 0; s < TRUTH_SLOTS; s++) {
    memset(&w->mine[s], 0, sizeof w->mine[s]);
    w->mine[s].b.name = -1;
    publish(w, s);
  }
  for (int i = 0; i < w->nactors; i++) {
    w->actors[i].depth = 0;
    w->actors[i].reacquire = -1;
    clear_busy(&w->actors[i]);
    truth_belief_clear(&w->slot->abandoned[i]);
  }
  w->nuntold = 0; /* abandoned with the client: a close tells nothing */
  pthread_mutex_unlock(&w->mu);
  for (int i = 0; i < w->ntargets; i++) {
    target_t *t = &w->targets[i];
    if (t->lock != NULL)
      relock_lock_free(t->lock);
    if (t->multi != NULL)
      relock_multi_lock_free(t->multi);
    if (t->sem != NULL)
      relock_semaphore_free(t->sem);
    if (t->permit != NULL)
      relock_permit_semaphore_free(t->permit);
  }
  size_t unreturned = close_and_count(w);
  relock_client_free(w->client);
  w->client = NULL;
  if (unreturned > 0) {
    /* documented: what a close could not give back stays taken (a permit
     * without a lease for good); the observer allows for that many */
    atomic_fetch_add(&w->sh->unreturned, (long)unreturned);
    truth_trace(w->slot, "the close could not give back %zu acquisitions", unreturned);
  }
}
/* -- threaded actors --------------------------------------------------------*/

/* What the actor's next release gives back (it needs one). */
static int next_release(const actor_t *a) {
  return a->has_redo ? a->redo.target : a->holds[a->depth - 1].target;
}

/* The actor's holds change under w->mu (a loss, on the loop thread). */
static op_t choose_locked(actor_t *a) {
  pthread_mutex_lock(&a->w->mu);
  op_t op = choose(a);
  pthread_mutex_unlock(&a->w->mu);
  return op;
}

static int give_back_locked(actor_t *a, int everything, op_t *op) {
  pthread_mutex_lock(&a->w->mu);
  int more = needs_give_back(a, everything);
  if (more)
    *op = (op_t){.type = OP_RELEASE, .target = next_release(a), .cancel_after_ms = -1,
                 .start_ns = truth_now_ns()};
  pthread_mutex_unlock(&a->w->mu);
  return more;
}

static void *actor_thread(void *arg) {
  actor_t *a = arg;
  uint64_t owner = relock_thread_owner();
  pthread_mutex_lock(&a->w->mu);
  a->owner = owner;
  pthread_mutex_unlock(&a->w->mu);
  while (!atomic_load(&a->w->closing) && !atomic_load(&a->w->sh->stop)) {
    op_t op = choose_locked(a);
    run_op_blocking(a, &op);
  }
  int everything = atomic_load(&a->w->sh->stop);
  op_t op;
  while (give_back_locked(a, everything, &op))
    run_op_blocking(a, &op);
  return NULL;
}

/* Interrupts a random actor blocked in a blocking acquisition, now and then. */
static void maybe_interrupt(worker_t *w) {
  actor_t *a = &w->actors[rnd_below(&w->rng, w->nactors)];
  relock_lock_t *lock = atomic_load(&a->blocked_in);
  if (lock != NULL && rnd_below(&w->rng, 4) == 0) {
    pthread_mutex_lock(&w->mu);
    uint64_t owner = a->owner;
    pthread_mutex_unlock(&w->mu);
    /* once per blocking call: a call that does not wake is a hang to see
     * in the trace, not a thousand interrupts that crowd it out */
    if (atomic_compare_exchange_strong(&a->blocked_in, &lock, NULL))
      truth_trace(w->slot, "interrupt a%d: %d", a->idx, relock_lock_interrupt(lock, owner));
  }
}

static void run_threaded(worker_t *w) {
  while (!atomic_load(&w->sh->stop)) {
    open_client(w);
    atomic_store(&w->closing, 0);
    for (int i = 0; i < w->nactors; i++)
      pthread_create(&w->actors[i].thread, NULL, actor_thread, &w->actors[i]);
    uint64_t close_at = truth_now_ns() + (uint64_t)(6000 + rnd_below(&w->rng, 14000)) * 1000000u;
    while (!atomic_load(&w->sh->stop) && truth_now_ns() < close_at) {
      msleep(5);
      refresh_all(w);
      maybe_interrupt(w);
    }
    atomic_store(&w->closing, 1);
    /* refresh while the actors wind down: their beliefs stay checked */
    for (int i = 0; i < w->nactors; i++) {
      while (pthread_tryjoin_np(w->actors[i].thread, NULL) == EBUSY) {
        msleep(5);
        refresh_all(w);
      }
    }
    truth_trace(w->slot, "close the client");
    close_client(w);
    atomic_fetch_add(&w->slot->closes, 1);
  }
}

/* -- embedded actors ----------------------------------------------------------*/

static void actor_step(actor_t *a);

static void think_cb(struct ev_loop *loop, ev_timer *t, int revents) {
  (void)loop;
  (void)revents;
  actor_step(t->data);
}

static void cancel_cb(struct ev_loop *loop, ev_timer *t, int revents) {
  (void)loop;
  (void)revents;
  actor_t *a = t->data;
  if (a->inflight != NULL)
    relock_future_cancel(a->inflight);
}

static void later(actor_t *a, int ms) {
  ev_timer_set(&a->think, ms / 1000.0, 0);
  ev_timer_start(a->w->loop, &a->think);
}

static void on_done(relock_future_t *f, void *arg) {
  actor_t *a = arg;
  ev_timer_stop(a->w->loop, &a->cancel);
  finish_op(a, &a->op, f);
  relock_future_release(f);
  a->inflight = NULL;
  later(a, rnd_below(&a->rng, 40));
}

static void actor_step(actor_t *a) {
  worker_t *w = a->w;
  int stopping = atomic_load(&w->sh->stop) || atomic_load(&w->closing);
  if (stopping && !needs_give_back(a, atomic_load(&w->sh->stop))) {
    a->idle = 1;
    return;
  }
  op_t op = stopping ? (op_t){.type = OP_RELEASE, .target = next_release(a),
                              .cancel_after_ms = -1, .start_ns = truth_now_ns()}
                     : choose(a);
  a->op = op;
  if (op.type == OP_THINK) {
    later(a, op.think_ms >= 0 ? op.think_ms : rnd_below(&a->rng, 60));
    return;
  }
  relock_future_t *f = start_op(a, &a->op);
  if (f == NULL) {
    later(a, 10);
    return;
  }
  a->inflight = f;
  if (op.cancel_after_ms >= 0) {
    ev_timer_set(&a->cancel, op.cancel_after_ms / 1000.0, 0);
    ev_timer_start(w->loop, &a->cancel);
  }
  relock_future_on_done(f, on_done, a);
}

static void refresh_cb(struct ev_loop *loop, ev_timer *t, int revents) {
  (void)revents;
  worker_t *w = t->data;
  refresh_all(w);
  int idle = 0;
  for (int i = 0; i < w->nactors; i++)
    idle += w->actors[i].idle;
  if (idle == w->nactors)
    ev_break(loop, EVBREAK_ONE);
  if (!atomic_load(&w->closing) && rnd_below(&w->rng, 2000) == 0)
    atomic_store(&w->closing, 1); /* every 10 s or so: close and reopen */
}

static void run_embedded(worker_t *w) {
  w->loop = ev_loop_new(EVFLAG_AUTO);
  while (!atomic_load(&w->sh->stop)) {
    open_client(w);
    atomic_store(&w->closing, 0);
    for (int i = 0; i < w->nactors; i++) {
      actor_t *a = &w->actors[i];
      a->idle = 0;
      ev_timer_init(&a->think, think_cb, 0, 0);
      ev_timer_init(&a->cancel, cancel_cb, 0, 0);
      a->think.data = a->cancel.data = a;
      later(a, 0);
    }
    ev_timer_init(&w->refresh, refresh_cb, 0.005, 0.005);
    w->refresh.data = w;
    ev_timer_start(w->loop, &w->refresh);
    ev_run(w->loop, 0);
    ev_timer_stop(w->loop, &w->refresh);
    truth_trace(w->slot, "close the client");
    close_client(w);
    atomic_fetch_add(&w->slot->closes, 1);
  }
  ev_loop_destroy(w->loop);
}

int truth_worker_main(truth_shared_t *sh, int id, int port, uint64_t seed, int embedded) {
  static worker_t w;
  w.sh = sh;
  w.slot = &sh->w[id];
  w.id = id;
  w.port = port;
  w.embedded = embedded;
  w.rng = seed | 1;
  w.lost_rng = (seed ^ 0x5851f42d4c957f2dull) | 1;
  pthread_mutex_init(&w.mu, NULL);
  relock_test_wall_offset_at(&w.slot->wall_offset_ns); /* the supervisor steps it */
  w.nactors = embedded ? 4 : 3;
  for (int i = 0; i < w.nactors; i++) {
    w.actors[i].w = &w;
    w.actors[i].idx = i;
    w.actors[i].owner = (uint64_t)i + 1;
    w.actors[i].rng = truth_rnd(&w.rng) | 1;
    w.actors[i].reacquire = -1;
  }
  for (int s = 0; s < TRUTH_SLOTS; s++) {
    w.mine[s].b.name = -1;
    publish(&w, s);
  }
  truth_trace(w.slot, "worker %d (%s), seed %llu", id, embedded ? "embedded" : "threaded", (unsigned long long)seed);
  if (embedded)
    run_embedded(&w);
  else
    run_threaded(&w);
  atomic_store(&w.slot->done, 1);
  return 0;
}
