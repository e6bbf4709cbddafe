/* Commands and scripts with retries (call.h). */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <relock/error.h>

#include "base/decimal.h"
#include "redis/call.h"
#include "base/clock.h"
#include "redis/reply.h"
#include "future/promise.h"
#include "base/random.h"
#include "redis/router.h"
#include "redis/slot.h"
#include "stats/stats.h"

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
  int until_answered;       /* retried for as long as the client lives (call.h) */
  relock__link_t persist;   /* in redis->until_answered when until_answered */
  int attempts_left;
  int slot;                 /* of its key (Cluster), -1: keyless */
  int redirects;            /* MOVED / ASK followed so far */
  relock__conn_t *redirect; /* the attempt was answered MOVED or ASK: go there next */
  int asking;               /* ... and ASK: with ASKING, once */
  uint64_t deadline_ns;
  uint64_t answer_by_ns;    /* until_answered, but no longer than this (call.h) */
  int wait_replicas;        /* > 0: each attempt is followed by WAIT */
  int64_t wait_timeout_ms;
  int (*wrote)(const relock_reply_t *reply);
  void (*on_retry)(int err, const char *msg, void *arg);
  void *retry_arg;
  relock_future_t *wait;    /* the attempt's WAIT in flight, if any */
  relock_reply_t *held;     /* the command's reply, kept until WAIT answers */
  relock_reply_t held_scalar; /* held points here for a reply without strings */
  relock__timer_t backoff;
  /* Made before the cluster said whether it has sharded pub/sub: cmd
   * holds the PUBLISH form, then (after its NUL) the SPUBLISH one, of
   * spub_len bytes; the first attempt waits for the answer and keeps one. */
  int undecided;
  size_t spub_len;
  size_t len;
  char cmd[]; /* the request's bytes, for every attempt */
} call_t;

static void start_attempt(call_t *call);

/* Withdraws the attempt's WAIT: its callback sees it is no longer
 * call->wait and only lets go of it. */
static void cancel_wait(call_t *call) {
  relock_future_t *f = call->wait;
  if (f != NULL) {
    call->wait = NULL;
    relock_future_cancel(f);
  }
}

static void release_held(call_t *call) {
  if (call->held != NULL && call->held != &call->held_scalar)
    relock__reply_free(call->held);
  call->held = NULL;
}

static void call_free(call_t *call) {
  relock__list_remove(&call->persist);
  relock__timer_stop(&call->backoff);
  cancel_wait(call);
  release_held(call);
  relock_future_release(call->out);
  free(call);
}

/* Failures that a later attempt may not meet: the connection, and the
 * server saying "not now" (loading its data after a restart, a script
 * running too long, a failover, a master demoted to a replica) rather than
 * "no" - itself, or inside a script (Redis 6 wraps a script's READONLY in
 * "ERR Error running script ..."; the script wrote nothing: a replica
 * refuses its first write). */
static int not_now(const char *msg) {
  static const char *const codes[] = {"LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN", "CLUSTERDOWN", "READONLY"};
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
    if (relock__reply_error_is(msg, strlen(msg), codes[i]))
      return 1;
  return 0;
}

static int transient(int err, const char *msg) {
  if (err == RELOCK_ECONNLOST || err == RELOCK_ECONNREFUSED || err == RELOCK_ETIMEDOUT)
    return 1;
  return err == RELOCK_ESERVER && not_now(msg);
}

int relock__call_may_pass(int err, const char *msg) {
  return transient(err, msg) || (err == RELOCK_ESERVER && strstr(msg, "OOM") != NULL);
}

/* The server's "not now" (it did not run the command): the attempt fails
 * with it, so that on_attempt_done retries it while it may. */
static int not_now_reply(const relock_reply_t *reply) {
  return reply->type == RELOCK_REPLY_ERROR && not_now(reply->str);
}

/* A Cluster redirection (the command did not run there): the next attempt
 * goes where it says, whether or not the call may repeat. 1 when the
 * attempt was one (it has failed then), 0 when not. */
static int redirected(call_t *call, relock_future_t *attempt, const relock_reply_t *reply) {
  relock__conn_t *to = NULL;
  int kind = relock__route_redirect(call->redis, call->conn, reply->str, reply->len, &to);
  if (kind == 0)
    return 0;
  if (kind < 0 || call->redirects >= RELOCK__REDIRECTS_MAX) {
    relock__future_fail(attempt, RELOCK_ESERVER, "%s after %d redirections (last: %.*s): the nodes disagree on where "
                        "the slot is, or it moves faster than it can be followed", kind < 0 ? "a malformed redirection" : "no answer",
                        call->redirects, (int)reply->len, reply->str);
    return 1;
  }
  call->redirects++;
  RELOCK__STATS_COUNT(call->redis->settings->stats, redirections, 1);
  call->redirect = to;
  call->asking = kind == 2;
  relock__future_fail(attempt, RELOCK_ESERVER, "%.*s", (int)reply->len, reply->str);
  return 1;
}

/* Keeps the command's reply until WAIT answers: a scalar by value (the
 * hot path allocates nothing more), anything else as a copy. */
static int hold_reply(call_t *call, const relock_reply_t *reply) {
  if (reply->type == RELOCK_REPLY_NIL || reply->type == RELOCK_REPLY_INTEGER) {
    call->held_scalar = *reply;
    call->held = &call->held_scalar;
    return 0;
  }
  call->held = relock__reply_dup(reply);
  return call->held != NULL ? 0 : -1;
}

/* The reply of an attempt completes the caller's future directly, unless
 * it is a "not now" to retry, or a write that WAIT must confirm first. */
static void on_attempt_reply(relock_future_t *attempt, const relock_reply_t *reply, void *arg) {
  call_t *call = arg;
  if (reply->type == RELOCK_REPLY_ERROR && redirected(call, attempt, reply))
    return;
  int full = call->answer_by_ns != 0 && reply->type == RELOCK_REPLY_ERROR && relock__reply_error_is(reply->str, reply->len, "OOM");
  if (call->retry_safe && (not_now_reply(reply) || full)) { /* full: see relock__call_may_pass */
    relock__future_fail(attempt, RELOCK_ESERVER, "%.*s", (int)reply->len, reply->str);
    return;
  }
  if (call->wait_replicas > 0 && reply->type != RELOCK_REPLY_ERROR && (call->wrote == NULL || call->wrote(reply))) {
    if (hold_reply(call, reply) != 0)
      relock__future_fail(attempt, RELOCK_ENOMEM, "out of memory keeping a reply until WAIT answers");
    else
      relock__future_succeed(attempt); /* on_attempt_done: WAIT decides */
    return;
  }
  call->on_reply(call->out, reply, call->arg);
  relock__future_succeed(attempt); /* tells on_attempt_done it is over */
}

/* The attempt (its command, or the WAIT after a command that ran) failed
 * with err: another one after a back-off if the failure may be transient
 * and the call may repeat, else the call fails. */
static void retry_or_fail(call_t *call, int err, const char *msg, int of_wait) {
  cancel_wait(call);
  release_held(call);
  /* A server's "not now" (CLUSTERDOWN, TRYAGAIN, LOADING...) is retried
   * for as long as a deadline allows, attempts or not: it says the command
   * did not run, and a bounded wait is the caller's own limit. */
  int more = call->attempts_left > 0 || call->until_answered ||
             (call->deadline_ns != 0 && err == RELOCK_ESERVER && not_now(msg));
  /* A release retried in the background (answer_by_ns) waits out a full
   * server too: what it frees is what memory comes back for. */
  int may_pass = call->answer_by_ns != 0 ? relock__call_may_pass(err, msg) : transient(err, msg);
  if (may_pass && call->retry_safe && more && !call->redis->closing &&
      !relock__conn_fails_fast(call->conn) && /* a refusal known at once is news, not a glitch */
      (call->deadline_ns == 0 || call->until_answered || relock__now_ns() < call->deadline_ns) &&
      (call->answer_by_ns == 0 || relock__now_ns() < call->answer_by_ns)) {
    /* The connection lost under the attempt, or down: the next attempt
     * waits for the reconnect (or the new master) in the connection's
     * queue, within its timeout, sending nothing meanwhile, and goes the
     * moment it is back - a back-off would only add its own delay to a
     * failover. A server that answered "not now" or too late backs off. */
    int down = err == RELOCK_ECONNLOST || call->conn->state != RELOCK__CONN_READY;
    if (call->slot >= 0) /* a Cluster's map may have moved the slot meanwhile */
      call->conn = relock__route_slot_conn(call->redis, call->slot);
    int64_t interval = call->redis->settings->opt.retry_interval_ms;
    /* Past the budget, an until_answered call backs off even from a
     * connection that is down: Redis may stay out of reach for hours, and
     * an attempt that fails at once must not make a busy loop. */
    int64_t delay = down && (call->attempts_left > 0 || !call->until_answered) ? 0 : relock__jitter_ms(call->redis->rng, interval);
    relock__timer_start(call->redis->wheel, &call->backoff, delay);
    if (call->on_retry != NULL)
      call->on_retry(err, msg, call->retry_arg);
  } else if (of_wait && err == RELOCK_ESERVER) {
    /* Not RELOCK_ESERVER, which tells callers the command did not run: it
     * did, and only WAIT was refused. */
    relock__future_fail(call->out, RELOCK_ENOTREPLICATED, "written on the master but WAIT failed: %s", msg);
    call_free(call);
  } else {
    relock__future_fail(call->out, err, "%s", msg);
    call_free(call);
  }
}

static int send_wait(call_t *call);

static void on_attempt_done(relock_future_t *attempt, void *arg) {
  call_t *call = arg;
  call->attempt = NULL;
  int err = relock_future_error(attempt);
  if (relock_future_is_done(call->out)) { /* answered, or cancelled */
    call_free(call);
  } else if (call->redirect != NULL) {
    /* Not run there: at once to the node named, not counted as a retry. */
    cancel_wait(call);
    release_held(call);
    call->conn = call->redirect;
    call->redirect = NULL;
    call->attempts_left++;
    start_attempt(call);
  } else if (err == 0 && call->held != NULL) {
    /* Written: WAIT decides. A WAIT that has answered already ran before
     * the command (re-sent as EVAL after NOSCRIPT, behind it) and says
     * nothing about it: another one, now. */
    if (call->wait == NULL && send_wait(call) != 0) {
      relock__future_fail(call->out, RELOCK_ENOMEM, "out of memory sending WAIT");
      call_free(call);
    }
  } else {
    retry_or_fail(call, err, relock_future_message(attempt), 0);
  }
  relock_future_release(attempt);
}

/* -- WAIT -------------------------------------------------------------------*/

static void on_wait_reply(relock_future_t *f, const relock_reply_t *reply, void *arg) {
  (void)arg;
  if (reply->type == RELOCK_REPLY_INTEGER)
    relock__future_succeed_int(f, reply->integer);
  else if (reply->type == RELOCK_REPLY_ERROR)
    relock__future_fail(f, relock__reply_error_code(reply->str, reply->len), "%.*s", (int)reply->len, reply->str);
  else
    relock__future_fail(f, RELOCK_EPROTO, "unexpected reply type %d to WAIT", (int)reply->type);
}

static void on_wait_done(relock_future_t *f, void *arg) {
  call_t *call = arg;
  if (call->wait != f) { /* withdrawn */
    relock_future_release(f);
    return;
  }
  call->wait = NULL;
  if (call->held == NULL) {
    /* Answered before the command: it ran before it (see on_attempt_done),
     * or failed with the connection, as the command will. */
    relock_future_release(f);
    return;
  }
  int err = relock_future_error(f);
  if (err == 0) {
    int64_t acks = relock_future_int(f);
    if (acks >= call->wait_replicas) {
      call->on_reply(call->out, call->held, call->arg);
    } else {
      /* With Sentinel, say when the setting cannot be met at all. */
      int up = relock__sentinel_replicas_up(call->redis->sentinel);
      char seen[64] = "";
      if (up >= 0 && up < call->wait_replicas)
        snprintf(seen, sizeof seen, " (the sentinels see %d replica%s up)", up, up == 1 ? "" : "s");
      relock__future_fail(call->out, RELOCK_ENOTREPLICATED,
                          "written on the master but acknowledged by only %lld of %d replicas within %lld ms%s",
                          (long long)acks, call->wait_replicas, (long long)call->wait_timeout_ms, seen);
    }
    call_free(call);
  } else {
    retry_or_fail(call, err, relock_future_message(f), 1);
  }
  relock_future_release(f);
}

/* Sends WAIT behind the attempt's command, on the same connection, so that
 * it runs right after it. 0, or -1 when out of memory. */
static int send_wait(call_t *call) {
  char n[16], t[24];
  const char *argv[] = {"WAIT", n, t};
  const size_t lens[] = {4, relock__decimal(n, call->wait_replicas), relock__decimal(t, call->wait_timeout_ms)};
  relock_future_t *f = relock__future_new(call->redis->exec);
  relock__request_t *req = f != NULL ? relock__request_argv(relock_future_retain(f), 3, argv, lens) : NULL;
  if (req == NULL) {
    if (f != NULL) {
      relock_future_release(f);
      relock_future_release(f);
    }
    return -1;
  }
  req->on_reply = on_wait_reply;
  req->flush_on_close = (unsigned char)call->flush_on_close;
  call->wait = f;
  relock_future_on_done(f, on_wait_done, call); /* the inline slot: cannot fail */
  relock__conn_send(call->conn, req, call->redis->settings->opt.command_timeout_ms);
  return 0;
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
    call_free(call); /* between attempts, or waiting for WAIT */
  }
}

/* The publish command is known now: cmd keeps its form. */
static void decide_publish(call_t *call) {
  if (strcmp(relock__route_publish_command(call->redis), "SPUBLISH") == 0) {
    memmove(call->cmd, call->cmd + call->len + 1, call->spub_len + 1);
    call->len = call->spub_len;
  }
  call->undecided = 0;
}

static void on_probe_waited(relock_future_t *f, void *arg) {
  call_t *call = arg;
  call->attempt = NULL;
  int err = relock_future_error(f);
  if (relock_future_is_done(call->out)) { /* cancelled */
    call_free(call);
  } else if (err == 0) {
    if (call->slot >= 0) /* the map may have come meanwhile */
      call->conn = relock__route_slot_conn(call->redis, call->slot);
    start_attempt(call);
  } else {
    call->attempts_left--; /* the probe's failure is this attempt's */
    retry_or_fail(call, err, relock_future_message(f), 0);
  }
  relock_future_release(f);
}

/* A call that publishes waits, before its first attempt, until the
 * cluster has said whether it has sharded pub/sub: the wait stands for an
 * attempt (cancelled as one). 1 when it waits (or failed: out of memory). */
static int wait_for_probe(call_t *call) {
  if (relock__route_publish_command(call->redis) != relock__publish_undecided) {
    decide_publish(call);
    return 0;
  }
  relock_future_t *f = relock__route_await_publish_command(call->redis);
  if (f == NULL) {
    relock__future_fail(call->out, RELOCK_ENOMEM, "out of memory waiting for the cluster's pub/sub kind");
    call_free(call);
    return 1;
  }
  call->attempt = f;
  relock_future_on_done(f, on_probe_waited, call); /* the inline slot: cannot fail */
  return 1;
}

static void start_attempt(call_t *call) {
  if (call->undecided && wait_for_probe(call))
    return;
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
  req->asking = (unsigned char)call->asking;
  call->asking = 0; /* ASK is for one attempt: the map still says the old owner */
  call->attempt = attempt;
  relock_future_on_done(attempt, on_attempt_done, call); /* the inline slot: cannot fail */
  if (call->wait_replicas == 0) {
    relock__conn_send(call->conn, req, call->redis->settings->opt.command_timeout_ms);
    return;
  }
  /* The command may fail inside the send (a closing client): then the call
   * is over (out done, call freed) or waits to retry (attempt gone). */
  relock_future_t *out = relock_future_retain(call->out);
  relock__conn_send(call->conn, req, call->redis->settings->opt.command_timeout_ms);
  if (!relock_future_is_done(out) && call->attempt == attempt)
    send_wait(call); /* out of memory: on_attempt_done tries again */
  relock_future_release(out);
}

/* The first key of a script whose slot differs from the first key's, or
 * -1: in a cluster such a script cannot run anywhere (CROSSSLOT). (On one
 * node every key's slot is 0.) */
static int other_slot_key(const relock__redis_t *redis, const relock__call_spec_t *spec, int slot) {
  if (spec->script == NULL)
    return -1;
  for (int i = 1; i < spec->nkeys; i++)
    if (relock__route_slot(redis, spec->argv[i], spec->lens[i]) != slot)
      return i;
  return -1;
}

/* The index of the argument that stands for the publish command
 * (relock__publish_undecided), -1 if none. */
static int publish_arg(const relock__call_spec_t *spec) {
  for (int i = 0; i < spec->argc; i++)
    if (spec->argv[i] == relock__publish_undecided)
      return i;
  return -1;
}

/* The call's bytes, through a throw-away request, with the command publish
 * in argument pub (if >= 0). NULL when out of memory or too many arguments. */
static relock__request_t *format(const relock__call_spec_t *spec, int pub, const char *publish) {
  enum { MAX_ARGS = 256 };
  const char *argv[MAX_ARGS];
  size_t lens[MAX_ARGS];
  if (pub >= 0) {
    if (spec->argc > MAX_ARGS)
      return NULL;
    memcpy(argv, spec->argv, (size_t)spec->argc * sizeof(*argv));
    memcpy(lens, spec->lens, (size_t)spec->argc * sizeof(*lens));
    argv[pub] = publish;
    lens[pub] = strlen(publish);
  }
  const char *const *a = pub >= 0 ? argv : spec->argv;
  const size_t *l = pub >= 0 ? lens : spec->lens;
  return spec->script != NULL ? relock__request_script(NULL, spec->script, spec->nkeys, spec->argc, a, l)
                              : relock__request_argv(NULL, spec->argc, a, l);
}

relock_future_t *relock__call(relock__redis_t *redis, const relock__call_spec_t *spec) {
  /* Format once, through a throw-away request, and keep the bytes: both
   * forms while the publish command is not known (call_t.undecided). */
  relock_future_t *out = relock__future_new(redis->exec);
  if (out == NULL)
    return NULL;
  int key = spec->script != NULL ? 0 : 1;
  int slot = spec->argc > key ? relock__route_slot(redis, spec->argv[key], spec->lens[key]) : -1;
  int other = other_slot_key(redis, spec, slot);
  if (other >= 0) {
    relock__future_fail(out, RELOCK_EINVAL,
                        "keys \"%.*s\" and \"%.*s\" hash to different cluster slots (%d, %d): a name with '{' must "
                        "hold a non-empty hash tag, as in \"{tag}rest\"",
                        (int)spec->lens[0], spec->argv[0], (int)spec->lens[other], spec->argv[other], slot,
                        relock__route_slot(redis, spec->argv[other], spec->lens[other]));
    return out;
  }
  int pub = publish_arg(spec);
  const char *publish = relock__route_publish_command(redis);
  int undecided = pub >= 0 && publish == relock__publish_undecided;
  relock__request_t *tmp = format(spec, pub, undecided ? "PUBLISH" : publish);
  relock__request_t *spub = tmp != NULL && undecided ? format(spec, pub, "SPUBLISH") : NULL;
  size_t extra = spub != NULL ? spub->len + 1 : 0;
  call_t *call = tmp != NULL && (spub != NULL || !undecided) ? malloc(sizeof(*call) + tmp->len + 1 + extra) : NULL;
  if (call == NULL) {
    if (tmp != NULL)
      relock__request_discard(tmp);
    if (spub != NULL)
      relock__request_discard(spub);
    relock_future_release(out);
    return NULL;
  }
  memset(call, 0, sizeof(*call));
  call->len = tmp->len;
  memcpy(call->cmd, tmp->cmd, tmp->len + 1);
  relock__request_discard(tmp);
  if (spub != NULL) {
    call->undecided = 1;
    call->spub_len = spub->len;
    memcpy(call->cmd + call->len + 1, spub->cmd, spub->len + 1);
    relock__request_discard(spub);
  }

  call->redis = redis;
  call->out = relock_future_retain(out);
  call->slot = slot;
  call->conn = relock__route_slot_conn(redis, slot); /* relock__route's for its key, or keyless */
  call->on_reply = spec->on_reply != NULL ? spec->on_reply : relock__reply_to_future;
  call->arg = spec->arg;
  call->script = spec->script;
  call->retry_safe = spec->retry_safe;
  call->flush_on_close = spec->flush_on_close;
  call->deadline_ns = spec->deadline_ns;
  call->answer_by_ns = spec->answer_by_ns;
  call->on_retry = spec->on_retry;
  call->retry_arg = spec->retry_arg;
  call->wait_replicas = spec->wait_replicas > 0 ? spec->wait_replicas : 0;
  call->wait_timeout_ms = spec->wait_timeout_ms;
  call->wrote = spec->wrote;
  call->attempts_left = 1 + redis->settings->opt.retry_attempts;
  call->until_answered = spec->until_answered && spec->retry_safe;
  relock__list_init(&call->persist);
  if (call->until_answered)
    relock__list_push_back(&redis->until_answered, &call->persist);
  relock__timer_init(&call->backoff, on_backoff, call);
  relock__future_set_cancel(out, on_call_cancel, call);
  start_attempt(call);
  return out;
}

void relock__call_hurry(relock__redis_t *redis) {
  /* Set apart first: an attempt may end (and free its call) at once. */
  relock__link_t waiting;
  relock__list_init(&waiting);
  for (relock__link_t *l = redis->until_answered.next, *next; l != &redis->until_answered; l = next) {
    next = l->next;
    call_t *call = relock__container_of(l, call_t, persist);
    if (relock__timer_pending(&call->backoff)) {
      relock__list_remove(l);
      relock__list_push_back(&waiting, l);
    }
  }
  while (!relock__list_empty(&waiting)) {
    call_t *call = relock__container_of(waiting.next, call_t, persist);
    relock__list_remove(&call->persist);
    relock__list_push_back(&redis->until_answered, &call->persist);
    relock__timer_stop(&call->backoff);
    start_attempt(call);
  }
}
