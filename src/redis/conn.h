/* One Redis connection: a hiredis async context on the loop, the handshake
 * (AUTH, SELECT, CLIENT SETNAME), reconnection with jittered exponential
 * back-off, and requests with per-request timeouts on the wheel.
 *
 * A request is sent at most once (a script that meets NOSCRIPT is re-sent as
 * EVAL: it did not run). Requests issued while the connection is down wait
 * for it within their timeout - unless it has never been ready and its
 * attempts fail in a way the next one will meet too (see
 * relock__conn_fails_fast); requests in flight when it drops fail with
 * RELOCK_ECONNLOST. A request whose future completed early (timeout, cancel,
 * close) stays allocated until hiredis hands back its callback. */
#ifndef RELOCK__REDIS_CONN_H
#define RELOCK__REDIS_CONN_H

#include <stddef.h>
#include <stdint.h>

#include <stdarg.h>

#include <ev.h>

#include <relock/client.h>
#include <relock/future.h>

#include "base/list.h"
#include "redis/scripts.h"
#include "config/settings.h"
#include "loop/wheel.h"

/* hiredis stays behind this layer: the modules above see these only as
 * pointers they never follow. */
struct redisAsyncContext;
struct redisReader;
struct redisReply;
struct relock__tls;
struct ssl_st;

typedef struct relock__conn relock__conn_t;
typedef struct relock__request relock__request_t;

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
  size_t len;
  char cmd[];              /* RESP */
};

/* What the owner of a connection hears about it. Any hook may be NULL.
 *
 * on_push makes a raw connection (the subscriber's): once ready, it reads
 * its socket itself, hands every reply (PING answers excepted) to on_push,
 * and sends only with relock__conn_write_raw, so hiredis's own pub/sub
 * bookkeeping, which asserts on what it does not expect, never runs.
 * on_push returns NULL, or why the reply breaks the protocol: then the
 * connection drops with RELOCK_EPROTO and reconnects. */
typedef struct relock__conn_hooks {
  void (*on_ready)(relock__conn_t *c, void *arg);  /* handshake done */
  void (*on_down)(relock__conn_t *c, void *arg);   /* a ready connection dropped */
  void (*on_closed)(relock__conn_t *c, void *arg); /* fully down after close */
  const char *(*on_push)(relock__conn_t *c, const struct redisReply *reply, void *arg);
  void *arg;
} relock__conn_hooks_t;

/* Why a connection asks its locator where to go (conn->locator). */
typedef enum relock__relocate_why {
  RELOCK__RELOCATE_NO_TARGET = 1, /* it has no address yet, and something waits */
  RELOCK__RELOCATE_FAILED,        /* an attempt at its address failed */
  RELOCK__RELOCATE_NOT_MASTER,    /* the node there says (ROLE) it is not a master */
  RELOCK__RELOCATE_DOWN,          /* a ready connection dropped */
  RELOCK__RELOCATE_READONLY       /* the node answered READONLY: it was demoted */
} relock__relocate_why;

/* Who says where a connection goes when its address can change (the
 * Sentinel-discovered master, a sentinel): told of every sign that the
 * address may be wrong, it answers, now or later, with
 * relock__conn_set_target or relock__conn_no_target. Not set: the address
 * from the settings, for good. */
typedef struct relock__conn_locator {
  void (*relocate)(relock__conn_t *c, relock__relocate_why why, void *arg);
  void *arg;
} relock__conn_locator_t;

/* As whom a connection introduces itself: the settings' AUTH, database and
 * client name by default; a sentinel's AUTH for connections to sentinels.
 * check_master adds ROLE: a node that says it is no master is refused
 * (RELOCK_ENOMASTER) and the locator told. */
typedef struct relock__conn_auth {
  const char *username;
  const char *password;
  int db;
  const char *client_name;
  int check_master;
} relock__conn_auth_t;

typedef enum relock__conn_state {
  RELOCK__CONN_IDLE = 0,   /* no context (maybe waiting to reconnect) */
  RELOCK__CONN_CONNECTING, /* TCP/unix connect in progress */
  RELOCK__CONN_HANDSHAKE,  /* connected, AUTH/SELECT/SETNAME (and with TLS a PING) in flight */
  RELOCK__CONN_READY,
  RELOCK__CONN_CLOSED
} relock__conn_state_t;

struct relock__conn {
  struct ev_loop *loop;
  relock__wheel_t *wheel;
  const relock__settings_t *settings;
  const char *role;        /* "command" or "subscriber", for messages */
  relock__conn_hooks_t hooks;
  uint64_t *rng;           /* the client's, for back-off jitter */

  /* Where it connects: the settings' node, or what its locator set. */
  relock__conn_locator_t locator;
  relock__conn_auth_t auth;
  char host[256];
  int port;
  const char *unix_path;   /* the settings' (one node only) */
  int has_target;          /* 0: nowhere yet (the locator is asked) */
  unsigned target_gen;     /* counts relock__conn_set_target's moves */
  int moving;              /* its context is dropped for a new address */
  int prompt;              /* the next attempt starts at once */
  int started;             /* relock__conn_start was called (a subscriber is opened on first use) */
  int many;                /* its locator has other addresses: a failed attempt is not final news
                              (relock__conn_no_target says when it is) */
  int exhausted;           /* many: the locator said every address failed at once */
  char address[300];       /* "host:port" or the socket path, for messages */

  struct redisAsyncContext *ac;
  relock__conn_state_t state;
  int closing;
  int in_on_connect;       /* freeing the context now would be a use-after-free */
  int free_deferred;
  ev_timer deferred_free;

  relock__link_t waiting;  /* requests not yet handed to hiredis, in order */
  relock__link_t inflight; /* requests handed to hiredis, in order */
  size_t nwaiting;
  size_t ninflight;
  size_t nflush;           /* requests in flight that a close waits for */
  int draining;            /* closing: the context goes when nflush and nwaiting are 0 */

  relock__timer_t connect_timer;
  relock__timer_t reconnect_timer;
  unsigned attempts;       /* failed attempts since the last ready */
  uint64_t connects;       /* successful handshakes, for tests and statistics */

  struct relock__tls *tls; /* the client's TLS context; NULL: no TLS */
  struct ssl_st *ssl;      /* this context's TLS session (hiredis owns it) */

  int hs_steps[8];         /* handshake replies still expected, in order */
  /* The scripts (relock__scripts indexes, bit i) this context's server
   * has answered for: cached there. The first EVALSHA of any other is a
   * probe: what follows waits until it is answered, so that a NOSCRIPT and
   * the script's EVAL re-send are not overtaken by requests sent after it. */
  uint64_t scripts_known;
  struct relock__request *probe;
  int hs_next;
  int hs_count;

  /* Health check: a PING after ping_interval_ms without a reply, and the
   * connection presumed dead when nothing arrives within the command
   * timeout after it. One wheel timer does both. */
  relock__timer_t health_timer;
  ev_tstamp last_rx;       /* loop time a reply last started arriving */
  ev_tstamp ping_sent;
  int ping_pending;
  uint64_t pings;          /* PINGs sent, for tests and statistics */
  uint64_t dead;           /* connections presumed dead, for the same */

  struct redisReader *reader; /* a raw connection's, once ready */

  int unexpected_reply;    /* the server sent a reply nobody asked for */
  int ever_heard;          /* a reply has come, on any context so far */
  int last_err;            /* why the last attempt failed (0: none) */
  int definitive;          /* and the next attempt will meet it too */
  char last_msg[1024];     /* with Sentinel: every sentinel tried, and what each said */
};

void relock__conn_init(relock__conn_t *c, struct ev_loop *loop, relock__wheel_t *wheel,
                       const relock__settings_t *settings, const char *role, const relock__conn_hooks_t *hooks,
                       uint64_t *rng);

/* Points the connection at host:port (a copy is kept): a connection
 * elsewhere is dropped (its requests in flight fail with RELOCK_ECONNLOST,
 * those waiting go to the new address). now: the address is tried at once,
 * the back-off starts afresh, and an idle connection already pointed there
 * tries again at once too; else the next attempt keeps its back-off (for
 * moving on from one failed sentinel to the next without a busy loop). */
void relock__conn_set_target(relock__conn_t *c, const char *host, int port, int now);

/* The locator found no address: what waits fails now if definitive and the
 * connection was never ready (relock__conn_fails_fast), else at its
 * timeout, with err and msg. */
void relock__conn_no_target(relock__conn_t *c, int err, const char *msg, int definitive);

/* Fails the requests not yet sent with err: "not sent: no connection to
 * <address>: why" (Cluster: their slot is served elsewhere now). */
void relock__conn_fail_waiting(relock__conn_t *c, int err, const char *why);

/* Starts connecting if idle and not waiting to reconnect. */
void relock__conn_start(relock__conn_t *c);

/* Fails everything pending with RELOCK_ECLOSED and drops the connection;
 * hooks.on_closed runs once it is fully down (possibly from inside this call).
 * Requests marked flush_on_close are the exception: those in flight, those
 * waiting (for a connection still connecting, or in its reconnect
 * back-off: it makes one more attempt at once), and those sent while the
 * connection drains (an answer to a failed one may send one), are sent
 * and answered first, each within its own timeout; if the connection
 * fails meanwhile, those not sent fail with its error. They give back
 * holds: dropped unsent, a lock would stay held by a client that is gone,
 * until its lease ran out. */
void relock__conn_close(relock__conn_t *c);

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

/* Appends a command to a ready raw connection's output (no reply is
 * awaited: answers reach hooks.on_push). 0, or -1 if the connection is not
 * ready or memory ran out. */
int relock__conn_write_raw(relock__conn_t *c, int argc, const char *const *argv, const size_t *lens);

/* The default reply handler: the future succeeds with a copy of the reply
 * tree, or fails with RELOCK_ESERVER and the server's text for an error. */
void relock__reply_to_future(relock_future_t *future, const relock_reply_t *reply, void *arg);

#endif /* RELOCK__REDIS_CONN_H */
