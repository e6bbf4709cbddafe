/* A connection's health: keepalive and PING (health.h). */
#include <config.h>

#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <strings.h>
#include <sys/socket.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <relock/error.h>

#include "redis/ev_adapter.h"
#include "redis/health.h"

static int64_t ms_since(relock__conn_t *c, ev_tstamp t) {
  ev_tstamp d = ev_now(c->loop) - t;
  return d <= 0 ? 0 : (int64_t)(d * 1000.0);
}

static void health_arm(relock__conn_t *c, int64_t ms) {
  relock__timer_start(c->wheel, &c->health_timer, ms > 0 ? ms : 1);
}

void relock__health_start(relock__conn_t *c) {
  c->last_rx = ev_now(c->loop);
  c->ping_pending = 0;
  if (c->settings->opt.ping_interval_ms > 0)
    health_arm(c, c->settings->opt.ping_interval_ms);
}

void relock__health_stop(relock__conn_t *c) {
  relock__timer_stop(&c->health_timer);
  c->ping_pending = 0;
}

static void ping_answered(relock__conn_t *c) {
  c->ping_pending = 0;
  health_arm(c, c->settings->opt.ping_interval_ms);
}

static int is_pong(const redisReply *r) {
  if (r->type == REDIS_REPLY_STATUS)
    return r->len == 4 && strncasecmp(r->str, "PONG", 4) == 0;
  /* RESP2, subscribed: ["pong", ""] */
  return r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_STRING &&
         r->element[0]->len == 4 && strncasecmp(r->element[0]->str, "pong", 4) == 0 &&
         r->element[1]->type == REDIS_REPLY_STRING;
}

int relock__health_pong(relock__conn_t *c, const struct redisReply *reply) {
  if (!c->ping_pending || !is_pong(reply))
    return 0;
  ping_answered(c);
  return 1;
}

static void on_ping_reply(redisAsyncContext *ac, void *r, void *privdata) {
  relock__conn_t *c = privdata;
  if (r == NULL || ac != c->ac || c->state != RELOCK__CONN_READY)
    return; /* the context is going away */
  ping_answered(c);
}

static void send_ping(relock__conn_t *c) {
  static const char ping[] = "*1\r\n$4\r\nPING\r\n";
  int r;
  if (c->reader != NULL) /* a raw connection: its reader sees the answer */
    r = relock__ev_append(c->ac, ping, sizeof ping - 1);
  else
    r = redisAsyncFormattedCommand(c->ac, on_ping_reply, c, ping, sizeof ping - 1) == REDIS_OK ? 0 : -1;
  if (r != 0) {
    health_arm(c, c->settings->opt.ping_interval_ms); /* try again later */
    return;
  }
  c->pings++;
  c->ping_pending = 1;
  c->ping_sent = ev_now(c->loop);
  health_arm(c, c->settings->opt.command_timeout_ms);
}

static void on_health_timer(relock__timer_t *t, int status, void *arg) {
  (void)t;
  relock__conn_t *c = arg;
  const relock__settings_t *s = c->settings;
  if (status != 0 || c->state != RELOCK__CONN_READY || c->ac == NULL || c->closing)
    return;
  int64_t quiet = ms_since(c, c->last_rx);
  if (!c->ping_pending) {
    if (quiet >= s->opt.ping_interval_ms)
      send_ping(c);
    else
      health_arm(c, s->opt.ping_interval_ms - quiet);
    return;
  }
  if (c->last_rx >= c->ping_sent && quiet < s->opt.command_timeout_ms) {
    /* Replies still arrive, the PING's is queued behind them: alive. */
    health_arm(c, s->opt.command_timeout_ms - quiet);
    return;
  }
  char byte;
  if (recv(c->ac->c.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0) {
    /* The answer is there, unread: this process, not the peer, was stalled
     * (the loop blocked, the host suspended). */
    health_arm(c, s->opt.command_timeout_ms);
    return;
  }
  c->dead++;
  char msg[sizeof c->last_msg];
  snprintf(msg, sizeof msg, "no reply to PING within %lld ms: connection to %s presumed dead",
           (long long)s->opt.command_timeout_ms, c->address);
  c->life->drop_for(c, RELOCK_ECONNLOST, msg);
}

void relock__health_init(relock__conn_t *c) { relock__timer_init(&c->health_timer, on_health_timer, c); }

/* TCP keepalive with short settings, so that the kernel too gives up on a
 * silent peer, and TCP_USER_TIMEOUT so that unacknowledged data does not
 * wait for the ~15 minutes of retransmissions: both derived from the ping
 * interval (the command timeout when the PING is off). */
static int keepalive_s(int64_t ms) {
  int64_t s = (ms + 999) / 1000;
  return s < 1 ? 1 : s > 32767 ? 32767 : (int)s;
}

void relock__health_socket(relock__conn_t *c, int fd) {
  const relock__settings_t *s = c->settings;
  if (c->unix_path != NULL)
    return;
  int64_t base = s->opt.ping_interval_ms > 0 ? s->opt.ping_interval_ms : s->opt.command_timeout_ms;
  int on = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
#ifdef TCP_KEEPIDLE
  int idle = keepalive_s(base);
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
#endif
#ifdef TCP_KEEPINTVL
  int intvl = keepalive_s(s->opt.command_timeout_ms / 3);
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
#endif
#ifdef TCP_KEEPCNT
  int cnt = 3;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
#endif
#ifdef TCP_USER_TIMEOUT
  int64_t ut = base + s->opt.command_timeout_ms;
  unsigned int user_timeout = ut > (int64_t)UINT_MAX ? UINT_MAX : (unsigned int)ut;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
#endif
}
