/* The watchdog: what this client holds, and the renewal of the locks held
 * without a fixed lease.
 *
 * Every hold (a key and a field in it) is tracked with its local hold count
 * and, for a watchdog lease, the local deadline until which the lock is known
 * to be held: the time the last successful acquisition or renewal was *sent*
 * plus the lease, never later than Redis's own expiry (acquisitions, renewals
 * and partial releases only extend a key's expiry, so the furthest of
 * several leases is the one kept; a read release sets the lock's from the
 * read holds' timeout keys, which only extend too). Every third of the
 * watchdog timeout all watchdog holds are renewed, in batches of up to 100
 * keys per script call; batches are independent and retried on transient
 * errors. With min-replicas-acked, a renewal fewer replicas acknowledged
 * (WAIT, redis/call.h) has failed, as if it had not reached Redis. A hold
 * whose renewal answers 0, or whose local deadline passes
 * without a successful renewal, is lost: its holder's on_lost is told, and
 * a later release by that owner reports RELOCK_ELOST (for
 * RELOCK__LOST_KEPT_MS; then the hold is forgotten). Renewal of a hold stops
 * the moment its last hold is released. The cycle timer runs only while
 * something is renewed: an idle client never wakes.
 *
 * Every hold, fixed leases included, knows locally until when it is valid:
 * the send time of its last successful acquisition or renewal plus the lease,
 * less a drift margin for the server's clock running faster than ours. A
 * fixed-lease hold is forgotten once that time has passed (Redis lets it
 * expire; a later release finds nothing to release).
 *
 * A fixed-lease hold is never renewed, but it is lost like any other: each
 * cycle checks the fixed-lease holds too, in the same batches
 * (lua/lock_check.lua: is the field there, and for how long does Redis
 * keep it? - it extends nothing), and one found gone before its validity
 * deadline was taken away (deleted, force released, lost in a failover):
 * Redis cannot have let it expire yet. So every loss is told within a cycle
 * (a third of the watchdog timeout) and a round trip, whatever the lease.
 * A foreign client can cut a key's expiry below a lease (a plain PEXPIRE,
 * as Redisson's read-lock renewal does with its own lease), which nothing
 * here can stop; but a belief is never longer than what Redis keeps: the
 * check brings the hold's deadline down to its send time plus the time
 * Redis keeps the hold (the key's PTTL; for a read hold no longer than its
 * owner's longest timeout key) less the drift margin, never up. A hold so
 * cut is lost when that deadline passes (or at once, if it has), its holder
 * told, before Redis lets the key go.
 *
 * The watchdog knows holds as plain data - a key, an opaque owner, a lease,
 * a deadline - and a holder interface that names the key and the field and
 * is told of a loss; never the objects that took them, so that every kind of
 * object (lock, semaphore, ...) can use it. */
#ifndef RELOCK__WATCHDOG_RENEWAL_H
#define RELOCK__WATCHDOG_RENEWAL_H

#include <stddef.h>
#include <stdint.h>

#include <relock/future.h>
#include <relock/stats.h>

#include "base/hashtab.h"
#include "base/list.h"
#include "loop/wheel.h"
#include "redis/redis.h"

#define RELOCK__RENEW_BATCH 100

/* How long a lost hold is remembered, so that its owner's release reports
 * RELOCK_ELOST rather than RELOCK_ENOTOWNER. */
#define RELOCK__LOST_KEPT_MS 60000

/* The part of a lease not trusted: Redis's clock may run faster than ours
 * (1%, as Redisson's RedLock assumes), plus 2 ms for the rounding of
 * PEXPIRE and of our clock. */
static inline int64_t relock__validity_margin_ms(int64_t lease_ms) { return lease_ms / 100 + 2; }

typedef struct relock__renewal relock__renewal_t;

/* The longest field of a hold, NUL included. */
#define RELOCK__HOLD_FIELD_MAX 96

/* What a hold is in its key: one owner may hold one key in two roles at
 * once (a read-write lock's writer taking read holds), and a read hold's
 * renewal also extends its per-hold timeout keys (Redisson's read lock:
 * "<base>:<field>:rwlock_timeout:<n>" for n = 1..count, base being the key
 * in braces, or the key itself when it has a hash tag). A permit of a
 * permit-expirable semaphore is not in its key but in "<base>:timeout", a
 * zset whose score is the permit's expiry (Redisson's layout): its field is
 * the permit, the 16 bytes its id spells. */
typedef enum relock__hold_role {
  RELOCK__ROLE_PLAIN = 0, /* a reentrant lock's hold, or a write hold */
  RELOCK__ROLE_WRITE,
  RELOCK__ROLE_READ,
  RELOCK__ROLE_PERMIT
} relock__hold_role_t;

/* A hold's identity: its key in Redis, its role, and the opaque owner the
 * holder knows it by (for a lock, the owner whose field "<client-id>:<owner>"
 * is in the key). */
typedef struct relock__hold_id {
  const char *key;
  size_t key_len;
  uint64_t owner;
  relock__hold_role_t role;
  relock_kind_t kind;       /* what its statistics are counted under */
} relock__hold_id_t;

typedef struct relock__holder relock__holder_t;

/* What the watchdog asks of whoever took a hold. The watchdog keeps one
 * pointer to the holder per hold, not copies of the key and the field: a
 * hold is kept per held lock, so its size is the client's memory per lock.
 *   what     what a hold is called in messages ("lock", "permit");
 *   key      the key (valid while the holder lives), its length in *len;
 *   field    writes owner's field in the key (NUL-terminated), returns its
 *            length (< RELOCK__HOLD_FIELD_MAX; a permit's has NUL bytes);
 *   name     writes how messages name owner's hold (NUL-terminated);
 *   on_lost  owner's hold was found lost (reason RELOCK_ELOST or
 *            RELOCK_ETIMEDOUT, msg saying what happened); it may do
 *            anything, close the client included;
 *   drop     lets go of the reference the hold kept on the holder. */
typedef struct relock__holder_ops {
  const char *what; /* for messages: "lock", "permit" */
  const char *(*key)(const relock__holder_t *h, size_t *len);
  size_t (*field)(const relock__holder_t *h, uint64_t owner, char field[RELOCK__HOLD_FIELD_MAX]);
  void (*name)(const relock__holder_t *h, uint64_t owner, char name[RELOCK__HOLD_FIELD_MAX]);
  void (*on_lost)(relock__holder_t *h, uint64_t owner, int reason, const char *msg);
  void (*drop)(relock__holder_t *h);
  /* releases one hold of owner's (release-on-close), the holds that
   * remain keeping lease_ms; a close waits for its answer within the
   * command timeout. The future succeeds with an integer (1 freed, 0 holds
   * remain, < 0 not held) or a boolean (a permit: released or not held);
   * NULL when out of memory. */
  relock_future_t *(*release)(relock__holder_t *h, uint64_t owner, int64_t lease_ms);
} relock__holder_ops_t;

/* Embedded in the object that takes holds (a lock); the callbacks find the
 * object from it. */
struct relock__holder {
  const relock__holder_ops_t *ops;
};

typedef struct relock__hold relock__hold_t;

/* The end of a fixed lease, which only fixed-lease holds need: kept apart
 * from the hold (a hold is kept per held lock, and most are renewed). */
typedef struct relock__hold_lease {
  relock__link_t link;        /* in renewal->fixed: checked every cycle */
  relock__timer_t end;        /* the hold is forgotten once its lease has surely run out */
  relock__hold_t *hold;
  int64_t lease_ms;           /* the longest taken: what a partial release keeps */
} relock__hold_lease_t;

/* Which of link and fixed is in use
 * follows from the flags:
 *   renewed (watchdog, not lost)  link in renewal->renewing
 *   fixed lease (neither)         fixed, its end's timer running, fixed->link in renewal->fixed
 *   lost, its holder told         link in renewal->lost_holds
 *   lost, being told (telling)    link in check_deadlines' list
 *   removed                       neither */
struct relock__hold {
  relock__hnode_t node;       /* in renewal->holds, by key and owner */
  union {
    relock__link_t link;
    relock__hold_lease_t *fixed;
  };
  relock__holder_t *holder;   /* a reference, dropped with the hold */
  uint64_t owner;
  int64_t count;              /* holds taken minus holds released */
  uint64_t release_id[2];     /* the next release's request id (both 0: a new one), relock__renewal_pass_release_id */
  union {
    uint64_t deadline_ns;     /* known held until (monotonic, margin taken off) */
    uint64_t forget_ns;       /* lost: when it is forgotten */
  };
  int refs;                   /* the table's, plus each batch's in flight */
  int releases_in_flight;     /* a 0 from renew may be our own release */
  unsigned watchdog : 1;
  unsigned lost : 1;
  unsigned telling : 1;       /* lost, its holder not told yet (check_deadlines) */
  unsigned removed : 1;       /* out of the table: the batch replies ignore it */
  unsigned unsynced : 1;      /* its last renewal was not on enough replicas */
  unsigned cut : 1;           /* a fixed lease whose key someone cut shorter: its end is a loss */
  unsigned role : 2;          /* relock__hold_role_t */
  unsigned kind : 4;          /* relock_kind_t, for statistics */
  unsigned ended : 1;         /* its end (released, lost, lease run out) was counted */
  /* When it was taken, in ms on the monotonic clock, wrapping: what fits
   * the padding before the struct's end, exact for any hold shorter than
   * 49 days (the difference is taken modulo 2^32). */
  uint32_t since_ms;
};

/* 104 bytes, a 112-byte malloc chunk: the release id costs the 16 bytes a
 * latch key (about 80 bytes in Redis, and its DEL) would cost otherwise. */
_Static_assert(sizeof(void *) != 8 || sizeof(relock__hold_t) == 104,
               "a hold is kept per held lock: its size is memory per lock (issue 20)");

struct relock__renewal {
  relock__redis_t *redis;     /* where renewals and validations are sent */
  relock__wheel_t *wheel;
  relock__htab_t holds;
  relock__link_t renewing;
  size_t nrenewing;
  relock__link_t fixed;       /* the fixed-lease holds' leases, checked every cycle */
  size_t nfixed;
  relock__timer_t cycle;      /* every third of the watchdog timeout, while something is renewed or checked */
  relock__timer_t check;      /* an early deadline check when renewals fail */
  /* Lost holds, earliest forget_ns first (each is kept lost_kept_ms): one
   * timer forgets them all, so a hold needs no timer of its own for it. */
  relock__link_t lost_holds;
  relock__timer_t forget;     /* at the first lost hold's forget_ns */
  int64_t watchdog_ms;
  int64_t lost_kept_ms;       /* RELOCK__LOST_KEPT_MS (tests shorten it) */
  int closing;
  /* release-on-close: the holds released, and those that could not be
   * (no answer within the command timeout, an error, or not held) */
  size_t close_released;
  size_t close_unreleased;
  /* statistics, for tests and benchmarks */
  uint64_t cycles;
  uint64_t batches;           /* renewals */
  uint64_t checks;            /* checks of fixed-lease holds */
  uint64_t renewed;
  uint64_t lost;
  uint64_t unsynced;          /* batches acknowledged by too few replicas */
};

/* Renewals go to redis (which need not be set up yet); holds' timers run on
 * wheel; watchdog_ms is the lease of a watchdog hold. */
int relock__renewal_init(relock__renewal_t *r, relock__redis_t *redis, relock__wheel_t *wheel, int64_t watchdog_ms);

/* release-on-close: releases every hold not known lost, each of its
 * holds through its holder, counting into close_released and
 * close_unreleased as the answers come (by the end of the close: a close
 * waits for them within the command timeout). Call right before
 * relock__renewal_close. */
void relock__renewal_release_all(relock__renewal_t *r);

/* Stops renewing and forgets every hold (without releasing anything). */
void relock__renewal_close(relock__renewal_t *r);

relock__hold_t *relock__renewal_find(relock__renewal_t *r, const relock__hold_id_t *id);

/* The hold id was taken (one more hold) through holder; the acquisition
 * was sent at sent_ns, and Redis counts count holds of the owner now, this
 * one included (0: not said). Fewer than the owner had plus this one: the
 * earlier ones are gone (the key vanished, and this acquisition made it
 * afresh) - they are lost, told to the holder as any loss (RELOCK_ELOST),
 * and the owner holds what Redis counts. The watchdog takes over one
 * reference on holder: it keeps it with a new hold and drops it (ops->drop)
 * at once otherwise, errors included.
 * Returns 0, RELOCK_ENOMEM (the hold is then not renewed) or RELOCK_ECLOSED
 * (the client closed, possibly from the lost callback of an earlier hold
 * found past its validity, which this one replaces). */
int relock__renewal_acquired(relock__renewal_t *r, const relock__hold_id_t *id, relock__holder_t *holder,
                             int watchdog, int64_t lease_ms, uint64_t sent_ns, int64_t count);

/* The request id (bits) that the next release of hold id uses: its
 * acquisition's latch, which that release takes over (lua/lock_release.lua);
 * nothing when id is not held. take returns 1 and the id (forgotten: the
 * releases after it use ids of their own), or 0 when none was passed. */
void relock__renewal_pass_release_id(relock__renewal_t *r, const relock__hold_id_t *id, const uint64_t bits[2]);
int relock__renewal_take_release_id(relock__renewal_t *r, const relock__hold_id_t *id, uint64_t bits[2]);

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
void relock__renewal_release_started(relock__renewal_t *r, const relock__hold_id_t *id);
int relock__renewal_release_done(relock__renewal_t *r, const relock__hold_id_t *id,
                                 relock__release_outcome_t outcome);

/* A release by owner of a hold found lost: it is answered here, without
 * Redis (which may be out of reach, the reason for the loss), by
 * RELOCK_ELOST. Returns 1 if the hold is lost (one hold of it is let go:
 * the last forgets it), 0 if the release must ask Redis. */
int relock__renewal_release_lost(relock__renewal_t *r, const relock__hold_id_t *id);

/* The lease a partial release keeps for the hold's remaining holds. */
int64_t relock__renewal_lease_for(relock__renewal_t *r, const relock__hold_id_t *id);

/* How long the hold is known to be valid from now, in ms (0: it must be
 * taken as lost now), without asking Redis. RELOCK_ENOTOWNER when this
 * client has no such hold, RELOCK_ELOST when it was found lost. */
int64_t relock__renewal_validity_ms(relock__renewal_t *r, const relock__hold_id_t *id);

/* Asks Redis whether the hold is still there, renewing a watchdog hold on
 * the way (its validity starts again); a fixed lease is only checked. An
 * answer "gone" declares it lost (a fixed lease past its validity deadline:
 * forgotten, its lease having run out). The future succeeds with a
 * boolean. NULL when out of memory. */
relock_future_t *relock__renewal_validate(relock__renewal_t *r, const relock__hold_id_t *id);

#endif /* RELOCK__WATCHDOG_RENEWAL_H */
