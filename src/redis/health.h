/* A connection's health: TCP keepalive on its socket, and a PING when
 * nothing has arrived for ping_interval_ms; if then nothing at all arrives
 * within the command timeout, the peer is presumed dead (a black hole: the
 * kernel would retransmit for many minutes) and the connection is dropped
 * through c->life, to be replaced. Replies of any kind count as signs of
 * life (c->last_rx, noted by whoever reads them), so a busy connection is
 * never pinged. Its state is the health part of relock__conn_t. */
#ifndef RELOCK__REDIS_HEALTH_H
#define RELOCK__REDIS_HEALTH_H

#include "redis/conn_state.h"

struct redisReply;

void relock__health_init(relock__conn_t *c);

/* The connection is ready: the interval starts now. */
void relock__health_start(relock__conn_t *c);

/* The connection is going: no PING, no verdict. */
void relock__health_stop(relock__conn_t *c);

/* 1 if reply (read on a raw connection) answers our PING, which it then
 * settles; 0 if it is someone else's. */
int relock__health_pong(relock__conn_t *c, const struct redisReply *reply);

/* Keepalive and TCP_USER_TIMEOUT on a new TCP socket (best effort). */
void relock__health_socket(relock__conn_t *c, int fd);

#endif /* RELOCK__REDIS_HEALTH_H */
