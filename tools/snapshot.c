/* One look at the locks matching a pattern (snapshot.h).
 *
 * Per name, pipelined in batches: HGETALL and PTTL (a lock; WRONGTYPE for
 * a key of another type, which is no lock), LLEN of its fair queue and
 * EXISTS of its fence token (the kind: a reentrant lock, a fair one with
 * an empty queue and a spin lock look the same in Redis), then the
 * subscribers of every lock's channel (waiters.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hold.h"
#include "scan.h"
#include "snapshot.h"
#include "waiters.h"

#define BATCH 256
#define PER_KEY 4 /* HGETALL, PTTL, LLEN, EXISTS */

static relock_future_t *send_derived(relock_client_t *c, const char *cmd, const char *prefix, const name_t *name) {
  size_t n;
  char *key = derived_key(prefix, name->s, name->len, &n);
  const char *argv[] = {cmd, key};
  const size_t lens[] = {strlen(cmd), n};
  relock_future_t *f = key != NULL ? relock_client_command_async(c, 2, argv, lens) : NULL;
  free(key);
  return f;
}

static void send_key(relock_client_t *c, const name_t *name, relock_future_t **f) {
  const char *all[] = {"HGETALL", name->s}, *pttl[] = {"PTTL", name->s};
  const size_t all_lens[] = {7, name->len}, pttl_lens[] = {4, name->len};
  f[0] = relock_client_command_async(c, 2, all, all_lens);
  f[1] = relock_client_command_async(c, 2, pttl, pttl_lens);
  f[2] = send_derived(c, "LLEN", FAIR_QUEUE, name);
  f[3] = send_derived(c, "EXISTS", FENCE_TOKEN, name);
}

static int64_t integer(const relock_reply_t *r) {
  return r != NULL && r->type == RELOCK_REPLY_INTEGER ? r->integer : 0;
}

/* The holder fields of a lock hash, ", "-separated; their hold counts
 * added up into row. */
static int read_holders(const relock_reply_t *fields, lock_row_t *row) {
  size_t size = 1;
  for (size_t i = 0; i + 1 < fields->elements; i += 2)
    size += fields->element[i]->len + 2;
  if ((row->holders = malloc(size)) == NULL)
    return -1;
  size_t at = 0;
  for (size_t i = 0; i + 1 < fields->elements; i += 2) {
    int64_t count = 0;
    if (is_mode(fields, i) || hold_count(fields->element[i + 1], &count) != 0)
      continue;
    if (at > 0)
      memcpy(row->holders + at, ", ", 2), at += 2;
    memcpy(row->holders + at, fields->element[i]->str, fields->element[i]->len);
    at += fields->element[i]->len;
    row->nholders++;
    row->holds += count;
  }
  row->holders[at] = '\0';
  return 0;
}

/* A row of name if it is a held lock (f: send_key's answers); 1 when it
 * is none (another type, free now, not a lock's hash), -1 on error. */
static int read_key(const name_t *name, relock_future_t **f, lock_row_t *row, char *why, size_t size) {
  const relock_reply_t *fields = await_reply(f[0]), *ttl = await_reply(f[1]);
  if (fields == NULL || ttl == NULL) {
    relock_future_t *bad = fields == NULL ? f[0] : f[1];
    if (bad != NULL && relock_future_error(bad) == RELOCK_ESERVER &&
        strncmp(relock_future_message(bad), "WRONGTYPE", 9) == 0)
      return 1;
    failure(bad, why, size);
    return -1;
  }
  if (fields->type != RELOCK_REPLY_ARRAY || fields->elements == 0 || bad_field(fields) != NULL)
    return 1;
  memset(row, 0, sizeof *row);
  if ((row->name = malloc(name->len + 1)) == NULL || read_holders(fields, row) != 0) {
    free(row->name);
    failure(NULL, why, size);
    return -1;
  }
  memcpy(row->name, name->s, name->len + 1);
  row->len = name->len;
  row->ttl_ms = ttl->type == RELOCK_REPLY_INTEGER && ttl->integer >= 0 ? ttl->integer : -1;
  int64_t queued = integer(await_reply(f[2]));
  const char *mode = rw_mode(fields);
  row->kind = mode != NULL ? mode : queued > 0 ? "fair" : integer(await_reply(f[3])) > 0 ? "fenced" : "lock";
  row->waiters = queued > 0 ? queued : -1; /* the others: their channel's subscribers */
  return 0;
}

static int grow(snapshot_t *s, size_t *cap) {
  if (s->n < *cap)
    return 0;
  size_t more = *cap ? 2 * *cap : 64;
  lock_row_t *rows = realloc(s->rows, more * sizeof *rows);
  if (rows == NULL)
    return -1;
  s->rows = rows, *cap = more;
  return 0;
}

/* The rows of n names, read together. */
static int read_batch(relock_client_t *c, const name_t *names, size_t n, snapshot_t *s, size_t *cap) {
  relock_future_t *f[PER_KEY * BATCH];
  for (size_t i = 0; i < n; i++)
    send_key(c, &names[i], f + PER_KEY * i);
  int code = 0;
  for (size_t i = 0; i < n && code == 0; i++) {
    if (grow(s, cap) != 0) {
      failure(NULL, s->error, sizeof s->error);
      code = -1;
    } else {
      int r = read_key(&names[i], f + PER_KEY * i, &s->rows[s->n], s->error, sizeof s->error);
      code = r < 0 ? -1 : 0;
      s->n += r == 0;
    }
  }
  for (size_t i = 0; i < PER_KEY * n; i++) {
    relock_future_wait(f[i], RELOCK_INFINITE); /* those an error left unread */
    relock_future_release(f[i]);
  }
  return code;
}

/* The subscribers of each row's channel, for the rows whose waiters are
 * not known yet (not fair locks with a queue). A failure leaves them
 * unknown (-1), with why in s->error: the locks are still worth showing. */
static void count_waiters(relock_client_t *c, const relock_reply_t *masters, snapshot_t *s) {
  char **channels = calloc(s->n + 1, sizeof *channels);
  size_t *lens = calloc(s->n + 1, sizeof *lens), *at = calloc(s->n + 1, sizeof *at), m = 0;
  int64_t *counts = calloc(s->n + 1, sizeof *counts);
  int ok = channels != NULL && lens != NULL && at != NULL && counts != NULL;
  for (size_t i = 0; ok && i < s->n; i++) {
    if (s->rows[i].waiters >= 0)
      continue;
    const char *kind = s->rows[i].kind;
    const char *prefix = strcmp(kind, "read") == 0 || strcmp(kind, "write") == 0 ? RWLOCK_CHANNEL : LOCK_CHANNEL;
    ok = (channels[m] = derived_key(prefix, s->rows[i].name, s->rows[i].len, &lens[m])) != NULL;
    at[m++] = i;
  }
  if (!ok)
    failure(NULL, s->error, sizeof s->error);
  else if (m > 0 && count_subscribers(c, masters, channels, lens, m, counts, s->error, sizeof s->error) == 0)
    for (size_t k = 0; k < m; k++)
      s->rows[at[k]].waiters = counts[k];
  for (size_t k = 0; channels != NULL && k < m; k++)
    free(channels[k]);
  free(channels);
  free(lens);
  free(at);
  free(counts);
}

int snapshot_take(relock_client_t *c, const char *pattern, snapshot_t *s) {
  memset(s, 0, sizeof *s);
  static const char *const types[] = {"hash", NULL};
  const relock_reply_t *masters;
  names_t v = {NULL, 0, 0};
  size_t cap = 0;
  relock_future_t *mf = masters_of(c, &masters, s->error, sizeof s->error);
  int code = masters == NULL || scan_names(c, masters, pattern, types, &v, s->error, sizeof s->error) != 0 ? -1 : 0;
  for (size_t i = 0; i < v.n && code == 0; i += BATCH)
    code = read_batch(c, v.at + i, v.n - i < BATCH ? v.n - i : BATCH, s, &cap);
  if (code == 0)
    count_waiters(c, masters, s);
  names_free(&v);
  relock_future_release(mf);
  return code;
}

void snapshot_free(snapshot_t *s) {
  for (size_t i = 0; i < s->n; i++) {
    free(s->rows[i].name);
    free(s->rows[i].holders);
  }
  free(s->rows);
  s->rows = NULL;
  s->n = 0;
}
