/* Commands and scripts with retries (call.h). */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include <relock/error.h>

#include "redis/call.h"
#include "base/clock.h"
#include "future/promise.h"
#include "base/random.h"
#include "redis/router.h"

typedef struct call {
  relock__redis_t *redis;
  relock_future_t *out;     /* the caller's future; the call holds a reference */
  relock_future_t *attempt; /* the attempt in flight, if any */
  relock__conn_t *conn;
  relock__reply_fn on_reply;
  void *arg;
  const relock__script_t *script;
  int retry_safe;
  int flush_on_close;
  int attempts_left;
  uint64_t deadline_ns;
  relock__timer_t backoff;
  size_t len;
  char cmd[]; /* the request's bytes, for every attempt */
} call_t;

static void start_attempt(call_t *call);

static void call_free(call_t *call) {
  relock__timer_stop(&call->backoff);
  relock_future_release(call->out);
  free(call);
}

/* Failures that a later attempt may not meet: the connection, and the
 * server saying "not now" (loading its data after a restart, a script
 * running too long, a failover, a master demoted to a replica) rather than
 * "no". */
static int not_now(const char *msg) {
  static const char *const prefixes[] = {"LOADING ", "BUSY ", "TRYAGAIN ", "MASTERDOWN ", "CLUSTERDOWN ",
                                         "READONLY "};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (strncmp(msg, prefixes[i], strlen(prefixes[i])) == 0)
      return 1;
  return 0;
}

static int transient(relock_future_t *attempt) {
  int err = relock_future_error(attempt);
  if (err == RELOCK_ECONNLOST || err == RELOCK_ECONNREFUSED || err == RELOCK_ETIMEDOUT)
    return 1;
  return err == RELOCK_ESERVER && not_now(relock_future_message(attempt));
}

/* The server's "not now" (it did not run the command): the attempt fails
 * with it, so that on_attempt_done retries it while it may. */
static int not_now_reply(const relock_reply_t *reply) {
  return reply->type == RELOCK_REPLY_ERROR && not_now(reply->str);
}

/* The reply of an attempt completes the caller's future directly, unless
 * it is a "not now" to retry. */
static void on_attempt_reply(relock_future_t *attempt, const relock_reply_t *reply, void *arg) {
  call_t *call = arg;
  if (call->retry_safe && not_now_reply(reply)) {
    relock__future_fail(attempt, RELOCK_ESERVER, "%.*s", (int)reply->len, reply->str);
    return;
  }
  call->on_reply(call->out, reply, call->arg);
  relock__future_succeed(attempt); /* tells on_attempt_done it is over */
}

static void on_attempt_done(relock_future_t *attempt, void *arg) {
  call_t *call = arg;
  call->attempt = NULL;
  int err = relock_future_error(attempt);
  if (relock_future_is_done(call->out)) { /* answered, or cancelled */
    call_free(call);
  } else if (transient(attempt) && call->retry_safe && call->attempts_left > 0 && !call->redis->closing &&
             !relock__conn_fails_fast(call->conn) && /* a refusal known at once is news, not a glitch */
             (call->deadline_ns == 0 || relock__now_ns() < call->deadline_ns)) {
    /* A connection lost under the attempt: the next one waits for the
     * reconnect (or the new master) in the connection's queue, within its
     * timeout, and goes the moment it is back - a back-off would only add
     * its own delay to a failover. Anything else backs off. */
    int64_t delay = err == RELOCK_ECONNLOST
                        ? 0
                        : relock__jitter_ms(call->redis->rng, call->redis->settings->opt.retry_interval_ms);
    relock__timer_start(call->redis->wheel, &call->backoff, delay);
  } else {
    relock__future_fail(call->out, err, "%s", relock_future_message(attempt));
    call_free(call);
  }
  relock_future_release(attempt);
}

static void on_backoff(relock__timer_t *t, int status, void *arg) {
  (void)t;
  call_t *call = arg;
  if (status != 0) {
    relock__future_fail(call->out, RELOCK_ECLOSED, "client closed");
    call_free(call);
    return;
  }
  start_attempt(call);
}

static void on_call_cancel(relock_future_t *out, void *arg) {
  (void)out;
  call_t *call = arg;
  if (call->attempt != NULL) {
    relock_future_cancel(call->attempt); /* its callback frees the call */
  } else {
    call_free(call); /* between attempts */
  }
}

static void start_attempt(call_t *call) {
  call->attempts_left--;
  relock_future_t *attempt = relock__future_new(call->redis->exec);
  relock__request_t *req = attempt != NULL ? relock__request_new(relock_future_retain(attempt), call->len) : NULL;
  if (req == NULL) {
    if (attempt != NULL) {
      relock_future_release(attempt);
      relock_future_release(attempt);
    }
    relock__future_fail(call->out, RELOCK_ENOMEM, "out of memory sending a command");
    call_free(call);
    return;
  }
  memcpy(req->cmd, call->cmd, call->len);
  req->script = call->script;
  req->flush_on_close = (unsigned char)call->flush_on_close;
  req->on_reply = on_attempt_reply;
  req->arg = call;
  call->attempt = attempt;
  relock_future_on_done(attempt, on_attempt_done, call); /* the inline slot: cannot fail */
  relock__conn_send(call->conn, req, call->redis->settings->opt.command_timeout_ms);
}

relock_future_t *relock__call(relock__redis_t *redis, const relock__call_spec_t *spec) {
  /* Format once, through a throw-away request, and keep the bytes. */
  relock_future_t *out = relock__future_new(redis->exec);
  if (out == NULL)
    return NULL;
  relock__request_t *tmp =
      spec->script != NULL
          ? relock__request_script(NULL, spec->script, spec->nkeys, spec->argc, spec->argv, spec->lens)
          : relock__request_argv(NULL, spec->argc, spec->argv, spec->lens);
  call_t *call = tmp != NULL ? malloc(sizeof(*call) + tmp->len + 1) : NULL;
  if (call == NULL) {
    if (tmp != NULL)
      relock__request_discard(tmp);
    relock_future_release(out);
    return NULL;
  }
  memset(call, 0, sizeof(*call));
  call->len = tmp->len;
  memcpy(call->cmd, tmp->cmd, tmp->len + 1);
  relock__request_discard(tmp);

  call->redis = redis;
  call->out = relock_future_retain(out);
  int key = spec->script != NULL ? 0 : 1;
  call->conn = spec->argc > key ? relock__route(redis, spec->argv[key], spec->lens[key])
                                : relock__route(redis, NULL, 0);
  call->on_reply = spec->on_reply != NULL ? spec->on_reply : relock__reply_to_future;
  call->arg = spec->arg;
  call->script = spec->script;
  call->retry_safe = spec->retry_safe;
  call->flush_on_close = spec->flush_on_close;
  call->deadline_ns = spec->deadline_ns;
  call->attempts_left = 1 + redis->settings->opt.retry_attempts;
  relock__timer_init(&call->backoff, on_backoff, call);
  relock__future_set_cancel(out, on_call_cancel, call);
  start_attempt(call);
  return out;
}
