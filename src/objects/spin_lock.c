/* The spin lock (Redisson's RSpinLock): the reentrant lock's hash and
 * scripts, without pub/sub - a waiter tries again after a back-off
 * (lock_acquire.c: 1 ms doubling to 128 ms, +25-50 %, never past the
 * holder's TTL), and its releases publish nothing. Only relock's force
 * release publishes (on the reentrant lock's channel), so that a holder
 * that watches its hold (lock_watch.c) hears it; Redisson's forceUnlock
 * publishes nothing, and is found at the holder's next renewal. */
#include <config.h>

#include "objects/lock_impl.h"

static const relock__lock_kind_t spin = {
    .what = "spin lock",
    .stat = RELOCK_KIND_SPIN_LOCK,
    .field_suffix = "",
    .channel_prefix = "redisson_lock__channel", /* named in the scripts' keys; only a force release publishes */
    .role = RELOCK__ROLE_PLAIN,
    .wait = RELOCK__WAIT_SPIN,
    .latch_passed_on = 1,
    .acquire = relock__rlock_acquire,
    .undo = relock__rlock_undo,
    .release = relock__rlock_release,
    .force_release = relock__rlock_force_release,
};

relock_lock_t *relock_spin_lock_new(relock_client_t *client, const char *name, relock_error_t *err) {
  return relock__lock_new(client, name, &spin, err);
}
