/* Pieces of the lock operations shared by lock.c and lock_acquire.c. */
#ifndef RELOCK__OBJECTS_LOCK_OPS_H
#define RELOCK__OBJECTS_LOCK_OPS_H

#include <stdint.h>

#include <relock/future.h>

#include "objects/lock_impl.h"

/* Sets call up for owner's operation on lock: the field (written into
 * field), the latch TTL, the publish command, retry-safe; the caller adds
 * the rest. */
void relock__lock_call_init(relock__lock_call_t *call, relock_lock_t *lock, uint64_t owner,
                            char field[RELOCK__FIELD_MAX]);

/* Sends the release script for one hold of owner (keeping lease_ms for the
 * holds that remain). The future succeeds with the script's answer: 1 freed,
 * 0 holds remain, -1 not the owner. NULL when out of memory. */
relock_future_t *relock__lock_send_release(relock_lock_t *lock, uint64_t owner, int64_t lease_ms);

#endif /* RELOCK__OBJECTS_LOCK_OPS_H */
