/* Pieces of the lock operations shared by lock.c and lock_acquire.c. */
#ifndef RELOCK__OBJECTS_LOCK_OPS_H
#define RELOCK__OBJECTS_LOCK_OPS_H

#include <stdint.h>

#include <relock/future.h>

#include "objects/lock_impl.h"

/* Sends the release script for one hold of owner (keeping lease_ms for the
 * holds that remain). The future succeeds with the script's answer: 1 freed,
 * 0 holds remain, -1 not the owner. NULL when out of memory. */
relock_future_t *relock__lock_send_release(relock_lock_t *lock, uint64_t owner, int64_t lease_ms);

#endif /* RELOCK__OBJECTS_LOCK_OPS_H */
