/* Copies of hiredis replies as the public relock_reply_t (private to the
 * library): a command future carries one, so its reply outlives hiredis's. */
#ifndef RELOCK_REPLY_H
#define RELOCK_REPLY_H

#include <relock/client.h>

struct redisReply;

/* A deep copy of r in a single allocation (nodes, element arrays and string
 * bytes together), to be freed with relock__reply_free. NULL when out of
 * memory (or when r is NULL). Types hiredis 1.x adds for RESP3 map onto the RESP2 ones: double,
 * big number and verbatim string become STRING (their text), boolean becomes
 * INTEGER (0 or 1), map, set, push and attribute become ARRAY (a map as
 * key, value, key, value ...). An empty ARRAY has element NULL; only STRING,
 * STATUS and ERROR have a str (never NULL for them). */
relock_reply_t *relock__reply_copy(const struct redisReply *r);

/* Frees a copy (NULL is fine); fits relock__future_succeed_ptr's dtor. */
void relock__reply_free(void *reply);

#endif /* RELOCK_REPLY_H */
