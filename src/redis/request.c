/* A connection's requests (request.h). */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <relock/error.h>

#include "base/clock.h"
#include "base/decimal.h"
#include "base/resp.h"
#include "future/promise.h"
#include "redis/reply.h"
#include "redis/request.h"
#include "redis/tls.h"
#include "stats/stats.h"

enum { REQ_WAITING = 0, REQ_SENT, REQ_DONE };

relock__request_t *relock__request_new(relock_future_t *future, size_t len) {
  /* hiredis peeks one byte past a command's end: keep a NUL there. */
  relock__request_t *req = malloc(sizeof(*req) + len + 1);
  if (req == NULL)
    return NULL;
  memset(req, 0, sizeof(*req));
  req->cmd[len] = '\0';
  relock__list_init(&req->link);
  req->future = future;
  req->len = len;
  return req;
}

relock__request_t *relock__request_argv(relock_future_t *future, int argc, const char *const *argv,
                                        const size_t *lens) {
  relock__request_t *req = relock__request_new(future, relock__resp_size(argc, lens));
  if (req != NULL)
    relock__resp_write(req->cmd, argc, argv, lens);
  return req;
}

relock__request_t *relock__request_script(relock_future_t *future, const relock__script_t *script, int nkeys,
                                          int argc, const char *const *argv, const size_t *lens) {
  enum { MAX_ARGS = 256 };
  if (argc < 0 || argc > MAX_ARGS - 3 || nkeys > argc)
    return NULL;
  const char *all[MAX_ARGS];
  size_t all_lens[MAX_ARGS];
  char numkeys[16];
  all[0] = "EVALSHA";
  all_lens[0] = 7;
  all[1] = script->sha;
  all_lens[1] = 40;
  all_lens[2] = relock__decimal(numkeys, nkeys);
  all[2] = numkeys;
  for (int i = 0; i < argc; i++) {
    all[3 + i] = argv[i];
    all_lens[3 + i] = lens[i];
  }
  relock__request_t *req = relock__request_argv(future, argc + 3, all, all_lens);
  if (req != NULL)
    req->script = script;
  return req;
}

relock__request_t *relock__request_vformat(relock_future_t *future, const char *format, va_list ap,
                                           const char **invalid) {
  *invalid = NULL;
  char *cmd = NULL;
  int len = redisvFormatCommand(&cmd, format, ap);
  if (len == -1) /* hiredis: out of memory */
    return NULL;
  if (len <= 0) {
    *invalid = "invalid format";
    return NULL;
  }
  relock__request_t *req = NULL;
  if (strncmp(cmd, "*0\r\n", 4) == 0) /* no arguments: nothing to send */
    *invalid = "the format makes a command of no words";
  else if ((req = relock__request_new(future, (size_t)len)) != NULL)
    memcpy(req->cmd, cmd, (size_t)len);
  redisFreeCommand(cmd);
  return req;
}

static void request_free(relock__request_t *req) {
  free(req->eval_cmd);
  free(req);
}

void relock__request_discard(relock__request_t *req) {
  relock_future_release(req->future);
  request_free(req);
}

/* The request's future has completed (or been cancelled): let go of it, and
 * of the request itself unless hiredis still owes it a callback. */
static void request_done(relock__request_t *req) {
  relock__conn_t *c = req->conn;
  if (req->state == REQ_WAITING)
    c->nwaiting--;
  else if (req->state == REQ_SENT) {
    c->ninflight--;
    c->nflush -= req->flush_on_close;
  }
  if (c->probe == req)
    c->probe = NULL; /* what waits behind it goes at the caller's next release_waiting */
  relock__list_remove(&req->link);
  relock__timer_stop(&req->timer);
  req->state = REQ_DONE;
  relock_future_t *f = req->future;
  req->future = NULL;
  if (!req->in_hiredis)
    request_free(req);
  relock_future_release(f);
}

static void request_fail(relock__request_t *req, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void request_fail(relock__request_t *req, int err, const char *fmt, ...) {
  relock_future_t *f = relock_future_retain(req->future);
  request_done(req);
  va_list ap;
  va_start(ap, fmt);
  relock__future_vfail(f, err, fmt, ap);
  va_end(ap);
  relock_future_release(f);
}

void relock__requests_drain_check(relock__conn_t *c) {
  if (c->draining && c->nflush == 0 && c->nwaiting == 0) {
    c->draining = 0;
    c->life->drop_context(c);
  }
}

static void on_request_cancel(relock_future_t *f, void *arg) {
  (void)f;
  relock__request_t *req = arg;
  relock__conn_t *c = req->conn;
  request_done(req);
  relock__requests_release(c);
  relock__requests_drain_check(c);
}

/* -- statistics (stats/stats.h): a command connection's answers -----------------*/

static void count_answer(const relock__conn_t *c, const relock__request_t *req, int error) {
  relock__stats_t *st = c->settings->stats;
  if (!c->counts_commands || !st->on)
    return;
  st->s.commands++;
  st->s.command_errors += error != 0;
  relock__histogram_add(&st->s.command_time, (uint64_t)relock__ns_between(relock__now_ns(), req->sent_ns));
}

static void count_failure(const relock__conn_t *c) {
  if (c->counts_commands)
    RELOCK__STATS_COUNT(c->settings->stats, command_failures, 1);
}

static void on_request_timeout(relock__timer_t *t, int status, void *arg) {
  (void)t;
  relock__request_t *req = arg;
  relock__conn_t *c = req->conn;
  if (status != 0) {
    request_fail(req, RELOCK_ECLOSED, "client closed");
  } else if (req->state == REQ_SENT) {
    count_failure(c);
    request_fail(req, RELOCK_ETIMEDOUT, "no reply from %s within the command timeout", c->address);
  } else if (c->last_err != 0) {
    request_fail(req, c->last_err, "not sent: no connection to %s: %s", c->address, c->last_msg);
  } else if (c->ssl != NULL && !relock__tls_established(c->ssl)) {
    /* A server without TLS on this port waits for the rest of a "command". */
    request_fail(req, RELOCK_ETIMEDOUT, "not sent: TLS handshake with %s not done yet (does the server speak TLS "
                 "on this port?)", c->address);
  } else {
    request_fail(req, RELOCK_ETIMEDOUT, "not sent: still connecting to %s", c->address);
  }
  if (status == 0) {
    relock__requests_release(c);
    relock__requests_drain_check(c);
  }
}

static int is_noscript(const redisReply *reply) {
  return reply->type == REDIS_REPLY_ERROR && reply->len >= 8 && strncmp(reply->str, "NOSCRIPT", 8) == 0;
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata);

_Static_assert(RELOCK__SCRIPT_COUNT <= 64, "conn.scripts_known has a bit per script");

static uint64_t script_bit(const relock__request_t *req) { return UINT64_C(1) << (req->script - relock__scripts); }

/* Whether req must go alone: the first EVALSHA of its script here. */
static int is_probe(const relock__conn_t *c, const relock__request_t *req) {
  return req->script != NULL && (c->scripts_known & script_bit(req)) == 0;
}

static void submit(relock__conn_t *c, relock__request_t *req);

void relock__requests_release(relock__conn_t *c) {
  while (!relock__list_empty(&c->waiting) && c->state == RELOCK__CONN_READY && !c->moving && c->probe == NULL)
    submit(c, relock__container_of(c->waiting.next, relock__request_t, link));
}

static int hand_to_hiredis(relock__conn_t *c, relock__request_t *req, const char *cmd, size_t len) {
  /* ASK: the importing node runs the next command only right after
   * ASKING. Nothing can come between the two: both go out now, in order,
   * and its answer (+OK) is dropped. */
  static const char asking[] = "*1\r\n$6\r\nASKING\r\n";
  if (req->asking && redisAsyncFormattedCommand(c->ac, NULL, NULL, asking, sizeof asking - 1) != REDIS_OK)
    return -1;
  if (redisAsyncFormattedCommand(c->ac, on_reply, req, cmd, len) != REDIS_OK)
    return -1;
  req->in_hiredis = 1;
  return 0;
}

/* The script is not in the server's cache (restarted, or SCRIPT FLUSH): send
 * it whole with EVAL, which also caches it. Everything after EVALSHA's SHA
 * argument stays as it was. */
static int resend_as_eval(relock__conn_t *c, relock__request_t *req) {
  const relock__script_t *s = req->script;
  if (req->eval_cmd == NULL) {
    /* The command is "*N\r\n$7\r\nEVALSHA\r\n$40\r\n<sha>\r\n<rest>", as built
     * by relock__request_script. */
    static const char evalsha[] = "$7\r\nEVALSHA\r\n$40\r\n";
    const char *nl = memchr(req->cmd, '\n', req->len);
    size_t head = nl != NULL ? (size_t)(nl - req->cmd) + 1 : 0;
    size_t skip = head + sizeof evalsha - 1 + 40 + 2;
    if (head == 0 || skip > req->len || memcmp(req->cmd + head + sizeof evalsha - 1, s->sha, 40) != 0)
      return -1;
    char eval_head[48];
    int n = snprintf(eval_head, sizeof eval_head, "$4\r\nEVAL\r\n$%zu\r\n", s->len);
    size_t len = head + (size_t)n + s->len + 2 + (req->len - skip);
    char *eval = malloc(len + 1); /* + the NUL hiredis peeks at */
    if (eval == NULL)
      return -1;
    char *p = eval;
    memcpy(p, req->cmd, head);
    p += head;
    memcpy(p, eval_head, (size_t)n);
    p += n;
    memcpy(p, s->body, s->len);
    p += s->len;
    memcpy(p, "\r\n", 2);
    p += 2;
    memcpy(p, req->cmd + skip, req->len - skip);
    eval[len] = '\0';
    req->eval_cmd = eval;
    req->len = len; /* the EVALSHA form is not sent again */
  }
  return hand_to_hiredis(c, req, req->eval_cmd, req->len);
}

/* Hands reply to fn as the library's own type: a scalar as a view (the
 * hot path, acquire and release, allocates nothing), an aggregate as a
 * copy for the duration of the call. Without fn the future keeps a copy. */
static void deliver(relock_future_t *f, const redisReply *reply, relock__reply_fn fn, void *arg) {
  relock_reply_t view;
  relock_reply_t *copy = NULL;
  if (fn == NULL && reply->type != REDIS_REPLY_ERROR) {
    if ((copy = relock__reply_copy(reply)) == NULL)
      relock__future_fail(f, RELOCK_ENOMEM, "out of memory copying a reply");
    else if (!relock__future_succeed_ptr(f, copy, relock__reply_free))
      relock__reply_free(copy);
    return;
  }
  if (fn == NULL)
    fn = relock__reply_to_future;
  if (relock__reply_view(reply, &view) == 0) {
    fn(f, &view, arg);
  } else if ((copy = relock__reply_copy(reply)) == NULL) {
    relock__future_fail(f, RELOCK_ENOMEM, "out of memory copying a reply");
  } else {
    fn(f, copy, arg);
    relock__reply_free(copy);
  }
}

const char *relock__conn_plain_on_tls_hint(const relock__conn_t *c) {
  if (c->ever_heard || c->tls != NULL || c->unix_path != NULL)
    return "";
  return " (the server has never answered anything: a TLS port? use rediss://)";
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata) {
  relock__request_t *req = privdata;
  redisReply *reply = r;
  req->in_hiredis = 0;
  if (req->state == REQ_DONE) { /* timed out, cancelled or closed earlier */
    request_free(req);
    return;
  }
  relock__conn_t *c = req->conn;
  if (reply == NULL) {
    const char *why = ac->errstr[0] ? ac->errstr : "connection closed";
    if (c->closing)
      request_fail(req, RELOCK_ECLOSED, "client closed");
    else if (c->unexpected_reply)
      request_fail(req, RELOCK_EPROTO, "%s sent a reply nobody asked for: is it a Redis server?",
                   c->address);
    else if (ac->c.err == REDIS_ERR_PROTOCOL)
      request_fail(req, RELOCK_EPROTO, "protocol error from %s with the command in flight: %s",
                   c->address, why);
    else
      request_fail(req, RELOCK_ECONNLOST, "connection to %s lost with the command in flight: %s%s",
                   c->address, why, relock__conn_plain_on_tls_hint(c));
    if (!c->closing)
      count_failure(c);
    return;
  }
  if (req->script != NULL && is_noscript(reply)) {
    if (c->counts_commands)
      RELOCK__STATS_COUNT(c->settings->stats, script_loads, 1);
    if (resend_as_eval(c, req) == 0)
      return;
    request_fail(req, RELOCK_ENOMEM, "cannot re-send script %s after NOSCRIPT", req->script->name);
    return;
  }
  if (req->script != NULL && reply->type != REDIS_REPLY_ERROR)
    c->scripts_known |= script_bit(req); /* it ran: cached there now */
  count_answer(c, req, reply->type == REDIS_REPLY_ERROR);
  relock_future_t *f = relock_future_retain(req->future);
  relock__reply_fn fn = req->on_reply;
  void *arg = req->arg;
  request_done(req); /* frees req: hiredis is done with it */
  relock__requests_release(c); /* behind a probe, in order, before anyone hears of its answer */
  deliver(f, reply, fn, arg);
  relock_future_release(f);
  relock__requests_drain_check(c);
  if (reply->type == REDIS_REPLY_ERROR && relock__reply_error_is(reply->str, reply->len, "READONLY"))
    c->life->relocate(c, RELOCK__RELOCATE_READONLY); /* a demoted master: where is the new one? */
}

/* Hands req, a waiting request (counted in nwaiting, on the waiting list),
 * to hiredis: then it is in flight. A context hiredis is tearing down
 * (its callbacks failing what was in flight, where a caller may send
 * anew) takes no command: req fails, counted out of the waiting ones there,
 * once. */
static void submit(relock__conn_t *c, relock__request_t *req) {
  if (is_probe(c, req))
    c->probe = req;
  if (hand_to_hiredis(c, req, req->cmd, req->len) != 0) {
    if (c->probe == req)
      c->probe = NULL;
    request_fail(req, RELOCK_ECONNLOST, "connection to %s is closing", c->address);
    return;
  }
  relock__list_remove(&req->link);
  c->nwaiting--;
  req->state = REQ_SENT;
  req->sent_ns = relock__now_ns();
  c->ninflight++;
  c->nflush += req->flush_on_close;
  relock__list_push_back(&c->inflight, &req->link);
}

void relock__conn_send(relock__conn_t *c, relock__request_t *req, int64_t timeout_ms) {
  req->conn = c;
  relock__timer_init(&req->timer, on_request_timeout, req);
  req->state = REQ_WAITING;
  c->nwaiting++;
  relock__list_push_back(&c->waiting, &req->link);
  if (c->closing && !(req->flush_on_close && c->draining)) {
    request_fail(req, RELOCK_ECLOSED, "client closed");
    return;
  }
  relock__timer_start(c->wheel, &req->timer, timeout_ms);
  relock__future_set_cancel(req->future, on_request_cancel, req);
  if (c->state == RELOCK__CONN_READY && !c->moving && c->nwaiting == 1 && c->probe == NULL) { /* not to a context being dropped */
    submit(c, req);
  } else if (relock__conn_fails_fast(c)) {
    /* A fresh attempt now, the back-off notwithstanding. From the wheel, not
     * from here: its failure must not complete the request inside this call
     * (a caller retrying from its callback would recurse without end). */
    relock__timer_start(c->wheel, &c->reconnect_timer, 0);
  } else {
    c->life->start(c);
  }
}

int relock__conn_fails_fast(const relock__conn_t *c) {
  return c->connects == 0 && c->definitive && (!c->many || c->exhausted) && c->state == RELOCK__CONN_IDLE &&
         !c->closing;
}

void relock__reply_to_future(relock_future_t *f, const relock_reply_t *reply, void *arg) {
  (void)arg;
  if (reply->type == RELOCK_REPLY_ERROR) {
    relock__future_fail(f, relock__reply_error_code(reply->str, reply->len), "%.*s", (int)reply->len, reply->str);
    return;
  }
  relock_reply_t *copy = relock__reply_dup(reply);
  if (copy == NULL) {
    relock__future_fail(f, RELOCK_ENOMEM, "out of memory copying a reply");
    return;
  }
  if (!relock__future_succeed_ptr(f, copy, relock__reply_free))
    relock__reply_free(copy);
}


void relock__conn_fail_waiting(relock__conn_t *c, int err, const char *why) {
  while (!relock__list_empty(&c->waiting)) {
    relock__request_t *req = relock__container_of(c->waiting.next, relock__request_t, link);
    if (err == RELOCK_ECLOSED)
      request_fail(req, err, "client closed");
    else if (!c->has_target || c->many) /* why says where it looked */
      request_fail(req, err, "not sent: %s", why);
    else
      request_fail(req, err, "not sent: no connection to %s: %s", c->address, why);
  }
}


void relock__requests_fail_inflight(relock__conn_t *c, int err, const char *msg) {
  while (!relock__list_empty(&c->inflight)) {
    relock__request_t *req = relock__container_of(c->inflight.next, relock__request_t, link);
    request_fail(req, err, "%s", msg);
  }
}

/* Moves the requests of list that a close does not wait for to doomed. */
static void set_apart_doomed(relock__link_t *list, relock__link_t *doomed) {
  for (relock__link_t *l = list->next, *next; l != list; l = next) {
    next = l->next;
    if (!relock__container_of(l, relock__request_t, link)->flush_on_close) {
      relock__list_remove(l);
      relock__list_push_back(doomed, l);
    }
  }
}

void relock__requests_fail_unflushed(relock__conn_t *c) {
  /* The requests to fail are set apart first: their callbacks may send
   * flush_on_close requests, which join the lists behind the kept ones. */
  relock__link_t doomed;
  relock__list_init(&doomed);
  set_apart_doomed(&c->waiting, &doomed);
  set_apart_doomed(&c->inflight, &doomed);
  while (!relock__list_empty(&doomed)) {
    relock__request_t *req = relock__container_of(doomed.next, relock__request_t, link);
    request_fail(req, RELOCK_ECLOSED, "client closed");
  }
}

int relock__requests_waiting_to_flush(const relock__conn_t *c) {
  for (const relock__link_t *l = c->waiting.next; l != &c->waiting; l = l->next)
    if (relock__container_of(l, relock__request_t, link)->flush_on_close)
      return 1;
  return 0;
}

void relock__requests_init(relock__conn_t *c) {
  relock__list_init(&c->waiting);
  relock__list_init(&c->inflight);
}

void relock__requests_new_context(relock__conn_t *c) {
  c->scripts_known = 0;
  c->probe = NULL;
}
