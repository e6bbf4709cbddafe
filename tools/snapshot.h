/* One look at the locks matching a pattern, for relock top: every master
 * SCANned, each lock's holders, hold count, TTL, kind and waiters. No
 * printing: top (top.c) shows it, or the error that stopped it. */
#ifndef RELOCK_TOOLS_SNAPSHOT_H
#define RELOCK_TOOLS_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include <relock/relock.h>

typedef struct lock_row {
  char *name;      /* malloc'ed; len bytes (a NUL may be one of them) */
  size_t len;
  const char *kind; /* "lock", "fair", "read", "write", "fenced" (static) */
  char *holders;   /* the holder fields, ", "-separated, a writer's ":write" kept (malloc'ed) */
  size_t nholders;
  int64_t holds;   /* the hold counts added up */
  int64_t ttl_ms;  /* -1: no expiry */
  int64_t waiters; /* -1: unknown */
} lock_row_t;

typedef struct snapshot {
  lock_row_t *rows;
  size_t n;
  char error[512]; /* "" or why the look failed (rows then empty) or was partial */
} snapshot_t;

/* Looks at the locks matching pattern: 0, or -1 with s->error. Free with
 * snapshot_free whatever it returns. */
int snapshot_take(relock_client_t *c, const char *pattern, snapshot_t *s);

void snapshot_free(snapshot_t *s);

#endif /* RELOCK_TOOLS_SNAPSHOT_H */
