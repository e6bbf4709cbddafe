/* The lock object, whatever its kind (lock_kind.h): its life, release,
 * force release, queries, and the watchdog's holder (it tells the lost
 * callback). Acquisition and waiting are in lock_acquire.c; the kinds'
 * scripts in reentrant_lock.c and its siblings; Redisson's names in
 * keys.c. */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <relock/error.h>

#include "base/error.h"
#include "future/promise.h"
#include "objects/keys.h"
#include "objects/lock_impl.h"
#include "objects/lock_turn.h"
#include "objects/replies.h"
#include "redis/call.h"
#include "redis/reply.h"
#include "redis/router.h"
#include "watchdog/hold.h"
#include "watchdog/renewal.h"

/* -- the watchdog's holder ---------------------------------------------------*/

static relock_lock_t *lock_of(const relock__holder_t *h) {
  return relock__container_of(h, relock_lock_t, holder);
}

static const char *holder_key(const relock__holder_t *h, size_t *len) {
  *len = lock_of(h)->len;
  return lock_of(h)->name;
}

static size_t holder_field(const relock__holder_t *h, uint64_t owner, char field[RELOCK__HOLD_FIELD_MAX]) {
  return relock__lock_field(lock_of(h), owner, field);
}

/* The loss watch (lock_watch.c, above this file), if the lock has one, is
 * told through the functions it set in it (lock_impl.h). */
static relock__lock_watch_t *watch_of(const relock_lock_t *lock) {
  return lock->extra != NULL ? lock->extra->watch : NULL;
}

static void watch_gone(relock_lock_t *lock, uint64_t owner) {
  relock__lock_watch_t *w = watch_of(lock);
  if (w != NULL)
    w->gone(w, owner);
}

static void watch_stop(relock_lock_t *lock) {
  relock__lock_watch_t *w = watch_of(lock);
  if (w != NULL)
    w->stop(w);
}

/* Whether some owner's hold taken through lock is watched. */
static int watching(const relock_lock_t *lock) {
  const relock__lock_watch_t *w = watch_of(lock);
  return w != NULL && w->nowners > 0;
}

static void holder_lost(relock__holder_t *h, uint64_t owner, int reason, const char *msg) {
  relock_lock_t *lock = lock_of(h);
  watch_gone(lock, owner);
  if (relock__lock_lost_cb(lock) != NULL)
    lock->extra->lost_cb(lock, owner, reason, msg, lock->extra->lost_arg);
}

static void holder_drop(relock__holder_t *h) { relock__lock_unref(lock_of(h)); }

static relock_future_t *holder_release(relock__holder_t *h, uint64_t owner, const relock__release_req_t *req) {
  return relock__lock_send_release(lock_of(h), owner, req);
}

static void holder_name(const relock__holder_t *h, uint64_t owner, char name[RELOCK__HOLD_FIELD_MAX]) {
  relock__lock_field(lock_of(h), owner, name);
}

static const char *holder_kind_what(const relock__holder_t *h) { return lock_of(h)->kind->what; }

static int holder_takes_latch(const relock__holder_t *h) { return lock_of(h)->kind->latch_passed_on; }

static const relock__holder_ops_t holder_ops = {
    .what = "lock",
    .kind_what = holder_kind_what,
    .key = holder_key,
    .field = holder_field,
    .name = holder_name,
    .on_lost = holder_lost,
    .drop = holder_drop,
    .release = holder_release,
    .takes_latch = holder_takes_latch,
};

/* -- the object -------------------------------------------------------------*/

relock_lock_t *relock__lock_new(relock_client_t *client, const char *name, const relock__lock_kind_t *kind,
                                relock_error_t *err) {
  if (client == NULL || name == NULL || name[0] == '\0') {
    relock__error_set(err, RELOCK_EINVAL, "%s", client == NULL ? "client is NULL"
                                                : name == NULL ? "name is NULL"
                                                               : "the lock name is empty");
    return NULL;
  }
  size_t len = strlen(name);
  if (len > RELOCK__LOCK_NAME_MAX) {
    relock__error_set(err, RELOCK_EINVAL, "the lock name is %zu bytes long: at most %u (Redis's limit for a key)", len,
                      RELOCK__LOCK_NAME_MAX);
    return NULL;
  }
  /* In a forked child the mutex may have been held at the fork by a thread
   * the child does not have: waiting for it would never end (issue 46). */
  if (relock__exec_forked(client->exec)) {
    relock__error_set(err, RELOCK_EFORKED, "this client was made before fork(): a child process must make its own");
    return NULL;
  }
  /* Under the client's lock (threaded): a close in another thread is seen
   * either before (refused) or after (the object answers RELOCK_ECLOSED). */
  relock__exec_lock(client->exec);
  int closed = client->closing;
  relock__exec_unlock(client->exec);
  if (closed) {
    relock__error_set(err, RELOCK_ECLOSED, "cannot make %s %s: " RELOCK__CLOSED_MSG, kind->what, name);
    return NULL;
  }
  relock_lock_t *lock = calloc(1, sizeof(*lock) + len + 1);
  if (lock == NULL) {
    relock__error_set(err, RELOCK_ENOMEM, "out of memory creating %s %s", kind->what, name);
    return NULL;
  }
  lock->holder.ops = &holder_ops;
  lock->kind = kind;
  lock->client = relock__client_ref(client); /* kept, closed or freed, until the lock goes */
  lock->exec = relock__exec_ref(client->exec);
  lock->refs = 1;
  lock->len = (uint32_t)len;
  memcpy(lock->name, name, len + 1);
  relock__error_set(err, 0, NULL);
  return lock;
}

char *relock__lock_channel(const relock_lock_t *lock, char buf[RELOCK__CHANNEL_BUF], size_t *len) {
  size_t n = relock__lock_channel_to(lock, buf, RELOCK__CHANNEL_BUF);
  *len = n;
  if (n < RELOCK__CHANNEL_BUF)
    return buf;
  char *s = malloc(n + 1); /* a long name: rare */
  if (s != NULL)
    relock__lock_channel_to(lock, s, n + 1);
  return s;
}

void relock__lock_call_init(relock__lock_call_t *call, relock_lock_t *lock, uint64_t owner,
                            char field[RELOCK__FIELD_MAX]) {
  relock_client_t *c = lock->client;
  *call = (relock__lock_call_t){.lock = lock,
                                .owner = owner,
                                .field = field,
                                .field_len = relock__lock_field(lock, owner, field),
                                .permits = 1,
                                .latch_ttl_ms = relock__latch_ttl_ms(&c->settings),
                                .publish = lock->kind->wait == RELOCK__WAIT_SPIN
                                               ? ""
                                               : relock__route_publish_command(&c->redis),
                                .spec = {.retry_safe = 1}};
}

relock_lock_t *relock__lock_ref(relock_lock_t *lock) {
  lock->refs++;
  return lock;
}

static void extra_free(relock__lock_extra_t *x) {
  if (x == NULL)
    return;
  if (x->watch != NULL)
    free(x->watch->owners);
  free(x->watch);
  free(x);
}

void relock__lock_unref(relock_lock_t *lock) {
  if (--lock->refs > 0)
    return;
  watch_stop(lock);
  relock__client_unref(lock->client);
  relock__exec_unref(lock->exec);
  extra_free(lock->extra);
  free(lock);
}

void relock_lock_free(relock_lock_t *lock) {
  if (lock == NULL)
    return;
  relock__exec_t *x = relock__exec_ref(lock->exec); /* the lock's may go with it */
  if (relock__exec_enter(x, NULL) == 0) {
    if (lock->extra != NULL) { /* nobody to tell any more */
      lock->extra->lost_cb = NULL;
      lock->extra->wait_cb = NULL;
    }
    watch_stop(lock);
    relock__lock_unref(lock);
    relock__exec_leave(x);
  } /* else the wrong thread or a forked child: left alone, nothing is safe */
  relock__exec_unref(x);
}

const char *relock_lock_name(const relock_lock_t *lock) { return lock != NULL ? lock->name : NULL; }

size_t relock_lock_field(const relock_lock_t *lock, uint64_t owner, char *buf, size_t size) {
  if (lock == NULL)
    return 0;
  char field[RELOCK__FIELD_MAX];
  size_t n = relock__lock_field(lock, owner, field);
  if (buf != NULL && size > 0)
    snprintf(buf, size, "%s", field);
  return n + 1;
}

relock__lock_extra_t *relock__lock_extra(relock_lock_t *lock) {
  if (lock->extra == NULL)
    lock->extra = calloc(1, sizeof(*lock->extra));
  return lock->extra;
}

int relock__lock_set_lost(relock_lock_t *lock, relock_lost_cb cb, void *arg) {
  relock__lock_extra_t *extra = cb != NULL ? relock__lock_extra(lock) : lock->extra;
  if (extra != NULL) {
    extra->lost_cb = cb;
    extra->lost_arg = arg;
  }
  return cb != NULL && extra == NULL ? RELOCK_ENOMEM : 0;
}

int relock_lock_on_lost(relock_lock_t *lock, relock_lost_cb cb, void *arg) {
  if (lock == NULL)
    return RELOCK_EINVAL;
  int r = relock__client_enter_code(lock->client);
  if (r != 0)
    return r;
  r = relock__lock_set_lost(lock, cb, arg);
  relock__exec_leave(lock->exec);
  return r;
}

int relock_lock_on_wait(relock_lock_t *lock, relock_wait_cb cb, void *arg) {
  if (lock == NULL)
    return RELOCK_EINVAL;
  int r = relock__client_enter_code(lock->client);
  if (r != 0)
    return r;
  relock__lock_extra_t *extra = cb != NULL ? relock__lock_extra(lock) : lock->extra;
  if (extra != NULL) {
    extra->wait_cb = cb;
    extra->wait_arg = arg;
  }
  relock__exec_leave(lock->exec);
  return cb != NULL && extra == NULL ? RELOCK_ENOMEM : 0;
}

static void pass_turn(void *turn) { relock__turn_pass(turn); }

int relock__lock_acquired(relock_lock_t *lock, uint64_t owner, relock__lease_kind_t lease, int64_t lease_ms,
                          uint64_t sent_ns, int64_t count, const uint64_t *release_id, relock__turn_wait_t *turn) {
  relock__hold_id_t id = relock__lock_hold(lock, owner);
  int64_t surplus;
  int rc = relock__hold_acquired(&lock->client->ledger, &id, &relock__lock_ref(lock)->holder, lease, lease_ms, sent_ns,
                                 count, release_id, &surplus);
  if (rc != 0)
    return rc;
  if (surplus > 0) /* given back before the owner's next request on the lock: it keeps the turn */
    relock__hold_give_back(&lock->client->ledger, &id, &relock__lock_ref(lock)->holder, surplus, pass_turn,
                           relock__turn_take(turn));
  else
    relock__turn_leave(turn); /* counted: the owner's next request may go */
  return 0;
}

/* -- release ----------------------------------------------------------------
 * The release protocol is the ledger's (watchdog/hold.h): here only the
 * owner's turn (lock_turn.h), which a release keeps until the ledger says
 * it is settled - answered, or given up in the background - and the
 * script call the ledger asks for. */

typedef struct release {
  relock_lock_t *lock;
  relock_future_t *out;
  uint64_t owner;
  relock__turn_wait_t turn; /* its owner's turn (lock_turn.h), until the release is settled */
} release_t;

/* Lets go of op; the owner's next request on the lock may go. */
static void release_free(release_t *op) {
  relock__turn_leave(&op->turn);
  relock_future_release(op->out);
  relock__lock_unref(op->lock);
  free(op);
}

static void on_release_settled(void *arg) {
  release_t *op = arg;
  relock__hold_id_t id = relock__lock_hold(op->lock, op->owner);
  if (watching(op->lock) && relock__hold_validity_ms(&op->lock->client->ledger, &id) == RELOCK_ENOTOWNER)
    watch_gone(op->lock, op->owner); /* no hold of owner's left here */
  release_free(op);
}

/* The ledger's answer is the caller's. */
static void on_release_done(relock_future_t *f, void *arg) {
  relock_future_t *out = arg;
  if (relock_future_error(f) != 0)
    relock__future_fail(out, relock_future_error(f), "%s", relock_future_message(f));
  else
    relock__future_succeed_bool(out, relock_future_bool(f));
  relock_future_release(out);
  relock_future_release(f);
}

/* Sends op's release (it is its owner's turn). */
static void send_release(release_t *op) {
  relock_lock_t *lock = op->lock;
  relock__hold_id_t id = relock__lock_hold(lock, op->owner);
  relock_future_t *out = relock_future_retain(op->out);
  relock_future_t *f =
      relock__hold_release(&lock->client->ledger, &id, &relock__lock_ref(lock)->holder, on_release_settled, op);
  if (f == NULL) {
    relock__future_fail(out, RELOCK_ENOMEM, "out of memory releasing %s %s", lock->kind->what, lock->name);
    relock_future_release(out);
    release_free(op);
    return;
  }
  relock_future_on_done(f, on_release_done, out);
}

static void on_release_turn(relock__turn_wait_t *w, int err) {
  release_t *op = relock__container_of(w, release_t, turn);
  if (err == 0) {
    send_release(op);
    return;
  }
  /* Never sent: the hold is as it was. */
  if (err == RELOCK_ECLOSED)
    relock__future_fail(op->out, err, "client closed");
  else
    relock__future_fail(op->out, err,
                        "%s %s: an earlier request of owner %llu on it (a give-back, an acquisition, or a release "
                        "retried in the background) is still unanswered",
                        op->lock->kind->what, op->lock->name, (unsigned long long)op->owner);
  release_free(op);
}

relock_future_t *relock__lock_send_release(relock_lock_t *lock, uint64_t owner, const relock__release_req_t *req) {
  char id[RELOCK__REQUEST_ID_SIZE], field[RELOCK__FIELD_MAX];
  relock__request_id_of(req->id, id); /* the ledger's: the same on a retry, the acquisition's latch if passed on */
  relock__lock_call_t call;
  relock__lock_call_init(&call, lock, owner, field);
  char *latch = relock__unlock_latch_name(lock->name, lock->len, id, &call.latch_len);
  if (latch == NULL)
    return NULL;
  call.latch = latch;
  call.lease_ms = req->lease_ms;
  call.spec.on_reply = relock__reply_to_int; /* retry_safe: the latch makes a repeat harmless */
  call.spec.flush_on_close = req->on_close || req->answer_by_ns != 0; /* the close waits for its answer */
  call.spec.until_answered = req->answer_by_ns != 0;
  call.spec.answer_by_ns = req->answer_by_ns;
  /* No WAIT, even with min-replicas-acked: a release that a failover loses
   * brings the lock back on the new master held by nobody who uses it, and
   * it only delays others until its lease ends (the watchdog renews it no
   * more); it never makes two holders. Only what grants or extends a hold
   * (acquire, renew) must be on the replicas before it is believed. */
  relock_future_t *f = lock->kind->release(&call);
  free(latch);
  return f;
}

static relock_future_t *release_async(relock_lock_t *lock, uint64_t owner) {
  relock_client_t *c = lock->client;
  release_t *op = calloc(1, sizeof(*op));
  relock_future_t *out = relock__future_new(c->exec);
  if (op == NULL || out == NULL) {
    free(op);
    relock_future_release(out);
    return NULL;
  }
  op->lock = relock__lock_ref(lock);
  op->out = relock_future_retain(out);
  op->owner = owner;
  op->turn.go = on_release_turn;
  /* Sent once no other request of the owner's that changes its count on
   * the lock is in flight (lock_turn.h). */
  int turn = relock__turn_ask(lock, owner, &op->turn);
  if (turn > 0) {
    send_release(op);
  } else if (turn < 0) {
    relock__future_fail(out, RELOCK_ENOMEM, "out of memory releasing %s %s", lock->kind->what, lock->name);
    release_free(op);
  }
  return out;
}

relock_future_t *relock_lock_unlock_async(relock_lock_t *lock, uint64_t owner) {
  if (lock == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "lock is NULL");
  relock_future_t *f;
  if (relock__client_enter(lock->client, &f) != 0)
    return f;
  f = release_async(lock, owner);
  relock__exec_leave(lock->client->exec);
  return f;
}

/* -- force release and queries ----------------------------------------------*/


relock_future_t *relock_lock_force_unlock_async(relock_lock_t *lock) {
  if (lock == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "lock is NULL");
  relock_future_t *f;
  if (relock__client_enter(lock->client, &f) != 0)
    return f;
  char field[RELOCK__FIELD_MAX];
  relock__lock_call_t call;
  relock__lock_call_init(&call, lock, 0, field);
  call.spec.on_reply = relock__reply_to_bool;
  /* Every kind's force release publishes, the spin lock's too (its other
   * scripts publish nothing): a watched holder hears it at once. */
  call.publish = relock__route_publish_command(&lock->client->redis);
  f = lock->kind->force_release(&call);
  relock__exec_leave(lock->client->exec);
  return f;
}

relock_future_t *relock_lock_is_locked_async(relock_lock_t *lock) {
  if (lock == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "lock is NULL");
  const char *argv[] = {"EXISTS", lock->name};
  const size_t lens[] = {6, lock->len};
  return relock__object_query(lock->client, 2, argv, lens, relock__reply_to_bool);
}

relock_future_t *relock_lock_is_held_by_thread_async(relock_lock_t *lock, uint64_t owner) {
  if (lock == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "lock is NULL");
  char field[RELOCK__FIELD_MAX];
  size_t n = relock__lock_field(lock, owner, field);
  const char *argv[] = {"HEXISTS", lock->name, field};
  const size_t lens[] = {7, lock->len, n};
  return relock__object_query(lock->client, 3, argv, lens, relock__reply_to_bool);
}

relock_future_t *relock_lock_hold_count_async(relock_lock_t *lock, uint64_t owner) {
  if (lock == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "lock is NULL");
  char field[RELOCK__FIELD_MAX];
  size_t n = relock__lock_field(lock, owner, field);
  const char *argv[] = {"HGET", lock->name, field};
  const size_t lens[] = {4, lock->len, n};
  return relock__object_query(lock->client, 3, argv, lens, relock__reply_to_count);
}

relock_future_t *relock_lock_remaining_ttl_async(relock_lock_t *lock) {
  if (lock == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "lock is NULL");
  const char *argv[] = {"PTTL", lock->name};
  const size_t lens[] = {4, lock->len};
  return relock__object_query(lock->client, 2, argv, lens, relock__reply_to_int);
}

/* -- is it still mine? ------------------------------------------------------*/

int64_t relock_lock_validity_ms(relock_lock_t *lock, uint64_t owner) {
  if (lock == NULL)
    return RELOCK_EINVAL;
  int r = relock__client_enter_code(lock->client);
  if (r != 0)
    return r;
  relock__hold_id_t id = relock__lock_hold(lock, owner);
  int64_t ms = relock__hold_validity_ms(&lock->client->ledger, &id);
  relock__exec_leave(lock->client->exec);
  return ms;
}

relock_future_t *relock_lock_validate_async(relock_lock_t *lock, uint64_t owner) {
  if (lock == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "lock is NULL");
  relock_future_t *f;
  if (relock__client_enter(lock->client, &f) != 0)
    return f;
  relock__hold_id_t id = relock__lock_hold(lock, owner);
  f = relock__renewal_validate(&lock->client->renewal, &id);
  relock__exec_leave(lock->client->exec);
  return f;
}
