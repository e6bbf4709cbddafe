/* Who waits for a lock (waiters.h).
 *
 * Classic pub/sub is cluster-wide: a waiter subscribes on one node, and
 * NUMSUB counts only that node's subscribers, so every master is asked and
 * the counts added. Sharded pub/sub (Redis 7.0+ Cluster, which relock and
 * Redisson use when the cluster has it) keeps a channel's subscribers on
 * its slot's owner alone; SHARDNUMSUB elsewhere says 0, so the same sum
 * holds. A server without SHARDNUMSUB (before 7.0) has no sharded
 * subscribers: its error counts 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scan.h"
#include "waiters.h"

#define CHUNK 128 /* channels per PUBSUB command */

char *derived_key(const char *prefix, const char *name, size_t len, size_t *n) {
  int tagged = memchr(name, '{', len) != NULL;
  size_t plen = strlen(prefix);
  *n = plen + 1 + len + (tagged ? 0 : 2);
  char *s = malloc(*n + 1);
  if (s == NULL)
    return NULL;
  char *p = s;
  memcpy(p, prefix, plen);
  p += plen;
  *p++ = ':';
  if (!tagged)
    *p++ = '{';
  memcpy(p, name, len);
  p += len;
  if (!tagged)
    *p++ = '}';
  *p = '\0';
  return s;
}

/* Adds NUMSUB's answer (channel, count, ...) to counts, in order. */
static int add_counts(const relock_reply_t *r, size_t n, int64_t *counts) {
  if (r->type != RELOCK_REPLY_ARRAY || r->elements != 2 * n)
    return -1;
  for (size_t i = 0; i < n; i++) {
    const relock_reply_t *v = r->element[2 * i + 1];
    if (v->type != RELOCK_REPLY_INTEGER || v->integer < 0)
      return -1;
    counts[i] += v->integer;
  }
  return 0;
}

/* Whether f failed as a server without SHARDNUMSUB fails. */
static int unknown_subcommand(relock_future_t *f) {
  const char *m = relock_future_error(f) == RELOCK_ESERVER ? relock_future_message(f) : "";
  return strstr(m, "nknown subcommand") != NULL || strstr(m, "nknown command") != NULL;
}

/* NUMSUB and SHARDNUMSUB of n channels (n <= CHUNK) on every master. */
static int count_chunk(relock_client_t *c, const relock_reply_t *masters, char *const *channels, const size_t *lens,
                       size_t n, int64_t *counts, char *why, size_t size) {
  const char *argv[2 + CHUNK];
  size_t argvlen[2 + CHUNK];
  argv[0] = "PUBSUB", argvlen[0] = 6;
  for (size_t i = 0; i < n; i++)
    argv[2 + i] = channels[i], argvlen[2 + i] = lens[i];
  size_t nm = masters->elements;
  relock_future_t **f = calloc(2 * nm + 1, sizeof *f);
  if (f == NULL) {
    failure(NULL, why, size);
    return -1;
  }
  for (size_t m = 0; m < nm; m++) {
    const char *node = masters->element[m]->str;
    if (masters->element[m]->type != RELOCK_REPLY_STRING)
      continue;
    for (int sharded = 0; sharded < 2; sharded++) {
      argv[1] = sharded ? "SHARDNUMSUB" : "NUMSUB", argvlen[1] = strlen(argv[1]);
      f[2 * m + sharded] = relock_client_command_at_async(c, node, (int)(2 + n), argv, argvlen);
    }
  }
  int code = 0;
  for (size_t m = 0; m < 2 * nm; m++) {
    if (masters->element[m / 2]->type != RELOCK_REPLY_STRING)
      continue;
    const relock_reply_t *r = await_reply(f[m]);
    if (code != 0)
      ;
    else if (r == NULL && m % 2 == 1 && f[m] != NULL && unknown_subcommand(f[m]))
      ; /* no sharded pub/sub: nobody subscribed so */
    else if (r == NULL) {
      failure(f[m], why, size);
      code = -1;
    } else if (add_counts(r, n, counts) != 0) {
      snprintf(why, size, "unexpected reply to PUBSUB %s", m % 2 ? "SHARDNUMSUB" : "NUMSUB");
      code = -1;
    }
  }
  for (size_t m = 0; m < 2 * nm; m++)
    relock_future_release(f[m]);
  free(f);
  return code;
}

int count_subscribers(relock_client_t *c, const relock_reply_t *masters, char *const *channels, const size_t *lens,
                      size_t n, int64_t *counts, char *why, size_t size) {
  memset(counts, 0, n * sizeof *counts);
  for (size_t i = 0; i < n; i += CHUNK)
    if (count_chunk(c, masters, channels + i, lens + i, n - i < CHUNK ? n - i : CHUNK, counts + i, why, size) != 0)
      return -1;
  return 0;
}
