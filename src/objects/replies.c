/* Replies into values, and plain queries (replies.h). */
#include <config.h>

#include <stdlib.h>

#include <relock/error.h>

#include "client/client_impl.h"
#include "future/promise.h"
#include "objects/replies.h"
#include "redis/call.h"
#include "redis/reply.h"

static int server_error(relock_future_t *f, const relock_reply_t *reply) {
  if (reply->type != RELOCK_REPLY_ERROR)
    return 0;
  relock__reply_fail(f, reply->str, reply->len);
  return 1;
}

void relock__reply_to_int(relock_future_t *f, const relock_reply_t *reply, void *arg) {
  (void)arg;
  if (server_error(f, reply))
    return;
  if (reply->type == RELOCK_REPLY_INTEGER)
    relock__future_succeed_int(f, reply->integer);
  else if (reply->type == RELOCK_REPLY_NIL)
    relock__future_succeed_int(f, -1);
  else if (reply->type == RELOCK_REPLY_STRING)
    relock__future_succeed_int(f, strtoll(reply->str, NULL, 10));
  else
    relock__future_fail(f, RELOCK_EPROTO, "unexpected reply type %d", (int)reply->type);
}

void relock__reply_to_bool(relock_future_t *f, const relock_reply_t *reply, void *arg) {
  (void)arg;
  if (server_error(f, reply))
    return;
  if (reply->type == RELOCK_REPLY_INTEGER)
    relock__future_succeed_bool(f, reply->integer != 0);
  else
    relock__future_fail(f, RELOCK_EPROTO, "unexpected reply type %d", (int)reply->type);
}

void relock__reply_to_count(relock_future_t *f, const relock_reply_t *reply, void *arg) {
  (void)arg;
  if (server_error(f, reply))
    return;
  if (reply->type == RELOCK_REPLY_NIL)
    relock__future_succeed_int(f, 0);
  else if (reply->type == RELOCK_REPLY_STRING || reply->type == RELOCK_REPLY_INTEGER)
    relock__reply_to_int(f, reply, NULL);
  else
    relock__future_fail(f, RELOCK_EPROTO, "unexpected reply type %d", (int)reply->type);
}

relock_future_t *relock__object_query(relock_client_t *client, int argc, const char *const *argv, const size_t *lens,
                                      void (*on_reply)(relock_future_t *f, const relock_reply_t *reply, void *arg)) {
  relock__call_spec_t spec = {.argc = argc, .argv = argv, .lens = lens, .on_reply = on_reply, .retry_safe = 1};
  relock_future_t *f;
  if (relock__client_enter(client, &f) != 0)
    return f;
  f = relock__call(&client->redis, &spec);
  relock__exec_leave(client->exec);
  return f;
}
