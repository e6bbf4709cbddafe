/* The hold ledger: everything a hold *is*, from "acquired" to "gone", in
 * one room. The objects (lock, permit semaphore) say "I hold this"
 * (relock__hold_acquired, and relock__hold_give_back for what Redis counts
 * on top), "release it" (relock__hold_release), "is it still valid?"
 * (relock__hold_validity_ms; relock__renewal_validate asks Redis) and
 * nothing more; the renewal engine (renewal.h) renews and
 * checks the holds the ledger lists and reports Redis's answers back here.
 *
 * A hold (a key and a field in it) is kept with its local hold count, its
 * lease kind, and the local deadline until which it is known to be held:
 * the time the last successful acquisition or renewal was *sent* plus the
 * lease, less a drift margin, never later than Redis's own expiry
 * (acquisitions, renewals and partial releases only extend a key's expiry,
 * so the furthest of several leases is the one kept).
 *
 * A hold's states (docs/ARCHITECTURE.md has the table of every arrow and
 * the test that drives it):
 *
 *   held, renewed   a watchdog lease: in renewing, renewed every cycle;
 *   held, fixed     a fixed lease: in fixed, checked every cycle (is the
 *                   field there, for how long?), never extended; forgotten
 *                   once its deadline has surely passed (Redis lets it go).
 *                   A check answered late brings the deadline nearer (it
 *                   cannot tell a slow way from a cut expiry) and is sent
 *                   again at once; if nothing confirms the lease before
 *                   the nearer deadline, the hold is lost (RELOCK_ETIMEDOUT,
 *                   told): its owner was promised the whole lease;
 *   held, kept      no lease at all (a permit taken without one, with
 *                   release-on-close): in neither list; only a release or
 *                   the close ends it;
 *   letting go      its owner asked to release its last hold: never renewed
 *                   or checked again, whatever the answer; a release that
 *                   got no answer is retried in the background until Redis
 *                   answers or the lease has surely ended, then forgotten.
 *                   It counts for nothing: its validity is RELOCK_ENOTOWNER;
 *   lost            renewal answered "gone", a check found it taken away,
 *                   or its deadline passed unrenewed: its holder is told
 *                   once (on_lost), and it is kept lost_kept_ms, so that its
 *                   owner's release answers RELOCK_ELOST without Redis;
 *   gone            out of the table (forgotten, released).
 *
 * Whenever the owner's count and Redis's disagree, Redis's is the truth: an
 * acquisition that Redis counts fewer holds for than the owner had plus
 * one found the earlier ones gone (lost); a release that Redis answers
 * "freed" while the owner believed it held more ends those (lost). */
#ifndef RELOCK__WATCHDOG_HOLD_H
#define RELOCK__WATCHDOG_HOLD_H

#include <stddef.h>
#include <stdint.h>

#include <relock/future.h>
#include <relock/stats.h>

#include "base/hashtab.h"
#include "base/list.h"
#include "loop/wheel.h"
#include "redis/redis.h"

/* How long a lost hold is remembered, so that its owner's release reports
 * RELOCK_ELOST rather than RELOCK_ENOTOWNER. */
#define RELOCK__LOST_KEPT_MS 60000

/* The part of a lease not trusted: Redis's clock may run faster than ours
 * (1%, as Redisson's RedLock assumes), plus 2 ms for the rounding of
 * PEXPIRE and of our clock. */
static inline int64_t relock__validity_margin_ms(int64_t lease_ms) { return lease_ms / 100 + 2; }

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

/* How a hold's lease goes. */
typedef enum relock__lease_kind {
  RELOCK__LEASE_FIXED = 0, /* Redis lets it expire; checked, never extended */
  RELOCK__LEASE_RENEWED,   /* the watchdog's: renewed every third of it */
  RELOCK__LEASE_KEPT       /* none: a permit that never expires (release-on-close keeps it) */
} relock__lease_kind_t;

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

/* One release as the ledger asks the holder to send it. */
typedef struct relock__release_req {
  int64_t lease_ms;         /* what the holds that remain keep */
  uint64_t id[2];           /* its request id (the unlock latch's): the same on a retry */
  int on_close;             /* release-on-close: a close waits for its answer */
  uint64_t answer_by_ns;    /* 0, or retried until answered or this time (background) */
} relock__release_req_t;

/* What the ledger asks of whoever took a hold. The ledger keeps one
 * pointer to the holder per hold, not copies of the key and the field: a
 * hold is kept per held lock, so its size is the client's memory per lock.
 *   what     what a hold is called in messages ("lock", "permit"), or
 *   kind_what  when not NULL, what this holder's holds are called ("fair
 *            lock", "read lock": a lock object's kind);
 *   key      the key (valid while the holder lives), its length in *len;
 *   field    writes owner's field in the key (NUL-terminated), returns its
 *            length (< RELOCK__HOLD_FIELD_MAX; a permit's has NUL bytes);
 *   name     writes how messages name owner's hold (NUL-terminated);
 *   on_lost  owner's hold was found lost (reason RELOCK_ELOST or
 *            RELOCK_ETIMEDOUT, msg saying what happened); it may do
 *            anything, close the client included;
 *   drop     lets go of the reference the hold kept on the holder;
 *   release  sends one release of owner's hold; the future succeeds with
 *            an integer (1 freed, 0 holds remain, < 0 not held) or a
 *            boolean (a permit: released or not held); NULL when out of
 *            memory;
 *   takes_latch  NULL, or whether the holder's release takes over the latch
 *            of the acquisition as its request id (relock__hold_acquired's
 *            release_id); else each release gets one of its own;
 *   not_held_false  a release Redis answers "not held" succeeds with false
 *            (a permit's, as Redisson's tryRelease) rather than failing
 *            with RELOCK_ENOTOWNER. */
typedef struct relock__holder_ops {
  const char *what;
  const char *(*kind_what)(const relock__holder_t *h);
  const char *(*key)(const relock__holder_t *h, size_t *len);
  size_t (*field)(const relock__holder_t *h, uint64_t owner, char field[RELOCK__HOLD_FIELD_MAX]);
  void (*name)(const relock__holder_t *h, uint64_t owner, char name[RELOCK__HOLD_FIELD_MAX]);
  void (*on_lost)(relock__holder_t *h, uint64_t owner, int reason, const char *msg);
  void (*drop)(relock__holder_t *h);
  relock_future_t *(*release)(relock__holder_t *h, uint64_t owner, const relock__release_req_t *req);
  int (*takes_latch)(const relock__holder_t *h);
  int not_held_false;
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
  relock__link_t link;        /* in ledger->fixed: checked every cycle */
  relock__timer_t end;        /* the hold is forgotten once its lease has surely run out */
  relock__hold_t *hold;
  int64_t lease_ms;           /* the longest taken: what a partial release keeps */
  /* The deadline its acquisitions earned, what its owner counts on. A
   * check answered late may bring the deadline nearer (kept_for); ending
   * before this is then a loss, told, not a lease run out. */
  uint64_t promised_ns;
} relock__hold_lease_t;

/* Which of link and fixed is in use follows from the state:
 *   renewed (watchdog, not lost)   link in ledger->renewing
 *   fixed lease                    fixed, its end's timer running, fixed->link in ledger->fixed
 *   kept, letting go               link in no list
 *   lost, its holder told          link in ledger->lost_holds
 *   lost, being told (telling)     link in the deadline check's list
 *   removed                        neither */
struct relock__hold {
  relock__hnode_t node;       /* in ledger->holds, by key and owner */
  union {
    relock__link_t link;
    relock__hold_lease_t *fixed;
  };
  relock__holder_t *holder;   /* a reference, dropped with the hold */
  uint64_t owner;
  int64_t count;              /* holds taken minus holds released (asked) */
  uint64_t release_id[2];     /* the next release's request id (both 0: a new one) */
  union {
    uint64_t deadline_ns;     /* known held until (monotonic, margin taken off) */
    uint64_t forget_ns;       /* lost: when it is forgotten */
  };
  int refs;                   /* the table's, plus each batch's and release's in flight */
  int releases_in_flight;     /* a 0 from renew may be our own release */
  unsigned watchdog : 1;      /* lease kind RENEWED */
  unsigned kept : 1;          /* lease kind KEPT */
  unsigned letting_go : 1;    /* its last hold's release was asked */
  unsigned lost : 1;
  unsigned telling : 1;       /* lost, its holder not told yet (the deadline check) */
  unsigned removed : 1;       /* out of the table: the batch replies ignore it */
  unsigned unsynced : 1;      /* its last renewal was not on enough replicas */
  unsigned cut : 1;           /* a fixed lease whose key someone cut shorter: its end is a loss */
  unsigned role : 2;          /* relock__hold_role_t */
  unsigned kind : 4;          /* relock_kind_t, for statistics */
  unsigned ended : 1;         /* its end (released, lost, lease run out) was counted */
  /* When it was taken, in ms on the monotonic clock, wrapping: exact for
   * any hold shorter than 49 days (the difference is taken modulo 2^32). */
  uint32_t since_ms;
};

_Static_assert(sizeof(void *) != 8 || sizeof(relock__hold_t) == 104,
               "a hold is kept per held lock: its size is memory per lock (issue 20)");

typedef struct relock__ledger {
  relock__redis_t *redis;     /* where releases go; its settings, statistics and random source */
  relock__wheel_t *wheel;
  relock__htab_t holds;
  relock__link_t renewing;    /* held, renewed */
  size_t nrenewing;
  relock__link_t fixed;       /* held, fixed: their leases */
  size_t nfixed;
  relock__timer_t check;      /* an early deadline check when renewals fail */
  /* Lost holds, earliest forget_ns first (each is kept lost_kept_ms): one
   * timer forgets them all, so a hold needs no timer of its own for it. */
  relock__link_t lost_holds;
  relock__timer_t forget;     /* at the first lost hold's forget_ns */
  int64_t watchdog_ms;
  int64_t lost_kept_ms;       /* RELOCK__LOST_KEPT_MS (tests shorten it) */
  int closing;
  /* The renewal engine's: told when the holds renewed or checked change
   * (nrenewing, nfixed), so that its cycle runs while there are any and
   * stops at once when none are left (an idle client never wakes). */
  void (*changed)(void *arg);
  void *changed_arg;
  /* release-on-close: the holds released, and those that could not be
   * (no answer within the command timeout, an error, or not held) */
  size_t close_released;
  size_t close_unreleased;
  uint64_t lost;              /* holds found lost, for tests */
  size_t letting_go;          /* holds whose release is retried in the background now */
} relock__ledger_t;

int relock__ledger_init(relock__ledger_t *l, relock__redis_t *redis, relock__wheel_t *wheel, int64_t watchdog_ms);

/* release-on-close: releases every hold still held (not lost, not let
 * go), each of its holds through its holder, counting into close_released
 * and close_unreleased as the answers come (a close waits for them within
 * the command timeout), and hurries the releases retried in the
 * background. Call right before relock__ledger_close. */
void relock__ledger_release_all(relock__ledger_t *l);

/* Forgets every hold (without releasing anything). */
void relock__ledger_close(relock__ledger_t *l);

/* -- what the objects say ---------------------------------------------------*/

/* "I hold this": hold id was taken (one more hold) through holder, with
 * lease (lease_ms for a fixed one); the acquisition was sent at sent_ns,
 * and Redis counts count holds of the owner now, this one included (0: not
 * said). Fewer than the owner had plus this one: the earlier ones are gone
 * (the key vanished, and this acquisition made it afresh) - they are lost,
 * told to the holder as any loss, and the owner holds what Redis counts.
 * release_id, when not NULL, is the request id the next release uses (the
 * acquisition's latch, which that release takes over). The ledger takes
 * over one reference on holder: it keeps it with a new hold and drops it
 * (ops->drop) at once otherwise, errors included.
 * Redis counting more holds than the owner now believes (a field left from
 * a hold let go or forgotten within its drift margin, a duplicate) leaves
 * the difference in *surplus: holds nobody believes in, to be given back
 * at once (relock__hold_give_back) while the owner's turn is kept.
 * Returns 0, RELOCK_ENOMEM or RELOCK_ECLOSED (the client closed, possibly
 * from the lost callback of an earlier hold this one replaces). */
int relock__hold_acquired(relock__ledger_t *l, const relock__hold_id_t *id, relock__holder_t *holder,
                          relock__lease_kind_t lease, int64_t lease_ms, uint64_t sent_ns, int64_t count,
                          const uint64_t *release_id, int64_t *surplus);

/* Gives back n holds of hold id that Redis counts and its owner does not
 * believe in (relock__hold_acquired's surplus), through holder (a reference
 * taken over), one release after another, leaving the owner's count as it
 * is; settled(arg) once they are answered (or one is not: the owner's last
 * release gives back what is left). */
void relock__hold_give_back(relock__ledger_t *l, const relock__hold_id_t *id, relock__holder_t *holder, int64_t n,
                            void (*settled)(void *arg), void *arg);

/* "Release it": one release of hold id by its owner, through holder - the
 * one release protocol. A hold known lost is answered here, without Redis,
 * by RELOCK_ELOST. Otherwise the release is sent; the last hold's is let go
 * at once (never renewed again). A release that gets no answer fails with
 * the transport's error and a message saying when the lock is free at the
 * latest, and is retried in the background (same request id) until Redis
 * answers or the lease has surely ended. settled(arg), when not NULL, is
 * called once nothing of this release is in flight any more (answered, or
 * given up): the owner's next request on the key may go then. The ledger
 * takes over one reference on holder (kept while the release lives). NULL
 * when out of memory (settled is not called then). */
relock_future_t *relock__hold_release(relock__ledger_t *l, const relock__hold_id_t *id, relock__holder_t *holder,
                                      void (*settled)(void *arg), void *arg);

/* "Is it still valid?": how long hold id is known to be valid from now, in
 * ms (0: it must be taken as lost now), without asking Redis.
 * RELOCK_ENOTOWNER when this client holds no such hold (never, released,
 * let go, a fixed lease that ran out), RELOCK_ELOST when it was found lost,
 * INT64_MAX for a kept hold (no lease). */
int64_t relock__hold_validity_ms(relock__ledger_t *l, const relock__hold_id_t *id);

/* -- what the renewal engine says (renewal.c) -------------------------------*/

relock__hold_t *relock__hold_find(relock__ledger_t *l, const relock__hold_id_t *id);
void relock__hold_ref(relock__hold_t *hold);
void relock__hold_unref(relock__hold_t *hold);
const char *relock__hold_key(const relock__hold_t *hold, size_t *len);
size_t relock__hold_field(const relock__hold_t *hold, char field[RELOCK__HOLD_FIELD_MAX]);

/* Whether a renewal or check's answers apply to hold: it is still held
 * (not lost, let go or removed). */
static inline int relock__hold_held(const relock__hold_t *hold) {
  return !hold->removed && !hold->lost && !hold->letting_go;
}

/* A renewal sent at sent_ns succeeded: the hold is valid a lease from then. */
void relock__hold_renewed(relock__ledger_t *l, relock__hold_t *hold, uint64_t sent_ns);
/* Redis answered that the hold's field is gone. */
void relock__hold_gone(relock__ledger_t *l, relock__hold_t *hold);
/* A check sent at sent_ns answered that Redis keeps the fixed-lease hold
 * kept_ms more (-1: no expiry). Returns 1 when that answer shortened the
 * hold's deadline without showing that anyone cut the key: it may only
 * have come late (the way to Redis, or Redis, grew slow), so a check sent
 * now may confirm the lease again - the engine sends one. */
int relock__hold_kept_for(relock__ledger_t *l, relock__hold_t *hold, uint64_t sent_ns, int64_t kept_ms);
/* Declares lost every renewed hold whose deadline has passed (their
 * holders told); returns the earliest deadline left (UINT64_MAX: none). */
uint64_t relock__ledger_check_deadlines(relock__ledger_t *l, uint64_t now);
/* Arms the early deadline check if earliest comes before the next cycle. */
void relock__ledger_arm_check(relock__ledger_t *l, uint64_t now, uint64_t earliest);

#endif /* RELOCK__WATCHDOG_HOLD_H */
