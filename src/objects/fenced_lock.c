/* The fenced lock (Redisson's RFencedLock): the reentrant lock's hash, and
 * a token counter "redisson_lock_token:{name}" taken on every acquisition,
 * which the acquisition's future answers (lua/fenced_lock_acquire.lua).
 * Release, force release and renewal are the reentrant lock's. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

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

static const relock__lock_kind_t fenced = {
    .what = "fenced lock",
    .field_suffix = "",
    .channel_prefix = "redisson_lock__channel",
    .role = RELOCK__ROLE_PLAIN,
    .wait = RELOCK__WAIT_CHANNEL,
    .fenced = 1,
    .acquire = fenced_acquire,
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
    relock__future_fail(f, relock__reply_error_code(reply->str, reply->len), "%.*s", (int)reply->len, reply->str);
  else
    relock__future_fail(f, RELOCK_EPROTO, "unexpected reply type %d to GET", (int)reply->type);
}

relock_future_t *relock_fenced_lock_token_async(relock_lock_t *lock) {
  if (lock == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "lock is NULL");
  if (!lock->kind->fenced)
    return relock__future_failed(lock->client->exec, RELOCK_EINVAL, "%s %s is not a fenced lock: it has no token",
                                 lock->kind->what, lock->name);
  relock_future_t *f;
  if (relock__future_enter(lock->client->exec, &f) != 0)
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
