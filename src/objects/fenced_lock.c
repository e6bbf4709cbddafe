/* The fenced lock (Redisson's RFencedLock): the reentrant lock's hash, and
 * a token counter "redisson_lock_token:{name}" taken on every acquisition,
 * which the acquisition's future answers (lua/fenced_lock_acquire.lua).
 * Release, force release and renewal are the reentrant lock's. */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "future/promise.h"
#include "objects/lock_impl.h"
#include "objects/script_args.h"
#include "redis/call.h"
#include "redis/reply.h"
#include "redis/scripts.h"

#define TOKEN_PREFIX "redisson_lock_token"

static relock_future_t *fenced_acquire(relock__lock_call_t *call) {
  relock__args_t a;
  relock__args_init(&a);
  relock__args_lock(&a, call->lock);
  relock__args_key(&a, call->latch, call->latch_len);
  relock__args_derived(&a, call->lock, TOKEN_PREFIX);
  relock__args_number(&a, call->lease_ms);
  relock__args_str(&a, call->field, call->field_len);
  relock__args_number(&a, call->latch_ttl_ms);
  return relock__args_send(call, RELOCK__SCRIPT_FENCED_LOCK_ACQUIRE, &a);
}

/* {count, token}, both positive, when acquired; else the locks' answers. */
static int read_answer(const relock_reply_t *reply, relock__answer_t *a) {
  if (reply->type != RELOCK_REPLY_ARRAY)
    return relock__read_lock_answer(reply, a);
  if (reply->elements != 2 || reply->element[0]->type != RELOCK_REPLY_INTEGER || reply->element[0]->integer <= 0 ||
      reply->element[1]->type != RELOCK_REPLY_INTEGER || reply->element[1]->integer <= 0)
    return -1;
  *a = (relock__answer_t){.acquired = 1, .count = reply->element[0]->integer, .token = reply->element[1]->integer};
  return 0;
}

/* The acquisition's future: the token, 0 when not acquired. */
static void settle(relock_future_t *out, const relock__answer_t *a, const char *id) {
  (void)id;
  relock__future_succeed_int(out, a != NULL ? a->token : 0);
}

static const relock__lock_kind_t fenced = {
    .what = "fenced lock",
    .stat = RELOCK_KIND_FENCED_LOCK,
    .field_suffix = "",
    .channel_prefix = "redisson_lock__channel",
    .role = RELOCK__ROLE_PLAIN,
    .wait = RELOCK__WAIT_CHANNEL,
    .acquire = fenced_acquire,
    .read_answer = read_answer,
    .settle = settle,
    .undo = relock__rlock_undo,
    .release = relock__rlock_release,
    .force_release = relock__rlock_force_release,
};

relock_lock_t *relock_fenced_lock_new(relock_client_t *client, const char *name, relock_error_t *err) {
  return relock__lock_new(client, name, &fenced, err);
}

/* GET's answer: the token, 0 for none yet. */
static void reply_to_token(relock_future_t *f, const relock_reply_t *reply, void *arg) {
  (void)arg;
  if (reply->type == RELOCK_REPLY_NIL)
    relock__future_succeed_int(f, 0);
  else if (reply->type == RELOCK_REPLY_STRING)
    relock__future_succeed_int(f, strtoll(reply->str, NULL, 10));
  else if (reply->type == RELOCK_REPLY_ERROR)
    relock__reply_fail(f, reply->str, reply->len);
  else
    relock__future_fail(f, RELOCK_EPROTO, "unexpected reply type %d to GET", (int)reply->type);
}

relock_future_t *relock_fenced_lock_token_async(relock_lock_t *lock) {
  if (lock == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "lock is NULL");
  if (lock->kind != &fenced)
    return relock__future_failed(lock->client->exec, RELOCK_EINVAL, "%s %s is not a fenced lock: it has no token",
                                 lock->kind->what, lock->name);
  relock_future_t *f;
  if (relock__client_enter(lock->client, &f) != 0)
    return f;
  size_t len;
  char *token = relock__derived_name(lock->name, lock->len, TOKEN_PREFIX, NULL, &len);
  f = NULL;
  if (token != NULL) {
    const char *argv[] = {"GET", token};
    const size_t lens[] = {3, len};
    relock__call_spec_t spec = {.argc = 2, .argv = argv, .lens = lens, .on_reply = reply_to_token, .retry_safe = 1};
    f = relock__call(&lock->client->redis, &spec);
    free(token);
  }
  relock__exec_leave(lock->client->exec);
  return f;
}

/* -- blocking ----------------------------------------------------------------*/

/* The checks of a blocking acquisition, then: a fenced lock, or RELOCK_EINVAL. */
static int fenced_args(relock_lock_t *lock, int64_t wait_ms, int64_t lease_ms) {
  int r = relock__sync_acquire_args(lock, wait_ms, lease_ms);
  if (r != 0 || lock->kind == &fenced)
    return r;
  char msg[256];
  snprintf(msg, sizeof msg, "%s %.128s is not a fenced lock: it has no token", lock->kind->what, lock->name);
  return relock__last_error_set(RELOCK_EINVAL, msg);
}

int relock_fenced_lock_lock(relock_lock_t *lock, int64_t lease_ms, int64_t *token) {
  int r = fenced_args(lock, RELOCK_INFINITE, lease_ms);
  return r != 0 ? r : relock__sync_acquire(lock, RELOCK_INFINITE, lease_ms, token);
}

int relock_fenced_lock_try_lock(relock_lock_t *lock, int64_t wait_ms, int64_t lease_ms, int64_t *token) {
  int r = fenced_args(lock, wait_ms, lease_ms);
  return r != 0 ? r : relock__sync_acquire(lock, wait_ms, lease_ms, token);
}

int relock_fenced_lock_token(relock_lock_t *lock, int64_t *token) {
  int r = relock__sync_would_block(lock);
  return r != 0 ? r : relock__sync_wait_value(relock_fenced_lock_token_async(lock), token);
}
