/* Blocking wrappers: start the asynchronous operation for the calling
 * thread's owner id and wait on its future, running the client's loop. */
#include <config.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <ev.h>

#include <relock/error.h>
#include <relock/lock.h>

#include "objects/lock_impl.h"
#include "future/promise.h"

uint64_t relock_thread_owner(void) { return (uint64_t)syscall(SYS_gettid); }

/* Refuses before starting anything: an operation started and then not
 * waited for would go on behind the caller's back. */
static int would_block(relock_lock_t *lock) {
  return lock == NULL ? RELOCK_EINVAL
                      : relock__future_would_block(lock->client->loop) ? RELOCK_EWOULDBLOCK : 0;
}

/* Waits for f; returns its error, with the value in *value (bool or int). */
static int wait_value(relock_future_t *f, int64_t *value) {
  if (f == NULL)
    return RELOCK_ENOMEM;
  int r = relock_future_wait(f, RELOCK_INFINITE);
  if (r == 0 && value != NULL)
    *value = relock_future_value_type(f) == RELOCK_VALUE_BOOL ? relock_future_bool(f) : relock_future_int(f);
  if (r == RELOCK_EPENDING) /* cannot happen while the client is alive; never leave it running */
    relock_future_cancel(f);
  relock_future_release(f);
  return r;
}

static int wait_flag(relock_future_t *f, int *flag) {
  int64_t v = 0;
  int r = wait_value(f, &v);
  if (r == 0 && flag != NULL)
    *flag = v != 0;
  return r;
}

static int valid_lease(int64_t lease_ms) {
  return lease_ms == RELOCK_INFINITE || (lease_ms > 0 && lease_ms <= RELOCK_MAX_LEASE_MS);
}

int relock_lock_lock(relock_lock_t *lock, int64_t lease_ms) {
  int r = would_block(lock);
  if (r != 0)
    return r;
  if (!valid_lease(lease_ms))
    return RELOCK_EINVAL;
  return wait_flag(relock_lock_acquire_async(lock, relock_thread_owner(), RELOCK_INFINITE, lease_ms), NULL);
}

int relock_lock_try_lock(relock_lock_t *lock, int64_t wait_ms, int64_t lease_ms, int *acquired) {
  int r = would_block(lock);
  if (r != 0)
    return r;
  if (wait_ms < RELOCK_INFINITE || !valid_lease(lease_ms))
    return RELOCK_EINVAL;
  return wait_flag(relock_lock_acquire_async(lock, relock_thread_owner(), wait_ms, lease_ms), acquired);
}

int relock_lock_unlock(relock_lock_t *lock) {
  int r = would_block(lock);
  return r != 0 ? r : wait_flag(relock_lock_release_async(lock, relock_thread_owner()), NULL);
}

int relock_lock_force_unlock(relock_lock_t *lock, int *was_locked) {
  int r = would_block(lock);
  return r != 0 ? r : wait_flag(relock_lock_force_release_async(lock), was_locked);
}

int relock_lock_is_locked(relock_lock_t *lock, int *locked) {
  int r = would_block(lock);
  return r != 0 ? r : wait_flag(relock_lock_is_locked_async(lock), locked);
}

int relock_lock_is_held_by_thread(relock_lock_t *lock, int *held) {
  int r = would_block(lock);
  return r != 0 ? r : wait_flag(relock_lock_is_held_by_async(lock, relock_thread_owner()), held);
}

int relock_lock_hold_count(relock_lock_t *lock, int64_t *count) {
  int r = would_block(lock);
  return r != 0 ? r : wait_value(relock_lock_hold_count_async(lock, relock_thread_owner()), count);
}

int relock_lock_validate(relock_lock_t *lock, int *held) {
  int r = would_block(lock);
  return r != 0 ? r : wait_flag(relock_lock_validate_async(lock, relock_thread_owner()), held);
}
