/* Who waits for a lock, as far as Redis can tell: the subscribers of the
 * channel its waiters listen on (PUBSUB NUMSUB and, for a Redis Cluster's
 * sharded pub/sub, PUBSUB SHARDNUMSUB, asked of every master and added up),
 * or for a fair lock the length of its queue. A subscriber is a
 * connection: one per waiting process, however many of its threads wait.
 * Used by status, list (inspect.c) and top (snapshot.c). */
#ifndef RELOCK_TOOLS_WAITERS_H
#define RELOCK_TOOLS_WAITERS_H

#include <stddef.h>
#include <stdint.h>

#include <relock/relock.h>

/* The channel prefixes of Redisson's kinds. */
#define LOCK_CHANNEL "redisson_lock__channel"   /* a lock, fenced lock (and a spin lock's force release) */
#define RWLOCK_CHANNEL "redisson_rwlock"        /* a read-write lock */
#define SEMAPHORE_CHANNEL "redisson_sc"         /* both semaphores */
#define FAIR_QUEUE "redisson_lock_queue"        /* a fair lock's waiting holders, a list */
#define FENCE_TOKEN "redisson_lock_token"       /* a fenced lock's token counter */

/* Redisson's name derived from a name: "prefix:{name}", or "prefix:name"
 * when name has a '{' already (its hash tag then comes from the name); the
 * same cluster slot as name. Malloc'ed (NULL out of memory), length in *n. */
char *derived_key(const char *prefix, const char *name, size_t len, size_t *n);

/* The subscribers of n channels, each added up over every master of
 * masters (an array reply of addresses), into counts. 0, or -1 with why (a
 * refused PUBSUB, Redis unreachable): the counts are then unknown. */
int count_subscribers(relock_client_t *c, const relock_reply_t *masters, char *const *channels, const size_t *lens,
                      size_t n, int64_t *counts, char *why, size_t size);

#endif /* RELOCK_TOOLS_WAITERS_H */
