/* What every object does with Redis's answers: turns a reply into its
 * future's value, and asks a plain query. */
#ifndef RELOCK__OBJECTS_REPLIES_H
#define RELOCK__OBJECTS_REPLIES_H

#include <relock/client.h>
#include <relock/future.h>
#include <relock/reply.h>

/* Reply handlers (relock__reply_fn). Each fails the future with the
 * server's error (its code from redis/reply.h) or RELOCK_EPROTO for a reply
 * of a type it does not expect. */
/* An integer (or a number in a bulk string); nil: -1. */
void relock__reply_to_int(relock_future_t *f, const relock_reply_t *reply, void *arg);
/* An integer as a boolean. */
void relock__reply_to_bool(relock_future_t *f, const relock_reply_t *reply, void *arg);
/* A count stored as a string (HGET, GET): nil is 0. */
void relock__reply_to_count(relock_future_t *f, const relock_reply_t *reply, void *arg);

/* Sends a plain command (argv[1] its key, which routes it), retried when
 * safe - queries are. The future is on_reply's; NULL when out of memory. */
relock_future_t *relock__object_query(relock_client_t *client, int argc, const char *const *argv, const size_t *lens,
                                      void (*on_reply)(relock_future_t *f, const relock_reply_t *reply, void *arg));

#endif /* RELOCK__OBJECTS_REPLIES_H */
