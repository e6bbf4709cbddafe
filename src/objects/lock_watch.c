/* Prompt loss detection (relock_lock_watch_loss): while owners hold a
 * watched lock, its object listens on the lock's channel, where relock's
 * force release of every kind publishes (the fair lock's and the spin
 * lock's included), and so do Redisson's forceUnlock of the reentrant,
 * fenced and read-write locks, and most unlocks. A message - or a gap in
 * the subscription, or its confirmation - makes each of those holds
 * checked at once (relock__renewal_validate: a renewal of that hold alone,
 * or a check of a fixed lease), which declares a hold whose field is gone
 * lost: the lost callback runs within a round trip of the force release
 * instead of at the next renewal or check.
 *
 * Our own releases publish too; a check racing one is harmless (the
 * watchdog does not take a release in flight for a loss, and a check sent
 * after it finds no hold to check). What publishes nothing the holder
 * hears - a DEL, Redisson's forceUnlock of a fair lock (it wakes only the
 * head waiter, on its own channel) or of a spin lock, a failover that lost
 * the hold - is found by the next renewal or check, within a third of the
 * watchdog timeout (watchdog/renewal.h).
 *
 * Cost per watched held lock: one subscription (shared with the name's
 * waiters in this client), an owner slot here, and one check per message
 * on the channel. Off by default: a client holding 100k locks would hold
 * 100k subscriptions. */
#include <config.h>

#include <stdlib.h>

#include <relock/error.h>

#include "future/promise.h"
#include "objects/lock_impl.h"
#include "redis/router.h"

static void on_checked(relock_future_t *f, void *arg) {
  (void)arg;
  relock_future_release(f);
}

static relock__lock_watch_t *watch_of(const relock_lock_t *lock) {
  return lock->extra != NULL ? lock->extra->watch : NULL;
}

/* Checks every watched owner's hold now. */
static void check_all(relock_lock_t *lock) {
  relock__lock_watch_t *w = watch_of(lock);
  relock__lock_ref(lock); /* a check's lost callback may free the object */
  for (size_t i = 0; i < w->nowners; i++) {
    relock__hold_id_t id = relock__lock_hold(lock, w->owners[i]);
    relock_future_t *f = relock__renewal_validate(&lock->client->renewal, &id);
    if (f != NULL)
      relock_future_on_done(f, on_checked, NULL);
  }
  relock__lock_unref(lock);
}

static void on_message(relock__listener_t *l, const char *payload, size_t len, void *arg) {
  (void)l;
  (void)payload; /* any message: an unlock, a force release; NULL: a gap */
  (void)len;
  check_all(arg);
}

static void on_confirmed(relock_future_t *f, void *arg) {
  relock_lock_t *lock = arg;
  /* Heard from now on: a force release between the acquisition and now
   * published unheard, so look once. */
  if (relock_future_error(f) == 0 && watch_of(lock) != NULL && watch_of(lock)->listening)
    check_all(lock);
  relock_future_release(f);
  relock__lock_unref(lock);
}

static void listen(relock_lock_t *lock) {
  relock__lock_watch_t *w = watch_of(lock);
  char buf[RELOCK__CHANNEL_BUF];
  size_t len;
  char *channel = relock__lock_channel(lock, buf, &len);
  if (channel == NULL)
    return; /* out of memory: the renewal finds the loss, later */
  relock_future_t *f = relock__route_subscribe(&lock->client->redis, &w->listener, channel, len, on_message, lock);
  relock__lock_channel_free(channel, buf); /* the subscription keeps its own copy */
  if (f == NULL)
    return; /* out of memory: the renewal finds the loss, later */
  w->listening = 1;
  relock_future_on_done(f, on_confirmed, relock__lock_ref(lock));
}

static void stop_listening(relock__lock_watch_t *w) {
  if (!w->listening)
    return;
  w->listening = 0;
  relock__pubsub_unsubscribe(&w->listener);
}

void relock__lock_watch_held(relock_lock_t *lock, uint64_t owner) {
  relock__lock_watch_t *w = watch_of(lock);
  if (w == NULL || !w->on || lock->client->closing)
    return;
  for (size_t i = 0; i < w->nowners; i++)
    if (w->owners[i] == owner)
      return; /* a re-entry */
  if (w->nowners == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 1;
    uint64_t *owners = realloc(w->owners, cap * sizeof(*owners));
    if (owners == NULL)
      return; /* unwatched: the renewal finds a loss, later */
    w->owners = owners;
    w->cap = cap;
  }
  w->owners[w->nowners++] = owner;
  if (!w->listening)
    listen(lock);
}

/* relock__lock_watch_t.gone: lock.c's, through the watch. */
static void gone(relock__lock_watch_t *w, uint64_t owner) {
  for (size_t i = 0; i < w->nowners; i++)
    if (w->owners[i] == owner) {
      w->owners[i] = w->owners[--w->nowners];
      break;
    }
  if (w->nowners == 0)
    stop_listening(w);
}

/* relock__lock_watch_t.stop: lock.c's, through the watch, and ours. */
static void stop(relock__lock_watch_t *w) {
  w->on = 0;
  w->nowners = 0;
  stop_listening(w);
}

/* The lock's watch, made on first use (NULL when out of memory). */
static relock__lock_watch_t *watch_make(relock_lock_t *lock) {
  relock__lock_extra_t *x = relock__lock_extra(lock);
  if (x != NULL && x->watch == NULL && (x->watch = calloc(1, sizeof(*x->watch))) != NULL) {
    x->watch->gone = gone;
    x->watch->stop = stop;
  }
  return x != NULL ? x->watch : NULL;
}

int relock_lock_watch_loss(relock_lock_t *lock, int on) {
  if (lock == NULL)
    return RELOCK_EINVAL;
  if (lock->kind->no_hold)
    return RELOCK_EINVAL; /* a semaphore's, a latch's acquisitions hold nothing */
  int r = relock__client_enter_code(lock->client);
  if (r != 0)
    return r;
  relock__lock_watch_t *w = on ? watch_make(lock) : watch_of(lock);
  if (on && w == NULL)
    r = RELOCK_ENOMEM;
  else if (on)
    w->on = 1;
  else if (w != NULL)
    stop(w);
  relock__exec_leave(lock->exec);
  return r;
}
