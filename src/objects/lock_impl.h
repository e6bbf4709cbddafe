/* The lock object's insides: its struct and what the files built on it
 * share. Included by the engine (lock.c: the object, release, queries;
 * lock_acquire.c: acquisition; lock_turn.c, lock_watch.c, sync.c), by
 * every kind's file (lock_kind.h, which this includes, is the kind's
 * interface; the object's name and client are read here), by the
 * synchronizers' shared counter (counter.h), the multi-lock
 * (multi_lock_impl.h), and by white-box tests. */
#ifndef RELOCK__OBJECTS_LOCK_IMPL_H
#define RELOCK__OBJECTS_LOCK_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <relock/lock.h>

#include "client/client_impl.h"
#include "redis/pubsub.h"
#include "objects/keys.h"
#include "objects/lock_kind.h"
#include "watchdog/renewal.h"

/* Whether a hold may be asked for with lease_ms: RELOCK_INFINITE (the
 * watchdog's), or a fixed lease from RELOCK_MIN_LEASE_MS to
 * RELOCK_MAX_LEASE_MS. Below the minimum the lease is all, or nearly all,
 * drift margin (relock__validity_margin_ms): no answer could come in time. */
static inline int relock__lease_valid(int64_t lease_ms) {
  return lease_ms == RELOCK_INFINITE || (lease_ms >= RELOCK_MIN_LEASE_MS && lease_ms <= RELOCK_MAX_LEASE_MS);
}

/* Why a positive lease under the minimum is refused (else ""). */
static inline const char *relock__lease_too_short(int64_t lease_ms) {
  return lease_ms > 0 && lease_ms < RELOCK_MIN_LEASE_MS
             ? ": a shorter lease is all or nearly all drift margin (1% + 2 ms), so no answer could come back in time"
             : "";
}

/* The message for a lease relock__lease_valid refuses, and its arguments. */
#define RELOCK__LEASE_RANGE_FMT "lease_ms must be %lld-%lld, or RELOCK_INFINITE (got %lld)%s"
#define RELOCK__LEASE_RANGE_ARGS(lease_ms)                                                \
  (long long)RELOCK_MIN_LEASE_MS, (long long)RELOCK_MAX_LEASE_MS, (long long)(lease_ms), \
      relock__lease_too_short(lease_ms)

/* The loss watch of relock_lock_watch_loss (lock_watch.c), made when it is
 * first turned on. lock_watch.c is above lock.c (it uses the object's
 * references, extra part and channel): lock.c tells the watch what it must
 * know through the two functions lock_watch.c sets in it, and calls
 * nothing of lock_watch.c. */
typedef struct relock__lock_watch {
  /* owner's hold taken through the lock is gone (released, lost) */
  void (*gone)(struct relock__lock_watch *w, uint64_t owner);
  /* stops watching (the object is freed by its caller, or goes) */
  void (*stop)(struct relock__lock_watch *w);
  int on;                   /* holds taken through the lock are watched */
  int listening;
  relock__listener_t listener; /* on the lock's channel while watched owners hold it */
  uint64_t *owners;         /* the owners holding it through this object, watched */
  size_t nowners;
  size_t cap;
} relock__lock_watch_t;

/* What few locks have, allocated only when one is set: a lock object is
 * kept per held lock, and a client holding very many locks rarely gives
 * each its own callbacks. The loss watch, larger and rarer still, is a
 * part of its own. */
typedef struct relock__lock_extra {
  relock_lost_cb lost_cb;   /* relock_lock_on_lost's; NULL: none */
  void *lost_arg;
  relock_wait_cb wait_cb;   /* relock_lock_on_wait's; NULL: none */
  void *wait_arg;
  relock__lock_watch_t *watch; /* NULL: never watched */
} relock__lock_extra_t;

/* 48 bytes and the name, NUL included: a name of up to 23 bytes takes an
 * 80-byte malloc chunk (glibc: the request + 8, rounded up to 16). */
struct relock_lock {
  relock__holder_t holder;  /* what the watchdog knows the lock by */
  const relock__lock_kind_t *kind;
  relock_client_t *client;  /* a reference (relock__client_ref): calls after its close or free answer RELOCK_ECLOSED */
  relock__exec_t *exec;     /* the client's (a reference: a lock may be freed after its client) */
  relock__lock_extra_t *extra; /* NULL: none */
  /* 32-bit: a lock object is kept per held lock, so its size is memory per
   * lock (names are at most RELOCK__LOCK_NAME_MAX bytes). */
  int refs;                 /* the caller's, and one per operation or hold */
  uint32_t len : 31;
  uint32_t waited : 1;      /* an acquisition through it had to wait: its tries register their process
                               as waiting from the first (lock_acquire.c; uncontended ones never do) */
  char name[];
};

_Static_assert(sizeof(void *) != 8 || offsetof(struct relock_lock, name) == 48,
               "a lock object is kept per held lock: its size is memory per lock (issue 20)");

/* The longest lock name (Redis's own limit for a key is 512 MB). */
#define RELOCK__LOCK_NAME_MAX (512u * 1024 * 1024)

/* The lock's channel (its kind's: "redisson_lock__channel:{name}", ...) is
 * not kept in the object but written where it is used: a lock object is
 * kept per held lock, and the channel was its largest part (issue 20).
 *
 * relock__lock_channel_to writes it into out (size bytes, NUL included) if
 * it fits and returns its length either way. relock__lock_channel returns
 * it in buf when it fits (names up to ~200 bytes), else in a malloc'ed
 * string (NULL when out of memory), its length in *len; the caller lets go
 * of it with relock__lock_channel_free. relock__lock_channel_to is here
 * rather than in lock.c: the script builder (script_args.c), below lock.c,
 * needs it too, and must not call up into lock.c. */
#define RELOCK__CHANNEL_BUF 256
static inline size_t relock__lock_channel_to(const relock_lock_t *lock, char *out, size_t size) {
  const relock__lock_kind_t *kind = lock->kind;
  if (kind->braced_channel) /* prefix{name}: Redisson's latch braces the name, hash tag or not */
    return relock__braced_name_to(out, size, kind->channel_prefix, lock->name, lock->len);
  return relock__derived_name_to(out, size, lock->name, lock->len, kind->channel_prefix);
}
char *relock__lock_channel(const relock_lock_t *lock, char buf[RELOCK__CHANNEL_BUF], size_t *len);
static inline void relock__lock_channel_free(char *channel, const char *buf) {
  if (channel != buf)
    free(channel);
}

relock_lock_t *relock__lock_ref(relock_lock_t *lock);
void relock__lock_unref(relock_lock_t *lock);

/* Writes owner's field ("<client-id>:<owner>" and the kind's suffix);
 * returns its length. Here rather than in lock.c: lock_turn.c, which
 * lock.c uses, needs it too, and must not call up into lock.c. */
static inline size_t relock__lock_field(const relock_lock_t *lock, uint64_t owner, char field[RELOCK__FIELD_MAX]) {
  size_t n = relock__field(lock->client->settings.client_id, owner, field);
  size_t suffix = strlen(lock->kind->field_suffix);
  memcpy(field + n, lock->kind->field_suffix, suffix + 1);
  return n + suffix;
}

_Static_assert(RELOCK__FIELD_MAX <= RELOCK__HOLD_FIELD_MAX, "a lock's field must fit the watchdog's buffers");

/* owner's hold of lock, as the watchdog knows it. */
static inline relock__hold_id_t relock__lock_hold(const relock_lock_t *lock, uint64_t owner) {
  return (relock__hold_id_t){
      .key = lock->name, .key_len = lock->len, .owner = owner, .role = lock->kind->role, .kind = lock->kind->stat};
}

/* The lock's extra part, made on first use (NULL when out of memory). */
relock__lock_extra_t *relock__lock_extra(relock_lock_t *lock);

/* The lost callback (NULL: none), and setting it (relock_lock_on_lost
 * without the thread check): 0, or RELOCK_ENOMEM when the extra part
 * cannot be made (cb is then not set). */
static inline relock_lost_cb relock__lock_lost_cb(const relock_lock_t *lock) {
  return lock->extra != NULL ? lock->extra->lost_cb : NULL;
}
int relock__lock_set_lost(relock_lock_t *lock, relock_lost_cb cb, void *arg);

/* The loss watch (lock_watch.c): owner's hold taken through lock was
 * registered. Nothing unless the lock is watched. (That a hold is gone,
 * lock.c tells the watch through relock__lock_watch_t.gone.) */
void relock__lock_watch_held(relock_lock_t *lock, uint64_t owner);

/* Registers owner's new hold of lock with the ledger (hold.h's
 * relock__hold_acquired, the lock being the holder that is told when it is
 * lost; count: the owner's holds Redis counts now, 0 if not said;
 * release_id: NULL, or the request id of the acquisition's latch, which
 * becomes the unlock latch of owner's next release, for a kind with
 * latch_passed_on). On success the acquisition's turn is left, or kept
 * until a surplus Redis counted is given back (relock__hold_give_back). */
struct relock__turn_wait;
int relock__lock_acquired(relock_lock_t *lock, uint64_t owner, relock__lease_kind_t lease, int64_t lease_ms,
                          uint64_t sent_ns, int64_t count, const uint64_t *release_id, struct relock__turn_wait *turn);

/* The blocking calls' pieces (sync.c), for every object built on a lock
 * object. Each sets the thread's last error (relock_last_error_message).
 * would_block: RELOCK_EINVAL for a NULL object, RELOCK_EWOULDBLOCK from
 * inside a loop callback, else 0. wait_value / wait_flag: wait for f (NULL:
 * RELOCK_ENOMEM), release it, and store its value (may be NULL). */
int relock__sync_would_block(relock_lock_t *lock);
int relock__sync_wait_value(relock_future_t *f, int64_t *value);
int relock__sync_wait_flag(relock_future_t *f, int *flag);
/* wait_string: a string value into buf (size bytes, NUL included; "" for
 * none). */
int relock__sync_wait_string(relock_future_t *f, char *buf, size_t size);
/* A blocking acquisition by the calling thread: acquire_args checks its
 * arguments (would_block, wait_ms, lease_ms), acquire starts it and waits,
 * interruptible by relock_lock_interrupt; *value (may be NULL) is the
 * acquisition's value as an integer (1 or 0; a fenced lock's token). */
int relock__sync_acquire_args(relock_lock_t *lock, int64_t wait_ms, int64_t lease_ms);
int relock__sync_acquire(relock_lock_t *lock, int64_t wait_ms, int64_t lease_ms, int64_t *value);

/* -- shared by lock.c and lock_acquire.c (and counter.c) -- */

/* Sets call up for owner's operation on lock: the field (written into
 * field), the latch TTL, the publish command, retry-safe; the caller adds
 * the rest. */
void relock__lock_call_init(relock__lock_call_t *call, relock_lock_t *lock, uint64_t owner,
                            char field[RELOCK__FIELD_MAX]);

/* Sends the release script for one hold of owner (keeping lease_ms for the
 * holds that remain). The future succeeds with the script's answer: 1 freed,
 * 0 holds remain, -1 not the owner. NULL when out of memory. */
relock_future_t *relock__lock_send_release(relock_lock_t *lock, uint64_t owner, const relock__release_req_t *req);

#endif /* RELOCK__OBJECTS_LOCK_IMPL_H */
