/* The keys matching a pattern on every master (SCAN ... MATCH ... COUNT,
 * never KEYS): SCAN answers for one node, and a Redis Cluster's keys are
 * spread over its masters. Used by list (inspect.c) and top (snapshot.c). */
#ifndef RELOCK_TOOLS_SCAN_H
#define RELOCK_TOOLS_SCAN_H

#include <stddef.h>

#include <relock/relock.h>

typedef struct name {
  char *s; /* malloc'ed, NUL-terminated (a name may hold NULs: len says) */
  size_t len;
} name_t;

typedef struct names {
  name_t *at;
  size_t n, cap;
} names_t;

/* Waits for f: its reply, or NULL if it failed (or is NULL: no memory). */
const relock_reply_t *await_reply(relock_future_t *f);

/* Writes why f failed ("out of memory" for NULL) into why. */
void failure(relock_future_t *f, char *why, size_t size);

/* The masters to SCAN (relock_client_masters_async), waited for: the
 * future (the caller releases it) and its array reply in *masters, or NULL
 * in *masters with why. */
relock_future_t *masters_of(relock_client_t *c, const relock_reply_t **masters, char *why, size_t size);

/* Adds the keys matching pattern on every master of masters to v, those
 * of the given types (NULL-terminated: "hash", "string"; Redis before 6.0,
 * which has no TYPE filter, gives the keys of every type), then sorts v by
 * bytes and drops duplicates. 0, or -1 with why. */
int scan_names(relock_client_t *c, const relock_reply_t *masters, const char *pattern, const char *const *types,
               names_t *v, char *why, size_t size);

void names_free(names_t *v);

#endif /* RELOCK_TOOLS_SCAN_H */
