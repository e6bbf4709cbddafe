/* The count behind a semaphore or a count-down latch (counter.h). */
#include <config.h>

#include <relock/error.h>

#include "future/promise.h"
#include "objects/counter.h"
#include "objects/keys.h"
#include "objects/lock_impl.h"
#include "objects/replies.h"
#include "objects/script_args.h"

static relock_future_t *update(relock_lock_t *obj, int script, const char *what, int64_t n, int boolean,
                               const char *key4, size_t key4_len, const char *arg5, size_t arg5_len, int on_close,
                               uint64_t answer_by_ns) {
  char id[RELOCK__REQUEST_ID_SIZE], field[RELOCK__FIELD_MAX];
  relock__request_id(&obj->client->rng, id);
  relock__lock_call_t call;
  relock__lock_call_init(&call, obj, 0, field);
  call.spec.on_reply = boolean ? relock__reply_to_bool : relock__reply_to_int; /* retry_safe: the latch */
  call.spec.flush_on_close = on_close || answer_by_ns != 0; /* release-on-close: the close waits for its answer */
  call.spec.until_answered = answer_by_ns != 0;             /* a release retried in the background (watchdog/hold.h) */
  call.spec.answer_by_ns = answer_by_ns;
  relock__args_t a;
  relock__args_init(&a);
  relock__args_lock(&a, obj);
  relock__args_channel(&a, obj);
  relock__args_take(&a, relock__unlock_latch_name(obj->name, obj->len, id, NULL));
  if (key4 != NULL)
    relock__args_key(&a, key4, key4_len);
  relock__args_cstr(&a, what);
  relock__args_number(&a, n);
  relock__args_number(&a, call.latch_ttl_ms);
  relock__args_cstr(&a, call.publish);
  if (arg5 != NULL)
    relock__args_str(&a, arg5, arg5_len);
  return relock__args_send(&call, script, &a);
}

relock_future_t *relock__counter_update_with(relock_lock_t *obj, int script, const char *what, int64_t n, int boolean,
                                            const char *key4, size_t key4_len, const char *arg5, size_t arg5_len,
                                            int on_close, uint64_t answer_by_ns) {
  relock_future_t *f;
  /* the close's own releases (release-on-close) are sent while it closes,
   * when every call of the user's is refused */
  int refused = on_close || answer_by_ns != 0 ? relock__future_enter(obj->client->exec, &f) : relock__client_enter(obj->client, &f);
  if (refused != 0)
    return f;
  f = update(obj, script, what, n, boolean, key4, key4_len, arg5, arg5_len, on_close, answer_by_ns);
  relock__exec_leave(obj->client->exec);
  return f;
}

relock_future_t *relock__counter_update(relock_lock_t *obj, int script, const char *what, int64_t n, int boolean) {
  return relock__counter_update_with(obj, script, what, n, boolean, NULL, 0, NULL, 0, 0, 0);
}

relock_future_t *relock__counter_get(relock_lock_t *obj) {
  const char *argv[] = {"GET", obj->name};
  const size_t lens[] = {3, obj->len};
  return relock__object_query(obj->client, 2, argv, lens, relock__reply_to_count);
}

relock_future_t *relock__counter_null(const char *what) {
  return relock__future_failed(NULL, RELOCK_EINVAL, "%s is NULL", what);
}
