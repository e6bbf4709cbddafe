/* A group of locks held as one (include/relock/multi_lock.h): the object,
 * the holds of its acquisitions, release, loss and validity, the blocking
 * release. Acquisition, and the blocking calls that acquire, are
 * multi_lock_acquire.c's: it uses this file, never the other way round.
 *
 * The group sets itself as each lock's lost callback: a member found lost
 * is marked so in every hold of that owner, and a hold left with fewer than
 * quorum members is reported lost, once, and let go at once: every member
 * it has is released (a lost one too, so that the member's own bookkeeping
 * of the loss ends), nothing renews what is left, and the owner's release
 * of the group answers "lost". */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "base/error.h"
#include "future/promise.h"
#include "objects/multi_lock_impl.h"

relock_multi_lock_t *relock__multi_ref(relock_multi_lock_t *m) {
  m->refs++;
  return m;
}

void relock__multi_unref(relock_multi_lock_t *m) {
  if (--m->refs > 0)
    return;
  while (!relock__list_empty(&m->holds)) {
    relock__multi_hold_t *hold = relock__container_of(m->holds.next, relock__multi_hold_t, link);
    relock__list_remove(&hold->link);
    relock__multi_hold_free(hold);
  }
  for (size_t i = 0; i < m->n; i++)
    relock_lock_free(m->locks[i]);
  relock__exec_unref(m->exec);
  free(m->results);
  free(m->order);
  free(m);
}

relock__multi_hold_t *relock__multi_hold_new(const relock_multi_lock_t *m, uint64_t owner) {
  relock__multi_hold_t *hold = calloc(1, sizeof(*hold) + m->n);
  if (hold == NULL)
    return NULL;
  relock__list_init(&hold->link);
  hold->owner = owner;
  return hold;
}

/* The round that filled hold stops filling it: the answers still out
 * are given back as they come (multi_lock_acquire.c). */
static void stop_filling(relock__multi_hold_t *hold) {
  if (hold->filler != NULL) {
    *hold->filler = NULL;
    hold->filler = NULL;
  }
}

void relock__multi_hold_free(relock__multi_hold_t *hold) {
  stop_filling(hold);
  free(hold);
}

void relock__multi_give_back(relock_multi_lock_t *m, relock__multi_hold_t *hold, size_t i) {
  if (hold->member[i] == RELOCK__MEMBER_HELD)
    hold->held--;
  hold->member[i] = RELOCK__MEMBER_NONE;
  relock_future_release(relock_lock_unlock_async(m->locks[i], hold->owner));
}

static int by_value_desc(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x < y) - (x > y);
}

int64_t relock__multi_validity(relock_multi_lock_t *m, const relock__multi_hold_t *hold) {
  if (hold->held < m->quorum)
    return 0;
  int64_t *valid = malloc(m->n * sizeof(*valid));
  if (valid == NULL)
    return RELOCK_ENOMEM;
  size_t k = 0;
  for (size_t i = 0; i < m->n; i++)
    if (hold->member[i] == RELOCK__MEMBER_HELD)
      valid[k++] = relock_lock_validity_ms(m->locks[i], hold->owner);
  qsort(valid, k, sizeof(*valid), by_value_desc);
  int64_t ms = valid[m->quorum - 1] > 0 ? valid[m->quorum - 1] : 0;
  free(valid);
  return ms;
}

/* -- loss -------------------------------------------------------------------*/

static void on_let_go(relock_future_t *f, void *arg) {
  (void)arg;
  relock_future_release(f); /* a failed release is retried by the member's ledger, within its lease */
}

/* A hold found lost holds nothing: the owner, told so, may never release
 * the group. Every member it still has is released now (the lost ones
 * too: that ends the member's own memory of the loss), so that nothing
 * renews the survivors; the hold stays listed, empty, so that the owner's
 * release of the group answers "lost". Late answers of the round that
 * filled it are given back by the round. */
static void let_go(relock_multi_lock_t *m, relock__multi_hold_t *hold) {
  hold->let_go = hold->held;
  stop_filling(hold);
  for (size_t j = 0; j < m->n; j++) {
    if (hold->member[j] == RELOCK__MEMBER_NONE)
      continue;
    hold->member[j] = RELOCK__MEMBER_NONE;
    relock_future_t *f = relock_lock_unlock_async(m->locks[j], hold->owner);
    if (f != NULL && relock_future_on_done(f, on_let_go, NULL) != 0)
      relock_future_release(f);
  }
  hold->held = 0;
}

static void member_lost(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg) {
  relock_multi_lock_t *m = arg;
  size_t i = 0;
  while (i < m->n && m->locks[i] != lock)
    i++;
  if (i == m->n)
    return;
  relock__multi_ref(m); /* the callback may free the group */
  for (relock__link_t *l = m->holds.next; l != &m->holds;) {
    relock__multi_hold_t *hold = relock__container_of(l, relock__multi_hold_t, link);
    l = l->next;
    if (hold->owner != owner || hold->member[i] != RELOCK__MEMBER_HELD)
      continue;
    hold->member[i] = RELOCK__MEMBER_LOST;
    hold->held--;
    if (hold->lost || hold->held >= m->quorum)
      continue;
    hold->lost = 1;
    let_go(m, hold);
    if (m->lost_cb != NULL) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s of %zu locks lost: %zu held, %zu needed; lock %zu (%s): %s", m->what, m->n,
               hold->let_go, m->quorum, i, lock->name, message);
      m->lost_cb(m, owner, reason, msg, m->lost_arg);
    }
  }
  relock__multi_unref(m);
}

/* The first member whose client is closed (the members share m's loop:
 * their clients are read under m's exec), or -1. */
static ssize_t closed_member(const relock_multi_lock_t *m) {
  for (size_t i = 0; i < m->n; i++)
    if (m->locks[i]->client->closing)
      return (ssize_t)i;
  return -1;
}

int relock__multi_enter(relock_multi_lock_t *m, relock_future_t **refused) {
  if (relock__future_enter(m->exec, refused) != 0)
    return -1;
  ssize_t i = closed_member(m);
  if (i < 0)
    return 0;
  *refused = relock__future_failed(m->exec, RELOCK_ECLOSED, "%s of %zu locks: lock %zd (%s): " RELOCK__CLOSED_MSG,
                                   m->what, m->n, i, m->locks[i]->name);
  relock__exec_leave(m->exec);
  return -1;
}

int relock__multi_enter_code(relock_multi_lock_t *m) {
  relock_future_t *refused;
  if (relock__multi_enter(m, &refused) == 0)
    return 0;
  int r = refused != NULL ? relock_future_error(refused) : RELOCK_ENOMEM;
  relock__last_error_set(r, refused != NULL ? relock_future_message(refused) : "out of memory");
  relock_future_release(refused);
  return r;
}

int relock_multi_lock_on_lost(relock_multi_lock_t *m, relock_multi_lost_cb cb, void *arg) {
  if (m == NULL)
    return RELOCK_EINVAL;
  int r = relock__multi_enter_code(m);
  if (r != 0)
    return r;
  m->lost_cb = cb;
  m->lost_arg = arg;
  relock__exec_leave(m->exec);
  return 0;
}

/* -- the object -------------------------------------------------------------*/

/* The order in which a multi-lock waits for its locks: by name, then by
 * index (n is small: an insertion sort). */
static void sort_order(relock_multi_lock_t *m) {
  for (size_t i = 0; i < m->n; i++) {
    size_t j = i;
    for (; j > 0 && strcmp(m->locks[m->order[j - 1]]->name, m->locks[i]->name) > 0; j--)
      m->order[j] = m->order[j - 1];
    m->order[j] = i;
  }
}

static int check_locks(relock_lock_t *const *locks, size_t n, relock_error_t *err) {
  if (locks == NULL || n == 0)
    return relock__error_set(err, RELOCK_EINVAL, "locks: an array of at least one lock is needed");
  for (size_t i = 0; i < n; i++) {
    relock_lock_t *lock = locks[i];
    if (lock == NULL)
      return relock__error_set(err, RELOCK_EINVAL, "lock %zu is NULL", i);
    if (lock->kind->no_hold)
      return relock__error_set(err, RELOCK_EINVAL, "lock %zu (%s) is a %s: its acquisitions hold nothing to group",
                               i, lock->name, lock->kind->what);
    if (relock__lock_lost_cb(lock) == member_lost)
      return relock__error_set(err, RELOCK_EINVAL, "lock %zu (%s) is in another group already", i, lock->name);
    if (lock->exec->loop != locks[0]->exec->loop)
      return relock__error_set(err, RELOCK_EINVAL,
                               "lock %zu (%s) runs on another loop than lock 0: a group's locks must share one (one "
                               "client, embedded clients made on the same loop, or threaded clients made with "
                               "relock_client_new_beside)",
                               i, lock->name);
    for (size_t j = 0; j < i; j++)
      if (locks[j] == lock)
        return relock__error_set(err, RELOCK_EINVAL, "lock %zu is lock %zu again", i, j);
  }
  return 0;
}

/* Makes each member's extra part, where its lost callback goes; -1 when
 * out of memory (the parts made stay with their locks, unused). */
static int members_extra(relock_lock_t *const *locks, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (relock__lock_extra(locks[i]) == NULL)
      return -1;
  return 0;
}

static relock_multi_lock_t *group_new(relock_lock_t *const *locks, size_t n, int redlock, relock_error_t *err) {
  if (locks == NULL || n == 0 || locks[0] == NULL) /* the rest is read on the loop's terms */
    return check_locks(locks, n, err), NULL;
  relock__exec_t *x = locks[0]->exec;
  if (relock__exec_enter(x, err) != 0)
    return NULL;
  relock_multi_lock_t *m = NULL;
  if (check_locks(locks, n, err) != 0)
    goto out;
  for (size_t i = 0; i < n; i++)
    if (locks[i]->client->closing) {
      relock__error_set(err, RELOCK_ECLOSED, "lock %zu (%s): " RELOCK__CLOSED_MSG, i, locks[i]->name);
      goto out;
    }
  m = members_extra(locks, n) == 0 ? calloc(1, sizeof(*m) + n * sizeof(m->locks[0])) : NULL;
  if (m == NULL || (m->results = calloc(n, sizeof(*m->results))) == NULL ||
      (m->order = malloc(n * sizeof(*m->order))) == NULL) {
    if (m != NULL)
      free(m->results);
    free(m);
    m = NULL;
    relock__error_set(err, RELOCK_ENOMEM, "out of memory creating a group of %zu locks", n);
    goto out;
  }
  m->exec = relock__exec_ref(x);
  m->client = locks[0]->client;
  m->what = redlock ? "RedLock" : "multi-lock";
  m->n = n;
  m->quorum = redlock ? n / 2 + 1 : n;
  m->refs = 1;
  relock__list_init(&m->holds);
  memcpy(m->locks, locks, n * sizeof(m->locks[0]));
  sort_order(m);
  for (size_t i = 0; i < n; i++)
    relock__lock_set_lost(m->locks[i], member_lost, m); /* the extra part is there: cannot fail */
out:
  relock__exec_leave(x);
  return m;
}

relock_multi_lock_t *relock_multi_lock_new(relock_lock_t *const *locks, size_t n, relock_error_t *err) {
  return group_new(locks, n, 0, err);
}

relock_multi_lock_t *relock_redlock_new(relock_lock_t *const *locks, size_t n, relock_error_t *err) {
  return group_new(locks, n, 1, err);
}

void relock_multi_lock_free(relock_multi_lock_t *m) {
  if (m == NULL)
    return;
  relock__exec_t *x = relock__exec_ref(m->exec);
  if (relock__exec_enter(x, NULL) == 0) {
    m->lost_cb = NULL;
    relock__multi_unref(m);
    relock__exec_leave(x);
  }
  relock__exec_unref(x);
}

size_t relock_multi_lock_size(const relock_multi_lock_t *m) { return m != NULL ? m->n : 0; }
size_t relock_multi_lock_quorum(const relock_multi_lock_t *m) { return m != NULL ? m->quorum : 0; }

int relock_multi_lock_results(relock_multi_lock_t *m, int *results, size_t size) {
  if (m == NULL || (results == NULL && size > 0))
    return RELOCK_EINVAL;
  int r = relock__multi_enter_code(m);
  if (r != 0)
    return r;
  for (size_t i = 0; i < size && i < m->n; i++)
    results[i] = m->results[i];
  relock__exec_leave(m->exec);
  return (int)m->n;
}

/* owner's latest acquisition, NULL if none. */
static relock__multi_hold_t *latest_hold(relock_multi_lock_t *m, uint64_t owner) {
  for (relock__link_t *l = m->holds.prev; l != &m->holds; l = l->prev) {
    relock__multi_hold_t *hold = relock__container_of(l, relock__multi_hold_t, link);
    if (hold->owner == owner)
      return hold;
  }
  return NULL;
}

int64_t relock_multi_lock_validity_ms(relock_multi_lock_t *m, uint64_t owner) {
  if (m == NULL)
    return RELOCK_EINVAL;
  int r = relock__multi_enter_code(m);
  if (r != 0)
    return r;
  relock__multi_hold_t *hold = latest_hold(m, owner);
  int64_t ms = hold == NULL ? RELOCK_ENOTOWNER : hold->lost ? RELOCK_ELOST : relock__multi_validity(m, hold);
  relock__exec_leave(m->exec);
  return ms;
}

/* -- release ----------------------------------------------------------------*/

typedef struct release {
  relock_multi_lock_t *m;
  relock_future_t *out;
  relock__multi_hold_t *hold;
  size_t pending;
  size_t released;
  int err;                        /* the first member's error (not its loss) */
  char msg[256];
} release_t;

static void release_end(release_t *op) {
  relock_multi_lock_t *m = op->m;
  if (op->hold->lost)
    relock__future_fail(op->out, RELOCK_ELOST,
                        "%s of %zu locks was lost before this release (its %zu members left were let go when the "
                        "loss was found)",
                        m->what, m->n, op->hold->let_go);
  else if (op->released < m->quorum && op->err != 0)
    relock__future_fail(op->out, op->err, "%s of %zu locks: %zu members released, %zu needed: %s", m->what, m->n,
                        op->released, m->quorum, op->msg);
  else
    relock__future_succeed_int(op->out, (int64_t)op->released);
  relock_future_release(op->out);
  relock__multi_hold_free(op->hold);
  relock__multi_unref(m);
  free(op);
}

static void on_member_released(relock_future_t *f, void *arg) {
  release_t *op = arg;
  int err = relock_future_error(f);
  if (err == 0)
    op->released++;
  else if (err != RELOCK_ELOST && op->err == 0) {
    op->err = err;
    snprintf(op->msg, sizeof op->msg, "%s", relock_future_message(f));
  }
  relock_future_release(f);
  if (--op->pending == 0)
    release_end(op);
}

relock_future_t *relock_multi_lock_unlock_async(relock_multi_lock_t *m, uint64_t owner) {
  if (m == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "the group is NULL");
  relock_future_t *out;
  if (relock__multi_enter(m, &out) != 0)
    return out;
  relock__multi_hold_t *hold = latest_hold(m, owner);
  release_t *op = hold != NULL ? calloc(1, sizeof(*op)) : NULL;
  out = relock__future_new(m->exec);
  if (out == NULL || (hold != NULL && op == NULL)) {
    relock_future_release(out);
    free(op);
    relock__exec_leave(m->exec);
    return NULL;
  }
  if (hold == NULL) {
    relock__future_fail(out, RELOCK_ENOTOWNER, "%s of %zu locks (lock 0: %s) is not held by owner %llu", m->what,
                        m->n, m->locks[0]->name, (unsigned long long)owner);
    relock__exec_leave(m->exec);
    return out;
  }
  relock__list_remove(&hold->link);
  stop_filling(hold);
  *op = (release_t){.m = relock__multi_ref(m), .out = relock_future_retain(out), .hold = hold, .pending = 1};
  for (size_t i = 0; i < m->n; i++) {
    if (hold->member[i] == RELOCK__MEMBER_NONE)
      continue;
    relock_future_t *f = relock_lock_unlock_async(m->locks[i], owner);
    op->pending++;
    if (f == NULL || relock_future_on_done(f, on_member_released, op) != 0) {
      if (f != NULL)
        relock_future_release(f);
      op->pending--;
      if (op->err == 0)
        op->err = RELOCK_ENOMEM, snprintf(op->msg, sizeof op->msg, "out of memory releasing lock %zu", i);
    }
  }
  if (--op->pending == 0) /* every member answered at once, or none was held */
    release_end(op);
  relock__exec_leave(m->exec);
  return out;
}

/* -- blocking ----------------------------------------------------------------*/

/* The locks' own check (sync.c): the group's exec is its first lock's. */
int relock__multi_would_block(relock_multi_lock_t *m) {
  return m == NULL ? relock__last_error_set(RELOCK_EINVAL, "the group is NULL") : relock__sync_would_block(m->locks[0]);
}

/* (relock_multi_lock_try_lock and relock_multi_lock_lock block on an
 * acquisition: they are multi_lock_acquire.c's.) */

int relock_multi_lock_unlock(relock_multi_lock_t *m) {
  int r = relock__multi_would_block(m);
  return r != 0 ? r : relock__sync_wait_value(relock_multi_lock_unlock_async(m, relock_thread_owner()), NULL);
}
