/* Replies nobody asked for, refused as hiredis's reader starts parsing them.
 *
 * hiredis (0.14 and 1.x alike) aborts the process (an assertion) when a
 * reply arrives that no command waits for on a connection it does not
 * believe subscribed: a server that is not Redis, or one that answers twice,
 * can send one. A guarded reader asks its guard as each reply (not each of
 * its elements) starts being parsed; a refused reply fails the reader with
 * a protocol error, and hiredis drops the connection instead of aborting.
 *
 * The guarded functions are one process-wide table, built once (thread-safe)
 * from hiredis's defaults; each reader finds its guard through its
 * privdata. The guard's policy is its owner's (conn.c). */
#ifndef RELOCK__REDIS_REPLY_GUARD_H
#define RELOCK__REDIS_REPLY_GUARD_H

#include "redis/conn_state.h" /* relock__reply_guard_t */

struct redisReader;

/* Guards reader, which must have hiredis's default reply functions (every
 * reader hiredis creates has): from now on g->refuse(g, type) is asked as
 * each reply starts, with hiredis's REDIS_REPLY_* type. 0, or -1 if the
 * table could not be built (out of memory) or reader has functions of
 * someone else's. */
int relock__reply_guard_install(struct redisReader *reader, relock__reply_guard_t *g);

#endif /* RELOCK__REDIS_REPLY_GUARD_H */
