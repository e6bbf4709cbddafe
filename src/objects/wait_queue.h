/* The wait queues (src/README.md, objects/): a client's local waiters for
 * a channel, told when they may try again. lock_acquire.c's acquisitions
 * wait here; the queue calls back into them only through the
 * relock__waiter_ops_t each waiter brings, so that calls go one way.
 *
 * A queue is per channel: a lock's, shared by a read-write lock's two
 * sides, or a fair lock waiter's own (which only the releaser's script
 * wakes, the head of the lock's queue in Redis first). It subscribes to
 * its channel (one subscription per channel, shared by every local
 * waiter); a waiter that joins tries again only once the subscription is
 * confirmed, so that an unlock published between its first try and the
 * subscription is never missed.
 *
 * An unlock message ("0") wakes one local waiter; a read-unlock ("1") or
 * a gap in the subscription wakes them all; a semaphore's channel says how
 * many permits are free, a latch's "0" that the count reached zero
 * (relock__wait_mode_t). A reentrant lock's waiting tries register the
 * client's waker id (relock__waitq_waker_id) while the lock is held, and a
 * release names the one registered longest right before its "0"
 * (lua/lock_release.lua): that client wakes one waiter, every other lets
 * the "0" pass - one try per unlock, not one per process (on_handed) - and
 * arms a fallback: if nothing follows within HANDED_FALLBACK_MS it wakes
 * one anyway. A waiter that joins a queue heard since before its first try
 * waits on that try's answer (the fallback covers an unlock handed
 * elsewhere meanwhile). The last waiter of a process to leave takes its
 * registration back, tries still in flight included.
 *
 * While the channel is not confirmed (pub/sub unavailable, or not yet),
 * waiters poll every ~100 ms instead of trusting the holder's TTL, so an
 * unlock published meanwhile delays them that long at most. The last
 * waiter leaving a queue leaves it subscribed for a second
 * (WAITQ_LINGER_MS: the next waiter of a contended name finds it heard);
 * then it unsubscribes. */
#ifndef RELOCK__OBJECTS_WAIT_QUEUE_H
#define RELOCK__OBJECTS_WAIT_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include <relock/client.h>

#include "base/list.h"
#include "objects/lock_kind.h"

typedef struct relock__waitq relock__waitq_t;
typedef struct relock__waiter relock__waiter_t;

/* What a queue asks of the one waiting (lock_acquire.c's acquisition). */
typedef struct relock__waiter_ops {
  /* w, idle, may try again now. Its callback may end it (it leaves its
   * queue meanwhile): the queue is kept alive across the call. */
  void (*wake)(relock__waiter_t *w);
  /* The channel is refused (RELOCK_ENOPERM; why: the server's word): w
   * ends, leaving its queue. */
  void (*refuse)(relock__waiter_t *w, const char *why);
  /* w was the last of its process to leave a queue, and the process may be
   * registered as waiting: the registration goes (w->registered 0). */
  void (*unregister)(relock__waiter_t *w);
} relock__waiter_ops_t;

/* A waiter's place: embedded in what waits (relock__waiter_init). */
struct relock__waiter {
  relock__link_t link;      /* in its queue's idle or trying list */
  relock__waitq_t *q;       /* NULL: in none */
  const relock__waiter_ops_t *ops;
  int64_t permits;          /* how many it takes at once (a semaphore's; 1 for a lock) */
  unsigned writer : 1;      /* a read-write lock's writer (its readers share the channel) */
  unsigned woken : 1;       /* an unlock came while its try was in flight: it tries again when answered */
  unsigned registered : 1;  /* a try may have registered its process as waiting (relock_lock_latch:{name}:waiters):
                               one carrying the waker id is in flight, or answered "held" or nothing */
};

static inline void relock__waiter_init(relock__waiter_t *w, const relock__waiter_ops_t *ops, int64_t permits,
                                       int writer) {
  *w = (relock__waiter_t){.ops = ops, .permits = permits, .writer = writer != 0};
  relock__list_init(&w->link);
}

/* Puts w (trying) in channel's queue, made and subscribed if there is none
 * (mode: what the channel's messages mean); sent_ns: when w's try that
 * found the lock held went out. Returns 1 if the subscription is confirmed
 * already, 2 if it was before that try went out (and no unlock came for
 * nobody since: the try's answer stands), 0 if w must wait for it, -1 when
 * out of memory. */
int relock__waitq_join(relock_client_t *c, relock__waiter_t *w, const char *channel, size_t len,
                       relock__wait_mode_t mode, uint64_t sent_ns);

/* w leaves its queue (nothing when in none); the process's registration
 * stays with the queue while others wait, else goes (ops->unregister). */
void relock__waitq_leave(relock__waiter_t *w);

/* w, in a queue, has a try in flight (trying) or waits (idle: to the back,
 * so that the one idle longest is woken first). Nothing when in none. */
void relock__waitq_move(relock__waiter_t *w, int trying);

/* Whether other waiters share w's queue (w's process stays registered if
 * it acquires). */
int relock__waitq_others(const relock__waiter_t *w);

/* Wakes every waiter of q (a shared hold was granted: the others may well
 * get one too). */
void relock__waitq_wake_all(relock__waitq_t *q);

/* How long a waiter of q waits before trying again: the holder's TTL
 * (ttl_ms; -1: it never expires, re-checked every second), at most the
 * ~100 ms poll while q's channel is not heard (waiting: not while it waits
 * for the subscription). */
int64_t relock__waitq_delay(relock__waitq_t *q, int waiting, int64_t ttl_ms);

/* A waiter of channel, in no queue, ends with its process perhaps
 * registered: 1 when the channel's queue has waiters and keeps that in
 * mind, 0 when the registration must go now. */
int relock__waitq_keep_registration(relock_client_t *c, const char *channel, size_t len);

/* The client's waker id (keys.h), made on first use: what a waiting try
 * registers, and what wakes this client's waiters only. NULL when out of
 * memory. */
const char *relock__waitq_waker_id(relock_client_t *c);

/* For white-box tests: how many queues c has (lingering ones included);
 * the hand-off's fallback (0: HANDED_FALLBACK_MS; tests under valgrind
 * lengthen it): 0, or RELOCK_ENOMEM. */
size_t relock__waitq_count(const relock_client_t *c);
int relock__waitq_set_fallback_ms(relock_client_t *c, int64_t ms);

#endif /* RELOCK__OBJECTS_WAIT_QUEUE_H */
