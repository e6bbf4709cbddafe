/* Acquiring a lock of any kind (lock_kind.h), and waiting for a held one
 * (docs/ARCHITECTURE.md, "The life of one acquisition").
 *
 * 1. Try (once it is the owner's turn on the lock: lock_turn.h). Acquired:
 *    done (a watchdog hold is registered for renewal); the answer says how
 *    many holds of the owner Redis counts now - fewer than it had plus this
 *    one when the key vanished meanwhile (watchdog/renewal.h).
 * 2. Held by someone else: join the wait queue of the lock's channel
 *    (wait_queue.h), and only once its subscription is confirmed try
 *    again, so that an unlock published between the first try and the
 *    subscription is never missed. A kind whose release wakes one process
 *    (wakes_one) registers the client's waker id with its waiting tries;
 *    the queue says which unlocks are this process's to take.
 * 3. Wait until the queue wakes the waiter, or for min(the holder's
 *    remaining TTL, the time left) - the queue's poll while its channel is
 *    not heard - whichever comes first; try again.
 * 4. Deadline (it bounds the whole operation, the try in flight included):
 *    the future succeeds with 0 (not acquired). Cancel: it completes
 *    cancelled. Either way a try in flight is abandoned and whatever it may
 *    have taken is given back.
 *
 * A spin lock's waiter joins no queue: it tries again after a back-off. A
 * fair lock's waiter that gives up leaves its place in Redis (the kind's
 * leave_queue).
 *
 * Safety (docs/SAFETY.md): "acquired" is reported only for an answer that
 * came back before the hold could have expired (send time + lease - drift
 * margin). A late answer, a lost one (error, timeout) and an abandoned try
 * are unknown outcomes: the acquisition's latch tells Redis which hold to
 * give back (lua/lock_acquire_undo.lua), so nothing is left held unseen and
 * the local hold count never drifts from Redis's. With min-replicas-acked
 * n, a try is the script plus WAIT in one round trip (redis/call.h): an
 * acquisition fewer than n replicas acknowledged is given back the same
 * way and fails with RELOCK_ENOTREPLICATED. */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <relock/error.h>

#include "base/clock.h"
#include "base/random.h"
#include "future/promise.h"
#include "objects/keys.h"
#include "objects/lock_impl.h"
#include "objects/lock_turn.h"
#include "objects/wait_queue.h"
#include "redis/call.h"
#include "redis/reply.h"
#include "redis/scripts.h"
#include "watchdog/renewal.h"

#define SPIN_MIN_MS 1   /* a spin lock's back-off base: 1 ms doubling to 128 ms */
#define SPIN_MAX_MS 128

typedef enum { TRYING, SUBSCRIBING, WAITING } acquire_state_t;

typedef struct acquire {
  relock__waiter_t w;       /* its place in its channel's wait queue (wait_queue.h) */
  relock_lock_t *lock;
  relock_future_t *out;     /* the caller's future (a reference) */
  relock_future_t *attempt; /* the try in flight */
  relock__timer_t timer;    /* the holder's TTL, or the poll cadence */
  relock__timer_t deadline; /* the end of a bounded wait */
  uint64_t owner;
  int64_t lease_ms;
  uint64_t deadline_ns;     /* UINT64_MAX: wait forever (or try once) */
  uint64_t sent_ns;         /* when the try in flight was first sent */
  uint64_t start_ns;        /* when the acquisition started (statistics) */
  uint64_t wait_ns;         /* when a try first found it held and it went on waiting; 0: it never did */
  uint32_t tries;           /* tries sent */
  acquire_state_t state;
  unsigned watchdog : 1;
  unsigned forever : 1;     /* no lease: no hold for the watchdog (a semaphore's or latch's; a permit's without one) */
  unsigned try_once : 1;
  unsigned answered : 1;    /* Redis answered a try of this operation */
  unsigned abandoned : 1;   /* over: a try in flight is given back */
  unsigned queued : 1;      /* a try may have put it in the lock's queue in Redis (fair lock) */
  unsigned waker_sent : 1;  /* the try in flight carries the waker id: it registers if the lock is held */
  unsigned keep_sent : 1;   /* ... and keeps the registration if it acquires (other waiters here) */
  int64_t wait_ms;
  /* What Redis last answered a try that is retried (CLUSTERDOWN, TRYAGAIN,
   * LOADING...; empty when the last retried failure was no answer at all):
   * a wait that ends meanwhile says it, as Redis did answer. */
  char not_now[160];
  int64_t spin_ms;          /* a spin lock's next back-off */
  char latch_id[RELOCK__REQUEST_ID_SIZE]; /* this try's request id */
  uint64_t latch_bits[2];   /* ... as numbers, for a kind whose release takes its latch over (latch_passed_on) */
  relock__turn_wait_t turn; /* its owner's turn (lock_turn.h): held from a try's send until it is answered, or
                               handed to its give-back */
} acquire_t;

static void try_acquire(acquire_t *op);
static void end(acquire_t *op, int err, const relock__answer_t *a, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* -- waiting ----------------------------------------------------------------*/

static acquire_t *acquire_of(relock__waiter_t *w) { return relock__container_of(w, acquire_t, w); }

/* Sets op's state, and its place in its queue (wait_queue.h). */
static void set_state(acquire_t *op, acquire_state_t state) {
  op->state = state;
  relock__waitq_move(&op->w, state == TRYING);
}

/* Its queue woke op: it tries now. */
static void on_wake(relock__waiter_t *w) {
  acquire_t *op = acquire_of(w);
  relock__timer_stop(&op->timer);
  try_acquire(op);
}

static void on_refused(relock__waiter_t *w, const char *why) {
  end(acquire_of(w), RELOCK_ENOPERM, 0, "waiting needs the lock's unlock channel: %s", why);
}

static void unregister(relock__waiter_t *w);

static const relock__waiter_ops_t waiter_ops = {on_wake, on_refused, unregister};

/* The channel op's waiter listens on (malloc'ed), NULL when out of memory:
 * the lock's channel, or for a fair lock the waiter's own,
 * "<lock channel>:<field>". */
static char *wait_channel(const acquire_t *op, size_t *len) {
  relock_lock_t *lock = op->lock;
  size_t channel_len = relock__lock_channel_to(lock, NULL, 0), field_len = 0;
  char field[RELOCK__FIELD_MAX];
  if (lock->kind->wait == RELOCK__WAIT_OWN_CHANNEL)
    field_len = relock__lock_field(lock, op->owner, field);
  *len = field_len > 0 ? channel_len + 1 + field_len : channel_len;
  char *channel = malloc(*len + 1);
  if (channel == NULL)
    return NULL;
  relock__lock_channel_to(lock, channel, channel_len + 1);
  if (field_len > 0) {
    channel[channel_len] = ':';
    memcpy(channel + channel_len + 1, field, field_len + 1);
  }
  return channel;
}

/* Puts op (trying) in its channel's queue: as relock__waitq_join. */
static int join_queue(acquire_t *op) {
  size_t len;
  char *channel = wait_channel(op, &len);
  if (channel == NULL)
    return -1;
  int confirmed = relock__waitq_join(op->lock->client, &op->w, channel, len, op->lock->kind->wait, op->sent_ns);
  free(channel);
  return confirmed;
}


/* -- giving back ------------------------------------------------------------*/

static void on_fire_and_forget(relock_future_t *f, void *arg) {
  (void)arg;
  relock_future_release(f);
}

/* The latch of op's current try (a malloc'ed string), NULL when out of memory. */
static char *latch_name(const acquire_t *op, size_t *len) {
  if (op->lock->kind->latch_passed_on) /* the unlock latch of the hold's next release */
    return relock__unlock_latch_name(op->lock->name, op->lock->len, op->latch_id, len);
  return relock__acquire_latch_name(op->lock->name, op->lock->len, op->latch_id, len);
}

/* A new request id for op's next try: its latch's, and for a kind whose
 * ids are permits, the owner the permit is. */
static void new_request_id(acquire_t *op) {
  uint64_t *rng = &op->lock->client->rng;
  if (op->lock->kind->request_id != NULL) {
    op->lock->kind->request_id(op->lock, op->latch_id, &op->owner);
  } else if (op->lock->kind->latch_passed_on) {
    op->latch_bits[0] = relock__random(rng);
    op->latch_bits[1] = relock__random(rng);
    relock__request_id_of(op->latch_bits, op->latch_id);
  } else {
    relock__request_id(rng, op->latch_id);
  }
}

/* Sets call up for op's current try (its latch: a malloc'ed string, which
 * the caller frees); -1 when out of memory. */
static int try_call(acquire_t *op, relock__lock_call_t *call, char field[RELOCK__FIELD_MAX]) {
  relock__lock_call_init(call, op->lock, op->owner, field);
  call->lease_ms = op->forever ? -1 : op->lease_ms;
  call->permits = op->w.permits;
  if (!op->try_once && op->lock->kind->wakes_one && (op->w.q != NULL || op->lock->waited)) {
    if ((call->waker = relock__waitq_waker_id(op->lock->client)) == NULL)
      return -1;
    call->keep_waker = relock__waitq_others(&op->w);
  }
  call->latch = latch_name(op, &call->latch_len);
  return call->latch != NULL ? 0 : -1;
}

/* A give-back is over: answered (it gave back what the try took, or found
 * nothing taken), or not, for good (the client closed first, or Redis
 * refused it): then it counts as unreturned (relock_client_unreturned). */
static void on_give_back_done(relock_future_t *f, void *arg) {
  relock_client_t *c = arg;
  __atomic_sub_fetch(&c->give_backs_owed, 1, __ATOMIC_RELAXED);
  if (relock_future_error(f) != 0)
    __atomic_add_fetch(&c->give_backs_failed, 1, __ATOMIC_RELAXED);
  relock_future_release(f);
}

/* The same for a give-back that kept its try's turn (arg): the owner's
 * next request may go now. */
static void on_give_back_turn_done(relock_future_t *f, void *arg) {
  relock_client_t *c = relock__turn_client(arg);
  relock__turn_pass(arg);
  on_give_back_done(f, c);
}

/* Gives back the hold (the permits) op's try took, if it took any: the
 * latch says so in Redis (op's place in a queue in Redis goes when op
 * finishes). Sent after the try on the same connection, so it runs after
 * it. It is retried until Redis answers, for as long as the client lives
 * (call.h, until_answered), however long Redis stays out of reach: a
 * semaphore's permits have no lease, and would stay taken for good. The
 * latch lives until then (a semaphore's has no expiry; a lock's lasts its
 * lease, which bounds the hold anyway), and running it twice gives back
 * once. A close tries it within its bound (it waits for the answer), so
 * that cancelling and closing at once (the relock tool on a signal) leaves
 * nothing held, and counts what it could not give back. */
static void undo(acquire_t *op) {
  /* The try's turn goes with it: nothing of its owner's may come between
   * the try and its give-back, whose latch outlives the key (lock_turn.h). */
  relock__turn_t *turn = relock__turn_take(&op->turn);
  if (op->lock->kind->undo == NULL) {
    relock__turn_pass(turn);
    return; /* it takes nothing: a latch's await */
  }
  relock_client_t *c = op->lock->client;
  char field[RELOCK__FIELD_MAX];
  relock__lock_call_t call;
  if (try_call(op, &call, field) != 0) {
    __atomic_add_fetch(&c->give_backs_failed, 1, __ATOMIC_RELAXED); /* out of memory */
    relock__turn_pass(turn);
    return;
  }
  call.spec.flush_on_close = 1; /* retry_safe: deleting the latch makes a repeat harmless */
  call.spec.until_answered = 1;
  relock_future_t *f = op->lock->kind->undo(&call);
  free((char *)call.latch);
  if (f == NULL) {
    __atomic_add_fetch(&c->give_backs_failed, 1, __ATOMIC_RELAXED);
    relock__turn_pass(turn);
    return;
  }
  __atomic_add_fetch(&c->give_backs_owed, 1, __ATOMIC_RELAXED);
  if (turn != NULL)
    relock_future_on_done(f, on_give_back_turn_done, turn);
  else
    relock_future_on_done(f, on_give_back_done, c);
}

/* op gives up waiting: its place in the lock's queue in Redis, if the
 * kind keeps one and a try put it there, goes to the waiter behind. */
static void leave_redis_queue(acquire_t *op) {
  if (!op->queued || op->lock->kind->leave_queue == NULL)
    return;
  op->queued = 0;
  char field[RELOCK__FIELD_MAX];
  relock__lock_call_t call;
  relock__lock_call_init(&call, op->lock, op->owner, field);
  call.spec.flush_on_close = 1;
  relock_future_t *f = op->lock->kind->leave_queue(&call);
  if (f != NULL)
    relock_future_on_done(f, on_fire_and_forget, NULL);
}

/* op, in no queue, ends with its process perhaps registered: the queue of
 * its channel keeps that in mind while it has waiters, else the
 * registration goes now. */
static void forget_registration(acquire_t *op) {
  size_t len;
  char *channel = wait_channel(op, &len);
  int kept = channel != NULL && relock__waitq_keep_registration(op->lock->client, channel, len);
  free(channel);
  if (!kept)
    unregister(&op->w);
}

/* w's process waits no more: its registration goes, so that no unlock is
 * handed to it (it would go unused until the hand-off's fallback,
 * wait_queue.h). */
static void unregister(relock__waiter_t *w) {
  relock_lock_t *lock = acquire_of(w)->lock;
  w->registered = 0;
  if (lock->client->closing)
    return; /* it expires by itself */
  const char *id = relock__waitq_waker_id(lock->client);
  size_t len;
  char *waiters = id != NULL ? relock__lock_waiters_name(lock->name, lock->len, &len) : NULL;
  if (waiters == NULL)
    return;
  const char *argv[] = {"ZREM", waiters, id};
  const size_t lens[] = {4, len, strlen(id)};
  relock__call_spec_t spec = {.argc = 3, .argv = argv, .lens = lens, .retry_safe = 1};
  relock_future_t *f = relock__call(&lock->client->redis, &spec);
  free(waiters);
  if (f != NULL)
    relock_future_on_done(f, on_fire_and_forget, NULL);
}

/* The answer came back in time: the latch is not needed any more (it would
 * otherwise stay in Redis for its whole life), unless the hold's next
 * release takes it over as its own (latch_passed_on). A semaphore's (a kind
 * without holds: no lease) has no expiry, so its DEL is retried until
 * answered, and a close waits for it. A lock's expires with its latch TTL:
 * its DEL is only tidying, and a close does not wait for it - a free must
 * not wait a command timeout for a stopped server when nothing is owed. */
static void drop_latch(acquire_t *op) {
  const relock__lock_kind_t *kind = op->lock->kind;
  if (kind->undo == NULL || kind->no_latch)
    return; /* no latch kept: nothing to give back, or the request id kept instead */
  if (kind->latch_passed_on) /* the hold's next release takes it over (relock__lock_acquired), and it expires after that */
    return;
  size_t len;
  char *latch = latch_name(op, &len);
  if (latch == NULL)
    return; /* it expires by itself */
  const char *argv[] = {"DEL", latch};
  const size_t lens[] = {3, len};
  int forever = op->lock->kind->no_hold;
  relock__call_spec_t spec = {
      .argc = 2, .argv = argv, .lens = lens, .retry_safe = 1, .flush_on_close = forever, .until_answered = forever};
  relock_future_t *f = relock__call(&op->lock->client->redis, &spec);
  free(latch);
  if (f != NULL)
    relock_future_on_done(f, on_fire_and_forget, NULL);
}

/* -- the operation ----------------------------------------------------------*/

static void finish(acquire_t *op) {
  relock__turn_leave(&op->turn); /* a try waiting for its turn goes unsent */
  leave_redis_queue(op);
  relock__timer_stop(&op->timer);
  relock__timer_stop(&op->deadline);
  relock__waitq_leave(&op->w);
  if (op->w.registered)
    forget_registration(op); /* a try before it joined a queue (or after it left one) may have registered */
  relock_future_release(op->out);
  relock__lock_unref(op->lock);
  free(op);
}

/* Ends op. A try in flight is cancelled; its callback gives back what it
 * may have taken and finishes op. */
static void abandon(acquire_t *op) {
  op->abandoned = 1;
  if (op->attempt == NULL) {
    finish(op);
    return;
  }
  relock__timer_stop(&op->timer);
  relock__timer_stop(&op->deadline);
  relock__waitq_leave(&op->w);
  relock_future_cancel(op->attempt);
}

/* How op ends, for statistics: "not acquired" is busy for a single try,
 * else its wait ran out; so did one Redis did not answer in time. */
static relock_outcome_t outcome_of(const acquire_t *op, int err, int acquired) {
  if (err == 0 && acquired)
    return RELOCK_OUTCOME_ACQUIRED;
  if (err == 0)
    return op->try_once ? RELOCK_OUTCOME_BUSY : RELOCK_OUTCOME_TIMED_OUT;
  return err == RELOCK_ETIMEDOUT ? RELOCK_OUTCOME_TIMED_OUT : RELOCK_OUTCOME_FAILED;
}

/* Counts op's end in its client's statistics, and tells the event
 * callback (stats/stats.h). */
static void record_end(acquire_t *op, relock_outcome_t outcome, int err, const char *msg) {
  relock_lock_t *lock = op->lock;
  relock__acquire_end_t e = {.kind = lock->kind->stat, .name = lock->name, .len = lock->len, .owner = op->owner,
                             .outcome = outcome, .err = err, .msg = msg, .start_ns = op->start_ns,
                             .wait_ns = op->wait_ns, .tries = op->tries};
  relock__stats_acquire_end(&lock->client->stats, &e);
}

/* Ends op, then completes its future: when err is 0 as its kind settles
 * (a, the answer if acquired, else NULL), else with err and the message.
 * Completing comes last because the caller's callback may do anything,
 * close the client included; op is gone by then. */
__attribute__((format(printf, 4, 5))) static void end(acquire_t *op, int err, const relock__answer_t *a,
                                                      const char *fmt, ...) {
  char msg[512] = "";
  if (fmt != NULL) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
  }
  record_end(op, outcome_of(op, err, a != NULL), err, msg);
  relock_future_t *out = relock_future_retain(op->out);
  relock__settle_fn settle = op->lock->kind->settle;
  relock__answer_t answer = a != NULL ? *a : (relock__answer_t){0};
  char id[RELOCK__REQUEST_ID_SIZE];
  memcpy(id, op->latch_id, sizeof id);
  abandon(op);
  if (err != 0)
    relock__future_fail(out, err, "%s", msg);
  else if (settle != NULL)
    settle(out, a != NULL ? &answer : NULL, id);
  else
    relock__future_succeed_bool(out, a != NULL);
  relock_future_release(out);
}

/* A spin lock's waiter, which hears nothing: it tries again after a
 * back-off whose base doubles from SPIN_MIN_MS to SPIN_MAX_MS, each delay
 * jittered up by a quarter to a half of the base so that spinners spread
 * out (at most 1.5 x SPIN_MAX_MS = 192 ms, as the docs say), and never past
 * the holder's TTL. */
static void spin(acquire_t *op, int64_t ttl_ms) {
  int64_t delay = op->spin_ms + relock__jitter_ms(&op->lock->client->rng, op->spin_ms) / 2;
  if (ttl_ms >= 0 && ttl_ms < delay)
    delay = ttl_ms;
  op->spin_ms = op->spin_ms * 2 > SPIN_MAX_MS ? SPIN_MAX_MS : op->spin_ms * 2;
  op->state = WAITING;
  relock__timer_start(&op->lock->client->wheel, &op->timer, delay);
}

static void wait_for(acquire_t *op, acquire_state_t state, int64_t ttl_ms) {
  int64_t delay = relock__waitq_delay(op->w.q, state == WAITING, ttl_ms);
  set_state(op, state);
  relock__timer_start(&op->lock->client->wheel, &op->timer, delay);
}

static int positive(const relock_reply_t *reply) {
  return reply->type == RELOCK_REPLY_INTEGER && reply->integer > 0;
}

int relock__read_lock_answer(const relock_reply_t *reply, relock__answer_t *a) {
  *a = (relock__answer_t){0};
  if (reply->type == RELOCK_REPLY_NIL) { /* a kind that takes no hold: a semaphore's permits, a latch */
    a->acquired = 1;
  } else if (reply->type == RELOCK_REPLY_ARRAY && reply->elements == 1 && positive(reply->element[0])) {
    a->acquired = 1;
    a->count = reply->element[0]->integer;
  } else if (reply->type == RELOCK_REPLY_INTEGER) {
    a->ttl_ms = reply->integer;
  } else {
    return -1;
  }
  return 0;
}

/* The try's future succeeds with the answer its kind read (a pointer). */
static void on_try_reply(relock_future_t *f, const relock_reply_t *reply, void *arg) {
  const relock__lock_kind_t *kind = arg;
  relock__read_answer_fn read = kind->read_answer != NULL ? kind->read_answer : relock__read_lock_answer;
  relock__answer_t answer;
  if (reply->type == RELOCK_REPLY_ERROR) {
    relock__reply_fail(f, reply->str, reply->len);
  } else if (read(reply, &answer) != 0) {
    relock__future_fail(f, RELOCK_EPROTO, "unexpected answer (reply type %d) to acquiring %s", (int)reply->type,
                        kind->what);
  } else {
    relock__answer_t *a = malloc(sizeof(*a));
    if (a == NULL) { /* an unknown outcome: given back */
      relock__future_fail(f, RELOCK_ENOMEM, "out of memory reading an acquisition's answer");
      return;
    }
    *a = answer;
    if (!relock__future_succeed_ptr(f, a, free))
      free(a); /* cancelled meanwhile */
  }
}

/* A try answered "acquired". Reported only if the answer came while the
 * hold is surely valid; a late one is given back and tried afresh (or, for
 * a single try, reported as a timeout). */
static void on_acquired(acquire_t *op, const relock__answer_t *answer) {
  const relock__lock_kind_t *kind = op->lock->kind;
  op->queued = 0; /* the script took it out of the queue it was in */
  op->w.registered = op->keep_sent; /* and its process out of the waiting ones (unless others wait here) */
  if (!op->forever) { /* a hold, or a permit with a lease */
    int64_t valid_ms = op->lease_ms - relock__validity_margin_ms(op->lease_ms);
    uint64_t now = relock__now_ns();
    int64_t took_ms = relock__ns_between(now, op->sent_ns) / RELOCK__NS_PER_MS;
    if (took_ms >= valid_ms) {
      undo(op);
      if (op->try_once) {
        end(op, RELOCK_ETIMEDOUT, NULL,
            "%s %s: the answer came %lld ms after the try, past its %lld ms lease less the drift margin; the hold "
            "was given back",
            kind->what, op->lock->name, (long long)took_ms, (long long)op->lease_ms);
      } else {
        new_request_id(op);
        try_acquire(op);
      }
      return;
    }
  }
  /* Permits with no lease are kept by the ledger only for release-on-close
   * (nothing renews or checks them); a semaphore's or a latch's take no
   * hold at all. */
  int kept = op->forever && kind->permit_holds && op->lock->client->settings.opt.release_on_close;
  if (op->forever && !kept) {
    drop_latch(op);
    end(op, 0, answer, NULL);
    return;
  }
  relock__lease_kind_t lease = kept ? RELOCK__LEASE_KEPT : op->watchdog ? RELOCK__LEASE_RENEWED : RELOCK__LEASE_FIXED;
  const uint64_t *release_id = kind->latch_passed_on && kind->undo != NULL && !kind->no_latch ? op->latch_bits : NULL;
  int rc = relock__lock_acquired(op->lock, op->owner, lease, op->lease_ms, op->sent_ns, answer->count, release_id,
                                 &op->turn);
  if (rc != 0) {
    undo(op); /* a hold nobody would renew or track */
    end(op, rc, NULL, "%s tracking %s %s", rc == RELOCK_ENOMEM ? "out of memory" : "client closed",
        op->lock->kind->what, op->lock->name);
  } else {
    drop_latch(op); /* the turn is left, or kept for a surplus's give-back (relock__lock_acquired) */
    relock__lock_watch_held(op->lock, op->owner);
    if (op->lock->kind->shared && op->w.q != NULL)
      relock__waitq_wake_all(op->w.q); /* shared holds: the other local waiters may well get one too */
    end(op, 0, answer, NULL);
  }
}

/* Tells relock_lock_on_wait's callback that a try found the lock held.
 * Called while op->attempt is still set, so that a cancel from inside
 * only marks op abandoned (the attempt, done, cannot be cancelled) and op
 * lives on for on_try_done to finish. */
static void tell_waiting(acquire_t *op, int64_t ttl_ms) {
  relock__lock_extra_t *extra = op->lock->extra;
  if (extra != NULL && extra->wait_cb != NULL && !op->abandoned && !relock_future_is_done(op->out))
    extra->wait_cb(op->lock, op->owner, ttl_ms, extra->wait_arg);
}

/* A try found the lock held, and op waits from now on (statistics and the
 * event callback: stats/stats.h). */
static void wait_started(acquire_t *op) {
  op->wait_ns = relock__now_ns();
  relock__stats_wait_start(&op->lock->client->stats, op->lock->kind->stat, op->lock->name, op->lock->len, op->owner);
}

static void on_try_done(relock_future_t *f, void *arg) {
  acquire_t *op = arg;
  int err = relock_future_error(f);
  relock__answer_t answer = {0};
  if (err == 0)
    answer = *(const relock__answer_t *)relock_future_ptr(f);
  int acquired = answer.acquired;
  if (err == 0 && !acquired)
    tell_waiting(op, answer.ttl_ms);
  if (err == 0 && !acquired && !op->try_once && op->wait_ns == 0 && !op->abandoned && !relock_future_is_done(op->out))
    wait_started(op);
  op->attempt = NULL;
  /* A server error means the script did not run (an upgrade refused: it
   * ran and took nothing; so does another kind refused); any other error leaves
   * the outcome unknown. An ACL refusal (RELOCK_ENOPERM) of EVALSHA or of
   * a key comes before the script runs, but one of a command inside it
   * comes after what ran before: unknown too. */
  int may_hold = err == 0 ? acquired : err != RELOCK_ESERVER && err != RELOCK_EUPGRADE && err != RELOCK_EWRONGKIND;
  if (!may_hold)
    relock__turn_leave(&op->turn); /* nothing to give back: the owner's next request may go */
  if (err == 0)
    op->answered = 1;
  if (err == 0 && !acquired && !op->try_once && op->lock->kind->wakes_one) {
    op->w.registered = op->waker_sent;
    op->lock->waited = 1;
  }

  if (op->abandoned || relock_future_is_done(op->out)) {
    if (may_hold)
      undo(op);
    finish(op);
  } else if (err != 0) {
    if (may_hold)
      undo(op);
    if (err == RELOCK_ENOTREPLICATED || err == RELOCK_EWRONGKIND) /* which lock: the kind tried, its name */
      end(op, err, NULL, "%s %s%s %s", op->lock->kind->what, op->lock->name, err == RELOCK_EWRONGKIND ? ":" : "",
          relock_future_message(f));
    else
      end(op, err, NULL, "%s", relock_future_message(f));
  } else if (acquired) {
    on_acquired(op, &answer);
  } else if (op->lock->client->closing) { /* by the wait callback: no timer would run */
    end(op, RELOCK_ECLOSED, NULL, "client closed");
  } else if (op->try_once) {
    end(op, 0, NULL, NULL);
  } else if (op->lock->kind->wait == RELOCK__WAIT_SPIN) {
    spin(op, answer.ttl_ms);
  } else if (op->w.q == NULL) {
    int confirmed = join_queue(op);
    if (confirmed < 0)
      end(op, RELOCK_ENOMEM, NULL, "out of memory waiting for %s %s", op->lock->kind->what, op->lock->name);
    else if (confirmed == 2 && op->w.registered)
      wait_for(op, WAITING, answer.ttl_ms); /* heard since before the try (which registered): none was missed */
    else if (confirmed)
      try_acquire(op); /* subscribed: now no unlock can be missed */
    else
      wait_for(op, SUBSCRIBING, answer.ttl_ms);
  } else if (op->w.woken) {
    try_acquire(op);
  } else {
    wait_for(op, WAITING, answer.ttl_ms);
  }
  relock_future_release(f);
}

/* Only an acquisition writes what the replicas must have: "held by
 * another" granted nothing (a fair lock's queue is no hold), and needs no
 * WAIT to be believed. */
static int acquired_reply(const relock_reply_t *reply) {
  return reply->type == RELOCK_REPLY_NIL || reply->type == RELOCK_REPLY_ARRAY;
}

/* The try's call retries after a failure (call.h's on_retry): a "not now"
 * is kept for the deadline's message, any other failure clears it. */
static void on_try_retry(int err, const char *msg, void *arg) {
  acquire_t *op = arg;
  if (err == RELOCK_ESERVER)
    snprintf(op->not_now, sizeof op->not_now, "%s", msg);
  else
    op->not_now[0] = '\0';
}

/* Sends op's try (it is its owner's turn). */
static void send_try(acquire_t *op) {
  relock_lock_t *lock = op->lock;
  relock_client_t *c = lock->client;
  char field[RELOCK__FIELD_MAX];
  relock__lock_call_t call;
  relock_future_t *f = NULL;
  if (try_call(op, &call, field) == 0) {
    call.queue = !op->try_once;
    call.spec.on_reply = on_try_reply; /* retry_safe: the latch makes a repeat harmless */
    call.spec.arg = (void *)lock->kind;
    /* a bounded wait bounds the retries too */
    call.spec.deadline_ns = op->deadline_ns == UINT64_MAX ? 0 : op->deadline_ns;
    call.spec.on_retry = on_try_retry;
    call.spec.retry_arg = op;
    /* synced replicas: "acquired" once enough have it */
    call.spec.wait_replicas = c->settings.opt.min_replicas_acked;
    call.spec.wait_timeout_ms = c->settings.opt.min_replicas_timeout_ms;
    call.spec.wrote = acquired_reply;
    set_state(op, TRYING);
    op->w.woken = 0;
    op->waker_sent = call.waker != NULL;
    op->keep_sent = call.keep_waker != 0;
    op->w.registered |= op->waker_sent; /* in flight: it may register */
    op->sent_ns = relock__now_ns();
    op->tries++;
    f = lock->kind->acquire(&call);
    free((char *)call.latch);
  }
  if (f == NULL) {
    end(op, RELOCK_ENOMEM, NULL, "out of memory acquiring %s %s", lock->kind->what, lock->name);
    return;
  }
  op->queued |= call.queue && lock->kind->leave_queue != NULL;
  op->attempt = f;
  relock_future_on_done(f, on_try_done, op);
}

static void on_turn(relock__turn_wait_t *w, int err) {
  acquire_t *op = relock__container_of(w, acquire_t, turn);
  if (err == 0)
    send_try(op);
  else if (err == RELOCK_ECLOSED)
    end(op, err, NULL, "client closed");
  else /* never sent: nothing to give back */
    end(op, err, NULL, "%s %s: an earlier request of owner %llu on it (a give-back, or a release) is still unanswered",
        op->lock->kind->what, op->lock->name, (unsigned long long)op->owner);
}

/* Tries once it is op's owner's turn (lock_turn.h): a try of a kind that
 * takes holds waits while one of the owner's requests that change its
 * count on the lock is in flight. */
static void try_acquire(acquire_t *op) {
  if (op->turn.turn != NULL && !op->turn.holds)
    return; /* waiting for its turn already */
  int r = op->lock->kind->no_hold || op->turn.holds ? 1 : relock__turn_ask(op->lock, op->owner, &op->turn);
  if (r < 0) {
    end(op, RELOCK_ENOMEM, NULL, "out of memory acquiring %s %s", op->lock->kind->what, op->lock->name);
  } else if (r == 0) {
    relock__timer_stop(&op->timer);
    set_state(op, TRYING); /* on_turn sends it */
  } else {
    send_try(op);
  }
}

static void on_timer(relock__timer_t *t, int status, void *arg) {
  (void)t;
  acquire_t *op = arg;
  if (status != 0) {
    end(op, RELOCK_ECLOSED, NULL, "client closed");
    return;
  }
  try_acquire(op);
}

static void on_deadline(relock__timer_t *t, int status, void *arg) {
  (void)t;
  acquire_t *op = arg;
  if (status != 0)
    end(op, RELOCK_ECLOSED, NULL, "client closed");
  else if (!op->answered && op->not_now[0] != '\0') /* Redis said why it did not run the tries */
    end(op, RELOCK_ETIMEDOUT, NULL, "%s %s: Redis kept answering \"%s\" until the %lld ms wait ran out",
        op->lock->kind->what, op->lock->name, op->not_now, (long long)op->wait_ms);
  else if (!op->answered) /* Redis is out of reach (or too slow): say so */
    end(op, RELOCK_ETIMEDOUT, NULL, "%s %s: Redis did not answer within the %lld ms wait", op->lock->kind->what,
        op->lock->name,
        (long long)op->wait_ms);
  else
    end(op, 0, NULL, NULL); /* not acquired in time */
}

static void on_cancel(relock_future_t *out, void *arg) {
  (void)out;
  record_end(arg, RELOCK_OUTCOME_CANCELLED, 0, NULL);
  abandon(arg);
}

static relock_future_t *acquire_async(relock_lock_t *lock, uint64_t owner, int64_t permits, int64_t wait_ms,
                                      int64_t lease_ms);

relock_future_t *relock_lock_lock_async(relock_lock_t *lock, uint64_t owner, int64_t wait_ms, int64_t lease_ms) {
  if (lock == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "lock is NULL");
  return relock__lock_acquire_async(lock, owner, 1, wait_ms, lease_ms);
}

relock_future_t *relock__lock_acquire_async(relock_lock_t *lock, uint64_t owner, int64_t permits, int64_t wait_ms,
                                            int64_t lease_ms) {
  if (wait_ms < RELOCK_INFINITE)
    return relock__future_failed(lock->client->exec, RELOCK_EINVAL,
                                 "wait_ms must be >= 0, or RELOCK_INFINITE (got %lld)", (long long)wait_ms);
  if (!relock__lease_valid(lease_ms) && !(lock->kind->permit_holds && lease_ms == RELOCK__NO_LEASE))
    return relock__future_failed(lock->client->exec, RELOCK_EINVAL, RELOCK__LEASE_RANGE_FMT,
                                 RELOCK__LEASE_RANGE_ARGS(lease_ms));
  if (wait_ms > RELOCK_MAX_LEASE_MS) /* decades: as good as forever, and no overflow */
    wait_ms = RELOCK_INFINITE;
  relock_future_t *f;
  if (relock__client_enter(lock->client, &f) != 0)
    return f;
  f = acquire_async(lock, owner, permits, wait_ms, lease_ms);
  relock__exec_leave(lock->client->exec);
  return f;
}

static relock_future_t *acquire_async(relock_lock_t *lock, uint64_t owner, int64_t permits, int64_t wait_ms,
                                      int64_t lease_ms) {
  relock_client_t *c = lock->client;
  acquire_t *op = calloc(1, sizeof(*op));
  relock_future_t *out = relock__future_new(c->exec);
  if (op == NULL || out == NULL) {
    free(op);
    relock_future_release(out);
    return NULL;
  }
  op->lock = relock__lock_ref(lock);
  op->out = relock_future_retain(out);
  op->owner = owner;
  op->forever = lock->kind->no_hold && (!lock->kind->permit_holds || lease_ms == RELOCK__NO_LEASE);
  op->watchdog = lease_ms == RELOCK_INFINITE && !op->forever;
  op->lease_ms = op->watchdog ? c->settings.opt.watchdog_timeout_ms : lease_ms;
  op->try_once = wait_ms == 0;
  op->wait_ms = wait_ms;
  op->spin_ms = SPIN_MIN_MS;
  op->start_ns = relock__now_ns();
  op->deadline_ns = wait_ms > 0 ? relock__deadline_after(op->start_ns, wait_ms) : UINT64_MAX;
  relock__waiter_init(&op->w, &waiter_ops, permits, lock->kind->role == RELOCK__ROLE_WRITE);
  relock__timer_init(&op->timer, on_timer, op);
  relock__timer_init(&op->deadline, on_deadline, op);
  op->turn.go = on_turn;
  new_request_id(op);
  relock__future_set_cancel(out, on_cancel, op);
  if (wait_ms > 0)
    relock__timer_start(&c->wheel, &op->deadline, wait_ms);
  relock__stats_acquire_start(&c->stats, lock->kind->stat, lock->name, lock->len, owner);
  try_acquire(op);
  return out;
}
