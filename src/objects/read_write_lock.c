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

#include <stdlib.h>
#include <string.h>

#include "objects/lock_impl.h"
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

static char *writers_name(const relock_lock_t *lock, size_t *len) {
  return relock__derived_name(lock->name, lock->len, WRITERS_PREFIX, NULL, len);
}

static relock_future_t *acquire(relock__lock_call_t *call) {
  relock_lock_t *lock = call->lock;
  int write = lock->kind->role == RELOCK__ROLE_WRITE;
  size_t writers_len;
  char *writers = writers_name(lock, &writers_len);
  if (writers == NULL)
    return NULL;
  char other[RELOCK__FIELD_MAX + 8], lease[24], ttl[24], keep[24];
  const char *argv[] = {lock->name, call->latch, writers, lease, call->field, other, ttl, call->queue ? "1" : "0",
                        keep};
  const size_t lens[] = {lock->len,
                         call->latch_len,
                         writers_len,
                         relock__lock_number(lease, call->lease_ms),
                         call->field_len,
                         other_field(call, other),
                         relock__lock_number(ttl, call->latch_ttl_ms),
                         1,
                         relock__lock_number(keep, WRITER_WAITING_MS)};
  relock_future_t *f = write ? relock__lock_send(call, RELOCK__SCRIPT_RWLOCK_WRITE_ACQUIRE, 3, 9, argv, lens)
                             : relock__lock_send(call, RELOCK__SCRIPT_RWLOCK_READ_ACQUIRE, 3, 7, argv, lens);
  free(writers);
  return f;
}

/* A read hold's release or undo. */
static relock_future_t *read_release(relock__lock_call_t *call, const char *channel, size_t channel_len,
                                     const char *ttl, size_t ttl_len) {
  relock_lock_t *lock = call->lock;
  const char *argv[] = {lock->name, channel, call->latch, call->field, ttl, call->publish};
  const size_t lens[] = {lock->len, channel_len, call->latch_len, call->field_len, ttl_len, strlen(call->publish)};
  return relock__lock_send(call, RELOCK__SCRIPT_RWLOCK_READ_RELEASE, 3, 6, argv, lens);
}

/* A write hold's release or undo. */
static relock_future_t *write_release(relock__lock_call_t *call, const char *channel, size_t channel_len,
                                      const char *ttl, size_t ttl_len) {
  relock_lock_t *lock = call->lock;
  size_t writers_len;
  char *writers = writers_name(lock, &writers_len);
  if (writers == NULL)
    return NULL;
  char lease[24];
  const char *argv[] = {lock->name, channel, call->latch, writers, lease, call->field, ttl, call->publish};
  const size_t lens[] = {lock->len,   channel_len, call->latch_len,
                         writers_len, relock__lock_number(lease, call->lease_ms > 0 ? call->lease_ms : 1),
                         call->field_len, ttl_len, strlen(call->publish)};
  relock_future_t *f = relock__lock_send(call, RELOCK__SCRIPT_RWLOCK_WRITE_RELEASE, 4, 8, argv, lens);
  free(writers);
  return f;
}

/* A release, or (ttl "undo", the latch an acquisition's) an undo. */
static relock_future_t *release_or_undo(relock__lock_call_t *call, const char *ttl, size_t ttl_len) {
  char buf[RELOCK__CHANNEL_BUF];
  size_t channel_len;
  char *channel = relock__lock_channel(call->lock, buf, &channel_len);
  if (channel == NULL)
    return NULL;
  relock_future_t *f = call->lock->kind->role == RELOCK__ROLE_READ
                           ? read_release(call, channel, channel_len, ttl, ttl_len)
                           : write_release(call, channel, channel_len, ttl, ttl_len);
  relock__lock_channel_free(channel, buf);
  return f;
}

static relock_future_t *release(relock__lock_call_t *call) {
  char ttl[24];
  return release_or_undo(call, ttl, relock__lock_number(ttl, call->latch_ttl_ms));
}

static relock_future_t *undo(relock__lock_call_t *call) { return release_or_undo(call, "undo", 4); }

static relock_future_t *force_release(relock__lock_call_t *call) {
  relock_lock_t *lock = call->lock;
  int write = lock->kind->role == RELOCK__ROLE_WRITE;
  char buf[RELOCK__CHANNEL_BUF];
  size_t channel_len;
  char *channel = relock__lock_channel(lock, buf, &channel_len);
  if (channel == NULL)
    return NULL;
  const char *argv[] = {lock->name, channel, write ? "write" : "read", write ? "1" : "0", call->publish};
  const size_t lens[] = {lock->len, channel_len, write ? 5u : 4u, 1, strlen(call->publish)};
  relock_future_t *f = relock__lock_send(call, RELOCK__SCRIPT_RWLOCK_FORCE_RELEASE, 2, 5, argv, lens);
  relock__lock_channel_free(channel, buf);
  return f;
}

static relock_future_t *writer_leave(relock__lock_call_t *call) {
  relock_lock_t *lock = call->lock;
  size_t writers_len, channel_len;
  char buf[RELOCK__CHANNEL_BUF];
  char *writers = writers_name(lock, &writers_len);
  char *channel = writers != NULL ? relock__lock_channel(lock, buf, &channel_len) : NULL;
  if (channel == NULL) {
    free(writers);
    return NULL;
  }
  const char *argv[] = {writers, channel, call->field, call->publish};
  const size_t lens[] = {writers_len, channel_len, call->field_len, strlen(call->publish)};
  relock_future_t *f = relock__lock_send(call, RELOCK__SCRIPT_RWLOCK_WRITER_LEAVE, 2, 4, argv, lens);
  relock__lock_channel_free(channel, buf);
  free(writers);
  return f;
}

static const relock__lock_kind_t read_side = {
    .what = "read lock",
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
