/* The count behind a semaphore or a count-down latch (counter.h). */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include <relock/error.h>

#include "future/promise.h"
#include "objects/counter.h"
#include "objects/keys.h"
#include "objects/lock_impl.h"
#include "objects/replies.h"
#include "redis/call.h"

static relock_future_t *update(relock_lock_t *obj, int script, const char *what, int64_t n, int boolean,
                               const char *key4, size_t key4_len, const char *arg5, size_t arg5_len) {
  relock_client_t *c = obj->client;
  char id[RELOCK__REQUEST_ID_SIZE], field[RELOCK__FIELD_MAX], number[24], ttl[24], buf[RELOCK__CHANNEL_BUF];
  relock__request_id(&c->rng, id);
  size_t latch_len, channel_len;
  char *latch = relock__unlock_latch_name(obj->name, obj->len, id, &latch_len);
  char *channel = latch != NULL ? relock__lock_channel(obj, buf, &channel_len) : NULL;
  if (channel == NULL) {
    free(latch);
    return NULL;
  }
  relock__lock_call_t call;
  relock__lock_call_init(&call, obj, 0, field);
  call.spec.on_reply = boolean ? relock__reply_to_bool : relock__reply_to_int; /* retry_safe: the latch */
  const char *argv[9];
  size_t lens[9];
  int argc = 0;
#define ARG(s, len) (argv[argc] = (s), lens[argc++] = (len))
  ARG(obj->name, obj->len);
  ARG(channel, channel_len);
  ARG(latch, latch_len);
  if (key4 != NULL)
    ARG(key4, key4_len);
  int nkeys = argc;
  ARG(what, strlen(what));
  ARG(number, relock__lock_number(number, n));
  ARG(ttl, relock__lock_number(ttl, call.latch_ttl_ms));
  ARG(call.publish, strlen(call.publish));
  if (arg5 != NULL)
    ARG(arg5, arg5_len);
#undef ARG
  relock_future_t *f = relock__lock_send(&call, script, nkeys, argc, argv, lens);
  relock__lock_channel_free(channel, buf);
  free(latch);
  return f;
}

relock_future_t *relock__counter_update_with(relock_lock_t *obj, int script, const char *what, int64_t n, int boolean,
                                            const char *key4, size_t key4_len, const char *arg5, size_t arg5_len) {
  relock_future_t *f;
  if (relock__future_enter(obj->client->exec, &f) != 0)
    return f;
  f = update(obj, script, what, n, boolean, key4, key4_len, arg5, arg5_len);
  relock__exec_leave(obj->client->exec);
  return f;
}

relock_future_t *relock__counter_update(relock_lock_t *obj, int script, const char *what, int64_t n, int boolean) {
  return relock__counter_update_with(obj, script, what, n, boolean, NULL, 0, NULL, 0);
}

relock_future_t *relock__counter_get(relock_lock_t *obj) {
  const char *argv[] = {"GET", obj->name};
  const size_t lens[] = {3, obj->len};
  return relock__object_query(obj->client, 2, argv, lens, relock__reply_to_count);
}

relock_future_t *relock__counter_null(const char *what) {
  return relock__future_failed(NULL, RELOCK_EINVAL, "%s is NULL", what);
}
