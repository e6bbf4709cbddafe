/* The group of locks' insides (include/relock/multi_lock.h), shared by
 * multi_lock.c (the object, its holds, release, loss, validity) and
 * multi_lock_acquire.c (acquisition). */
#ifndef RELOCK__OBJECTS_MULTI_LOCK_IMPL_H
#define RELOCK__OBJECTS_MULTI_LOCK_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <relock/multi_lock.h>

#include "base/list.h"
#include "objects/lock_impl.h"

typedef struct relock__multi_round relock__multi_round_t;

/* What one member is to one acquisition of the group. */
enum { RELOCK__MEMBER_NONE = 0, RELOCK__MEMBER_HELD, RELOCK__MEMBER_LOST };

/* One acquisition of the group by owner: the members it took. */
typedef struct relock__multi_hold {
  relock__link_t link;            /* in m->holds once the group is held, newest last */
  uint64_t owner;
  size_t held;                    /* members RELOCK__MEMBER_HELD */
  int lost;                       /* fewer than quorum remained: reported, and let go */
  size_t let_go;                  /* members it still held when it was let go */
  /* &round->hold of the round that took it (multi_lock_acquire.c), while
   * answers may still come; NULL: none. The hold's end sets *filler to
   * NULL, and the round gives late members back. A pointer into the round
   * rather than the round: multi_lock.c, below multi_lock_acquire.c, knows
   * no round. */
  struct relock__multi_hold **filler;
  unsigned char member[];         /* RELOCK__MEMBER_* per lock */
} relock__multi_hold_t;

struct relock_multi_lock {
  relock__exec_t *exec;           /* the first lock's (a reference) */
  relock_client_t *client;        /* the first lock's: its timer wheel and random numbers */
  const char *what;               /* "multi-lock" or "RedLock" */
  size_t n;
  size_t quorum;
  relock_multi_lost_cb lost_cb;
  void *lost_arg;
  relock__link_t holds;           /* relock__multi_hold_t */
  int refs;                       /* the caller's, and one per operation in flight */
  int *results;                   /* per lock: the last completed acquisition's */
  relock__multi_round_t *results_round; /* the won round they are of, while late answers may come */
  size_t *order;                  /* lock indexes by name, then index: the order of waiting */
  relock_lock_t *locks[];
};

relock_multi_lock_t *relock__multi_ref(relock_multi_lock_t *m);
void relock__multi_unref(relock_multi_lock_t *m);

/* A hold of owner taking no member yet; NULL when out of memory. */
relock__multi_hold_t *relock__multi_hold_new(const relock_multi_lock_t *m, uint64_t owner);
/* Frees a hold not in m->holds (its round, if any, is told: *filler). */
void relock__multi_hold_free(relock__multi_hold_t *hold);

/* Gives back what hold took of lock i (a release nobody waits for), and
 * marks it taken no more. */
void relock__multi_give_back(relock_multi_lock_t *m, relock__multi_hold_t *hold, size_t i);

/* How long hold is known to be valid (the quorum-th largest validity of
 * its members held); 0 when fewer than quorum are, RELOCK_ENOMEM. */
int64_t relock__multi_validity(relock_multi_lock_t *m, const relock__multi_hold_t *hold);

/* Whether a member's acquisition future says it was acquired (a boolean,
 * or a fenced lock's token). */
static inline int relock__multi_acquired(const relock_future_t *f) {
  return relock_future_value_type(f) == RELOCK_VALUE_BOOL ? relock_future_bool(f) : relock_future_int(f) > 0;
}

/* Starts a public call on m, as relock__client_enter (client_impl.h):
 * refused with RELOCK_ECLOSED once a member's client is closed. 0: go on
 * (relock__exec_leave(m->exec) must follow). _code: for calls answering a
 * code, that code. */
int relock__multi_enter(relock_multi_lock_t *m, relock_future_t **refused);
int relock__multi_enter_code(relock_multi_lock_t *m);

/* The blocking calls' check (sync.c's, of the first lock): 0, or an error
 * code with the thread's last error set. */
int relock__multi_would_block(relock_multi_lock_t *m);

#endif /* RELOCK__OBJECTS_MULTI_LOCK_IMPL_H */
