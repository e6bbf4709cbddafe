/* Pieces of the lock operations shared by lock.c and lock_acquire.c. */
#ifndef RELOCK_LOCK_OPS_H
#define RELOCK_LOCK_OPS_H

#include <stdint.h>

#include <relock/future.h>

#include "objects/lock_impl.h"

/* How long a latch (acquire or release) remembers its answer. */
int64_t relock__latch_ttl_ms(const relock_client_t *c);

/* A random request id: 32 hex digits. */
void relock__request_id(relock_client_t *c, char id[33]);

/* Sends the release script for one hold of owner (keeping lease_ms for the
 * holds that remain). The future succeeds with the script's answer: 1 freed,
 * 0 holds remain, -1 not the owner. NULL when out of memory. */
relock_future_t *relock__lock_send_release(relock_lock_t *lock, uint64_t owner, int64_t lease_ms);

#endif /* RELOCK_LOCK_OPS_H */
