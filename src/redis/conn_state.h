/* The state of one Redis connection, shared by the files that make it:
 *
 *   conn.c        its life: connect, handshake, reconnect, targets, close
 *   request.c     its requests: queued, sent in order, timed out, answered
 *   reply_guard.c hiredis's reader refusing replies nobody asked for
 *   raw_reader.c  the subscriber's reader under hiredis
 *   health.c      keepalive and PING
 *
 * conn.c is above the others and calls them; they never call it, but ask
 * through c->life (relock__conn_life_t), which it sets. Modules outside the
 * connection include conn.h, not this file. */
#ifndef RELOCK__REDIS_CONN_STATE_H
#define RELOCK__REDIS_CONN_STATE_H

#include <stddef.h>
#include <stdint.h>

#include <ev.h>

#include "base/list.h"
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
 * (RELOCK_ENOMASTER) and the locator told. check_cluster adds CLUSTER
 * SLOTS (a command a cluster client may send anyway, docs/ACL.md): a
 * server with cluster support disabled is refused for good
 * (RELOCK_EINVAL), before any command reaches it - a standalone server
 * taken for a cluster's node would hold locks that the other "nodes" know
 * nothing of. */
typedef struct relock__conn_auth {
  const char *username;
  const char *password;
  int db;
  const char *client_name;
  int check_master;
  int check_cluster;
} relock__conn_auth_t;

typedef enum relock__conn_state {
  RELOCK__CONN_IDLE = 0,   /* no context (maybe waiting to reconnect) */
  RELOCK__CONN_CONNECTING, /* TCP/unix connect in progress */
  RELOCK__CONN_HANDSHAKE,  /* connected, AUTH/SELECT/SETNAME (and with TLS a PING) in flight */
  RELOCK__CONN_READY,
  RELOCK__CONN_CLOSED
} relock__conn_state_t;

/* What the parts below conn.c ask of the connection's life. */
typedef struct relock__conn_life {
  /* Drops a ready connection for a reason of ours (msg is copied as its
   * last error): what was in flight fails with it, and it reconnects. */
  void (*drop_for)(relock__conn_t *c, int err, const char *msg);
  /* Frees the context now (a draining close has nothing left to send). */
  void (*drop_context)(relock__conn_t *c);
  /* Tells the locator (if any) a sign that the address may be wrong. */
  void (*relocate)(relock__conn_t *c, relock__relocate_why why);
  /* A request waits: connect, unless already on the way. */
  void (*start)(relock__conn_t *c);
} relock__conn_life_t;

/* The reply guard's part (reply_guard.h): hiredis's reader calls refuse as
 * each reply starts being parsed. */
typedef struct relock__reply_guard {
  int (*refuse)(struct relock__reply_guard *g, int type);
} relock__reply_guard_t;

struct relock__conn {
  struct ev_loop *loop;
  relock__wheel_t *wheel;
  const relock__settings_t *settings;
  const char *role;        /* "command" or "subscriber", for messages */
  unsigned counts_commands : 1;   /* statistics: its commands are counted (a command connection's) */
  unsigned counts_reconnects : 1; /* ... and its reconnects (a data node's, not a sentinel's) */
  relock__conn_hooks_t hooks;
  const relock__conn_life_t *life;
  uint64_t *rng;           /* the client's, for back-off jitter */

  /* -- its life (conn.c) -- */
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

  relock__timer_t connect_timer;
  relock__timer_t reconnect_timer;
  unsigned attempts;       /* failed attempts since the last ready */
  uint64_t connects;       /* successful handshakes, for tests and statistics */

  struct relock__tls *tls; /* the client's TLS context; NULL: no TLS */
  struct ssl_st *ssl;      /* this context's TLS session (hiredis owns it) */

  int hs_steps[8];         /* handshake replies still expected, in order */
  int hs_next;
  int hs_count;

  int ever_heard;          /* a reply has come, on any context so far */
  int last_err;            /* why the last attempt failed (0: none) */
  int definitive;          /* and the next attempt will meet it too */
  char last_msg[1024];     /* with Sentinel: every sentinel tried, and what each said */

  /* -- its requests (request.c) -- */
  relock__link_t waiting;  /* requests not yet handed to hiredis, in order */
  relock__link_t inflight; /* requests handed to hiredis, in order */
  size_t nwaiting;
  size_t ninflight;
  size_t nflush;           /* requests in flight that a close waits for */
  int draining;            /* closing: the context goes when nflush and nwaiting are 0 */
  /* The scripts (relock__scripts indexes, bit i) this context's server
   * has answered for: cached there. The first EVALSHA of any other is a
   * probe: what follows waits until it is answered, so that a NOSCRIPT and
   * the script's EVAL re-send are not overtaken by requests sent after it. */
  uint64_t scripts_known;
  struct relock__request *probe;

  /* -- replies nobody asked for (reply_guard.c, policy in conn.c) -- */
  relock__reply_guard_t guard;
  int unexpected_reply;    /* the server sent a reply nobody asked for */

  /* -- the subscriber's reader (raw_reader.c) -- */
  struct redisReader *reader; /* a raw connection's, once ready */

  /* -- health (health.c): a PING after ping_interval_ms without a reply,
   * and the connection presumed dead when nothing arrives within the
   * command timeout after it. One wheel timer does both. -- */
  relock__timer_t health_timer;
  ev_tstamp last_rx;       /* loop time a reply last started arriving */
  ev_tstamp ping_sent;
  int ping_pending;
  uint64_t pings;          /* PINGs sent, for tests and statistics */
  uint64_t dead;           /* connections presumed dead, for the same */
};

#endif /* RELOCK__REDIS_CONN_STATE_H */
