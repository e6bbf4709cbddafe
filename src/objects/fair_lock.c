/* The fair lock (Redisson's RFairLock): the reentrant lock's hash, plus a
 * queue of waiting fields "redisson_lock_queue:{name}" and their deadlines
 * "redisson_lock_timeout:{name}". The lock goes to the head of the queue; a
 * release wakes only the head, on its own channel
 * "redisson_lock__channel:{name}:<field>" (lua/fair_lock_*.lua say how the
 * queue heals itself of dead waiters). A force release wakes the head too,
 * and publishes on "redisson_lock__channel:{name}" itself, where a watched
 * holder listens (lock_watch.c). Renewal is the reentrant lock's. */
#include <config.h>

#include "objects/lock_impl.h"
#include "objects/script_args.h"
#include "redis/scripts.h"

/* What every fair lock script's KEYS start with: the lock, the queue's two
 * keys and the lock's channel. */
static void fair_keys(relock__args_t *a, const relock_lock_t *lock) {
  relock__args_init(a);
  relock__args_lock(a, lock);
  relock__args_derived(a, lock, "redisson_lock_queue");
  relock__args_derived(a, lock, "redisson_lock_timeout");
  relock__args_channel(a, lock);
}

static int64_t wait_timeout_ms(const relock_lock_t *lock) {
  return lock->client->settings.opt.fair_lock_wait_timeout_ms;
}

static relock_future_t *fair_acquire(relock__lock_call_t *call) {
  relock__args_t a;
  fair_keys(&a, call->lock);
  relock__args_key(&a, call->latch, call->latch_len);
  relock__args_number(&a, call->lease_ms);
  relock__args_str(&a, call->field, call->field_len);
  relock__args_number(&a, wait_timeout_ms(call->lock));
  relock__args_number(&a, call->latch_ttl_ms);
  relock__args_flag(&a, call->queue);
  relock__args_cstr(&a, call->publish);
  return relock__args_send(call, RELOCK__SCRIPT_FAIR_LOCK_ACQUIRE, &a);
}

/* A release, or (the latch an acquisition's) an undo: its latch TTL is
 * "undo". */
static relock_future_t *release_or_undo(relock__lock_call_t *call, int undo) {
  relock__args_t a;
  fair_keys(&a, call->lock);
  relock__args_key(&a, call->latch, call->latch_len);
  relock__args_number(&a, call->lease_ms > 0 ? call->lease_ms : 1);
  relock__args_str(&a, call->field, call->field_len);
  relock__args_latch_ttl(&a, call, undo);
  relock__args_cstr(&a, call->publish);
  return relock__args_send(call, RELOCK__SCRIPT_FAIR_LOCK_RELEASE, &a);
}

static relock_future_t *fair_release(relock__lock_call_t *call) { return release_or_undo(call, 0); }

static relock_future_t *fair_undo(relock__lock_call_t *call) { return release_or_undo(call, 1); }

static relock_future_t *fair_force_release(relock__lock_call_t *call) {
  relock__args_t a;
  fair_keys(&a, call->lock);
  relock__args_cstr(&a, call->publish);
  return relock__args_send(call, RELOCK__SCRIPT_FAIR_LOCK_FORCE_RELEASE, &a);
}

static relock_future_t *fair_leave(relock__lock_call_t *call) {
  relock__args_t a;
  fair_keys(&a, call->lock);
  relock__args_str(&a, call->field, call->field_len);
  relock__args_number(&a, wait_timeout_ms(call->lock));
  relock__args_cstr(&a, call->publish);
  return relock__args_send(call, RELOCK__SCRIPT_FAIR_LOCK_LEAVE, &a);
}

static const relock__lock_kind_t fair = {
    .what = "fair lock",
    .stat = RELOCK_KIND_FAIR_LOCK,
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
