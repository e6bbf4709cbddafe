/* The reentrant lock (Redisson's RLock): a hash named like the lock, field
 * "<client-id>:<owner>" -> hold count; unlocks published on
 * "redisson_lock__channel:{name}" (Redisson's layout: README.md, "Redisson
 * compatibility"; every kind's keys: docs/ARCHITECTURE.md, "The kinds"). Its
 * scripts are lua/lock_*.lua; the kinds with the same layout (spin, fenced)
 * reuse its operations. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "objects/lock_impl.h"
#include "redis/scripts.h"

/* KEYS: the lock, the latch and, for a wait (call->waker), the waiting
 * processes; ARGV: lease, field, latch TTL and, for a wait, the waker id
 * and whether it stays registered (lua/lock_acquire.lua). */
relock_future_t *relock__rlock_acquire(relock__lock_call_t *call) {
  relock_lock_t *lock = call->lock;
  char lease[24], ttl[24];
  const char *argv[8];
  size_t lens[8];
  int n = 0, nkeys = 2;
  char *waiters = NULL;
  argv[n] = lock->name, lens[n++] = lock->len;
  argv[n] = call->latch, lens[n++] = call->latch_len;
  if (call->waker != NULL) {
    if ((waiters = relock__lock_waiters_name(lock->name, lock->len, &lens[n])) == NULL)
      return NULL;
    argv[n++] = waiters, nkeys++;
  }
  argv[n] = lease, lens[n++] = relock__lock_number(lease, call->lease_ms);
  argv[n] = call->field, lens[n++] = call->field_len;
  argv[n] = ttl, lens[n++] = relock__lock_number(ttl, call->latch_ttl_ms);
  if (call->waker != NULL) {
    argv[n] = call->waker, lens[n++] = strlen(call->waker);
    argv[n] = call->keep_waker ? "1" : "0", lens[n++] = 1;
  }
  relock_future_t *f = relock__lock_send(call, RELOCK__SCRIPT_LOCK_ACQUIRE, nkeys, n, argv, lens);
  free(waiters);
  return f;
}

relock_future_t *relock__rlock_undo(relock__lock_call_t *call) {
  relock_lock_t *lock = call->lock;
  char buf[RELOCK__CHANNEL_BUF];
  size_t channel_len;
  char *channel = relock__lock_channel(lock, buf, &channel_len);
  if (channel == NULL)
    return NULL;
  const char *argv[] = {lock->name, channel, call->latch, call->field, "0", call->publish};
  const size_t lens[] = {lock->len, channel_len, call->latch_len, call->field_len, 1, strlen(call->publish)};
  relock_future_t *f = relock__lock_send(call, RELOCK__SCRIPT_LOCK_ACQUIRE_UNDO, 3, 6, argv, lens);
  relock__lock_channel_free(channel, buf);
  return f;
}

relock_future_t *relock__rlock_release(relock__lock_call_t *call) {
  relock_lock_t *lock = call->lock;
  char buf[RELOCK__CHANNEL_BUF], lease[24], ttl[24];
  size_t channel_len, waiters_len;
  char *channel = relock__lock_channel(lock, buf, &channel_len);
  if (channel == NULL)
    return NULL;
  char *waiters = relock__lock_waiters_name(lock->name, lock->len, &waiters_len);
  if (waiters == NULL) {
    relock__lock_channel_free(channel, buf);
    return NULL;
  }
  const char *argv[] = {lock->name, channel, call->latch, waiters, "0", lease, call->field, ttl, call->publish};
  const size_t lens[] = {lock->len,
                         channel_len,
                         call->latch_len,
                         waiters_len,
                         1,
                         relock__lock_number(lease, call->lease_ms),
                         call->field_len,
                         relock__lock_number(ttl, call->latch_ttl_ms),
                         strlen(call->publish)};
  relock_future_t *f = relock__lock_send(call, RELOCK__SCRIPT_LOCK_RELEASE, 4, 9, argv, lens);
  free(waiters);
  relock__lock_channel_free(channel, buf);
  return f;
}

relock_future_t *relock__rlock_force_release(relock__lock_call_t *call) {
  relock_lock_t *lock = call->lock;
  char buf[RELOCK__CHANNEL_BUF];
  size_t channel_len;
  char *channel = relock__lock_channel(lock, buf, &channel_len);
  if (channel == NULL)
    return NULL;
  const char *argv[] = {lock->name, channel, "0", call->publish};
  const size_t lens[] = {lock->len, channel_len, 1, strlen(call->publish)};
  relock_future_t *f = relock__lock_send(call, RELOCK__SCRIPT_LOCK_FORCE_RELEASE, 2, 4, argv, lens);
  relock__lock_channel_free(channel, buf);
  return f;
}

static const relock__lock_kind_t reentrant = {
    .what = "lock",
    .field_suffix = "",
    .channel_prefix = "redisson_lock__channel",
    .role = RELOCK__ROLE_PLAIN,
    .wait = RELOCK__WAIT_CHANNEL,
    .wakes_one = 1,
    .acquire = relock__rlock_acquire,
    .undo = relock__rlock_undo,
    .release = relock__rlock_release,
    .force_release = relock__rlock_force_release,
};

relock_lock_t *relock_lock_new(relock_client_t *client, const char *name, relock_error_t *err) {
  return relock__lock_new(client, name, &reentrant, err);
}
