/* Redisson's lock hash, as relock(1) reads it: fields "<client-id>:<owner>"
 * with hold counts, and a read-write lock's "mode". Shared by status, list
 * (inspect.c) and top (snapshot.c). */
#ifndef RELOCK_TOOLS_HOLD_H
#define RELOCK_TOOLS_HOLD_H

#include <stddef.h>
#include <stdint.h>

#include <relock/relock.h>

/* A hold count: a decimal integer from 1 on, as Redisson writes it. 0, or
 * -1 if v is not one. */
int hold_count(const relock_reply_t *v, int64_t *count);

/* Where the owner begins in a holder field "<client-id>:<owner>" (after the
 * last ':'; client ids may have some), or 0 if it is not one. */
size_t owner_at(const relock_reply_t *field);

int is_string(const relock_reply_t *v, const char *s);

/* Whether HGETALL's pair at i is a read-write lock's "mode". */
int is_mode(const relock_reply_t *fields, size_t i);

/* HGETALL's reply: the first field that is not a lock's holder, or NULL if
 * they all are. */
const relock_reply_t *bad_field(const relock_reply_t *fields);

/* HGETALL's reply: "read" or "write" for a read-write lock, else NULL. */
const char *rw_mode(const relock_reply_t *fields);

#endif /* RELOCK_TOOLS_HOLD_H */
