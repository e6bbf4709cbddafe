/* One owner's count-changing requests on one lock - its acquisitions'
 * tries and their give-backs, its releases - go to Redis one at a time
 * (docs/SAFETY.md): a later one is sent only once the earlier one is
 * answered or has failed for good. Two in flight at once may run in either
 * order (a retry after a back-off, a script re-sent after NOSCRIPT behind
 * what went meanwhile, a redirection), and a give-back or a release that
 * runs after the key vanished changes the count of the key made afresh
 * since: its latch outlives the key, and cannot tell the two apart.
 * Renewals and checks change no count: they overlap freely.
 *
 * A turn is per client, lock name and field (the owner's, and its role: a
 * reader's and a writer's field are two), kept only while a request holds
 * it or waits for it. An acquisition's give-back keeps the turn of the try
 * it gives back (nothing may come between them), and passes it on when it
 * is answered. A kind whose acquisitions take no hold (a semaphore) has no
 * turns.
 *
 * A request waits for its turn at most as long as a call of its own could
 * take (the command timeout, for each attempt, and the retry intervals)
 * and one attempt more: a give-back is retried until Redis answers,
 * however long it stays out of reach, and the requests behind it fail
 * meanwhile (RELOCK_ETIMEDOUT), never sent, as they would have in Redis's
 * silence. */
#ifndef RELOCK__OBJECTS_LOCK_TURN_H
#define RELOCK__OBJECTS_LOCK_TURN_H

#include <stdint.h>

#include "base/list.h"
#include "loop/wheel.h"
#include "objects/lock_impl.h"

typedef struct relock__turn relock__turn_t;

/* A request's place: embedded in what sends it. */
typedef struct relock__turn_wait {
  relock__link_t link;      /* in its turn's queue while it waits */
  relock__turn_t *turn;     /* NULL: neither waiting nor holding */
  relock__timer_t late;     /* while it waits: the most it waits */
  int holds;                /* its turn came */
  /* Its turn came (err 0; not called when it came at once), or not in
   * time (RELOCK_ETIMEDOUT; RELOCK_ECLOSED: the client closes): then w
   * neither waits nor holds. */
  void (*go)(struct relock__turn_wait *w, int err);
} relock__turn_wait_t;

/* Asks for owner's turn on lock for w (not waiting or holding yet): 1 when
 * it is w's at once, 0 when w waits (w->go is called), -1 when out of
 * memory. */
int relock__turn_ask(relock_lock_t *lock, uint64_t owner, relock__turn_wait_t *w);

/* w leaves: waiting, it gives up its place; holding, the turn passes on
 * (the next request's go is called from here). Nothing when w neither
 * waits nor holds. */
void relock__turn_leave(relock__turn_wait_t *w);

/* Takes the turn w holds away from w, for a request that outlives it (a
 * give-back); NULL when w holds none. relock__turn_pass passes it on. */
relock__turn_t *relock__turn_take(relock__turn_wait_t *w);
void relock__turn_pass(relock__turn_t *turn);

/* The client whose turn it is. */
relock_client_t *relock__turn_client(const relock__turn_t *turn);

#endif /* RELOCK__OBJECTS_LOCK_TURN_H */
