/* What makes one kind of lock (reentrant, fair, read, write, fenced, spin)
 * different from another: its field suffix, how its waiters are woken, and
 * the scripts it runs. Everything else - the object, acquisition and
 * waiting, latches, the watchdog, the blocking calls - is shared
 * (lock.c, lock_acquire.c, wait_queue.c, sync.c), so a new kind is one
 * small C file with a relock__lock_kind_t and its scripts in ../../lua/
 * (and, to be public, its constructor in include/relock/ and its lines in
 * Makefile.am and its man page).
 *
 * The synchronizers that are waited for the same way - a semaphore's
 * permits, a count-down latch reaching zero - are kinds too, whose
 * acquisitions take no hold (no_hold): nothing for the watchdog to renew
 * or for a lost callback to report.
 *
 * Each operation of a kind gets a relock__lock_call_t with everything the
 * shared code knows (the holder's field, the latch, the lease, the publish
 * command, the call's options) and sends its script through the builder
 * of script_args.h; how its acquire script's answer reads, and what the
 * caller's future says, are operations too (read_answer, settle). A kind's
 * file includes lock_impl.h, which brings this header; the engine
 * (lock.c, lock_acquire.c) calls a kind only through its table, so a new
 * kind touches no shared file (tests/redis/test_kind.c defines one). */
#ifndef RELOCK__OBJECTS_LOCK_KIND_H
#define RELOCK__OBJECTS_LOCK_KIND_H

#include <stddef.h>
#include <stdint.h>

#include <relock/client.h>
#include <relock/error.h>
#include <relock/future.h>
#include <relock/lock.h>
#include <relock/stats.h>

#include "objects/keys.h"
#include "redis/call.h"
#include "watchdog/renewal.h"

/* One operation of one owner on a lock, as a kind's script needs it. */
typedef struct relock__lock_call {
  relock_lock_t *lock;
  uint64_t owner;
  const char *field;      /* the holder's field in the lock hash */
  size_t field_len;
  const char *latch;      /* this operation's latch (acquire, undo, release) */
  size_t latch_len;
  int64_t lease_ms;       /* acquire: the lease (a no_hold kind's: -1 for none); release: the one holds that remain keep */
  int64_t latch_ttl_ms;   /* how long a latch remembers its answer */
  int queue;              /* acquire: a wait, not a single try (a fair lock queues the waiter) */
  int64_t permits;        /* acquire: how many (a semaphore's; 1 for the locks) */
  const char *waker;      /* acquire: a waiter's process registers with this waker id while the
                             lock is held (NULL: a single try, or a kind that wakes otherwise) */
  int keep_waker;         /* acquire: the process has other waiters: it stays registered */
  const char *publish;    /* PUBLISH or SPUBLISH; "" when the kind publishes nothing (spin) */
  relock__call_spec_t spec; /* on_reply, retries, deadline, WAIT... set by the caller */
} relock__lock_call_t;

typedef relock_future_t *(*relock__lock_op_fn)(relock__lock_call_t *call);

/* An acquire script's answer, read by its kind (read_answer). */
typedef struct relock__answer {
  int acquired;   /* the acquisition took what it asked for */
  int64_t ttl_ms; /* not acquired: how long the holder's lease has left (-1: no expiry), the most a
                     waiter waits before trying again */
  int64_t count;  /* acquired: the owner's hold count in Redis now, this acquisition's included
                     (0: the kind takes no hold) */
  int64_t token;  /* acquired: what else the answer carried, for the kind's settle (a fenced lock's token) */
} relock__answer_t;

/* Reads an acquire script's answer (never an error reply: the engine
 * fails those itself): 0, or -1 when it is no answer this kind gives. */
typedef int (*relock__read_answer_fn)(const relock_reply_t *reply, relock__answer_t *a);

/* Completes the caller's future of an acquisition that ended without an
 * error: a is its answer when it acquired, NULL when it did not (a single
 * try, or the wait ran out); id is its request id (a string). */
typedef void (*relock__settle_fn)(relock_future_t *out, const relock__answer_t *a, const char *id);

/* The locks' answers (read_answer NULL): {count} acquired; nil acquired,
 * taking no hold (a semaphore's permits, a latch passed); an integer, the
 * holder's TTL. */
int relock__read_lock_answer(const relock_reply_t *reply, relock__answer_t *a);

/* How a waiter learns that it may try again. */
typedef enum relock__wait_mode {
  RELOCK__WAIT_CHANNEL,     /* the lock's channel: "0" wakes one waiter per process, "1" all */
  RELOCK__WAIT_OWN_CHANNEL, /* a channel of its own, "<lock channel>:<field>" (the fair lock's queue) */
  RELOCK__WAIT_SPIN,        /* none: tries again after a back-off (1 ms doubling to 128 ms, +25-50 %) */
  RELOCK__WAIT_PERMITS,     /* the channel carries how many permits are free: enough waiters for them try */
  RELOCK__WAIT_ZERO         /* the channel's "0" (a latch reached zero) wakes all; other messages none */
} relock__wait_mode_t;

/* A lease for a permit_holds kind's acquisition: none at all (the permit
 * never expires; nothing tracks it). RELOCK_PERMIT_NO_LEASE. */
#define RELOCK__NO_LEASE ((int64_t)-2)

typedef struct relock__lock_kind {
  const char *what;           /* in messages: "lock", "fair lock", ... */
  relock_kind_t stat;         /* what its statistics are counted under (relock/stats.h) */
  const char *field_suffix;   /* after "<client-id>:<owner>": ":write" for a write lock, else "" */
  const char *channel_prefix; /* the channel is "<prefix>:{name}" (keys.h) */
  relock__hold_role_t role;   /* how the watchdog tells and renews its holds */
  relock__wait_mode_t wait;
  unsigned shared : 1;        /* holds are shared (read): one acquired wakes the other waiters */
  unsigned no_hold : 1;       /* an acquisition takes no hold: no watchdog, no lease to check it against */
  unsigned braced_channel : 1; /* the channel is "<prefix>{name}" always, a hash tag in the name or not */
  unsigned no_latch : 1;      /* its scripts keep no latch key: an acquisition is known by its request id,
                                 which they keep instead (a permit's id) */
  unsigned wakes_one : 1;     /* a waiting try registers its process (call->waker), and a release wakes
                                 the one registered longest, not a waiter in every process */
  unsigned latch_passed_on : 1; /* its acquisition's latch is the unlock latch of the hold's next release
                                 (lua/lock_acquire.lua, lua/lock_release.lua): kept, not deleted, and
                                 overwritten by that release's answer - an uncontended pair writes one
                                 key, as Redisson's does */
  unsigned permit_holds : 1;  /* a no_hold kind whose acquisitions with a lease are holds all the same:
                                 the watchdog renews or checks them (a permit-expirable semaphore's
                                 permits, each its own owner: request_id) */
  /* NULL: a request id is random. Else it makes the id of an acquisition
   * through lock, and the owner the acquisition then is (permit_holds: a
   * permit whose owner the watchdog knows it by, and its holder turns back
   * into the permit). */
  void (*request_id)(const relock_lock_t *lock, char id[RELOCK__REQUEST_ID_SIZE], uint64_t *owner);
  /* Each sends one script; the future completes with its answer (a reply).
   *   acquire: {count} acquired - the owner's hold count in Redis now,
   *            this acquisition's included; the fenced lock's {count,
   *            token}; nil for a no_hold kind - (call->latch made: a repeat
   *            of the same request answers the same), else an integer: how long
   *            the holder's lease has left (-1: no expiry) - the most a
   *            waiter waits before trying again.
   *   undo:    gives back the hold the acquisition with call->latch took,
   *            if it took one (a place in a queue goes by leave_queue);
   *            NULL when an acquisition takes nothing to give back (no
   *            latch is kept for it either).
   *   release: one hold, idempotent through call->latch: 1 freed, 0 holds
   *            remain, nil not the owner (NULL for a no_hold kind). A
   *            kind whose acquire registers call->waker wakes the process
   *            registered longest, by its waker id, before the unlock
   *            message.
   *   force_release: deletes it whoever holds it: 1 if it was held (NULL
   *            for a no_hold kind), and publishes (call->publish, set for
   *            every kind) on the lock's channel, where a watched holder
   *            listens (lock_watch.c).
   *   leave_queue (NULL: the kind keeps no queue in Redis): a waiter that
   *            ends without the lock (deadline, cancel, error) gives up its
   *            place - a fair lock's queue, a waiting writer's listing. */
  relock__lock_op_fn acquire;
  /* How its acquire script's answer reads (NULL: relock__read_lock_answer),
   * and what the caller's future then says (NULL: a boolean, acquired or
   * not). */
  relock__read_answer_fn read_answer;
  relock__settle_fn settle;
  relock__lock_op_fn undo;
  relock__lock_op_fn release;
  relock__lock_op_fn force_release;
  relock__lock_op_fn leave_queue;
} relock__lock_kind_t;

/* The reentrant lock's operations (reentrant_lock.c), which the kinds
 * sharing its layout reuse. */
relock_future_t *relock__rlock_acquire(relock__lock_call_t *call);
relock_future_t *relock__rlock_undo(relock__lock_call_t *call);
relock_future_t *relock__rlock_release(relock__lock_call_t *call);
relock_future_t *relock__rlock_force_release(relock__lock_call_t *call);

/* A new lock object of kind (the public constructors). */
relock_lock_t *relock__lock_new(relock_client_t *client, const char *name, const relock__lock_kind_t *kind,
                                relock_error_t *err);

/* relock_lock_lock_async for permits at once (a semaphore's; the locks
 * take 1): checks wait_ms and lease_ms (a failed future naming the one out
 * of range), the caller the rest. */
relock_future_t *relock__lock_acquire_async(relock_lock_t *lock, uint64_t owner, int64_t permits, int64_t wait_ms,
                                            int64_t lease_ms);

#endif /* RELOCK__OBJECTS_LOCK_KIND_H */
