/* A truth checker owner's operations: what it does next (acquire, re-enter,
 * release, validate, force-release, or hold on), sending it through the
 * library, and what its outcome makes the owner believe
 * (tests/truth/worker.h). */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "truth/worker.h"

/* -- choosing an operation ----------------------------------------------------*/

int is_lock(enum truth_kind k) {
  return k != K_SEMAPHORE && k != K_PERMIT;
}

/* A target that re-enters what the actor holds on top, or -1. */
static int reentry_target(actor_t *a) {
  worker_t *w = a->w;
  target_t *top = &w->targets[a->holds[a->depth - 1].target];
  int picks[MAX_TARGETS], n = 0;
  for (int i = 0; i < w->ntargets; i++) {
    target_t *t = &w->targets[i];
    if (t->name != top->name || t->multi != NULL || top->multi != NULL)
      continue;
    int ok = 0;
    switch (top->kind) {
    case K_REENTRANT:
    case K_SPIN:
    case K_FENCED: ok = t->kind == K_REENTRANT || t->kind == K_SPIN || t->kind == K_FENCED; break;
    case K_FAIR: ok = t->kind == K_FAIR; break;
    case K_READ: ok = t->kind == K_READ; break;
    case K_WRITE: ok = t->kind == K_WRITE || t->kind == K_READ; break;
    case K_SEMAPHORE: ok = t->kind == top->kind; break;
    /* each permit is a belief slot of its own */
    case K_PERMIT: ok = t->kind == top->kind && a->depth < SLOTS_PER_ACTOR; break;
    default: break;
    }
    if (ok && (w->sh->kinds & (1u << t->kind)))
      picks[n++] = i;
  }
  return n == 0 ? -1 : picks[rnd_below(&a->rng, n)];
}

static int64_t random_lease(actor_t *a) {
  if (rnd_below(&a->rng, 2) == 0)
    return RELOCK_INFINITE;
  if (rnd_below(&a->rng, 8) == 0) /* short: an answer may come past it */
    return 30 + rnd_below(&a->rng, 370);
  return 300 + rnd_below(&a->rng, TRUTH_MAX_FIXED_LEASE_MS - 300);
}

/* A permit's: watched (RELOCK_INFINITE: the watchdog renews it), a fixed
 * lease (tracked: its loss is reported), or none (taken for good until
 * given back, not tracked). */
static int64_t random_permit_lease(actor_t *a) {
  int r = rnd_below(&a->rng, 6);
  if (r < 2)
    return RELOCK_INFINITE;
  if (r < 5)
    return 500 + rnd_below(&a->rng, 2000);
  return RELOCK_PERMIT_NO_LEASE;
}

static int64_t random_wait(actor_t *a) {
  static const int64_t waits[] = {0, 50, 300, 1000, 2500};
  return waits[rnd_below(&a->rng, 5)];
}

op_t choose(actor_t *a) {
  worker_t *w = a->w;
  op_t op = {.type = OP_THINK, .target = -1, .cancel_after_ms = -1, .think_ms = -1, .token_floor = -1};
  op.start_ns = truth_now_ns();
  if (a->has_redo) {
    op.type = OP_RELEASE;
    op.target = a->redo.target;
    return op;
  }
  if (a->reacquire >= 0 && a->depth == 0) {
    /* its hold was lost (a timeout, a break): taken again at once */
    op.type = OP_ACQUIRE;
    op.target = a->reacquire;
    a->reacquire = -1;
    if ((!is_lock(w->targets[op.target].kind) && atomic_load(&w->sh->sem_paused)) ||
        !(w->sh->kinds & (1u << w->targets[op.target].kind))) {
      op.type = OP_THINK;
      return op;
    }
    op.wait_ms = 1000;
    op.lease_ms = w->targets[op.target].kind == K_PERMIT ? random_permit_lease(a) : random_lease(a);
    return op;
  }
  if (a->depth > 0) {
    hold_t *top = &a->holds[a->depth - 1];
    /* a re-entry aimed right at the fixed lease's end, inside its drift
     * margin: the library must either count it or declare the old hold
     * lost, never both nor neither */
    if (top->aim && top->lease_ms > 0 && a->depth < MAX_DEPTH) {
      int64_t margin = drift_margin_ms(top->lease_ms);
      uint64_t at = top->start_ns + (uint64_t)(top->lease_ms - margin + rnd_below(&a->rng, (int)margin + 3)) * 1000000u;
      if (op.start_ns + 1000000u < at) {
        op.think_ms = (int)((at - op.start_ns) / 1000000u);
        return op;
      }
      top->aim = 0;
      op.type = OP_ACQUIRE;
      op.target = top->target;
      op.wait_ms = 0;
      op.lease_ms = random_lease(a);
      op.aimed = 1;
      return op;
    }
    if (op.start_ns < top->hold_until_ns && rnd_below(&a->rng, 8) != 0) {
      op.think_ms = 20 + rnd_below(&a->rng, 60); /* a long hold: held on */
      return op;
    }
  }
  int r = rnd_below(&a->rng, 100);
  if (r < 2) {
    /* a force release of a lock name: Redis forgets every hold on it */
    int t = rnd_below(&a->rng, w->ntargets);
    if (!is_lock(w->targets[t].kind) || w->targets[t].multi != NULL || w->targets[t].kind == K_READ ||
        !(w->sh->kinds & (1u << w->targets[t].kind)))
      return op; /* think instead */
    op.type = OP_FORCE;
    op.target = t;
    return op;
  }
  if (a->depth == 0) {
    op.type = OP_ACQUIRE;
    op.target = rnd_below(&a->rng, w->ntargets);
    if ((!is_lock(w->targets[op.target].kind) && atomic_load(&w->sh->sem_paused)) ||
        !(w->sh->kinds & (1u << w->targets[op.target].kind))) {
      op.type = OP_THINK;
      return op;
    }
    op.wait_ms = random_wait(a);
    op.lease_ms = w->targets[op.target].kind == K_PERMIT ? random_permit_lease(a) : random_lease(a);
    if (rnd_below(&a->rng, 8) == 0)
      op.cancel_after_ms = rnd_below(&a->rng, 200);
    op.blocking = !w->embedded && w->targets[op.target].lock != NULL && rnd_below(&a->rng, 2) == 0;
    return op;
  }
  hold_t *top = &a->holds[a->depth - 1];
  if (r < 12 && a->depth < MAX_DEPTH) {
    int t = reentry_target(a);
    if (t >= 0 && !is_lock(w->targets[t].kind) && atomic_load(&w->sh->sem_paused))
      t = -1;
    if (t >= 0) {
      op.type = OP_ACQUIRE;
      op.target = t;
      op.wait_ms = random_wait(a);
      op.lease_ms = w->targets[t].kind == K_PERMIT ? random_permit_lease(a) : random_lease(a);
      op.blocking = !w->embedded && w->targets[t].lock != NULL && rnd_below(&a->rng, 2) == 0;
      return op;
    }
  }
  if (r < 18 && w->targets[top->target].lock != NULL) {
    op.type = OP_VALIDATE;
    op.target = top->target;
    return op;
  }
  if (r < 55) {
    op.type = OP_RELEASE;
    op.target = top->target;
    return op;
  }
  return op; /* think: hold a little longer */
}

/* -- running an operation -------------------------------------------------------*/

relock_future_t *start_op(actor_t *a, op_t *op) {
  worker_t *w = a->w;
  target_t *t = op->target >= 0 ? &w->targets[op->target] : NULL;
  switch (op->type) {
  case OP_ACQUIRE:
    truth_trace(w->slot, "a%d acquire %s %s wait %lld lease %lld%s%s", a->idx, truth_kind_names[t->kind],
                truth_names[t->name], (long long)op->wait_ms, (long long)op->lease_ms,
                op->cancel_after_ms >= 0 ? " (to cancel)" : "", op->aimed ? " (at the lease's end)" : "");
    op->stops = atomic_load(&w->slot->stops);
    op->token_floor = -1;
    if (t->kind == K_FENCED && atomic_load(&w->sh->global_break.pending) == 0)
      op->token_floor = atomic_load(&w->sh->max_token[t->name]);
    set_busy(a, op);
    if (t->multi != NULL)
      return relock_multi_lock_lock_async(t->multi, a->owner, op->wait_ms, op->lease_ms);
    if (t->lock != NULL)
      return relock_lock_lock_async(t->lock, a->owner, op->wait_ms, op->lease_ms);
    atomic_fetch_add(&w->sh->sem_inflight, 1); /* until finish_op */
    atomic_fetch_add(&w->sh->sem_ops, 1);
    if (t->sem != NULL)
      return relock_semaphore_acquire_async(t->sem, 1, op->wait_ms);
    return relock_permit_semaphore_acquire_async(t->permit, op->wait_ms, op->lease_ms);
  case OP_RELEASE: {
    /* withdraw the belief first: from now on the actor counts on nothing
     * (the hold on top: a loss may have taken the one chosen meanwhile) */
    pthread_mutex_lock(&w->mu);
    hold_t h;
    if (a->has_redo) { /* withdrawn already */
      h = a->redo;
      a->has_redo = 0;
    } else if (a->depth > 0) {
      h = a->holds[--a->depth];
      op->released_last = h.slot >= 0 && w->mine[h.slot].b.count == 1;
      let_go(w, h.slot);
      let_go(w, h.slot2);
      disbelieve(w, h.slot, 1);
      disbelieve(w, h.slot2, 1);
    } else {
      pthread_mutex_unlock(&w->mu);
      return NULL;
    }
    pthread_mutex_unlock(&w->mu);
    op->released = h;
    op->target = h.target;
    t = &w->targets[h.target];
    if (!is_lock(t->kind)) {
      atomic_fetch_add(&w->sh->sem_inflight, 1); /* until finish_op */
      atomic_fetch_add(&w->sh->sem_ops, 1);
    }
    set_busy(a, op);
    truth_trace(w->slot, "a%d release %s %s %s", a->idx, truth_kind_names[t->kind], truth_names[t->name],
                h.permit_id);
    if (t->multi != NULL)
      return relock_multi_lock_unlock_async(t->multi, a->owner);
    if (t->lock != NULL)
      return relock_lock_unlock_async(t->lock, a->owner);
    if (t->sem != NULL)
      return relock_semaphore_release_async(t->sem, 1);
    return relock_permit_semaphore_release_async(t->permit, h.permit_id);
  }
  case OP_FORCE: {
    /* the break is announced before it happens, so that the observer never
     * sees its effect without it */
    atomic_fetch_add(&w->sh->breaks[t->name].pending, 1);
    truth_break_at(&w->sh->breaks[t->name], F_FORCE_RELEASE, truth_now_ns());
    atomic_fetch_add(&w->slot->force_releases, 1);
    truth_trace(w->slot, "a%d force release %s", a->idx, truth_names[t->name]);
    return relock_lock_force_unlock_async(t->lock);
  }
  case OP_VALIDATE: return relock_lock_validate_async(t->lock, a->owner);
  default: return NULL;
  }
}

static int acquired_value(relock_future_t *f) {
  switch (relock_future_value_type(f)) {
  case RELOCK_VALUE_BOOL: return relock_future_bool(f);
  case RELOCK_VALUE_INT: return relock_future_int(f) > 0;
  case RELOCK_VALUE_STRING: return 1;
  default: return 0;
  }
}

/* An acquisition's outcome: rc 0 and acquired, or not. */
static void finish_acquire(actor_t *a, op_t *op, int rc, int acquired, const char *permit_id, int64_t token) {
  worker_t *w = a->w;
  target_t *t = &w->targets[op->target];
  if (rc == 0 && acquired && is_lock(t->kind)) {
    atomic_store(&w->sh->taken_ns[t->name], truth_now_ns());
    if (t->name2 >= 0)
      atomic_store(&w->sh->taken_ns[t->name2], truth_now_ns());
  }
  if (rc == 0 && acquired && t->kind == K_FENCED && token > 0 && op->token_floor >= 0) {
    /* a token is above every token handed out before this acquisition
     * began, whoever took it (a FLUSHALL or a lost restart meanwhile
     * starts them afresh: not checked) */
    uint64_t g = atomic_load(&w->sh->global_break.at_ns);
    if (atomic_load(&w->sh->global_break.pending) == 0 && g < op->start_ns) {
      if (token <= op->token_floor)
        truth_complain(w->sh, w->id, t->name, "%s: a fenced acquisition got token %lld, not above %lld handed out before it began",
                       truth_names[t->name], (long long)token, (long long)op->token_floor);
      int64_t old = atomic_load(&w->sh->max_token[t->name]);
      while (old < token && !atomic_compare_exchange_weak(&w->sh->max_token[t->name], &old, token))
        ;
    }
  }
  if (rc != 0 || !acquired) {
    truth_trace(w->slot, "a%d acquire %s %s: %s", a->idx, truth_kind_names[t->kind], truth_names[t->name],
                rc != 0 ? relock_err_name(rc) : "not acquired");
    /* an error, or a wait that ran out with a try in flight: what that
     * try took when it landed past the wait's end, the library gives back */
    if ((rc != 0 || op->wait_ms > 0) && is_lock(t->kind) && w->client != NULL) {
      char f[96];
      if (t->lock != NULL)
        relock_lock_field(t->lock, a->owner, f, sizeof f);
      else
        snprintf(f, sizeof f, "%s:%llu", relock_client_id(w->client), (unsigned long long)a->owner);
      pthread_mutex_lock(&w->mu);
      abandon(a, op, f);
      pthread_mutex_unlock(&w->mu);
    }
    return;
  }
  atomic_fetch_add(&w->slot->acquired, 1);
  atomic_fetch_add(&w->sh->acquired_by_kind[t->kind], 1);
  char field[96] = "";
  uint64_t deadline = UINT64_MAX;
  if (t->lock != NULL || t->multi != NULL) {
    int64_t v = validity_of(w, op->target, a->owner);
    deadline = truth_now_ns() + (uint64_t)(v > 0 ? v : 0) * 1000000u;
    /* "acquired" is a promise of the lease from the try's send: an answer
     * that came past it (less the drift margin) is no hold (unless the
     * worker was stopped meanwhile: its own timing is void then) */
    if (v == 0 && atomic_load(&w->slot->stops) == op->stops && !(atomic_load(&w->slot->stops) & 1))
      truth_complain(w->sh, w->id, t->name, "%s: reported acquired (%s lease %lld) with no validity left",
                     truth_names[t->name], truth_kind_names[t->kind], (long long)op->lease_ms);
    if (v < 0) {
      /* lost already (a force release's message, say): its lost callback
       * came before the answer was seen here, and found nothing believed */
      truth_trace(w->slot, "a%d acquired %s %s, lost already (%s)", a->idx, truth_kind_names[t->kind],
                  truth_names[t->name], relock_err_name((int)v));
      return;
    }
  }
  if (t->lock != NULL) {
    relock_lock_field(t->lock, a->owner, field, sizeof field);
  } else if (t->multi != NULL) {
    snprintf(field, sizeof field, "%s:%llu", relock_client_id(w->client), (unsigned long long)a->owner);
  } else if (t->permit != NULL) {
    /* a watched or leased permit: the library's validity, as a lock's */
    snprintf(field, sizeof field, "%s", permit_id);
    if (permit_tracked(op->lease_ms)) {
      int64_t v = relock_permit_semaphore_validity_ms(t->permit, permit_id);
      deadline = truth_now_ns() + (uint64_t)(v > 0 ? v : 0) * 1000000u;
    }
  } else {
    snprintf(field, sizeof field, "permits");
  }
  pthread_mutex_lock(&w->mu);
  if (a->depth == MAX_DEPTH) { /* cannot happen: choose() re-enters below it */
    pthread_mutex_unlock(&w->mu);
    return;
  }
  hold_t *h = &a->holds[a->depth];
  memset(h, 0, sizeof *h);
  h->target = op->target;
  h->lease_ms = op->lease_ms;
  h->start_ns = op->start_ns;
  snprintf(h->field, sizeof h->field, "%s", field);
  /* a share of long holds, past the bound of a break of truth */
  if (rnd_below(&a->rng, 4) == 0)
    h->hold_until_ns = op->start_ns + (uint64_t)(3000 + rnd_below(&a->rng, 4000)) * 1000000u;
  /* and of re-entries aimed at a fixed lease's end */
  h->aim = op->lease_ms > 0 && is_lock(t->kind) && t->multi == NULL && !op->aimed && rnd_below(&a->rng, 6) == 0;
  snprintf(h->permit_id, sizeof h->permit_id, "%s", permit_id != NULL ? permit_id : "");
  h->slot = believe(a, op->target, t->name, field, 1, op->lease_ms, op->start_ns, deadline);
  h->slot2 = t->name2 >= 0 ? believe(a, op->target, t->name2, field, 1, op->lease_ms, op->start_ns, deadline) : -1;
  /* held, believed or not: it is released like any other */
  a->depth++;
  if (h->slot < 0 || (t->name2 >= 0 && h->slot2 < 0)) {
    char busy[200] = "";
    for (int j = 0; j < SLOTS_PER_ACTOR; j++) {
      truth_belief_t *b = &w->mine[a->idx * SLOTS_PER_ACTOR + j].b;
      size_t n = strlen(busy);
      snprintf(busy + n, sizeof busy - n, " [%s %.12s x%d]", b->name >= 0 ? truth_names[b->name] : "-", b->field,
               b->count);
    }
    truth_trace(w->slot, "a%d: no belief slot left for %s (depth %d):%s", a->idx, truth_names[t->name], a->depth,
                busy);
  }
  pthread_mutex_unlock(&w->mu);
  truth_trace(w->slot, "a%d acquired %s %s %s validity %lld ms", a->idx, truth_kind_names[t->kind],
              truth_names[t->name], field[0] == 'p' ? "" : field,
              deadline == UINT64_MAX ? -1LL : (long long)((deadline - truth_now_ns()) / 1000000u));
}

/* A permit's release that failed is sent again (by its id: it frees the
 * permit once); a semaphore's cannot be (a repeat is a new request that
 * may give back twice), so its count is uncertain until the next reset. */
static void release_outcome(actor_t *a, op_t *op, int rc) {
  worker_t *w = a->w;
  /* RELOCK_ELOST: the library found it gone (and said so): nothing to give back */
  if (rc != 0 && rc != RELOCK_ELOST && w->targets[op->target].kind == K_PERMIT) {
    pthread_mutex_lock(&w->mu);
    a->redo = op->released;
    a->has_redo = 1;
    pthread_mutex_unlock(&w->mu);
  } else if (rc != 0) {
    atomic_fetch_add(&w->sh->sem_uncertain, 1);
  }
  atomic_fetch_sub(&w->sh->sem_inflight, 1);
  atomic_fetch_add(&w->sh->sem_ops, 1);
}

void finish_op(actor_t *a, op_t *op, relock_future_t *f) {
  worker_t *w = a->w;
  int rc = relock_future_error(f);
  if (rc == RELOCK_ECANCELED)
    atomic_fetch_add(&w->slot->cancels, 1);
  else if (rc != 0)
    atomic_fetch_add(&w->slot->errors, 1);
  switch (op->type) {
  case OP_ACQUIRE: {
    if (!is_lock(w->targets[op->target].kind)) {
      atomic_fetch_sub(&w->sh->sem_inflight, 1);
      atomic_fetch_add(&w->sh->sem_ops, 1);
    }
    const char *id = relock_future_value_type(f) == RELOCK_VALUE_STRING ? relock_future_string(f, NULL) : NULL;
    int64_t token = rc == 0 && relock_future_value_type(f) == RELOCK_VALUE_INT ? relock_future_int(f) : 0;
    finish_acquire(a, op, rc, rc == 0 && acquired_value(f), id, token);
    break;
  }
  case OP_FORCE: {
    /* The script ran somewhere between the send and now - or, when the
     * answer was lost, may still run when a stalled connection delivers
     * it: the break lasts until then. */
    uint64_t until = truth_now_ns() + (rc == 0 ? 0 : 3000000000ull);
    truth_break_t *b = &w->sh->breaks[w->targets[op->target].name];
    truth_break_at(b, F_FORCE_RELEASE, until);
    atomic_fetch_sub(&b->pending, 1); /* after the time: the observer reads them the other way round */
  }
    /* fall through */
  case OP_RELEASE:
  case OP_VALIDATE:
    if (op->type == OP_RELEASE && !is_lock(w->targets[op->target].kind))
      release_outcome(a, op, rc);
    if (op->type == OP_RELEASE && rc == 0) {
      /* answered: the hold was there; a loss shown meanwhile was none */
      target_t *t = &w->targets[op->target];
      pthread_mutex_lock(&w->mu);
      told(w, t->name, op->released.field);
      if (t->name2 >= 0)
        told(w, t->name2, op->released.field);
      pthread_mutex_unlock(&w->mu);
      if (op->released_last && is_lock(t->kind) && truth_name_group(t->name) == G_HASH) {
        int names[2] = {t->name, t->name2};
        uint64_t now = truth_now_ns();
        for (int k = 0; k < 2 && names[k] >= 0; k++) {
          /* a relock acquisition waiting on it (for 50 ms), and on for the bound */
          uint64_t waiter = 0, involved = 1u << w->id;
          /* a worker that waited on it lately may still be registered
           * there (its TTL and 2 s at most: lua/lock_acquire.lua) */
          for (int ow = 0; ow < w->sh->nworkers; ow++)
            if (atomic_load(&w->sh->busy_at[names[k]][ow]) + (uint64_t)(TRUTH_MAX_FIXED_LEASE_MS + 2000) * 1000000u > now)
              involved |= 1u << ow;
          for (int ow = 0; ow < w->sh->nworkers; ow++)
            for (int oa = 0; oa < TRUTH_MAX_OWNERS; oa++) {
              truth_belief_t b;
              truth_belief_read(&w->sh->w[ow].busy[oa], &b);
              if (b.name != names[k])
                continue;
              involved |= 1u << ow;
              if (waiter == 0 && b.deadline_ns > now + (TRUTH_WAKE_BOUND_MS + 100) * 1000000ull &&
                  b.since_ns + 50000000u < now)
                waiter = (uint64_t)(ow * 16 + oa + 1);
            }
          if (waiter == 0)
            continue;
          int i = atomic_fetch_add(&w->sh->freed_next, 1) % 256;
          atomic_store(&w->sh->freed[i][1], 0);
          atomic_store(&w->sh->freed[i][0], (uint64_t)names[k]);
          atomic_store(&w->sh->freed[i][2], waiter);
          atomic_store(&w->sh->freed[i][3], involved);
          atomic_store(&w->sh->freed[i][1], now);
        }
      }
    }
    if (rc != 0)
      truth_trace(w->slot, "a%d op %d on %s: %s", a->idx, op->type, truth_names[w->targets[op->target].name],
                  relock_err_name(rc));
    break;
  default: break;
  }
  clear_busy(a); /* after its outcome is believed: the observer reads the beliefs after this */
  atomic_fetch_add(&w->slot->ops, 1);
  uint64_t took_ms = (truth_now_ns() - op->start_ns) / 1000000u;
  int64_t bound = (op->wait_ms > 0 ? op->wait_ms : 0) + 8 * TRUTH_COMMAND_TIMEOUT_MS + 3000;
  if ((int64_t)took_ms > bound) {
    atomic_fetch_add(&w->slot->hung, 1);
    truth_trace(w->slot, "a%d op %d took %llu ms (bound %lld)", a->idx, op->type, (unsigned long long)took_ms,
                (long long)bound);
    fprintf(stderr, "# worker %d: a%d's operation %d on %s took %llu ms (bound %lld)\n", w->id, a->idx, op->type,
            truth_names[w->targets[op->target].name], (unsigned long long)took_ms, (long long)bound);
  }
}

/* The operations an actor runs before its client closes (or at the end):
 * give back what has no lease (semaphore permits, permits without a
 * lease: a watched one is left to expire once its client is gone, as a
 * lock's watchdog hold), and at the end everything. */
int needs_give_back(actor_t *a, int everything) {
  if (a->has_redo)
    return 1;
  if (a->depth > 0 && everything)
    return 1;
  /* releases go from the top: one below a hold that may stay (a watched
   * permit on a permit without a lease) needs the ones above it given
   * back too, or the close abandons it for good */
  for (int i = 0; i < a->depth; i++) {
    const hold_t *h = &a->holds[i];
    enum truth_kind k = a->w->targets[h->target].kind;
    if (k == K_SEMAPHORE || (k == K_PERMIT && h->lease_ms == RELOCK_PERMIT_NO_LEASE))
      return 1;
  }
  return 0;
}

/* -- a threaded actor's operation ---------------------------------------------*/
static void run_blocking_acquire(actor_t *a, op_t *op) {
  target_t *t = &a->w->targets[op->target];
  int acquired = 0;
  truth_trace(a->w->slot, "a%d blocking acquire %s %s wait %lld lease %lld", a->idx, truth_kind_names[t->kind],
              truth_names[t->name], (long long)op->wait_ms, (long long)op->lease_ms);
  op->stops = atomic_load(&a->w->slot->stops);
  set_busy(a, op);
  atomic_store(&a->blocked_in, t->lock);
  int rc = relock_lock_try_lock(t->lock, op->wait_ms, op->lease_ms, &acquired);
  atomic_store(&a->blocked_in, NULL);
  if (rc == RELOCK_EINTERRUPTED)
    atomic_fetch_add(&a->w->slot->interrupts, 1);
  else if (rc != 0)
    atomic_fetch_add(&a->w->slot->errors, 1);
  truth_trace(a->w->slot, "a%d blocking acquire %s %s: %s", a->idx, truth_kind_names[t->kind], truth_names[t->name],
              rc != 0 ? relock_err_name(rc) : acquired ? "acquired" : "not acquired");
  finish_acquire(a, op, rc, acquired, NULL, 0);
  clear_busy(a);
  atomic_fetch_add(&a->w->slot->ops, 1);
}

void run_op_blocking(actor_t *a, op_t *op) {
  if (op->type == OP_THINK) {
    msleep(op->think_ms >= 0 ? op->think_ms : rnd_below(&a->rng, 60));
    return;
  }
  if (op->blocking && op->type == OP_ACQUIRE) {
    run_blocking_acquire(a, op);
    return;
  }
  relock_future_t *f = start_op(a, op);
  if (f == NULL)
    return;
  if (op->cancel_after_ms >= 0) {
    msleep(op->cancel_after_ms);
    relock_future_cancel(f);
  }
  int64_t bound = (op->wait_ms > 0 ? op->wait_ms : 0) + 8 * TRUTH_COMMAND_TIMEOUT_MS + 3000;
  if (relock_future_wait(f, bound) == RELOCK_ETIMEDOUT && !relock_future_is_done(f)) {
    atomic_fetch_add(&a->w->slot->hung, 1);
    truth_trace(a->w->slot, "a%d op %d took over %lld ms (hung)", a->idx, op->type, (long long)bound);
    relock_future_cancel(f);
    relock_future_wait(f, RELOCK_INFINITE);
  }
  finish_op(a, op, f);
  relock_future_release(f);
}

