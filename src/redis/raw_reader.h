/* The subscriber's reader under hiredis: a raw connection (one with
 * hooks.on_push) reads its socket itself once ready, parses with a reader
 * of its own, and hands every reply to on_push (the answer to its PING
 * excepted, which health.h settles); it sends with relock__conn_write_raw.
 * hiredis's own pub/sub bookkeeping, which asserts on what it does not
 * expect, never runs. An error reply, a protocol error or on_push's
 * objection drops the connection through c->life. */
#ifndef RELOCK__REDIS_RAW_READER_H
#define RELOCK__REDIS_RAW_READER_H

#include <stddef.h>

#include "redis/conn_state.h"

/* The connection is ready: from now on its socket is read here. */
void relock__raw_start(relock__conn_t *c);

/* The context is gone: the reader goes with it. */
void relock__raw_stop(relock__conn_t *c);

/* Appends a command to a ready raw connection's output (no reply is
 * awaited: answers reach hooks.on_push). 0, or -1 if the connection is not
 * ready or memory ran out. */
int relock__conn_write_raw(relock__conn_t *c, int argc, const char *const *argv, const size_t *lens);

#endif /* RELOCK__REDIS_RAW_READER_H */
