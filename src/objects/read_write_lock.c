/* The read-write lock (Redisson's RReadWriteLock): its read side and its
 * write side are two kinds of lock on one hash, "mode" -> "read" | "write",
 * readers' fields "<client-id>:<owner>" and the writer's
 * "<client-id>:<owner>:write", each -> its hold count; every read hold also
 * has a timeout key (lua/rwlock_read_acquire.lua). Unlocks are published on
 * "redisson_rwlock:{name}": "0" when the last read hold goes (one waiter per
 * process tries), "1" when the write lock goes (all do).
 *
 * Ours besides Redisson's: a waiting writer is listed in
 * "relock_rwlock_writers:{name}" and keeps new readers out meanwhile, so
 * that readers that keep coming cannot starve it (Java readers do not know
 * the list); and an owner with read holds asking for the write lock fails at
 * once with RELOCK_EUPGRADE instead of waiting for itself forever. */
#include <config.h>

#include <string.h>

#include "objects/lock_impl.h"
#include "objects/script_args.h"
#include "redis/scripts.h"

#define WRITERS_PREFIX "relock_rwlock_writers"

/* How long a waiting writer keeps readers out without trying again: it
 * tries every third of it, so readers go ahead again at most this long
 * after a writer died while waiting. */
#define WRITER_WAITING_MS 3000

/* The owner's field on the other side: a reader's for a writer's field
 * (less ":write"), a writer's for a reader's. */
static size_t other_field(const relock__lock_call_t *call, char out[RELOCK__FIELD_MAX + 8]) {
  const char *write = ":write";
  size_t n = call->field_len, suffix = strlen(write);
  if (call->lock->kind->role == RELOCK__ROLE_WRITE) {
    memcpy(out, call->field, n - suffix);
    out[n - suffix] = '\0';
    return n - suffix;
  }
  memcpy(out, call->field, n);
  memcpy(out + n, write, suffix + 1);
  return n + suffix;
}

static relock_future_t *acquire(relock__lock_call_t *call) {
  char other[RELOCK__FIELD_MAX + 8];
  relock__args_t a;
  relock__args_init(&a);
  relock__args_lock(&a, call->lock);
  relock__args_key(&a, call->latch, call->latch_len);
  relock__args_derived(&a, call->lock, WRITERS_PREFIX);
  relock__args_number(&a, call->lease_ms);
  relock__args_str(&a, call->field, call->field_len);
  relock__args_str(&a, other, other_field(call, other));
  relock__args_number(&a, call->latch_ttl_ms);
  if (call->lock->kind->role == RELOCK__ROLE_READ)
    return relock__args_send(call, RELOCK__SCRIPT_RWLOCK_READ_ACQUIRE, &a);
  relock__args_flag(&a, call->queue);
  relock__args_number(&a, WRITER_WAITING_MS);
  return relock__args_send(call, RELOCK__SCRIPT_RWLOCK_WRITE_ACQUIRE, &a);
}

/* A release, or (the latch an acquisition's) an undo: its latch TTL is
 * "undo". A read hold's, or a write hold's, which names the waiting
 * writers and the lease the holds that remain keep. */
static relock_future_t *release_or_undo(relock__lock_call_t *call, int undo) {
  int write = call->lock->kind->role == RELOCK__ROLE_WRITE;
  relock__args_t a;
  relock__args_init(&a);
  relock__args_lock(&a, call->lock);
  relock__args_channel(&a, call->lock);
  relock__args_key(&a, call->latch, call->latch_len);
  if (write) {
    relock__args_derived(&a, call->lock, WRITERS_PREFIX);
    relock__args_number(&a, call->lease_ms > 0 ? call->lease_ms : 1);
  }
  relock__args_str(&a, call->field, call->field_len);
  relock__args_latch_ttl(&a, call, undo);
  relock__args_cstr(&a, call->publish);
  return relock__args_send(call, write ? RELOCK__SCRIPT_RWLOCK_WRITE_RELEASE : RELOCK__SCRIPT_RWLOCK_READ_RELEASE, &a);
}

static relock_future_t *release(relock__lock_call_t *call) { return release_or_undo(call, 0); }

static relock_future_t *undo(relock__lock_call_t *call) { return release_or_undo(call, 1); }

static relock_future_t *force_release(relock__lock_call_t *call) {
  int write = call->lock->kind->role == RELOCK__ROLE_WRITE;
  relock__args_t a;
  relock__args_init(&a);
  relock__args_lock(&a, call->lock);
  relock__args_channel(&a, call->lock);
  relock__args_cstr(&a, write ? "write" : "read");
  relock__args_flag(&a, write);
  relock__args_cstr(&a, call->publish);
  return relock__args_send(call, RELOCK__SCRIPT_RWLOCK_FORCE_RELEASE, &a);
}

static relock_future_t *writer_leave(relock__lock_call_t *call) {
  relock__args_t a;
  relock__args_init(&a);
  relock__args_derived(&a, call->lock, WRITERS_PREFIX);
  relock__args_channel(&a, call->lock);
  relock__args_str(&a, call->field, call->field_len);
  relock__args_cstr(&a, call->publish);
  return relock__args_send(call, RELOCK__SCRIPT_RWLOCK_WRITER_LEAVE, &a);
}

static const relock__lock_kind_t read_side = {
    .what = "read lock",
    .stat = RELOCK_KIND_READ_LOCK,
    .field_suffix = "",
    .channel_prefix = "redisson_rwlock",
    .role = RELOCK__ROLE_READ,
    .wait = RELOCK__WAIT_CHANNEL,
    .shared = 1,
    .acquire = acquire,
    .undo = undo,
    .release = release,
    .force_release = force_release,
};

static const relock__lock_kind_t write_side = {
    .what = "write lock",
    .stat = RELOCK_KIND_WRITE_LOCK,
    .field_suffix = ":write",
    .channel_prefix = "redisson_rwlock",
    .role = RELOCK__ROLE_WRITE,
    .wait = RELOCK__WAIT_CHANNEL,
    .acquire = acquire,
    .undo = undo,
    .release = release,
    .force_release = force_release,
    .leave_queue = writer_leave,
};

relock_lock_t *relock_read_lock_new(relock_client_t *client, const char *name, relock_error_t *err) {
  return relock__lock_new(client, name, &read_side, err);
}

relock_lock_t *relock_write_lock_new(relock_client_t *client, const char *name, relock_error_t *err) {
  return relock__lock_new(client, name, &write_side, err);
}
