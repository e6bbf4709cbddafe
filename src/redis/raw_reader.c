/* The subscriber's raw reader (raw_reader.h). Once ready, a raw connection
 * reads its socket itself into a reader of its own, so that no reply ever
 * reaches hiredis's callback bookkeeping. hiredis still writes, and still
 * owns the socket. */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <relock/error.h>

#include "base/resp.h"
#include "redis/ev_adapter.h"
#include "redis/health.h"
#include "redis/raw_reader.h"
#include "redis/reply.h"
#include "redis/tls.h"

static int raw_feed(relock__conn_t *c, redisAsyncContext *ac, const char *buf, size_t n);

/* Drops the connection through its life, with a message of ours. */
static void drop_for(relock__conn_t *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void drop_for(relock__conn_t *c, int err, const char *fmt, ...) {
  char msg[sizeof c->last_msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  c->life->drop_for(c, err, msg);
}

/* One reply on a raw connection; 0, or -1 once the connection was dropped. */
static int raw_reply(relock__conn_t *c, redisAsyncContext *ac, redisReply *reply) {
  if (reply->type == REDIS_REPLY_ERROR && !relock__cluster_error(reply->str)) {
    /* A refused SUBSCRIBE (ACL), "max number of clients": the server's word. */
    drop_for(c, relock__reply_error_code(reply->str, reply->len), "%.*s", (int)reply->len, reply->str);
    return -1;
  }
  if (relock__health_pong(c, reply))
    return 0;
  const char *why = c->hooks.on_push(c, reply, c->hooks.arg);
  if (c->ac != ac)
    return -1; /* the hook closed it */
  if (why != NULL) {
    drop_for(c, RELOCK_EPROTO, "protocol error from %s on the %s connection: %s", c->address, c->role,
             why);
    return -1;
  }
  return 0;
}

/* Reads what the socket has into buf: > 0 bytes, 0 for nothing now, -1
 * with the connection dropped. Over TLS through hiredis's SSL_read; one
 * that must write first and cannot (a renegotiation or a key update the
 * server asks for, which Redis never does) is not retried on writability:
 * the next readable event retries it. */
static ssize_t raw_recv(relock__conn_t *c, char *buf, size_t size) {
  redisAsyncContext *ac = c->ac;
#ifdef RELOCK_HAVE_TLS
  if (c->ssl != NULL) {
    ssize_t n = ac->c.funcs->read(&ac->c, buf, size);
    char why[sizeof c->last_msg];
    if (n < 0 && !relock__tls_failure(c->ssl, why, sizeof why))
      snprintf(why, sizeof why, "server closed the connection");
    if (n < 0)
      drop_for(c, RELOCK_ECONNLOST, "connection to %s lost: %s", c->address, why);
    return n;
  }
#endif
  ssize_t n = read(ac->c.fd, buf, size);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return 0;
  if (n <= 0) {
    drop_for(c, RELOCK_ECONNLOST, "connection to %s lost: %s", c->address,
             n == 0 ? "server closed the connection" : strerror(errno));
    return -1;
  }
  return n;
}

static void raw_read(void *arg) {
  relock__conn_t *c = arg;
  char buf[16 * 1024];
  /* TLS may hold decrypted bytes the socket will not announce again. */
  do {
    redisAsyncContext *ac = c->ac;
    ssize_t n = raw_recv(c, buf, sizeof buf);
    if (n <= 0 || raw_feed(c, ac, buf, (size_t)n) != 0)
      return;
  } while (c->ssl != NULL && relock__tls_pending(c->ssl) > 0);
}

/* Parses n bytes read on a raw connection and hands out the replies: 0, or
 * -1 once the connection was dropped. */
static int raw_feed(relock__conn_t *c, redisAsyncContext *ac, const char *buf, size_t n) {
  c->last_rx = ev_now(c->loop);
  if (redisReaderFeed(c->reader, buf, n) != REDIS_OK) {
    drop_for(c, RELOCK_ENOMEM, "out of memory reading from %s", c->address);
    return -1;
  }
  for (;;) {
    void *reply = NULL;
    if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) {
      drop_for(c, RELOCK_EPROTO, "protocol error from %s on the %s connection: %s", c->address,
               c->role, c->reader->errstr);
      return -1;
    }
    if (reply == NULL)
      return 0;
    int r = raw_reply(c, ac, reply);
    freeReplyObject(reply);
    if (r != 0)
      return -1;
  }
}

void relock__raw_start(relock__conn_t *c) {
  c->reader = redisReaderCreate();
  if (c->reader == NULL) {
    drop_for(c, RELOCK_ENOMEM, "out of memory connecting");
    return;
  }
  relock__ev_set_reader(c->ac, raw_read, c);
}

int relock__conn_write_raw(relock__conn_t *c, int argc, const char *const *argv, const size_t *lens) {
  if (c->state != RELOCK__CONN_READY || c->reader == NULL)
    return -1;
  size_t len = relock__resp_size(argc, lens);
  char *cmd = malloc(len + 1);
  if (cmd == NULL)
    return -1;
  relock__resp_write(cmd, argc, argv, lens);
  int r = relock__ev_append(c->ac, cmd, len);
  free(cmd);
  return r;
}

void relock__raw_stop(relock__conn_t *c) {
  if (c->reader != NULL) {
    redisReaderFree(c->reader);
    c->reader = NULL;
  }
}
