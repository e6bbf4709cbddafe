/* The wait queues: a client's local waiters per channel, its subscription,
 * linger and hand-off (wait_queue.h). */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <relock/error.h>

#include "base/clock.h"
#include "base/hashtab.h"
#include "base/random.h"
#include "client/client_impl.h"
#include "objects/keys.h"
#include "objects/wait_queue.h"
#include "redis/pubsub.h"
#include "redis/router.h"

#define NO_TTL_POLL_MS 1000 /* re-check a held lock that never expires */
#define UNSUBSCRIBED_POLL_MS 100 /* re-check cadence while no unlock can be heard */
#define WAITQ_LINGER_MS 1000     /* an empty wait queue stays subscribed that long */
#define HANDED_FALLBACK_MS 250   /* an unlock meant for another process: try anyway if nothing follows */

typedef relock__waitq_t waitq_t;
typedef relock__waiter_t waiter_t;

/* A client's queues and its side of the hand-off (client->waitqs, made by
 * its first waiter: most clients never wait). */
typedef struct relock__waitqs {
  relock__htab_t queues;    /* by channel */
  char waker_id[RELOCK__WAKER_ID_SIZE]; /* "": none yet; what wakes this client's waiters only (keys.h) */
  int64_t fallback_ms;      /* 0: HANDED_FALLBACK_MS; tests under valgrind lengthen it */
} waitqs_t;

/* The local waiters of one channel: those of one lock, or of its read and
 * write sides, or (a fair lock) of one owner. */
struct relock__waitq {
  relock__hnode_t node;     /* in client->waitqs->queues, by channel */
  relock_client_t *client;
  relock__listener_t listener;
  relock__timer_t linger;   /* empty: stays subscribed a while for the next waiter */
  relock__timer_t fallback; /* an unlock went to another process: wake one anyway if nothing follows */
  uint64_t heard_ns;        /* since when unlocks are heard (confirmed, or again after a gap) */
  relock_future_t *confirm;
  relock__link_t idle;      /* waiters waiting or subscribing, longest idle first */
  relock__link_t trying;    /* waiters with a try in flight */
  size_t nwaiters;
  size_t nwriters;          /* of them, a read-write lock's writers (their readers share the channel) */
  relock__wait_mode_t mode; /* what the channel's messages mean */
  int guards;               /* walks in progress: don't free yet */
  int dying;
  int heard;                /* the channel is confirmed: unlocks are heard */
  int handed;               /* a waker id came: the unlock message that follows is the same unlock's */
  int unclaimed;            /* a wake-up found no waiter here: one joining now must try again */
  int registered;           /* a waiter that left may have left the process registered: the last one unregisters */
  size_t channel_len;
  char channel[];
};

static waiter_t *waiter_of(relock__link_t *l) { return relock__container_of(l, waiter_t, link); }

static void waitqs_free(waitqs_t *all) {
  relock__htab_cleanup(&all->queues); /* empty: every wait completed on close */
  free(all);
}

/* c's queues, made if it has none (the client frees them with waitqs_free
 * when it goes); NULL when out of memory. */
static waitqs_t *waitqs_of(relock_client_t *c) {
  if (c->waitqs != NULL)
    return c->waitqs;
  waitqs_t *all = calloc(1, sizeof(*all));
  if (all == NULL || relock__htab_init(&all->queues, 64) != 0) {
    free(all);
    return NULL;
  }
  c->waitqs = all;
  c->waitqs_free = waitqs_free;
  return all;
}

static waitq_t *find_queue(waitqs_t *all, const char *channel, size_t len, uint64_t h) {
  relock__hnode_t *n;
  for (RELOCK__HTAB_EACH(&all->queues, h, n)) {
    waitq_t *q = relock__container_of(n, waitq_t, node);
    if (n->hash == h && q->channel_len == len && memcmp(q->channel, channel, len) == 0)
      return q;
  }
  return NULL;
}

static void queue_free(waitq_t *q) {
  /* Unsubscribing cancels a pending confirmation, whose callback runs right
   * here: dying tells it the queue is on its way out. */
  q->dying = 1;
  relock__timer_stop(&q->linger);
  relock__timer_stop(&q->fallback);
  relock__htab_remove(&q->client->waitqs->queues, &q->node);
  relock_future_t *confirm = q->confirm;
  q->confirm = NULL;
  relock__pubsub_unsubscribe(&q->listener);
  relock_future_release(confirm);
  free(q);
}

static void on_linger(relock__timer_t *t, int status, void *arg) {
  (void)t;
  (void)status; /* RELOCK_ECANCELED: the client closes; the queue goes all the same */
  waitq_t *q = arg;
  if (q->nwaiters == 0 && q->guards == 0 && !q->dying)
    queue_free(q);
}

/* An empty queue lingers, subscribed, for WAITQ_LINGER_MS: under contention
 * the next waiter of the name comes soon, and finds the channel heard
 * without a SUBSCRIBE and UNSUBSCRIBE of its own (issue 20: 0.43 SUBSCRIBEs
 * per contended acquisition before). A closing client, or a channel not
 * heard (unconfirmed, refused by an ACL), lets it go at once. */
static void queue_maybe_free(waitq_t *q) {
  if (q->nwaiters > 0 || q->guards > 0 || q->dying)
    return;
  if (q->client->closing || q->confirm != NULL || !q->heard || /* only a heard channel is worth keeping */
      relock__timer_start(&q->client->wheel, &q->linger, WAITQ_LINGER_MS) != 0)
    queue_free(q);
}

void relock__waitq_leave(waiter_t *w) {
  waitq_t *q = w->q;
  if (q == NULL)
    return;
  w->q = NULL;
  relock__list_remove(&w->link);
  q->nwaiters--;
  q->nwriters -= w->writer;
  /* The process's registration is one for all its waiters: the last one
   * to leave takes it back if any of them (or a try of theirs still in
   * flight: the ZREM goes after it on the same connection) may have left
   * it, so that no unlock is handed to a process with nobody to take it.
   * The fallback stays armed: a waiter joining now may have been answered
   * before the unlock it stands for. */
  if (q->nwaiters > 0) {
    q->registered |= w->registered;
    w->registered = 0;
  } else if (w->registered || q->registered) {
    q->registered = 0;
    w->ops->unregister(w);
  }
  queue_maybe_free(q);
}

void relock__waitq_move(waiter_t *w, int trying) {
  if (w->q == NULL)
    return;
  relock__list_remove(&w->link);
  relock__list_push_back(trying ? &w->q->trying : &w->q->idle, &w->link);
}

int relock__waitq_others(const waiter_t *w) { return w->q != NULL && w->q->nwaiters > 1; }

/* Wakes the waiters idle longest whose permits add up to permits (at least
 * one waiter; INT64_MAX: all; a lock's waiter wants 1). A waiter whose try
 * is in flight may have been answered before the unlock: it tries again at
 * once when its answer comes (all of them for "all"; else the first, and
 * only when no idle waiter took the wake-up). Trying moves a waiter out of
 * the batch; a callback finishing one meanwhile unlinks it from there, so
 * the walk never meets a freed one. */
static int wake_permits(waitq_t *q, int64_t permits) {
  if (permits <= 0)
    return 0;
  int all = permits == INT64_MAX;
  int woke = !relock__list_empty(&q->idle) || !relock__list_empty(&q->trying);
  if (all)
    for (relock__link_t *l = q->trying.next; l != &q->trying; l = l->next)
      waiter_of(l)->woken = 1;
  else if (relock__list_empty(&q->idle) && !relock__list_empty(&q->trying))
    waiter_of(q->trying.next)->woken = 1;
  relock__link_t batch;
  relock__list_init(&batch);
  while (permits > 0 && !relock__list_empty(&q->idle)) {
    relock__link_t *l = q->idle.next;
    if (!all)
      permits -= waiter_of(l)->permits;
    relock__list_remove(l);
    relock__list_push_back(&batch, l);
  }
  q->guards++;
  while (!relock__list_empty(&batch)) {
    waiter_t *w = waiter_of(batch.next);
    w->ops->wake(w);
  }
  q->guards--;
  queue_maybe_free(q);
  return woke;
}

/* A message's integer (a semaphore's free permits), 0 when it is none. */
static int64_t message_number(const char *payload, size_t len) {
  int64_t n = 0;
  for (size_t i = 0; i < len; i++) {
    if (payload[i] < '0' || payload[i] > '9' || n > INT64_MAX / 10 - 1)
      return 0;
    n = n * 10 + (payload[i] - '0');
  }
  return n;
}

/* A read-write lock's unlock for one waiter goes to a writer of this
 * process if one waits: while a writer waits, new readers are kept out
 * (lua/rwlock_read_acquire.lua), so a reader woken instead would try in
 * vain and leave the free lock idle until the writer's next try. The
 * writer idle longest tries; one with a try in flight tries again when it
 * is answered. 0 when no writer waits here. */
static int wake_writer(waitq_t *q) {
  if (q->nwriters == 0)
    return 0;
  for (relock__link_t *l = q->idle.next; l != &q->idle; l = l->next) {
    waiter_t *w = waiter_of(l);
    if (w->writer) {
      q->guards++; /* as wake_permits: a try that ends w at once must not free q under us */
      w->ops->wake(w);
      q->guards--;
      queue_maybe_free(q);
      return 1;
    }
  }
  for (relock__link_t *l = q->trying.next; l != &q->trying; l = l->next) {
    waiter_t *w = waiter_of(l);
    if (w->writer) {
      w->woken = 1;
      return 1;
    }
  }
  return 0;
}

/* Wakes one waiter (all: every waiter). One that finds none here leaves
 * the wake-up to the next waiter to join (relock__waitq_join). q may be
 * gone afterwards: an empty queue of a closing client goes at once (the
 * hand-off's fallback fires on one while a close drains). */
static void wake(waitq_t *q, int all) {
  q->handed = 0;
  if (!all && wake_writer(q))
    return;
  q->guards++; /* noted before the queue may go */
  if (!wake_permits(q, all ? INT64_MAX : 1))
    q->unclaimed = 1;
  q->guards--;
  queue_maybe_free(q);
}

void relock__waitq_wake_all(waitq_t *q) { wake(q, 1); }

static void on_fallback(relock__timer_t *t, int status, void *arg) {
  (void)t;
  if (status == 0)
    wake(arg, 0);
}

/* An unlock that names the process to wake, by the waker id its waiters
 * registered with (lua/lock_release.lua), then the unlock message for
 * Redisson's waiters. Every relock process but that one lets this unlock
 * pass: one try per unlock, not one per process. If that process is gone
 * without leaving, or has nobody left to take it, nobody takes the lock:
 * the others try anyway after HANDED_FALLBACK_MS without another unlock.
 * Every other process arms that fallback, waiters or not: one whose waiter
 * joins only now, with a try answered before this unlock, would otherwise
 * trust that answer and wait out the holder's whole TTL. */
static void on_handed(waitq_t *q, const char *id, size_t len) {
  const waitqs_t *all = q->client->waitqs;
  if (len == strlen(all->waker_id) && memcmp(id, all->waker_id, len) == 0) {
    relock__timer_stop(&q->fallback);
    q->guards++; /* the wake-up may let the queue go: not before handed is noted */
    wake(q, 0);
    q->handed = 1;
    q->guards--;
    queue_maybe_free(q);
    return;
  }
  int64_t ms = all->fallback_ms > 0 ? all->fallback_ms : HANDED_FALLBACK_MS;
  relock__timer_start(&q->client->wheel, &q->fallback, ms);
  q->handed = 1;
}

static void on_message(relock__listener_t *l, const char *payload, size_t len, void *arg) {
  (void)l;
  waitq_t *q = arg;
  int zero = payload != NULL && len == 1 && payload[0] == '0';
  if (payload == NULL) { /* subscribed again after a gap: anything may have been missed */
    q->heard = 1;
    q->heard_ns = relock__now_ns();
    wake(q, 1);
  } else if (q->mode == RELOCK__WAIT_CHANNEL && len > 1 && message_number(payload, len) > 0) {
    on_handed(q, payload, len);
  } else if (zero && q->mode == RELOCK__WAIT_CHANNEL && q->handed) {
    q->handed = 0; /* the unlock just handed to a process */
  } else if (q->mode == RELOCK__WAIT_PERMITS) {
    wake_permits(q, message_number(payload, len)); /* that many are free now */
  } else if (q->mode == RELOCK__WAIT_ZERO) {
    if (zero)
      wake(q, 1); /* the count reached zero: every awaiter is through */
  } else if (len == 1 && payload[0] == '1') {
    wake(q, 1); /* a read-unlock: everyone re-checks */
  } else if (zero) {
    wake(q, 0);
  }
}

/* The ACL forbids the unlock channel: waiting would only poll until the
 * deadline, the subscription refused again at every reconnect, and hide
 * the operator's mistake. Every waiter there is now fails with the
 * server's word; those that join later start afresh. */
static void refuse_waiters(waitq_t *q, const char *why) {
  relock__link_t batch;
  relock__list_init(&batch);
  relock__link_t *lists[] = {&q->idle, &q->trying};
  for (int i = 0; i < 2; i++)
    while (!relock__list_empty(lists[i])) {
      relock__link_t *l = lists[i]->next;
      relock__list_remove(l);
      relock__list_push_back(&batch, l);
    }
  q->guards++;
  while (!relock__list_empty(&batch)) {
    waiter_t *w = waiter_of(batch.next);
    w->ops->refuse(w, why);
  }
  q->guards--;
  queue_maybe_free(q);
}

static void on_confirm(relock_future_t *f, void *arg) {
  waitq_t *q = arg;
  if (q->dying)
    return;
  int err = relock_future_error(f);
  char why[256];
  snprintf(why, sizeof why, "%s", err != 0 ? relock_future_message(f) : "");
  q->heard = err == 0;
  q->heard_ns = relock__now_ns();
  if (q->confirm == f) {
    q->confirm = NULL;
    relock_future_release(f);
  }
  if (err == RELOCK_ENOPERM) {
    refuse_waiters(q, why);
    return;
  }
  /* Subscribed (or not: then the waiters poll until it is) - the waiters
   * that were waiting for it try again. */
  wake(q, 1);
}

/* Subscribes q to its channel: 1 if that is confirmed (or refused) at
 * once, 0 if q waits for the confirmation, -1 when out of memory. */
static int subscribe(waitq_t *q) {
  relock_future_t *f = relock__route_subscribe(&q->client->redis, &q->listener, q->channel, q->channel_len,
                                               on_message, q);
  if (f == NULL)
    return -1;
  if (!relock_future_is_done(f)) {
    q->confirm = f;
    relock_future_on_done(f, on_confirm, q); /* inline slot: cannot fail */
    return 0;
  }
  q->heard = relock_future_error(f) == 0;
  q->heard_ns = relock__now_ns();
  relock_future_release(f);
  return 1;
}

/* A new queue for channel, subscribed (*confirmed: as subscribe's);
 * NULL when out of memory. */
static waitq_t *queue_new(relock_client_t *c, waitqs_t *all, const char *channel, size_t len, uint64_t h,
                          relock__wait_mode_t mode, int *confirmed) {
  waitq_t *q = calloc(1, sizeof(*q) + len + 1);
  if (q == NULL)
    return NULL;
  q->client = c;
  relock__timer_init(&q->linger, on_linger, q);
  relock__timer_init(&q->fallback, on_fallback, q);
  q->mode = mode;
  q->channel_len = len;
  memcpy(q->channel, channel, len);
  relock__list_init(&q->idle);
  relock__list_init(&q->trying);
  relock__htab_insert(&all->queues, &q->node, h);
  if ((*confirmed = subscribe(q)) < 0) {
    relock__htab_remove(&all->queues, &q->node);
    free(q);
    return NULL;
  }
  return q;
}

int relock__waitq_join(relock_client_t *c, waiter_t *w, const char *channel, size_t len, relock__wait_mode_t mode,
                       uint64_t sent_ns) {
  waitqs_t *all = waitqs_of(c);
  if (all == NULL)
    return -1;
  uint64_t h = relock__hash_bytes(RELOCK__HASH_SEED, channel, len);
  waitq_t *q = find_queue(all, channel, len, h);
  int confirmed = 1;
  if (q == NULL) {
    if ((q = queue_new(c, all, channel, len, h, mode, &confirmed)) == NULL)
      return -1;
  } else if (q->confirm != NULL) {
    confirmed = 0;
  } else {
    relock__timer_stop(&q->linger); /* a lingering queue: heard already */
    if (q->heard && !q->unclaimed && q->heard_ns < sent_ns)
      confirmed = 2;
    q->unclaimed = 0;
  }
  w->q = q;
  relock__list_push_back(&q->trying, &w->link);
  q->nwaiters++;
  q->nwriters += w->writer;
  return confirmed;
}

int64_t relock__waitq_delay(waitq_t *q, int waiting, int64_t ttl_ms) {
  int64_t delay = ttl_ms >= 0 ? ttl_ms : NO_TTL_POLL_MS;
  /* Confirmed late (after its confirmation had timed out): from now on
   * unlocks are heard, and the try that led here saw any before. */
  if (q->listener.confirmed)
    q->heard = 1;
  if (waiting && !q->heard) {
    /* No unlock can be heard: poll, jittered so that waiters spread out. */
    int64_t poll = relock__jitter_ms(&q->client->rng, UNSUBSCRIBED_POLL_MS);
    if (poll < delay)
      delay = poll;
  }
  return delay;
}

int relock__waitq_keep_registration(relock_client_t *c, const char *channel, size_t len) {
  if (c->waitqs == NULL)
    return 0; /* no queue, hence no waiter */
  waitq_t *q = find_queue(c->waitqs, channel, len, relock__hash_bytes(RELOCK__HASH_SEED, channel, len));
  if (q == NULL || q->nwaiters == 0)
    return 0;
  q->registered = 1;
  return 1;
}

const char *relock__waitq_waker_id(relock_client_t *c) {
  waitqs_t *all = waitqs_of(c);
  if (all == NULL)
    return NULL;
  if (all->waker_id[0] == '\0')
    relock__waker_id(&c->rng, all->waker_id);
  return all->waker_id;
}

size_t relock__waitq_count(const relock_client_t *c) { return c->waitqs != NULL ? c->waitqs->queues.count : 0; }

int relock__waitq_set_fallback_ms(relock_client_t *c, int64_t ms) {
  waitqs_t *all = waitqs_of(c);
  if (all == NULL)
    return RELOCK_ENOMEM;
  all->fallback_ms = ms;
  return 0;
}
