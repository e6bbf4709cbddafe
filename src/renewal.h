/* The watchdog: what this client holds, and the renewal of the locks held
 * without a fixed lease.
 *
 * Every hold (a lock name and an owner) is tracked with its local hold count
 * and, for a watchdog lease, the local deadline until which the lock is known
 * to be held: the time the last successful acquisition or renewal was *sent*
 * plus the lease, never later than Redis's own expiry. Every third of the
 * watchdog timeout all watchdog holds are renewed, in batches of up to 100
 * keys per script call; batches are independent and retried on transient
 * errors. A hold whose renewal answers 0, or whose local deadline passes
 * without a successful renewal, is lost: its lock object's lost callback is
 * told, and a later release by that owner reports RELOCK_ELOST. Renewal of a
 * hold stops the moment its last hold is released. The cycle timer runs only
 * while something is renewed: an idle client never wakes. */
#ifndef RELOCK_RENEWAL_H
#define RELOCK_RENEWAL_H

#include <stddef.h>
#include <stdint.h>

#include "hashtab.h"
#include "list.h"
#include "wheel.h"

struct relock_client;
struct relock_lock;

#define RELOCK__RENEW_BATCH 100

typedef struct relock__hold {
  relock__hnode_t node;       /* in renewal->holds, by name and owner */
  relock__link_t renew_link;  /* in renewal->renewing while renewed */
  struct relock_lock *lock;   /* whose lost callback to call (a reference) */
  uint64_t owner;
  int64_t count;              /* holds taken minus holds released */
  int64_t lease_ms;           /* what a partial release keeps the lease at */
  uint64_t deadline_ns;       /* known held until (watchdog holds) */
  int refs;                   /* the table's, plus each batch's in flight */
  unsigned watchdog : 1;
  unsigned lost : 1;
  unsigned removed : 1;       /* out of the table: the batch replies ignore it */
  int releases_in_flight;     /* a 0 from renew may be our own release */
} relock__hold_t;

typedef struct relock__renewal {
  struct relock_client *client;
  relock__htab_t holds;
  relock__link_t renewing;
  size_t nrenewing;
  relock__timer_t cycle;      /* every third of the watchdog timeout */
  relock__timer_t check;      /* an early deadline check when renewals fail */
  int64_t watchdog_ms;
  int closing;
  /* statistics, for tests and benchmarks */
  uint64_t cycles;
  uint64_t batches;
  uint64_t renewed;
  uint64_t lost;
} relock__renewal_t;

int relock__renewal_init(relock__renewal_t *r, struct relock_client *client);

/* Stops renewing and forgets every hold (without releasing anything). */
void relock__renewal_close(relock__renewal_t *r);

relock__hold_t *relock__renewal_find(relock__renewal_t *r, struct relock_lock *lock, uint64_t owner);

/* owner acquired lock (one more hold); the acquisition was sent at sent_ns.
 * Returns 0 or RELOCK_ENOMEM (the hold is then not renewed). */
int relock__renewal_acquired(relock__renewal_t *r, struct relock_lock *lock, uint64_t owner, int watchdog,
                             int64_t lease_ms, uint64_t sent_ns);

typedef enum relock__release_outcome {
  RELOCK__RELEASE_FAILED = 0, /* no answer: nothing is known */
  RELOCK__RELEASE_FREED,      /* the lock is free now */
  RELOCK__RELEASE_REMAINS,    /* owner still holds it */
  RELOCK__RELEASE_NOT_OWNER   /* Redis says owner does not hold it */
} relock__release_outcome_t;

/* A release by owner is about to be sent / has been answered. While one is
 * in flight a renewal answering 0 is not taken for a loss. release_done
 * returns 1 if owner's hold had been lost (or is found lost by this answer),
 * so that the release reports RELOCK_ELOST rather than "not owner". */
void relock__renewal_release_started(relock__renewal_t *r, struct relock_lock *lock, uint64_t owner);
int relock__renewal_release_done(relock__renewal_t *r, struct relock_lock *lock, uint64_t owner,
                                 relock__release_outcome_t outcome);

/* The lease a partial release keeps for owner's remaining holds. */
int64_t relock__renewal_lease_for(relock__renewal_t *r, struct relock_lock *lock, uint64_t owner);

#endif /* RELOCK_RENEWAL_H */
