/* The count behind a semaphore or a count-down latch (counter.h). */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include <relock/error.h>

#include "future/promise.h"
#include "objects/counter.h"
#include "objects/keys.h"
#include "objects/lock_ops.h"
#include "objects/replies.h"
#include "redis/call.h"

static relock_future_t *update(relock_lock_t *obj, int script, const char *what, int64_t n, int boolean) {
  relock_client_t *c = obj->client;
  char id[RELOCK__REQUEST_ID_SIZE], field[RELOCK__FIELD_MAX], number[24], ttl[24];
  relock__request_id(&c->rng, id);
  size_t latch_len;
  char *latch = relock__unlock_latch_name(obj->name, obj->len, id, &latch_len);
  if (latch == NULL)
    return NULL;
  relock__lock_call_t call;
  relock__lock_call_init(&call, obj, 0, field);
  call.spec.on_reply = boolean ? relock__reply_to_bool : relock__reply_to_int; /* retry_safe: the latch */
  const char *argv[] = {obj->name, obj->channel, latch, what, number, ttl, call.publish};
  const size_t lens[] = {obj->len,
                         obj->channel_len,
                         latch_len,
                         strlen(what),
                         relock__lock_number(number, n),
                         relock__lock_number(ttl, call.latch_ttl_ms),
                         strlen(call.publish)};
  relock_future_t *f = relock__lock_send(&call, script, 3, 7, argv, lens);
  free(latch);
  return f;
}

relock_future_t *relock__counter_update(relock_lock_t *obj, int script, const char *what, int64_t n, int boolean) {
  relock_future_t *f;
  if (relock__future_enter(obj->client->exec, &f) != 0)
    return f;
  f = update(obj, script, what, n, boolean);
  relock__exec_leave(obj->client->exec);
  return f;
}

relock_future_t *relock__counter_get(relock_lock_t *obj) {
  const char *argv[] = {"GET", obj->name};
  const size_t lens[] = {3, obj->len};
  return relock__object_query(obj->client, 2, argv, lens, relock__reply_to_count);
}

relock_future_t *relock__counter_null(const char *what) {
  return relock__future_failed(NULL, RELOCK_EINVAL, "%s is NULL", what);
}
