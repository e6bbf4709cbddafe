/* The fair lock (Redisson's RFairLock): the reentrant lock's hash, plus a
 * queue of waiting fields "redisson_lock_queue:{name}" and their deadlines
 * "redisson_lock_timeout:{name}". The lock goes to the head of the queue; a
 * release wakes only the head, on its own channel
 * "redisson_lock__channel:{name}:<field>" (lua/fair_lock_*.lua say how the
 * queue heals itself of dead waiters). A force release wakes the head too,
 * and publishes on "redisson_lock__channel:{name}" itself, where a watched
 * holder listens (lock_watch.c). Renewal is the reentrant lock's. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "objects/lock_impl.h"
#include "redis/scripts.h"

/* What every fair lock script names besides the lock: the queue's two keys
 * (malloc'ed) and the lock's channel. */
typedef struct fair_keys {
  char *queue, *timeouts, *channel;
  size_t queue_len, timeouts_len, channel_len;
  char buf[RELOCK__CHANNEL_BUF]; /* the channel, when it fits */
} fair_keys_t;

static void fair_keys_free(fair_keys_t *k) {
  free(k->queue);
  free(k->timeouts);
  relock__lock_channel_free(k->channel, k->buf);
}

/* -1 when out of memory (nothing left to free). */
static int fair_keys(const relock_lock_t *lock, fair_keys_t *k) {
  k->queue = relock__derived_name(lock->name, lock->len, "redisson_lock_queue", NULL, &k->queue_len);
  k->timeouts = relock__derived_name(lock->name, lock->len, "redisson_lock_timeout", NULL, &k->timeouts_len);
  k->channel = relock__lock_channel(lock, k->buf, &k->channel_len);
  if (k->queue != NULL && k->timeouts != NULL && k->channel != NULL)
    return 0;
  fair_keys_free(k);
  return -1;
}

static int64_t wait_timeout_ms(const relock_lock_t *lock) {
  return lock->client->settings.opt.fair_lock_wait_timeout_ms;
}

static relock_future_t *fair_acquire(relock__lock_call_t *call) {
  relock_lock_t *lock = call->lock;
  fair_keys_t k;
  if (fair_keys(lock, &k) != 0)
    return NULL;
  char lease[24], wait[24], ttl[24];
  const char *argv[] = {lock->name, k.queue, k.timeouts, k.channel, call->latch, lease, call->field, wait, ttl,
                        call->queue ? "1" : "0", call->publish};
  const size_t lens[] = {lock->len,
                         k.queue_len,
                         k.timeouts_len,
                         k.channel_len,
                         call->latch_len,
                         relock__lock_number(lease, call->lease_ms),
                         call->field_len,
                         relock__lock_number(wait, wait_timeout_ms(lock)),
                         relock__lock_number(ttl, call->latch_ttl_ms),
                         1,
                         strlen(call->publish)};
  relock_future_t *f = relock__lock_send(call, RELOCK__SCRIPT_FAIR_LOCK_ACQUIRE, 5, 11, argv, lens);
  fair_keys_free(&k);
  return f;
}

/* A release, or (ttl "undo", the latch an acquisition's) an undo. */
static relock_future_t *release_or_undo(relock__lock_call_t *call, const char *ttl, size_t ttl_len) {
  relock_lock_t *lock = call->lock;
  fair_keys_t k;
  if (fair_keys(lock, &k) != 0)
    return NULL;
  char lease[24];
  const char *argv[] = {lock->name, k.queue, k.timeouts, k.channel, call->latch, lease, call->field, ttl,
                        call->publish};
  const size_t lens[] = {lock->len,       k.queue_len,
                         k.timeouts_len,  k.channel_len,
                         call->latch_len, relock__lock_number(lease, call->lease_ms > 0 ? call->lease_ms : 1),
                         call->field_len, ttl_len,
                         strlen(call->publish)};
  relock_future_t *f = relock__lock_send(call, RELOCK__SCRIPT_FAIR_LOCK_RELEASE, 5, 9, argv, lens);
  fair_keys_free(&k);
  return f;
}

static relock_future_t *fair_release(relock__lock_call_t *call) {
  char ttl[24];
  return release_or_undo(call, ttl, relock__lock_number(ttl, call->latch_ttl_ms));
}

static relock_future_t *fair_undo(relock__lock_call_t *call) { return release_or_undo(call, "undo", 4); }

static relock_future_t *fair_force_release(relock__lock_call_t *call) {
  relock_lock_t *lock = call->lock;
  fair_keys_t k;
  if (fair_keys(lock, &k) != 0)
    return NULL;
  const char *argv[] = {lock->name, k.queue, k.timeouts, k.channel, call->publish};
  const size_t lens[] = {lock->len, k.queue_len, k.timeouts_len, k.channel_len, strlen(call->publish)};
  relock_future_t *f = relock__lock_send(call, RELOCK__SCRIPT_FAIR_LOCK_FORCE_RELEASE, 4, 5, argv, lens);
  fair_keys_free(&k);
  return f;
}

static relock_future_t *fair_leave(relock__lock_call_t *call) {
  relock_lock_t *lock = call->lock;
  fair_keys_t k;
  if (fair_keys(lock, &k) != 0)
    return NULL;
  char wait[24];
  const char *argv[] = {lock->name, k.queue, k.timeouts, k.channel, call->field, wait, call->publish};
  const size_t lens[] = {lock->len,       k.queue_len, k.timeouts_len, k.channel_len, call->field_len,
                         relock__lock_number(wait, wait_timeout_ms(lock)), strlen(call->publish)};
  relock_future_t *f = relock__lock_send(call, RELOCK__SCRIPT_FAIR_LOCK_LEAVE, 4, 7, argv, lens);
  fair_keys_free(&k);
  return f;
}

static const relock__lock_kind_t fair = {
    .what = "fair lock",
    .field_suffix = "",
    .channel_prefix = "redisson_lock__channel",
    .role = RELOCK__ROLE_PLAIN,
    .wait = RELOCK__WAIT_OWN_CHANNEL,
    .acquire = fair_acquire,
    .undo = fair_undo,
    .release = fair_release,
    .force_release = fair_force_release,
    .leave_queue = fair_leave,
};

relock_lock_t *relock_fair_lock_new(relock_client_t *client, const char *name, relock_error_t *err) {
  return relock__lock_new(client, name, &fair, err);
}
