/* The truth checker's worker process, shared by its two files: worker.c
 * (the process: its client and objects, what it believes, its owners run
 * embedded or on threads) and operations.c (what an owner does next, and
 * doing it). See worker.c's opening comment. */
#ifndef RELOCK_TRUTH_WORKER_H
#define RELOCK_TRUTH_WORKER_H

#include <ev.h>
#include <pthread.h>

#include <relock/relock.h>

#include "truth/truth.h"

#define MAX_ACTORS TRUTH_MAX_OWNERS
#define SLOTS_PER_ACTOR TRUTH_SLOTS_PER_OWNER
#define MAX_DEPTH 6
#define MAX_TARGETS 40

typedef struct target {
  enum truth_kind kind;
  int name, name2; /* name2: a multi-lock's second member, else -1 */
  relock_lock_t *lock;
  relock_multi_lock_t *multi;
  relock_semaphore_t *sem;
  relock_permit_semaphore_t *permit;
} target_t;

typedef struct hold {
  int target;
  int slot, slot2; /* belief slots (slot2: a multi-lock's second name) */
  int64_t lease_ms;
  uint64_t start_ns;     /* its acquisition's start */
  uint64_t hold_until_ns; /* a long hold: not released before then */
  int aim;               /* re-enter right at its fixed lease's end (inside the drift margin) */
  char field[96];        /* its field (a permit: its id) */
  char permit_id[RELOCK_PERMIT_ID_SIZE];
} hold_t;

enum op_type { OP_ACQUIRE, OP_RELEASE, OP_FORCE, OP_VALIDATE, OP_THINK };

typedef struct op {
  enum op_type type;
  int target;
  int64_t wait_ms, lease_ms;
  int cancel_after_ms; /* >= 0: cancel the acquisition then */
  int blocking;        /* threaded: through the blocking wrapper */
  int think_ms;        /* OP_THINK: how long (-1: at random) */
  int aimed;           /* a re-entry aimed at the end of the lease below */
  long stops;          /* the worker's stops at the start */
  int64_t token_floor; /* a fenced acquisition: the largest token handed out before it (-1: not checked) */
  uint64_t start_ns;
  hold_t released;     /* a release's hold, once sent */
  int released_last;   /* it was the belief's last hold (the field let go) */
} op_t;

typedef struct worker worker_t;

typedef struct actor {
  worker_t *w;
  int idx;
  uint64_t owner;
  uint64_t rng;
  hold_t holds[MAX_DEPTH];
  int depth;
  /* a permit whose release failed: released again (by its id: once) before
   * anything else, as a program must, or it is taken for good */
  hold_t redo;
  int has_redo;
  int reacquire; /* a target to take again at once (its hold was lost), or -1 */
  op_t op;
  relock_future_t *inflight; /* embedded */
  ev_timer think, cancel;    /* embedded */
  pthread_t thread;          /* threaded */
  _Atomic(relock_lock_t *) blocked_in; /* threaded: a blocking call's lock */
  int idle;
} actor_t;

/* What the worker knows of each belief slot beyond what it publishes: the
 * object to ask for its validity, and the lease of its natural end. */
typedef struct local_belief {
  truth_belief_t b;
  int target;
  uint64_t natural_end_ns; /* a fixed lease's end less its drift margin (from the acquisition's start); UINT64_MAX: none */
} local_belief_t;

/* A loss the library shows (validity 0) and has not told yet: its lost
 * callback must come within TRUTH_UNTOLD_TICKS refreshes (a release
 * answered 0 ends it too: the hold was there after all). */
typedef struct untold {
  int name, slot;
  char field[80];
  int ticks;
  uint64_t since_ns;
} untold_t;

struct worker {
  truth_shared_t *sh;
  truth_worker_slot_t *slot;
  int id, port, embedded;
  uint64_t rng;      /* the worker's own thread (and the embedded loop) */
  uint64_t lost_rng; /* the lost callbacks', under mu: in threaded mode they
                      * run on the client's loop thread, beside the worker's */
  relock_client_t *client;
  struct ev_loop *loop;
  target_t targets[MAX_TARGETS];
  int ntargets;
  actor_t actors[MAX_ACTORS];
  int nactors;
  local_belief_t mine[TRUTH_SLOTS];
  untold_t untold[TRUTH_SLOTS];
  int nuntold;
  pthread_mutex_t mu;
  _Atomic int closing; /* actors stop at their next idle moment */
  ev_timer refresh;    /* embedded */
};

/* worker.c: beliefs (called with w->mu held, except validity_of) */
void publish(worker_t *w, int slot);
int64_t drift_margin_ms(int64_t lease_ms);
int believe(actor_t *a, int target, int name, const char *field, int count, int64_t lease_ms, uint64_t since_ns,
            uint64_t deadline_ns);
void disbelieve(worker_t *w, int s, int count);
void let_go(worker_t *w, int s);
void told(worker_t *w, int name, const char *field);
void set_busy(actor_t *a, const op_t *op);
void clear_busy(actor_t *a);
void abandon(actor_t *a, const op_t *op, const char *field);
int64_t validity_of(worker_t *w, int target, uint64_t owner);
int permit_tracked(int64_t lease_ms);
void msleep(long ms);
int rnd_below(uint64_t *rng, int n);

/* operations.c: the next operation of an actor (with w->mu held where a
 * loss may change its holds concurrently), sending it, its outcome */
int is_lock(enum truth_kind k);
op_t choose(actor_t *a);
relock_future_t *start_op(actor_t *a, op_t *op);
void finish_op(actor_t *a, op_t *op, relock_future_t *f);
int needs_give_back(actor_t *a, int everything);
/* A threaded actor's: start, wait, finish (or the blocking wrapper). */
void run_op_blocking(actor_t *a, op_t *op);

#endif
