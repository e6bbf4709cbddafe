/* The watchdog's renewal engine: every third of the watchdog timeout, all
 * holds the ledger (hold.h) lists as renewed are renewed, in batches of up
 * to 100 keys per script call whose keys share a cluster slot; batches are
 * independent and retried on transient errors. With min-replicas-acked, a
 * renewal fewer replicas acknowledged (WAIT, redis/call.h) has failed, as
 * if it had not reached Redis. The cycle timer runs only while something
 * is renewed or checked: an idle client never wakes.
 *
 * A fixed-lease hold is never renewed, but it is lost like any other: each
 * cycle checks the fixed-lease holds too, in the same batches
 * (lua/lock_check.lua: is the field there, and for how long does Redis
 * keep it? - it extends nothing), so every loss is told within a cycle (a
 * third of the watchdog timeout) and a round trip, whatever the lease.
 * Only holds in the state "held" are renewed or checked: once a hold is
 * let go, lost or forgotten, an answer about it changes nothing.
 *
 * What each answer means for a hold - renewed, gone (lost, or a fixed lease
 * run out), kept shorter than believed (cut) - is the ledger's to decide;
 * the engine only sends and reads. */
#ifndef RELOCK__WATCHDOG_RENEWAL_H
#define RELOCK__WATCHDOG_RENEWAL_H

#include <stddef.h>
#include <stdint.h>

#include <relock/future.h>

#include "loop/wheel.h"
#include "redis/redis.h"
#include "watchdog/hold.h"

#define RELOCK__RENEW_BATCH 100

typedef struct relock__renewal {
  relock__redis_t *redis;     /* where renewals and validations are sent */
  relock__wheel_t *wheel;
  relock__ledger_t *ledger;   /* the holds renewed and checked */
  relock__timer_t cycle;      /* every third of the watchdog timeout, while something is renewed or checked */
  int closing;
  /* statistics, for tests and benchmarks */
  uint64_t cycles;
  uint64_t batches;           /* renewals */
  uint64_t checks;            /* checks of fixed-lease holds */
  uint64_t renewed;
  uint64_t unsynced;          /* batches acknowledged by too few replicas */
} relock__renewal_t;

/* Renewals go to redis (which need not be set up yet), of ledger's holds;
 * the cycle runs on wheel. */
void relock__renewal_init(relock__renewal_t *r, relock__redis_t *redis, relock__wheel_t *wheel,
                          relock__ledger_t *ledger);

/* Stops renewing (the ledger's close forgets the holds). */
void relock__renewal_close(relock__renewal_t *r);

/* Asks Redis whether the hold is still there, renewing a watchdog hold on
 * the way (its validity starts again); a fixed lease is only checked. An
 * answer "gone" declares it lost (a fixed lease past its validity deadline:
 * forgotten, its lease having run out). The future succeeds with a
 * boolean (false for a hold not held: never, let go, lost, or kept
 * without a lease). NULL when out of memory. */
relock_future_t *relock__renewal_validate(relock__renewal_t *r, const relock__hold_id_t *id);

#endif /* RELOCK__WATCHDOG_RENEWAL_H */
