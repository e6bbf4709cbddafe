/* The count-down latch (Redisson's RCountDownLatch, include/relock/latch.h):
 * a lock object of a kind whose "acquisition" is finding the count at zero
 * and takes nothing, waiting on "redisson_countdownlatch__channel__{name}"
 * for "0" (RELOCK__WAIT_ZERO). The handle a caller gets is that lock
 * object's address; struct relock_latch is never defined. */
#include <config.h>

#include <relock/latch.h>

#include "future/promise.h"
#include "objects/counter.h"
#include "objects/lock_impl.h"
#include "objects/script_args.h"
#include "redis/scripts.h"

static relock_future_t *is_open(relock__lock_call_t *call) {
  relock__args_t a;
  relock__args_init(&a);
  relock__args_lock(&a, call->lock);
  return relock__args_send(call, RELOCK__SCRIPT_LATCH_AWAIT, &a);
}

static const relock__lock_kind_t latch = {
    .what = "count-down latch",
    .stat = RELOCK_KIND_LATCH,
    .field_suffix = "",
    .channel_prefix = "redisson_countdownlatch__channel__",
    .role = RELOCK__ROLE_PLAIN,
    .wait = RELOCK__WAIT_ZERO,
    .no_hold = 1,
    .braced_channel = 1,
    .acquire = is_open,
};

static relock_lock_t *obj(relock_latch_t *l) { return (relock_lock_t *)(void *)l; }

relock_latch_t *relock_latch_new(relock_client_t *client, const char *name, relock_error_t *err) {
  return (relock_latch_t *)(void *)relock__lock_new(client, name, &latch, err);
}

void relock_latch_free(relock_latch_t *l) { relock_lock_free(obj(l)); }

const char *relock_latch_name(const relock_latch_t *l) { return relock_lock_name((const relock_lock_t *)(const void *)l); }

/* -- asynchronous ------------------------------------------------------------*/

#define CHECK(l) \
  if ((l) == NULL) \
  return relock__counter_null("latch")

relock_future_t *relock_latch_try_set_count_async(relock_latch_t *l, int64_t count) {
  CHECK(l);
  if (count < 1)
    return relock__future_failed(obj(l)->client->exec, RELOCK_EINVAL, "count must be >= 1 (got %lld)",
                                 (long long)count);
  return relock__counter_update(obj(l), RELOCK__SCRIPT_LATCH_UPDATE, "set", count, 1);
}

relock_future_t *relock_latch_count_down_async(relock_latch_t *l) {
  CHECK(l);
  return relock__counter_update(obj(l), RELOCK__SCRIPT_LATCH_UPDATE, "down", 0, 0);
}

relock_future_t *relock_latch_delete_async(relock_latch_t *l) {
  CHECK(l);
  return relock__counter_update(obj(l), RELOCK__SCRIPT_LATCH_UPDATE, "delete", 0, 1);
}

relock_future_t *relock_latch_count_async(relock_latch_t *l) {
  CHECK(l);
  return relock__counter_get(obj(l));
}

relock_future_t *relock_latch_await_async(relock_latch_t *l, int64_t wait_ms) {
  CHECK(l);
  return relock__lock_acquire_async(obj(l), 0, 1, wait_ms, RELOCK_INFINITE);
}

/* -- blocking ----------------------------------------------------------------*/

int relock_latch_await(relock_latch_t *l, int64_t wait_ms, int *open) {
  int r = relock__sync_would_block(obj(l));
  return r != 0 ? r : relock__sync_wait_flag(relock_latch_await_async(l, wait_ms), open);
}

int relock_latch_count_down(relock_latch_t *l, int64_t *left) {
  int r = relock__sync_would_block(obj(l));
  return r != 0 ? r : relock__sync_wait_value(relock_latch_count_down_async(l), left);
}

int relock_latch_try_set_count(relock_latch_t *l, int64_t count, int *set) {
  int r = relock__sync_would_block(obj(l));
  return r != 0 ? r : relock__sync_wait_flag(relock_latch_try_set_count_async(l, count), set);
}

int relock_latch_count(relock_latch_t *l, int64_t *count) {
  int r = relock__sync_would_block(obj(l));
  return r != 0 ? r : relock__sync_wait_value(relock_latch_count_async(l), count);
}

int relock_latch_delete(relock_latch_t *l, int *deleted) {
  int r = relock__sync_would_block(obj(l));
  return r != 0 ? r : relock__sync_wait_flag(relock_latch_delete_async(l), deleted);
}
