/* Acquiring a lock, and waiting for a held one (DESIGN.md §4).
 *
 * 1. Try. Acquired: done (a watchdog hold is registered for renewal).
 * 2. Held by someone else: join the lock's wait queue, which subscribes to
 *    its unlock channel (one subscription per name, shared by every local
 *    waiter), and only once the subscription is confirmed try again, so that
 *    an unlock published between the first try and the subscription is
 *    never missed.
 * 3. Wait for an unlock message or for min(the holder's remaining TTL, the
 *    time left), whichever comes first; try again. An unlock message ("0")
 *    wakes one local waiter; a read-unlock ("1") or a gap in the subscription
 *    wakes them all.
 * 4. Deadline: the future succeeds with 0 (not acquired). Cancel: it
 *    completes cancelled, and if a try was in flight and succeeds, the lock
 *    is released again.
 * 5. The last waiter leaving a queue unsubscribes it. */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include <relock/error.h>

#include "call.h"
#include "clock.h"
#include "lock_impl.h"
#include "lock_ops.h"
#include "promise.h"
#include "pubsub.h"
#include "renewal.h"
#include "scripts.h"

#define NS_PER_MS 1000000u
#define ACQUIRED INT64_MIN /* the try's answer when the lock is ours */
#define NO_TTL_POLL_MS 1000 /* re-check a held lock that never expires */

typedef struct waitq waitq_t;

typedef enum { TRYING, SUBSCRIBING, WAITING } acquire_state_t;

typedef struct acquire {
  relock__link_t qlink;     /* in q->waiters, in arrival order */
  waitq_t *q;
  relock_lock_t *lock;
  relock_future_t *out;     /* the caller's future (a reference) */
  relock_future_t *attempt; /* the try in flight */
  relock__timer_t timer;    /* the holder's TTL, or the deadline */
  uint64_t owner;
  int64_t lease_ms;
  uint64_t deadline_ns;     /* UINT64_MAX: wait forever */
  uint64_t sent_ns;
  acquire_state_t state;
  unsigned watchdog : 1;
  unsigned try_once : 1;
  unsigned woken : 1;       /* an unlock came while the try was in flight */
  unsigned to_wake : 1;     /* picked by wake(), not woken yet */
  char latch_id[33];
} acquire_t;

struct waitq {
  relock__hnode_t node;     /* in client->waitqs, by lock name */
  relock_client_t *client;
  relock_lock_t *lock;      /* for its name and channel (a reference) */
  relock__listener_t listener;
  relock_future_t *confirm;
  relock__link_t waiters;
  size_t nwaiters;
  int guards;               /* walks in progress: don't free yet */
  int dying;
};

static void try_acquire(acquire_t *op);

/* -- wait queues ------------------------------------------------------------*/

static uint64_t name_hash(const relock_lock_t *lock) {
  return relock__hash_bytes(RELOCK__HASH_SEED, lock->name, lock->len);
}

static waitq_t *find_queue(relock_client_t *c, const relock_lock_t *lock) {
  uint64_t h = name_hash(lock);
  relock__hnode_t *n;
  for (RELOCK__HTAB_EACH(&c->waitqs, h, n)) {
    waitq_t *q = relock__container_of(n, waitq_t, node);
    if (n->hash == h && q->lock->len == lock->len && memcmp(q->lock->name, lock->name, lock->len) == 0)
      return q;
  }
  return NULL;
}

static void queue_maybe_free(waitq_t *q) {
  if (q->nwaiters > 0 || q->guards > 0 || q->dying)
    return;
  /* Unsubscribing cancels a pending confirmation, whose callback runs right
   * here: dying tells it the queue is on its way out. */
  q->dying = 1;
  relock__htab_remove(&q->client->waitqs, &q->node);
  relock_future_t *confirm = q->confirm;
  q->confirm = NULL;
  relock__pubsub_unsubscribe(&q->listener);
  relock_future_release(confirm);
  relock__lock_release(q->lock);
  free(q);
}

static void leave_queue(acquire_t *op) {
  waitq_t *q = op->q;
  if (q == NULL)
    return;
  op->q = NULL;
  relock__list_remove(&op->qlink);
  q->nwaiters--;
  queue_maybe_free(q);
}

/* Wakes waiters: all of them, or the first one not already trying. A waiter
 * whose try is in flight may have been answered before the unlock: it is
 * marked to try again at once (for "one", only if nobody else was woken).
 * Waking may complete or free waiters, so the walk marks first and then
 * wakes marked waiters one at a time from the front. */
static void wake(waitq_t *q, int all) {
  acquire_t *first_trying = NULL;
  int marked = 0;
  for (relock__link_t *l = q->waiters.next; l != &q->waiters; l = l->next) {
    acquire_t *op = relock__container_of(l, acquire_t, qlink);
    if (op->state == TRYING) {
      if (all)
        op->woken = 1;
      else if (first_trying == NULL)
        first_trying = op;
    } else if (all || !marked) {
      op->to_wake = 1;
      marked = 1;
    }
  }
  if (!marked && first_trying != NULL)
    first_trying->woken = 1;
  q->guards++;
  for (;;) {
    acquire_t *next = NULL;
    for (relock__link_t *l = q->waiters.next; l != &q->waiters && next == NULL; l = l->next) {
      acquire_t *op = relock__container_of(l, acquire_t, qlink);
      if (op->to_wake)
        next = op;
    }
    if (next == NULL)
      break;
    next->to_wake = 0;
    relock__timer_stop(&next->timer);
    try_acquire(next);
  }
  q->guards--;
  queue_maybe_free(q);
}

static void on_message(relock__listener_t *l, const char *payload, size_t len, void *arg) {
  (void)l;
  waitq_t *q = arg;
  if (payload == NULL || (len == 1 && payload[0] == '1'))
    wake(q, 1); /* a gap, or a read-unlock: everyone re-checks */
  else if (len == 1 && payload[0] == '0')
    wake(q, 0);
}

static void on_confirm(relock_future_t *f, void *arg) {
  waitq_t *q = arg;
  if (q->dying)
    return;
  if (q->confirm == f) {
    q->confirm = NULL;
    relock_future_release(f);
  }
  /* Subscribed (or not: then the TTL bounds the wait): the waiters that were
   * waiting for it try again. */
  q->guards++;
  for (relock__link_t *l = q->waiters.next; l != &q->waiters;) {
    acquire_t *op = relock__container_of(l, acquire_t, qlink);
    if (op->state != SUBSCRIBING) {
      l = l->next;
      continue;
    }
    op->state = TRYING;
    relock__timer_stop(&op->timer);
    try_acquire(op);
    l = q->waiters.next;
  }
  q->guards--;
  queue_maybe_free(q);
}

/* Puts op in its lock's queue; returns 1 if the subscription is confirmed
 * already, 0 if op must wait for it, -1 when out of memory. */
static int join_queue(acquire_t *op) {
  relock_client_t *c = op->lock->client;
  waitq_t *q = find_queue(c, op->lock);
  int confirmed = 1;
  if (q == NULL) {
    if ((q = calloc(1, sizeof(*q))) == NULL)
      return -1;
    q->client = c;
    q->lock = relock__lock_retain(op->lock);
    relock__list_init(&q->waiters);
    relock__htab_insert(&c->waitqs, &q->node, name_hash(op->lock));
    relock_future_t *f = relock__pubsub_subscribe(&c->pubsub, &q->listener, q->lock->channel,
                                                  q->lock->channel_len, 0, on_message, q);
    if (f == NULL) {
      relock__htab_remove(&c->waitqs, &q->node);
      relock__lock_release(q->lock);
      free(q);
      return -1;
    }
    if (!relock_future_is_done(f)) {
      q->confirm = f;
      confirmed = 0;
      relock_future_on_done(f, on_confirm, q); /* inline slot: cannot fail */
    } else {
      relock_future_release(f);
    }
  } else if (q->confirm != NULL) {
    confirmed = 0;
  }
  op->q = q;
  relock__list_push_back(&q->waiters, &op->qlink);
  q->nwaiters++;
  return confirmed;
}

/* -- the operation ----------------------------------------------------------*/

static void finish(acquire_t *op) {
  relock__timer_stop(&op->timer);
  leave_queue(op);
  relock_future_release(op->out);
  relock__lock_release(op->lock);
  free(op);
}

/* A try that succeeded for nobody (the caller cancelled): give it back. */
static void on_undo_done(relock_future_t *f, void *arg) {
  (void)arg;
  relock_future_release(f);
}

static void undo(acquire_t *op) {
  relock_future_t *f = relock__lock_send_release(op->lock, op->owner, op->lease_ms);
  if (f != NULL)
    relock_future_on_done(f, on_undo_done, NULL);
}

static int64_t ms_until(uint64_t deadline_ns, uint64_t now) {
  if (deadline_ns == UINT64_MAX)
    return INT64_MAX;
  return deadline_ns > now ? (int64_t)((deadline_ns - now + NS_PER_MS - 1) / NS_PER_MS) : 0;
}

static void wait_for(acquire_t *op, acquire_state_t state, int64_t ttl_ms) {
  int64_t left = ms_until(op->deadline_ns, relock__now_ns());
  int64_t delay = ttl_ms >= 0 ? ttl_ms : NO_TTL_POLL_MS;
  if (left < delay)
    delay = left;
  op->state = state;
  relock__timer_start(&op->lock->client->wheel, &op->timer, delay);
}

static void on_try_reply(relock_future_t *f, redisReply *reply, void *arg) {
  (void)arg;
  if (reply->type == REDIS_REPLY_NIL)
    relock__future_succeed_int(f, ACQUIRED);
  else if (reply->type == REDIS_REPLY_INTEGER)
    relock__future_succeed_int(f, reply->integer);
  else if (reply->type == REDIS_REPLY_ERROR)
    relock__future_fail(f, RELOCK_ESERVER, "%.*s", (int)reply->len, reply->str);
  else
    relock__future_fail(f, RELOCK_EPROTO, "unexpected reply type %d to acquire", reply->type);
}

static void on_try_done(relock_future_t *f, void *arg) {
  acquire_t *op = arg;
  op->attempt = NULL;
  int err = relock_future_error(f);
  int64_t answer = err == 0 ? relock_future_int(f) : 0;

  if (relock_future_is_done(op->out)) { /* cancelled meanwhile */
    if (err == 0 && answer == ACQUIRED)
      undo(op);
    finish(op);
  } else if (err != 0) {
    relock__future_fail(op->out, err, "%s", relock_future_message(f));
    finish(op);
  } else if (answer == ACQUIRED) {
    relock_client_t *c = op->lock->client;
    if (relock__renewal_acquired(&c->renewal, op->lock, op->owner, op->watchdog, op->lease_ms, op->sent_ns) != 0) {
      undo(op); /* a hold nobody would renew or track */
      relock__future_fail(op->out, RELOCK_ENOMEM, "out of memory tracking lock %s", op->lock->name);
    } else {
      relock__future_succeed_bool(op->out, 1);
    }
    finish(op);
  } else if (op->try_once || relock__now_ns() >= op->deadline_ns) {
    relock__future_succeed_bool(op->out, 0);
    finish(op);
  } else if (op->q == NULL) {
    int confirmed = join_queue(op);
    if (confirmed < 0) {
      relock__future_fail(op->out, RELOCK_ENOMEM, "out of memory waiting for lock %s", op->lock->name);
      finish(op);
    } else if (confirmed) {
      try_acquire(op); /* subscribed: now no unlock can be missed */
    } else {
      wait_for(op, SUBSCRIBING, answer);
    }
  } else if (op->woken) {
    try_acquire(op);
  } else {
    wait_for(op, WAITING, answer);
  }
  relock_future_release(f);
}

static void try_acquire(acquire_t *op) {
  relock_lock_t *lock = op->lock;
  relock_client_t *c = lock->client;
  char field[RELOCK__FIELD_MAX], lease[24], ttl[24], suffix[40];
  snprintf(suffix, sizeof suffix, ":%s", op->latch_id);
  size_t latch_len;
  char *latch = relock__lock_derived_name(lock, "relock_lock_latch", suffix, &latch_len);
  relock_future_t *f = NULL;
  if (latch != NULL) {
    const char *argv[] = {lock->name, latch, lease, field, ttl};
    const size_t lens[] = {lock->len, latch_len, (size_t)snprintf(lease, sizeof lease, "%lld", (long long)op->lease_ms),
                           relock__lock_field(lock, op->owner, field),
                           (size_t)snprintf(ttl, sizeof ttl, "%lld", (long long)relock__latch_ttl_ms(c))};
    relock__call_spec_t spec = {.script = &relock__scripts[RELOCK__SCRIPT_LOCK_ACQUIRE],
                                .nkeys = 2,
                                .argc = 5,
                                .argv = argv,
                                .lens = lens,
                                .on_reply = on_try_reply,
                                .retry_safe = 1, /* the latch makes a repeat harmless */
                                /* a bounded wait bounds the retries too */
                                .deadline_ns = op->deadline_ns == UINT64_MAX ? 0 : op->deadline_ns};
    op->state = TRYING;
    op->woken = 0;
    op->sent_ns = relock__now_ns();
    f = relock__call(c, &spec);
    free(latch);
  }
  if (f == NULL) {
    relock__future_fail(op->out, RELOCK_ENOMEM, "out of memory acquiring lock %s", lock->name);
    finish(op);
    return;
  }
  op->attempt = f;
  relock_future_on_done(f, on_try_done, op);
}

static void on_timer(relock__timer_t *t, int status, void *arg) {
  (void)t;
  acquire_t *op = arg;
  if (status != 0) {
    relock__future_fail(op->out, RELOCK_ECLOSED, "client closed");
    finish(op);
    return;
  }
  try_acquire(op);
}

static void on_cancel(relock_future_t *out, void *arg) {
  (void)out;
  acquire_t *op = arg;
  if (op->attempt != NULL) {
    /* Its answer decides: acquired means released again (on_try_done). */
    relock__timer_stop(&op->timer);
    leave_queue(op);
    return;
  }
  finish(op);
}

relock_future_t *relock_lock_acquire_async(relock_lock_t *lock, uint64_t owner, int64_t wait_ms, int64_t lease_ms) {
  if (lock == NULL || wait_ms < RELOCK_INFINITE || (lease_ms != RELOCK_INFINITE && lease_ms <= 0) ||
      lease_ms > RELOCK_MAX_LEASE_MS)
    return NULL;
  if (wait_ms > RELOCK_MAX_LEASE_MS) /* decades: as good as forever, and no overflow */
    wait_ms = RELOCK_INFINITE;
  relock_client_t *c = lock->client;
  acquire_t *op = calloc(1, sizeof(*op));
  relock_future_t *out = relock__future_new(c->loop);
  if (op == NULL || out == NULL) {
    free(op);
    relock_future_release(out);
    return NULL;
  }
  op->lock = relock__lock_retain(lock);
  op->out = relock_future_retain(out);
  op->owner = owner;
  op->watchdog = lease_ms == RELOCK_INFINITE;
  op->lease_ms = op->watchdog ? c->settings.watchdog_timeout_ms : lease_ms;
  op->try_once = wait_ms == 0;
  op->deadline_ns = wait_ms == RELOCK_INFINITE ? UINT64_MAX : relock__now_ns() + (uint64_t)wait_ms * NS_PER_MS;
  relock__list_init(&op->qlink);
  relock__timer_init(&op->timer, on_timer, op);
  relock__request_id(c, op->latch_id);
  relock__future_set_cancel(out, on_cancel, op);
  try_acquire(op);
  return out;
}
