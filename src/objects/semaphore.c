/* The semaphore (Redisson's RSemaphore, include/relock/semaphore.h): a lock
 * object of a kind whose acquisitions take permits and no hold, waiting on
 * "redisson_sc:{name}", whose messages carry the free count
 * (RELOCK__WAIT_PERMITS). The handle a caller gets is that lock object's
 * address; struct relock_semaphore is never defined. */
#include <config.h>

#include <relock/semaphore.h>

#include "future/promise.h"
#include "objects/counter.h"
#include "objects/lock_impl.h"
#include "objects/script_args.h"
#include "redis/scripts.h"

/* The latch has no expiry (lua/semaphore_acquire.lua): a give-back may come
 * however late (lock_acquire.c). */
static relock_future_t *acquire(relock__lock_call_t *call) {
  relock__args_t a;
  relock__args_init(&a);
  relock__args_lock(&a, call->lock);
  relock__args_key(&a, call->latch, call->latch_len);
  relock__args_number(&a, call->permits);
  return relock__args_send(call, RELOCK__SCRIPT_SEMAPHORE_ACQUIRE, &a);
}

static relock_future_t *undo(relock__lock_call_t *call) {
  relock__args_t a;
  relock__args_init(&a);
  relock__args_lock(&a, call->lock);
  relock__args_channel(&a, call->lock);
  relock__args_key(&a, call->latch, call->latch_len);
  relock__args_cstr(&a, call->publish);
  return relock__args_send(call, RELOCK__SCRIPT_SEMAPHORE_UNDO, &a);
}

static const relock__lock_kind_t semaphore = {
    .what = "semaphore",
    .stat = RELOCK_KIND_SEMAPHORE,
    .field_suffix = "",
    .channel_prefix = "redisson_sc",
    .role = RELOCK__ROLE_PLAIN,
    .wait = RELOCK__WAIT_PERMITS,
    .no_hold = 1,
    .acquire = acquire,
    .undo = undo,
};

static relock_lock_t *obj(relock_semaphore_t *s) { return (relock_lock_t *)(void *)s; }

relock_semaphore_t *relock_semaphore_new(relock_client_t *client, const char *name, relock_error_t *err) {
  return (relock_semaphore_t *)(void *)relock__lock_new(client, name, &semaphore, err);
}

void relock_semaphore_free(relock_semaphore_t *s) { relock_lock_free(obj(s)); }

const char *relock_semaphore_name(const relock_semaphore_t *s) {
  return relock_lock_name((const relock_lock_t *)(const void *)s);
}

/* -- asynchronous ------------------------------------------------------------*/

#define CHECK(s) \
  if ((s) == NULL) \
  return relock__counter_null("semaphore")

static relock_future_t *bad_permits(relock_semaphore_t *s, int64_t permits, int64_t min) {
  return relock__future_failed(obj(s)->client->exec, RELOCK_EINVAL, "permits must be >= %lld (got %lld)",
                               (long long)min, (long long)permits);
}

relock_future_t *relock_semaphore_acquire_async(relock_semaphore_t *s, int64_t permits, int64_t wait_ms) {
  CHECK(s);
  if (permits < 1)
    return bad_permits(s, permits, 1);
  return relock__lock_acquire_async(obj(s), 0, permits, wait_ms, RELOCK_INFINITE);
}

relock_future_t *relock_semaphore_release_async(relock_semaphore_t *s, int64_t permits) {
  CHECK(s);
  if (permits < 1)
    return bad_permits(s, permits, 1);
  return relock__counter_update(obj(s), RELOCK__SCRIPT_SEMAPHORE_UPDATE, "release", permits, 0);
}

relock_future_t *relock_semaphore_try_set_permits_async(relock_semaphore_t *s, int64_t permits) {
  CHECK(s);
  if (permits < 0)
    return bad_permits(s, permits, 0);
  return relock__counter_update(obj(s), RELOCK__SCRIPT_SEMAPHORE_UPDATE, "set", permits, 1);
}

relock_future_t *relock_semaphore_add_permits_async(relock_semaphore_t *s, int64_t permits) {
  CHECK(s);
  return relock__counter_update(obj(s), RELOCK__SCRIPT_SEMAPHORE_UPDATE, "add", permits, 0);
}

relock_future_t *relock_semaphore_drain_permits_async(relock_semaphore_t *s) {
  CHECK(s);
  return relock__counter_update(obj(s), RELOCK__SCRIPT_SEMAPHORE_UPDATE, "drain", 0, 0);
}

relock_future_t *relock_semaphore_available_async(relock_semaphore_t *s) {
  CHECK(s);
  return relock__counter_get(obj(s));
}

/* -- blocking ----------------------------------------------------------------*/

int relock_semaphore_acquire(relock_semaphore_t *s, int64_t permits, int64_t wait_ms, int *acquired) {
  int r = relock__sync_would_block(obj(s));
  return r != 0 ? r : relock__sync_wait_flag(relock_semaphore_acquire_async(s, permits, wait_ms), acquired);
}

int relock_semaphore_release(relock_semaphore_t *s, int64_t permits) {
  int r = relock__sync_would_block(obj(s));
  return r != 0 ? r : relock__sync_wait_value(relock_semaphore_release_async(s, permits), NULL);
}

int relock_semaphore_try_set_permits(relock_semaphore_t *s, int64_t permits, int *set) {
  int r = relock__sync_would_block(obj(s));
  return r != 0 ? r : relock__sync_wait_flag(relock_semaphore_try_set_permits_async(s, permits), set);
}

int relock_semaphore_available(relock_semaphore_t *s, int64_t *available) {
  int r = relock__sync_would_block(obj(s));
  return r != 0 ? r : relock__sync_wait_value(relock_semaphore_available_async(s), available);
}

int relock_semaphore_add_permits(relock_semaphore_t *s, int64_t permits, int64_t *available) {
  int r = relock__sync_would_block(obj(s));
  return r != 0 ? r : relock__sync_wait_value(relock_semaphore_add_permits_async(s, permits), available);
}

int relock_semaphore_drain_permits(relock_semaphore_t *s, int64_t *drained) {
  int r = relock__sync_would_block(obj(s));
  return r != 0 ? r : relock__sync_wait_value(relock_semaphore_drain_permits_async(s), drained);
}
