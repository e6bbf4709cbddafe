/* Blocking wrappers: start the asynchronous operation for the calling
 * thread's owner id and wait on its future - on a threaded client, asleep
 * while the loop thread works; on an embedded one, running its loop. An
 * error's message stays readable through relock_last_error_message. A
 * blocked acquisition can be interrupted from another thread. */
#include <config.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ev.h>

#include <relock/error.h>
#include <relock/lock.h>

#include "base/error.h"
#include "base/list.h"
#include "future/promise.h"
#include "objects/lock_impl.h"

/* The thread id, asked of the kernel once per thread (a blocking call asks
 * for it every time: the syscall was one in eight of a pair's). A fork's
 * child forgets it: its one thread has an id of its own, and the parent's,
 * once that thread exits, may be given to another thread of the child. */
static _Thread_local uint64_t thread_owner;
static pthread_once_t forget_at_fork = PTHREAD_ONCE_INIT;

static void forget_owner(void) { thread_owner = 0; }
static void register_forget(void) { pthread_atfork(NULL, NULL, forget_owner); }

uint64_t relock_thread_owner(void) {
  if (thread_owner == 0) {
    pthread_once(&forget_at_fork, register_forget);
    thread_owner = (uint64_t)syscall(SYS_gettid);
  }
  return thread_owner;
}

/* Refuses before starting anything: an operation started and then not
 * waited for would go on behind the caller's back. */
int relock__sync_would_block(relock_lock_t *lock) {
  if (lock == NULL)
    return relock__last_error_set(RELOCK_EINVAL, "lock is NULL");
  if (relock__future_would_block(lock->exec))
    return relock__last_error_set(RELOCK_EWOULDBLOCK,
                                  "a blocking call from inside a callback of the client's loop would never return");
  return 0;
}

/* Waits for f (not releasing it); the error is also the thread's last. */
static int wait_for(relock_future_t *f) {
  if (f == NULL)
    return relock__last_error_set(RELOCK_ENOMEM, "out of memory starting the operation");
  int r = relock_future_wait(f, RELOCK_INFINITE);
  if (r == RELOCK_EPENDING) /* cannot happen while the client is alive; never leave it running */
    relock_future_cancel(f);
  return relock__last_error_set(r, r == RELOCK_EPENDING ? "the client stopped before the operation completed"
                                                        : relock_future_message(f));
}

/* The value of a succeeded future (bool or int). */
static int64_t value_of(const relock_future_t *f) {
  return relock_future_value_type(f) == RELOCK_VALUE_BOOL ? relock_future_bool(f) : relock_future_int(f);
}

int relock__sync_wait_value(relock_future_t *f, int64_t *value) {
  int r = wait_for(f);
  if (r == 0 && value != NULL)
    *value = value_of(f);
  relock_future_release(f);
  return r;
}

int relock__sync_wait_flag(relock_future_t *f, int *flag) {
  int64_t v = 0;
  int r = relock__sync_wait_value(f, &v);
  if (r == 0 && flag != NULL)
    *flag = v != 0;
  return r;
}

int relock__sync_wait_string(relock_future_t *f, char *buf, size_t size) {
  int r = wait_for(f);
  if (size > 0)
    snprintf(buf, size, "%s", r == 0 && relock_future_string(f, NULL) != NULL ? relock_future_string(f, NULL) : "");
  relock_future_release(f);
  return r;
}

/* -- interruptible acquisition ------------------------------------------------*/

/* An acquisition a thread is blocked in, findable by relock_lock_interrupt
 * (in the client's list, under its mutex). */
typedef struct blocked {
  relock__link_t link;
  relock_lock_t *lock;
  uint64_t owner;
  relock_future_t *future;
  int interrupted;
} blocked_t;

int relock__sync_acquire(relock_lock_t *lock, int64_t wait_ms, int64_t lease_ms, int64_t *value) {
  blocked_t b = {.lock = lock, .owner = relock_thread_owner()};
  b.future = relock_lock_lock_async(lock, b.owner, wait_ms, lease_ms);
  if (b.future == NULL)
    return wait_for(NULL);
  relock__exec_t *x = lock->exec;
  int listed = relock__exec_enter(x, NULL) == 0; /* else the acquisition was refused already */
  if (listed) {
    /* Only while pending: a completed one cannot be interrupted, and one
     * completed by the client's close may mean the client is gone. */
    listed = relock_future_state(b.future) == RELOCK_FUTURE_PENDING;
    if (listed)
      relock__list_push_back(&lock->client->blocked, &b.link);
    relock__exec_leave(x);
  }
  int r = wait_for(b.future);
  if (listed && relock__exec_enter(x, NULL) == 0) {
    relock__list_remove(&b.link);
    relock__exec_leave(x);
  }
  if (r == RELOCK_ECANCELED && b.interrupted)
    r = relock__last_error_set(RELOCK_EINTERRUPTED, "interrupted by relock_lock_interrupt: the lock was not taken");
  if (r == 0 && value != NULL)
    *value = value_of(b.future);
  relock_future_release(b.future);
  return r;
}

int relock_lock_interrupt(relock_lock_t *lock, uint64_t owner) {
  if (lock == NULL)
    return RELOCK_EINVAL;
  int r = relock__client_enter_code(lock->client);
  if (r != 0)
    return r;
  int n = 0;
  relock__link_t *head = &lock->client->blocked;
  for (relock__link_t *l = head->next; l != head; l = l->next) {
    blocked_t *b = relock__container_of(l, blocked_t, link);
    if (b->owner != owner || b->lock->kind != lock->kind || b->lock->len != lock->len ||
        memcmp(b->lock->name, lock->name, lock->len) != 0)
      continue;
    /* Marked first: the cancellation wakes the blocked thread at once. A
     * future that has completed already keeps its outcome - unless an
     * earlier interrupt cancelled it (the thread has not woken yet): it
     * stays interrupted. */
    int was = b->interrupted;
    b->interrupted = 1;
    if (relock_future_cancel(b->future))
      n++;
    else
      b->interrupted = was;
  }
  relock__exec_leave(lock->exec);
  return n;
}

/* -- the blocking calls -------------------------------------------------------*/

int relock__sync_acquire_args(relock_lock_t *lock, int64_t wait_ms, int64_t lease_ms) {
  int r = relock__sync_would_block(lock);
  if (r != 0)
    return r;
  if (wait_ms < RELOCK_INFINITE)
    return relock__last_error_set(RELOCK_EINVAL, "wait_ms must be >= 0, or RELOCK_INFINITE");
  char msg[256];
  if (!relock__lease_valid(lease_ms)) {
    snprintf(msg, sizeof msg, RELOCK__LEASE_RANGE_FMT, RELOCK__LEASE_RANGE_ARGS(lease_ms));
    return relock__last_error_set(RELOCK_EINVAL, msg);
  }
  return 0;
}

int relock_lock_lock(relock_lock_t *lock, int64_t lease_ms) {
  int r = relock__sync_acquire_args(lock, RELOCK_INFINITE, lease_ms);
  return r != 0 ? r : relock__sync_acquire(lock, RELOCK_INFINITE, lease_ms, NULL);
}

int relock_lock_try_lock(relock_lock_t *lock, int64_t wait_ms, int64_t lease_ms, int *acquired) {
  int64_t value = 0;
  int r = relock__sync_acquire_args(lock, wait_ms, lease_ms);
  if (r == 0)
    r = relock__sync_acquire(lock, wait_ms, lease_ms, &value);
  if (r == 0 && acquired != NULL)
    *acquired = value != 0;
  return r;
}

int relock_lock_unlock(relock_lock_t *lock) {
  int r = relock__sync_would_block(lock);
  return r != 0 ? r : relock__sync_wait_flag(relock_lock_unlock_async(lock, relock_thread_owner()), NULL);
}

int relock_lock_force_unlock(relock_lock_t *lock, int *was_locked) {
  int r = relock__sync_would_block(lock);
  return r != 0 ? r : relock__sync_wait_flag(relock_lock_force_unlock_async(lock), was_locked);
}

int relock_lock_is_locked(relock_lock_t *lock, int *locked) {
  int r = relock__sync_would_block(lock);
  return r != 0 ? r : relock__sync_wait_flag(relock_lock_is_locked_async(lock), locked);
}

int relock_lock_is_held_by_thread(relock_lock_t *lock, int *held) {
  int r = relock__sync_would_block(lock);
  return r != 0 ? r : relock__sync_wait_flag(relock_lock_is_held_by_thread_async(lock, relock_thread_owner()), held);
}

int relock_lock_hold_count(relock_lock_t *lock, int64_t *count) {
  int r = relock__sync_would_block(lock);
  return r != 0 ? r : relock__sync_wait_value(relock_lock_hold_count_async(lock, relock_thread_owner()), count);
}

int relock_lock_validate(relock_lock_t *lock, int *held) {
  int r = relock__sync_would_block(lock);
  return r != 0 ? r : relock__sync_wait_flag(relock_lock_validate_async(lock, relock_thread_owner()), held);
}

int relock_lock_remaining_ttl(relock_lock_t *lock, int64_t *ttl_ms) {
  int r = relock__sync_would_block(lock);
  return r != 0 ? r : relock__sync_wait_value(relock_lock_remaining_ttl_async(lock), ttl_ms);
}

