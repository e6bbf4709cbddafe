/* A connection's requests: built, queued until the connection is ready,
 * sent in order, bounded by their timeout, and answered.
 *
 * A request is sent at most once (a script that meets NOSCRIPT is re-sent
 * as EVAL: it did not run). Requests issued while the connection is down
 * wait for it within their timeout - unless it has never been ready and its
 * attempts fail in a way the next one will meet too (see
 * relock__conn_fails_fast); requests in flight when it drops fail with
 * RELOCK_ECONNLOST. A request whose future completed early (timeout,
 * cancel, close) stays allocated until hiredis hands back its callback. */
#ifndef RELOCK__REDIS_REQUEST_H
#define RELOCK__REDIS_REQUEST_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <relock/client.h>
#include <relock/future.h>

#include "base/list.h"
#include "loop/wheel.h"
#include "redis/conn_state.h"
#include "redis/scripts.h"

/* Completes future from a reply (never NULL; for a script, never NOSCRIPT);
 * arg is the request's. The reply is valid during the call only: a scalar
 * is a view into hiredis's reply (no allocation), an aggregate a copy freed
 * afterwards. */
typedef void (*relock__reply_fn)(relock_future_t *future, const relock_reply_t *reply, void *arg);

struct relock__request {
  relock__link_t link;     /* in conn->waiting or conn->inflight */
  relock__conn_t *conn;
  relock_future_t *future; /* the request's own reference */
  relock__reply_fn on_reply; /* NULL: the future gets a copy of the reply */
  void *arg;               /* for on_reply */
  relock__timer_t timer;
  const relock__script_t *script; /* for the NOSCRIPT fallback */
  char *eval_cmd;          /* the EVAL form, once NOSCRIPT was met */
  unsigned char state;
  unsigned char in_hiredis; /* hiredis holds a callback for it */
  unsigned char flush_on_close; /* a close waits for its answer (it gives back a hold) */
  unsigned char asking;    /* Cluster ASK: sent right after ASKING */
  uint64_t sent_ns;        /* when handed to hiredis (statistics) */
  size_t len;
  char cmd[];              /* RESP */
};

/* A request with room for a command of len bytes (to be written into
 * req->cmd), completing future (whose reference it takes over). */
relock__request_t *relock__request_new(relock_future_t *future, size_t len);

/* A request for the command argv (lens[i] bytes each), or for running
 * script by EVALSHA with the first nkeys of argv as KEYS and the rest as ARGV
 * (at most 253 in all). NULL when out of memory. */
relock__request_t *relock__request_argv(relock_future_t *future, int argc, const char *const *argv,
                                        const size_t *lens);
relock__request_t *relock__request_script(relock_future_t *future, const relock__script_t *script, int nkeys,
                                          int argc, const char *const *argv, const size_t *lens);

/* A request for a command in hiredis's printf-like format ("SET %s %b").
 * NULL when the format is refused (*invalid says why: it is invalid, or
 * makes no words) or memory ran out (*invalid NULL); future's reference
 * stays the caller's then. */
relock__request_t *relock__request_vformat(relock_future_t *future, const char *format, va_list ap,
                                           const char **invalid);

/* Frees a request that was never sent (it releases its future). */
void relock__request_discard(relock__request_t *req);

/* Sends req (or queues it until the connection is ready), bounded by
 * timeout_ms. Never fails directly: every outcome completes req->future.
 * After close, only a flush_on_close request on a draining connection
 * (one still connecting included) is sent; others fail with
 * RELOCK_ECLOSED. */
void relock__conn_send(relock__conn_t *c, relock__request_t *req, int64_t timeout_ms);

/* Whether requests fail at once instead of waiting for the connection: it
 * has never been ready, and its last attempt failed definitively (refused,
 * no route to the host, a name that does not resolve, a missing socket
 * file, AUTH or SELECT refused). Such a failure is known at once and most
 * likely a wrong address or a server that is not running: waiting out
 * timeouts and retries would only delay the news. Once a connection has
 * been ready, the same refusal most likely is a restart: requests wait for
 * the reconnect within their timeout, and retries go on, as renewals of
 * held locks need. A request sent in this state does not fail on stale
 * news: it makes a fresh attempt (at once, not after the back-off) and
 * shares its fate, so a server that has just started is found. */
int relock__conn_fails_fast(const relock__conn_t *c);
/* (With conn->many, only once its locator has said, through
 * relock__conn_no_target, that every address it knows failed so.) */

/* Fails the requests not yet sent with err: "not sent: no connection to
 * <address>: why" (Cluster: their slot is served elsewhere now). */
void relock__conn_fail_waiting(relock__conn_t *c, int err, const char *why);

/* The default reply handler: the future succeeds with a copy of the reply
 * tree, or fails with RELOCK_ESERVER and the server's text for an error. */
void relock__reply_to_future(relock_future_t *future, const relock_reply_t *reply, void *arg);

/* -- for the connection's life (conn.c) -- */

void relock__requests_init(relock__conn_t *c);

/* A new context: perhaps a new server, or one restarted; no script is
 * known to be cached there. */
void relock__requests_new_context(relock__conn_t *c);

/* Sends what waits, in order, while the connection is ready and no probe
 * is in flight. */
void relock__requests_release(relock__conn_t *c);

/* Fails every request in flight with err and msg. */
void relock__requests_fail_inflight(relock__conn_t *c, int err, const char *msg);

/* A close: fails with RELOCK_ECLOSED every request it does not wait for
 * (those not flush_on_close), waiting or in flight. */
void relock__requests_fail_unflushed(relock__conn_t *c);

/* A draining connection goes once the last request it waits for is over
 * (those in flight, and those waiting for it to be ready). Called where
 * hiredis's context is sure to be alive (a reply, a timer). */
void relock__requests_drain_check(relock__conn_t *c);

/* Whether a request waiting is one a close must send (flush_on_close). */
int relock__requests_waiting_to_flush(const relock__conn_t *c);

/* "" or a hint for a plaintext connection that the server dropped without
 * ever having said anything: most likely a port that speaks TLS only. */
const char *relock__conn_plain_on_tls_hint(const relock__conn_t *c);

#endif /* RELOCK__REDIS_REQUEST_H */
