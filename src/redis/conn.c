/* One Redis connection: its life (conn.h). */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <relock/error.h>

#include "base/random.h"
#include "loop/exec.h"
#include "redis/conn.h"
#include "redis/ev_adapter.h"
#include "redis/health.h"
#include "redis/raw_reader.h"
#include "redis/reply.h"
#include "redis/reply_guard.h"
#include "redis/tls.h"
#include "stats/stats.h"

enum { HS_AUTH = 1, HS_SELECT, HS_SETNAME, HS_PING, HS_ROLE, HS_CLUSTER };

static void connect_now(relock__conn_t *c);
static void relocate(relock__conn_t *c, relock__relocate_why why);
static void drop_context(relock__conn_t *c);

static void record_error(relock__conn_t *c, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void record_error(relock__conn_t *c, int err, const char *fmt, ...) {
  c->last_err = err;
  c->definitive = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->last_msg, sizeof c->last_msg, fmt, ap);
  va_end(ap);
}

/* A connect failure the next attempt will meet too: nobody listens, no
 * route, no such socket file; or hiredis's REDIS_ERR_OTHER, which at
 * connect time means the name did not resolve or no address was usable.
 * Not a timeout: the server may just be slow. hiredis reports errno only
 * as strerror's text, hence the comparison of texts. */
static int definitive_failure(const redisContext *ctx) {
  static const int codes[] = {ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, ENOENT};
  if (ctx->err == REDIS_ERR_OTHER)
    return 1;
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
    if (ctx->err == REDIS_ERR_IO && strstr(ctx->errstr, strerror(codes[i])) != NULL)
      return 1;
  return 0;
}

/* The attempt failed for good (c->definitive) before any success: what
 * waits fails now rather than at its timeout (relock__conn_fails_fast). */
static void fail_fast_waiting(relock__conn_t *c) {
  if (relock__conn_fails_fast(c))
    relock__conn_fail_waiting(c, c->last_err, c->last_msg);
}

/* An attempt failed: what waits fails now if that is known to be final,
 * and the locator is told - unless failing what waited made the connection
 * move already (a locator reacting to the failed requests). */
static void attempt_failed(relock__conn_t *c, relock__relocate_why why) {
  unsigned gen = c->target_gen;
  if (!c->many)
    fail_fast_waiting(c);
  if (gen == c->target_gen)
    relocate(c, why);
}

/* Jittered exponential back-off: half the delay is fixed, half random, so
 * clients that lost the same server don't come back in lockstep. */
static int64_t backoff_ms(relock__conn_t *c) {
  const relock__settings_t *s = c->settings;
  int64_t d = s->opt.reconnect_min_ms;
  for (unsigned i = 0; i < c->attempts && d < s->opt.reconnect_max_ms; i++)
    d *= 2;
  if (d > s->opt.reconnect_max_ms)
    d = s->opt.reconnect_max_ms;
  return relock__jitter_ms(c->rng, d);
}

static void schedule_reconnect(relock__conn_t *c) {
  if (c->closing)
    return;
  int64_t delay = c->prompt ? 0 : backoff_ms(c);
  c->prompt = 0;
  c->attempts++;
  relock__timer_start(c->wheel, &c->reconnect_timer, delay);
}

static void on_reconnect_timer(relock__timer_t *t, int status, void *arg) {
  (void)t;
  relock__conn_t *c = arg;
  if (status == 0 && c->state == RELOCK__CONN_IDLE && !c->closing)
    connect_now(c);
}

/* The context is gone (hiredis freed it). Returns 1 when that ended a
 * close: on_closed has run, and its owner may have freed c. */
static int context_gone(relock__conn_t *c) {
  relock__conn_state_t was = c->state;
  c->ac = NULL;
  c->draining = 0;
  c->ssl = NULL; /* hiredis freed it with the context */
  relock__timer_stop(&c->connect_timer);
  relock__health_stop(c);
  relock__raw_stop(c);
  if (c->closing) {
    /* Kept for a close (they give back holds), and now never to be sent. */
    if (c->last_err != 0)
      relock__conn_fail_waiting(c, c->last_err, c->last_msg);
    else
      relock__conn_fail_waiting(c, RELOCK_ECLOSED, NULL);
    c->state = RELOCK__CONN_CLOSED;
    if (c->hooks.on_closed)
      c->hooks.on_closed(c, c->hooks.arg);
    return 1;
  }
  c->state = RELOCK__CONN_IDLE;
  if (was == RELOCK__CONN_READY && c->hooks.on_down)
    c->hooks.on_down(c, c->hooks.arg);
  schedule_reconnect(c);
  return 0;
}

static void ready(relock__conn_t *c) {
  relock__timer_stop(&c->connect_timer);
  c->state = RELOCK__CONN_READY;
  c->attempts = 0;
  c->last_err = 0;
  c->definitive = 0;
  c->last_msg[0] = '\0';
  if (c->connects++ > 0 && c->counts_reconnects)
    relock__stats_reconnect(c->settings->stats, c->address);
  if (c->hooks.on_push != NULL)
    relock__raw_start(c);
  if (c->state == RELOCK__CONN_READY)
    relock__health_start(c);
  relock__requests_release(c);
  if (c->state == RELOCK__CONN_READY && c->hooks.on_ready)
    c->hooks.on_ready(c, c->hooks.arg);
}

static int auth_error(const redisReply *reply) {
  static const char *const prefixes[] = {"WRONGPASS", "NOAUTH", "ERR invalid password",
                                         "ERR AUTH", "ERR Client sent AUTH", "NOPERM"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (strncasecmp(reply->str, prefixes[i], strlen(prefixes[i])) == 0)
      return 1;
  return 0;
}

/* ROLE's answer: NULL if the node is a master, else what it says it is. A
 * user whom the ACL does not allow ROLE cannot check: the sentinels' word
 * stands then (a demoted node still answers writes with READONLY). */
static const char *not_master(const redisReply *reply) {
  if (reply->type == REDIS_REPLY_ERROR)
    return strncmp(reply->str, "NOPERM", 6) == 0 ? NULL : reply->str;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements == 0 || reply->element[0]->type != REDIS_REPLY_STRING)
    return "an unexpected answer to ROLE";
  return strcmp(reply->element[0]->str, "master") == 0 ? NULL : reply->element[0]->str;
}

/* Whether CLUSTER SLOTS's answer says that the server is no cluster node.
 * Any other answer passes, errors included (a user the ACL refuses the
 * command cannot check; the map's load says the rest). */
static int not_cluster(const redisReply *reply) {
  static const char disabled[] = "ERR This instance has cluster support disabled";
  return reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, disabled, sizeof disabled - 1) == 0;
}

static void relocate(relock__conn_t *c, relock__relocate_why why) {
  if (c->locator.relocate != NULL && !c->closing)
    c->locator.relocate(c, why, c->locator.arg);
}

static void on_handshake_reply(redisAsyncContext *ac, void *r, void *privdata) {
  (void)ac;
  relock__conn_t *c = privdata;
  redisReply *reply = r;
  if (reply == NULL || c->state != RELOCK__CONN_HANDSHAKE)
    return; /* the context is going away; context_gone deals with it */
  int step = c->hs_steps[c->hs_next++];
  const char *role = step == HS_ROLE ? not_master(reply) : NULL;
  if (role != NULL) {
    /* Not definitive: whoever said this node was the master will be asked again. */
    record_error(c, RELOCK_ENOMASTER, "it is not a master (ROLE says %.40s): the sentinels' answer is stale or wrong",
                 role);
    c->state = RELOCK__CONN_CONNECTING; /* no more handshake replies are wanted */
    drop_context(c);
    relocate(c, RELOCK__RELOCATE_NOT_MASTER);
    return;
  }
  if (step == HS_CLUSTER && not_cluster(reply)) {
    /* Definitive: the server will not turn into a cluster node. What
     * waits fails now; the locator tries the other seeds. */
    record_error(c, RELOCK_EINVAL, "redis+cluster:// names a server that is not in cluster mode: %s", c->address);
    c->definitive = 1;
    relock__conn_fail_waiting(c, c->last_err, c->last_msg);
    c->state = RELOCK__CONN_CONNECTING; /* no more handshake replies are wanted */
    drop_context(c); /* on_disconnect tells the locator */
    return;
  }
  /* The PING only proves that TLS works both ways; NOAUTH is an answer too. */
  if (reply->type == REDIS_REPLY_ERROR && step != HS_PING && step != HS_ROLE && step != HS_CLUSTER) {
    const char *what = step == HS_AUTH ? "AUTH" : step == HS_SELECT ? "SELECT" : "CLIENT SETNAME";
    int err = step == HS_AUTH && auth_error(reply) ? RELOCK_EAUTH : relock__reply_error_code(reply->str, reply->len);
    record_error(c, err, "%s failed: %.*s", what, (int)reply->len, reply->str);
    c->definitive = 1;
    /* Retrying won't fix a wrong password or database: tell the waiting
     * requests now rather than at their timeout. Reconnecting continues. */
    relock__conn_fail_waiting(c, err, c->last_msg);
    c->state = RELOCK__CONN_CONNECTING; /* no more handshake replies are wanted */
    drop_context(c); /* on_disconnect tells the locator */
    return;
  }
  if (c->hs_next == c->hs_count)
    ready(c);
}

static void start_handshake(relock__conn_t *c) {
  const relock__conn_auth_t *a = &c->auth;
  c->state = RELOCK__CONN_HANDSHAKE;
  relock__requests_new_context(c);
  c->hs_next = c->hs_count = 0;
  if (a->password != NULL) {
    if (a->username != NULL)
      redisAsyncCommand(c->ac, on_handshake_reply, c, "AUTH %s %s", a->username, a->password);
    else
      redisAsyncCommand(c->ac, on_handshake_reply, c, "AUTH %s", a->password);
    c->hs_steps[c->hs_count++] = HS_AUTH;
  }
  if (a->db != 0) {
    redisAsyncCommand(c->ac, on_handshake_reply, c, "SELECT %d", a->db);
    c->hs_steps[c->hs_count++] = HS_SELECT;
  }
  if (a->client_name != NULL) {
    redisAsyncCommand(c->ac, on_handshake_reply, c, "CLIENT SETNAME %s", a->client_name);
    c->hs_steps[c->hs_count++] = HS_SETNAME;
  }
  if (a->check_master) {
    redisAsyncCommand(c->ac, on_handshake_reply, c, "ROLE");
    c->hs_steps[c->hs_count++] = HS_ROLE;
  }
  if (a->check_cluster) {
    redisAsyncCommand(c->ac, on_handshake_reply, c, "CLUSTER SLOTS");
    c->hs_steps[c->hs_count++] = HS_CLUSTER;
  }
  /* With TLS, ready means a whole round trip over it: under TLS 1.3 the
   * client's side of the handshake completes before the server has judged
   * it, and a refused client certificate only shows on the first read. */
  if (c->ssl != NULL) {
    redisAsyncCommand(c->ac, on_handshake_reply, c, "PING");
    c->hs_steps[c->hs_count++] = HS_PING;
  }
  if (c->hs_count == 0)
    ready(c);
}

/* A TLS failure is definitive (the next attempt meets the same certificate)
 * and, before any success, fails what waits at once. */
static void tls_failed(relock__conn_t *c, const char *msg) {
  record_error(c, RELOCK_ETLS, "%s", msg);
  c->definitive = 1;
}

/* Starts TLS over the connected socket: 0, or -1 with the context dropped. */
static int start_tls(relock__conn_t *c) {
  char msg[sizeof c->last_msg];
  c->ssl = relock__tls_start(c->tls, &c->ac->c, c->host, msg, sizeof msg);
  if (c->ssl != NULL) {
    relock__ev_no_sigpipe(c->ac); /* its SSL sends with MSG_NOSIGNAL */
    return 0;
  }
  tls_failed(c, msg);
  if (c->connects == 0)
    relock__conn_fail_waiting(c, c->last_err, c->last_msg);
  drop_context(c); /* deferred: we are inside on_connect */
  return -1;
}

static void on_connect(const redisAsyncContext *cac, int status) {
  relock__conn_t *c = cac->data;
  if (status != REDIS_OK) {
    /* hiredis frees the context right after this returns. */
    record_error(c, RELOCK_ECONNREFUSED, "%s", cac->errstr[0] ? cac->errstr : "connect failed");
    c->definitive = definitive_failure(&cac->c);
    if (!context_gone(c))
      attempt_failed(c, RELOCK__RELOCATE_FAILED);
    return;
  }
  c->in_on_connect = 1;
  if (c->tls == NULL || start_tls(c) == 0)
    start_handshake(c);
  c->in_on_connect = 0;
  if (c->free_deferred) {
    ev_timer_start(c->loop, &c->deferred_free);
    relock__exec_changed();
  }
}

static void on_disconnect(const redisAsyncContext *cac, int status) {
  relock__conn_t *c = cac->data;
  char msg[sizeof c->last_msg];
  /* Asked whenever TLS failed, so that OpenSSL's error queue is emptied. */
  int tls_why = status != REDIS_OK && c->ssl != NULL && relock__tls_failure(c->ssl, msg, sizeof msg);
  /* hiredis drops a connection on an error reply nobody asked for (a refused
   * SUBSCRIBE, "max number of clients"): that is the server's word. */
  if (c->unexpected_reply)
    record_error(c, RELOCK_EPROTO, "%s sent a reply nobody asked for: is it a Redis server?", c->address);
  else if (tls_why && c->state != RELOCK__CONN_READY)
    tls_failed(c, msg); /* hiredis's own text is strerror of a stale errno */
  else if (status != REDIS_OK && cac->c.err == REDIS_ERR_PROTOCOL)
    record_error(c, RELOCK_EPROTO, "protocol error from %s: %s", c->address, cac->errstr);
  else if (status != REDIS_OK && c->last_err == 0)
    record_error(c, cac->c.err == REDIS_ERR_OTHER ? RELOCK_ESERVER : RELOCK_ECONNLOST, "%s%s",
                 tls_why ? msg : cac->errstr[0] ? cac->errstr : "connection lost",
                 c->state == RELOCK__CONN_HANDSHAKE ? relock__conn_plain_on_tls_hint(c) : "");
  int was_ready = c->state == RELOCK__CONN_READY, moving = c->moving;
  c->moving = 0;
  if (context_gone(c))
    return; /* closed: c may be gone */
  if (moving) /* not a failure: the new address is being tried */
    fail_fast_waiting(c);
  else
    attempt_failed(c, was_ready ? RELOCK__RELOCATE_DOWN : RELOCK__RELOCATE_FAILED);
}

static void on_deferred_free(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  relock__conn_t *c = w->data;
  c->free_deferred = 0;
  drop_context(c);
}

/* Frees the context, which fails whatever hiredis still holds. */
static void drop_context(relock__conn_t *c) {
  redisAsyncContext *ac = c->ac;
  if (ac == NULL)
    return;
  if (c->in_on_connect) { /* hiredis 0.14 would use the context after we return */
    c->free_deferred = 1;
    return;
  }
  int connected = (ac->c.flags & REDIS_CONNECTED) != 0;
  redisAsyncFree(ac);
  /* A connected context reports through on_disconnect (now, or when the
   * hiredis callback we are inside returns); one that never connected is
   * freed silently. */
  if (!connected)
    context_gone(c);
}

static void on_connect_timeout(relock__timer_t *t, int status, void *arg) {
  (void)t;
  relock__conn_t *c = arg;
  if (status != 0 || c->ac == NULL)
    return;
  if (c->ssl != NULL && !relock__tls_established(c->ssl))
    record_error(c, RELOCK_ETIMEDOUT, "TLS handshake not done within %lld ms (does the server speak TLS on this port?)",
                 (long long)c->settings->opt.connect_timeout_ms);
  else
    record_error(c, RELOCK_ETIMEDOUT, "no connection within %lld ms", (long long)c->settings->opt.connect_timeout_ms);
  int connected = (c->ac->c.flags & REDIS_CONNECTED) != 0;
  drop_context(c);
  if (!connected) /* else on_disconnect tells */
    attempt_failed(c, RELOCK__RELOCATE_FAILED);
}

/* The reply guard's policy (reply_guard.h): a reply no command waits for
 * is refused, so that the connection drops (RELOCK_EPROTO) instead of
 * hiredis aborting. Every reply notes that something arrived, for the
 * health check. (No connection here is ever subscribed or monitoring in
 * hiredis's eyes: the subscriber reads its socket itself.) */
static int refuse_unasked(relock__reply_guard_t *g, int type) {
  relock__conn_t *c = relock__container_of(g, relock__conn_t, guard);
  if (c->ac == NULL)
    return 0;
  c->last_rx = ev_now(c->loop);
  c->ever_heard = 1;
  /* hiredis itself drops a connection on an unasked-for error reply (a
   * refused connection: "max number of clients reached"). */
  if (c->ac->replies.head != NULL || type == REDIS_REPLY_ERROR)
    return 0;
  c->unexpected_reply = 1;
  return 1;
}

/* Drops a ready connection for a reason of our own (msg becomes its last
 * error): what was in flight fails with it, and it reconnects. */
static void drop_for(relock__conn_t *c, int err, const char *msg) {
  c->last_err = err;
  c->definitive = 0;
  snprintf(c->last_msg, sizeof c->last_msg, "%s", msg);
  relock__requests_fail_inflight(c, err, c->last_msg);
  drop_context(c);
}

static void connect_now(relock__conn_t *c) {
  const relock__settings_t *s = c->settings;
  if (!c->has_target) { /* its locator finds one, and sets it */
    relocate(c, RELOCK__RELOCATE_NO_TARGET);
    return;
  }
  c->exhausted = 0;
  redisAsyncContext *ac = c->unix_path != NULL ? redisAsyncConnectUnix(c->unix_path) : redisAsyncConnect(c->host, c->port);
  if (ac == NULL) {
    record_error(c, RELOCK_ENOMEM, "out of memory connecting");
    schedule_reconnect(c);
    return;
  }
  if (ac->err) {
    record_error(c, RELOCK_ECONNREFUSED, "%s", ac->errstr);
    c->definitive = definitive_failure(&ac->c);
    redisAsyncFree(ac);
    schedule_reconnect(c);
    attempt_failed(c, RELOCK__RELOCATE_FAILED);
    return;
  }
  ac->data = c;
  /* A program that forks and execs (the relock tool does) must not hand its
   * Redis connections to the child. */
  fcntl(ac->c.fd, F_SETFD, fcntl(ac->c.fd, F_GETFD) | FD_CLOEXEC);
  relock__health_socket(c, ac->c.fd);
  /* Over TLS SSL_write cannot be told MSG_NOSIGNAL, and SSL_read writes too
   * (the handshake, key updates): the adapter guards both (ev_adapter.c). */
  if (relock__ev_attach(ac, c->loop, c->tls != NULL) != 0 ||
      relock__reply_guard_install(ac->c.reader, &c->guard) != 0) {
    record_error(c, RELOCK_ENOMEM, "out of memory connecting");
    redisAsyncFree(ac);
    schedule_reconnect(c);
    return;
  }
  c->ac = ac;
  c->unexpected_reply = 0;
  c->state = RELOCK__CONN_CONNECTING;
  relock__timer_start(c->wheel, &c->connect_timer, s->opt.connect_timeout_ms);
  redisAsyncSetDisconnectCallback(ac, on_disconnect);
  redisAsyncSetConnectCallback(ac, on_connect); /* arms the write watcher */
}

static const relock__conn_life_t life = {
    .drop_for = drop_for,
    .drop_context = drop_context,
    .relocate = relocate,
    .start = relock__conn_start,
};

void relock__conn_init(relock__conn_t *c, struct ev_loop *loop, relock__wheel_t *wheel,
                       const relock__settings_t *settings, const char *role, const relock__conn_hooks_t *hooks,
                       uint64_t *rng) {
  memset(c, 0, sizeof(*c));
  c->loop = loop;
  c->wheel = wheel;
  c->settings = settings;
  c->role = role;
  c->counts_commands = strcmp(role, "command") == 0;
  c->counts_reconnects = strncmp(role, "sentinel", 8) != 0;
  if (hooks != NULL)
    c->hooks = *hooks;
  c->rng = rng;
  c->auth = (relock__conn_auth_t){.username = settings->opt.username,
                                  .password = settings->opt.password,
                                  .db = settings->opt.db,
                                  .client_name = settings->opt.client_name};
  /* one node; Sentinel sets the master's address, the Cluster router each
   * node's */
  if (settings->nsentinels == 0 && settings->ncluster_nodes == 0) {
    snprintf(c->host, sizeof c->host, "%s", settings->opt.host != NULL ? settings->opt.host : "");
    c->port = settings->opt.port;
    c->unix_path = settings->opt.unix_path;
    c->has_target = 1;
  }
  snprintf(c->address, sizeof c->address, "%s", settings->address);
  c->life = &life;
  c->guard.refuse = refuse_unasked;
  relock__requests_init(c);
  relock__timer_init(&c->connect_timer, on_connect_timeout, c);
  relock__timer_init(&c->reconnect_timer, on_reconnect_timer, c);
  relock__health_init(c);
  ev_timer_init(&c->deferred_free, on_deferred_free, 0.0, 0.0);
  c->deferred_free.data = c;
}

void relock__conn_set_target(relock__conn_t *c, const char *host, int port, int now) {
  if (c->closing)
    return;
  if (c->has_target && c->port == port && strcmp(c->host, host) == 0) {
    if (now && c->state == RELOCK__CONN_IDLE && relock__timer_pending(&c->reconnect_timer)) {
      relock__timer_stop(&c->reconnect_timer);
      connect_now(c);
    }
    return;
  }
  char was[sizeof c->address];
  snprintf(was, sizeof was, "%s", c->address);
  snprintf(c->host, sizeof c->host, "%s", host);
  c->port = port;
  c->unix_path = NULL;
  c->has_target = 1;
  c->target_gen++;
  if (strchr(host, ':') != NULL)
    snprintf(c->address, sizeof c->address, "[%s]:%d", host, port);
  else
    snprintf(c->address, sizeof c->address, "%s:%d", host, port);
  if (now) { /* the new address is tried at once, not after a back-off */
    c->attempts = 0;
    c->prompt = 1;
    relock__timer_stop(&c->reconnect_timer);
  }
  if (c->ac != NULL) {
    /* What was sent to the old address fails (a call that may repeat is
     * re-sent, to the new one); what waits goes to the new address. */
    if (c->state == RELOCK__CONN_READY) {
      char why[2 * sizeof c->address + 64];
      snprintf(why, sizeof why, "connection to %s closed: the master is now %s", was, c->address);
      relock__requests_fail_inflight(c, RELOCK_ECONNLOST, why);
    }
    /* A ready connection stays READY until its context is gone, so that
     * its owner hears on_down (the subscriber subscribes its channels
     * again on the new connection); a handshake wants no more replies. */
    if (c->state == RELOCK__CONN_HANDSHAKE)
      c->state = RELOCK__CONN_CONNECTING;
    c->moving = (c->ac->c.flags & REDIS_CONNECTED) != 0; /* on_disconnect will run */
    drop_context(c);
  } else if (c->state == RELOCK__CONN_IDLE && now && (c->started || c->nwaiting > 0)) {
    c->prompt = 0;
    connect_now(c);
  }
}

void relock__conn_no_target(relock__conn_t *c, int err, const char *msg, int definitive) {
  record_error(c, err, "%s", msg);
  c->definitive = definitive;
  c->exhausted = definitive;
  fail_fast_waiting(c);
}


void relock__conn_start(relock__conn_t *c) {
  c->started = 1;
  if (c->state == RELOCK__CONN_IDLE && !c->closing && !relock__timer_pending(&c->reconnect_timer))
    connect_now(c);
}

void relock__conn_close(relock__conn_t *c) {
  if (c->closing)
    return;
  c->closing = 1;
  relock__timer_stop(&c->reconnect_timer);
  relock__health_stop(c);
  /* Requests that give back a hold are kept, waiting or in flight: a
   * connection not ready yet (a cluster node's, opened for the give-back)
   * or in its reconnect back-off gets one more attempt, and they go once
   * it is ready. While it drains, such requests are still accepted. */
  if (c->ac == NULL && c->state == RELOCK__CONN_IDLE && c->has_target && relock__requests_waiting_to_flush(c))
    connect_now(c);
  c->draining = c->ac != NULL;
  relock__requests_fail_unflushed(c);
  if (c->ac != NULL && c->nflush + c->nwaiting > 0) {
    c->draining = 1; /* the context goes with the last of them (relock__requests_drain_check) */
    relock__requests_release(c); /* a failed probe held them back */
    relock__requests_drain_check(c); /* none of them could be sent after all */
    return;
  }
  c->draining = 0;
  if (c->ac == NULL) {
    context_gone(c);
  } else if (!c->free_deferred) {
    drop_context(c); /* inside on_connect this defers; the deferred free ends it */
  }
}
