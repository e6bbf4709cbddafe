/* The reentrant lock (Redisson's RLock): a hash named like the lock, field
 * "<client-id>:<owner>" -> hold count; unlocks published on
 * "redisson_lock__channel:{name}" (Redisson's layout: README.md, "Redisson
 * compatibility"; every kind's keys: docs/ARCHITECTURE.md, "The kinds"). Its
 * scripts are lua/lock_*.lua; the kinds with the same layout (spin, fenced)
 * reuse its operations. */
#include <config.h>

#include "objects/lock_impl.h"
#include "objects/script_args.h"
#include "redis/scripts.h"

/* KEYS: the lock, the latch and, for a wait (call->waker), the waiting
 * processes; ARGV: lease, field, latch TTL and, for a wait, the waker id
 * and whether it stays registered (lua/lock_acquire.lua). */
relock_future_t *relock__rlock_acquire(relock__lock_call_t *call) {
  relock_lock_t *lock = call->lock;
  relock__args_t a;
  relock__args_init(&a);
  relock__args_lock(&a, lock);
  relock__args_key(&a, call->latch, call->latch_len);
  if (call->waker != NULL)
    relock__args_take(&a, relock__lock_waiters_name(lock->name, lock->len, NULL));
  relock__args_number(&a, call->lease_ms);
  relock__args_str(&a, call->field, call->field_len);
  relock__args_number(&a, call->latch_ttl_ms);
  if (call->waker != NULL) {
    relock__args_cstr(&a, call->waker);
    relock__args_flag(&a, call->keep_waker);
  }
  return relock__args_send(call, RELOCK__SCRIPT_LOCK_ACQUIRE, &a);
}

relock_future_t *relock__rlock_undo(relock__lock_call_t *call) {
  relock__args_t a;
  relock__args_init(&a);
  relock__args_lock(&a, call->lock);
  relock__args_channel(&a, call->lock);
  relock__args_key(&a, call->latch, call->latch_len);
  relock__args_str(&a, call->field, call->field_len);
  relock__args_cstr(&a, "0");
  relock__args_cstr(&a, call->publish);
  return relock__args_send(call, RELOCK__SCRIPT_LOCK_ACQUIRE_UNDO, &a);
}

relock_future_t *relock__rlock_release(relock__lock_call_t *call) {
  relock_lock_t *lock = call->lock;
  relock__args_t a;
  relock__args_init(&a);
  relock__args_lock(&a, lock);
  relock__args_channel(&a, lock);
  relock__args_key(&a, call->latch, call->latch_len);
  relock__args_take(&a, relock__lock_waiters_name(lock->name, lock->len, NULL));
  relock__args_cstr(&a, "0");
  relock__args_number(&a, call->lease_ms);
  relock__args_str(&a, call->field, call->field_len);
  relock__args_number(&a, call->latch_ttl_ms);
  relock__args_cstr(&a, call->publish);
  return relock__args_send(call, RELOCK__SCRIPT_LOCK_RELEASE, &a);
}

relock_future_t *relock__rlock_force_release(relock__lock_call_t *call) {
  relock__args_t a;
  relock__args_init(&a);
  relock__args_lock(&a, call->lock);
  relock__args_channel(&a, call->lock);
  relock__args_cstr(&a, "0");
  relock__args_cstr(&a, call->publish);
  return relock__args_send(call, RELOCK__SCRIPT_LOCK_FORCE_RELEASE, &a);
}

static const relock__lock_kind_t reentrant = {
    .what = "lock",
    .stat = RELOCK_KIND_LOCK,
    .field_suffix = "",
    .channel_prefix = "redisson_lock__channel",
    .role = RELOCK__ROLE_PLAIN,
    .wait = RELOCK__WAIT_CHANNEL,
    .wakes_one = 1,
    .latch_passed_on = 1,
    .acquire = relock__rlock_acquire,
    .undo = relock__rlock_undo,
    .release = relock__rlock_release,
    .force_release = relock__rlock_force_release,
};

relock_lock_t *relock_lock_new(relock_client_t *client, const char *name, relock_error_t *err) {
  return relock__lock_new(client, name, &reentrant, err);
}
