/* Acquiring a group of locks (include/relock/multi_lock.h).
 *
 * A round tries every member once, all at once, and is decided as soon as
 * quorum members are held (won, if the quorum-th largest validity is still
 * positive) or too many refused or failed for that (lost). Answers that
 * come after the decision: a won round adds a late member to its hold (or
 * gives it back if the hold is gone by then); a lost round cancels its
 * tries in flight, whose own undo gives back whatever they took.
 *
 * After a lost round, RedLock waits 50-250 ms (random) and runs another,
 * until the wait runs out. A multi-lock that met a member held by someone
 * else instead waits for its members one at a time, in m->order, each for
 * as long as the group may still wait: everyone waiting in one order, no
 * two multi-locks can each hold what the other waits for.
 *
 * The acquisition ends once: held, not within the wait (its deadline timer),
 * an error, or cancelled - whichever comes first; what it had taken is
 * given back unless held. Rounds and member futures in flight keep their
 * own references, so whatever answers after the end finds its memory. */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/random.h"
#include "future/promise.h"
#include "objects/multi_lock_impl.h"

#define RETRY_MIN_MS 50 /* RedLock's pause between rounds: 50 ms + up to 200 ms */
#define RETRY_SPREAD_MS 200

typedef struct acquire acquire_t;

typedef struct slot {
  relock__multi_round_t *round;
  relock_future_t *f;             /* the member's try, until it answers */
  int result;                     /* 1 acquired, 0 refused, < 0 error; EPENDING until it answers */
} slot_t;

enum { UNDECIDED, WON, LOST };

struct relock__multi_round {
  acquire_t *op;                  /* NULL once the acquisition moved on */
  relock_multi_lock_t *m;         /* a reference */
  relock__multi_hold_t *hold;     /* what it takes: the group's once won; NULL once gone */
  uint64_t owner;
  int decided;
  int refs;                       /* the acquisition's, and one per try in flight */
  size_t refused;
  size_t failed;
  slot_t slots[];
};

struct acquire {
  relock_multi_lock_t *m;         /* a reference */
  relock_future_t *out;
  uint64_t owner;
  int64_t lease_ms;
  int bounded;
  uint64_t deadline_ns;
  int refs;                       /* its own until it ends, and the member future's in flight */
  int ended;
  relock__timer_t pause;          /* RedLock: the next round */
  relock__timer_t deadline;
  relock__multi_round_t *round;   /* the round in flight */
  /* a multi-lock waiting for its members one at a time */
  relock__multi_hold_t *hold;
  size_t next;                    /* in m->order */
  relock_future_t *member;
  int err;                        /* the first member error of the last round */
  char msg[256];
  int results[];                  /* the last round's, per lock */
};

static void acquire_unref(acquire_t *op) {
  if (--op->refs > 0)
    return;
  relock__multi_unref(op->m);
  free(op);
}

static void round_unref(relock__multi_round_t *round) {
  if (--round->refs > 0)
    return;
  if (round->hold != NULL)
    round->hold->filler = NULL;
  if (round->m->results_round == round)
    round->m->results_round = NULL;
  relock__multi_unref(round->m);
  free(round);
}

static void round_decide(relock__multi_round_t *round, int won);

/* Ends the acquisition: err 0 with the boolean held, or err and a message. */
static void finish(acquire_t *op, int err, int held, const char *msg) {
  if (op->ended)
    return;
  op->ended = 1;
  relock_multi_lock_t *m = op->m;
  relock__timer_stop(&op->pause);
  relock__timer_stop(&op->deadline);
  if (op->round != NULL)
    round_decide(op->round, 0); /* gives back what it took, and lets go of op */
  if (op->member != NULL)
    relock_future_cancel(op->member); /* its undo gives back what it may have taken */
  if (op->hold != NULL) {
    for (size_t i = 0; i < m->n; i++)
      if (op->hold->member[i] != RELOCK__MEMBER_NONE)
        relock__multi_give_back(m, op->hold, i);
    relock__multi_hold_free(op->hold);
    op->hold = NULL;
  }
  memcpy(m->results, op->results, m->n * sizeof(*m->results));
  m->results_round = NULL;
  if (err != 0)
    relock__future_fail(op->out, err, "%s", msg);
  else
    relock__future_succeed_bool(op->out, held);
  relock_future_release(op->out);
  acquire_unref(op);
}

static void end(acquire_t *op, int held) { finish(op, 0, held, ""); }

static void fail(acquire_t *op, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(acquire_t *op, int err, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  finish(op, err, 0, msg);
}

static int64_t ms_left(const acquire_t *op) {
  return op->bounded ? relock__ms_until(op->deadline_ns, relock__now_ns()) : RELOCK_INFINITE;
}

/* -- one member at a time, in order ------------------------------------------*/

static void wait_next(acquire_t *op);

static void on_member(relock_future_t *f, void *arg) {
  acquire_t *op = arg;
  relock_multi_lock_t *m = op->m;
  size_t i = m->order[op->next];
  int err = relock_future_error(f);
  int got = err == 0 && relock__multi_acquired(f);
  op->member = NULL;
  if (op->ended) {
    if (got) /* answered before the cancel: give it back */
      relock_future_release(relock_lock_unlock_async(m->locks[i], op->owner));
  } else {
    op->results[i] = err != 0 ? err : got;
    if (err != 0) {
      fail(op, err, "%s of %zu locks: lock %zu (%s): %s", m->what, m->n, i, m->locks[i]->name,
          relock_future_message(f));
    } else if (!got) {
      end(op, 0);
    } else {
      op->hold->member[i] = RELOCK__MEMBER_HELD;
      op->hold->held++;
      op->next++;
      wait_next(op);
    }
  }
  relock_future_release(f);
  acquire_unref(op);
}

static void wait_next(acquire_t *op) {
  relock_multi_lock_t *m = op->m;
  if (op->next == m->n) {
    if (relock__multi_validity(m, op->hold) <= 0) {
      end(op, 0); /* a fixed lease ran out while waiting: not held (given back by end) */
      return;
    }
    relock__list_push_back(&m->holds, &op->hold->link);
    op->hold = NULL;
    end(op, 1);
    return;
  }
  size_t i = m->order[op->next];
  relock_future_t *f = relock_lock_lock_async(m->locks[i], op->owner, ms_left(op), op->lease_ms);
  if (f == NULL) {
    fail(op, RELOCK_ENOMEM, "out of memory acquiring lock %zu of a %s", i, m->what);
    return;
  }
  op->member = f;
  op->refs++;
  if (relock_future_on_done(f, on_member, op) != 0) {
    op->member = NULL;
    op->refs--;
    relock_future_cancel(f);
    relock_future_release(f);
    fail(op, RELOCK_ENOMEM, "out of memory acquiring lock %zu of a %s", i, m->what);
  }
}

static void wait_in_order(acquire_t *op) {
  op->hold = relock__multi_hold_new(op->m, op->owner);
  if (op->hold == NULL) {
    fail(op, RELOCK_ENOMEM, "out of memory acquiring a %s", op->m->what);
    return;
  }
  op->next = 0;
  for (size_t i = 0; i < op->m->n; i++)
    op->results[i] = 0;
  wait_next(op);
}

/* -- rounds -----------------------------------------------------------------*/

static void start_round(acquire_t *op);

/* After a lost round: RedLock pauses and tries again; a multi-lock that met
 * a holder waits in order; an error, or no time left, ends it. */
static void after_lost_round(acquire_t *op, size_t refused, size_t failed, int validity_ran_out) {
  relock_multi_lock_t *m = op->m;
  if (failed > m->n - m->quorum) {
    fail(op, op->err, "%s of %zu locks: %zu of them failed, at most %zu may: %s", m->what, m->n, failed,
        m->n - m->quorum, op->msg);
    return;
  }
  int64_t left = ms_left(op);
  if (left == 0) {
    end(op, 0);
    return;
  }
  if (m->quorum == m->n && refused > 0 && !validity_ran_out) {
    wait_in_order(op);
    return;
  }
  int64_t pause = RETRY_MIN_MS + (int64_t)(relock__random(&m->client->rng) % (RETRY_SPREAD_MS + 1));
  if (left != RELOCK_INFINITE && pause >= left) {
    end(op, 0);
    return;
  }
  if (relock__timer_start(&m->client->wheel, &op->pause, pause) != 0)
    fail(op, RELOCK_ECLOSED, "%s: the client of lock 0 is closed", m->what);
}

static void round_decide(relock__multi_round_t *round, int won) {
  acquire_t *op = round->op;
  relock_multi_lock_t *m = round->m;
  relock__multi_hold_t *hold = round->hold;
  int validity_ran_out = 0;
  if (won && relock__multi_validity(m, hold) <= 0)
    won = 0, validity_ran_out = 1;
  round->decided = won ? WON : LOST;
  round->op = NULL;
  op->round = NULL;
  for (size_t i = 0; i < m->n; i++)
    op->results[i] = round->slots[i].result;
  if (won) {
    hold->filler = &round->hold; /* the hold's end clears it: late members are given back */
    relock__list_push_back(&m->holds, &hold->link);
    end(op, 1);
    m->results_round = round; /* late answers complete the results */
  } else {
    for (size_t i = 0; i < m->n; i++)
      if (round->slots[i].f != NULL)
        relock_future_cancel(round->slots[i].f);
    for (size_t i = 0; i < m->n; i++)
      if (hold->member[i] != RELOCK__MEMBER_NONE)
        relock__multi_give_back(m, hold, i);
    round->hold = NULL;
    relock__multi_hold_free(hold);
    if (!op->ended)
      after_lost_round(op, round->refused, round->failed, validity_ran_out);
  }
  round_unref(round); /* the acquisition's: it kept the round alive through the cancels */
}

static void on_try(relock_future_t *f, void *arg) {
  slot_t *slot = arg;
  relock__multi_round_t *round = slot->round;
  relock_multi_lock_t *m = round->m;
  size_t i = (size_t)(slot - round->slots);
  int err = relock_future_error(f);
  int got = err == 0 && relock__multi_acquired(f);
  slot->f = NULL;
  slot->result = err != 0 ? err : got;
  relock__multi_hold_t *hold = round->hold;
  if (m->results_round == round)
    m->results[i] = slot->result;
  if (round->decided == UNDECIDED) {
    acquire_t *op = round->op;
    if (got) {
      hold->member[i] = RELOCK__MEMBER_HELD;
      hold->held++;
    } else if (err != 0) {
      round->failed++;
      if (op->err == 0) {
        op->err = err;
        snprintf(op->msg, sizeof op->msg, "lock %zu (%s): %s", i, m->locks[i]->name, relock_future_message(f));
      }
    } else {
      round->refused++;
    }
    if (hold->held >= m->quorum)
      round_decide(round, 1);
    else if (round->refused + round->failed > m->n - m->quorum)
      round_decide(round, 0);
  } else if (got && round->decided == WON && hold != NULL) { /* late, and kept */
    hold->member[i] = RELOCK__MEMBER_HELD;
    hold->held++;
  } else if (got) { /* late, for a hold that is gone */
    relock_future_release(relock_lock_unlock_async(m->locks[i], round->owner));
  }
  relock_future_release(f);
  round_unref(round);
}

static void start_round(acquire_t *op) {
  relock_multi_lock_t *m = op->m;
  relock__multi_round_t *round = calloc(1, sizeof(*round) + m->n * sizeof(round->slots[0]));
  relock__multi_hold_t *hold = round != NULL ? relock__multi_hold_new(m, op->owner) : NULL;
  if (hold == NULL) {
    free(round);
    fail(op, RELOCK_ENOMEM, "out of memory acquiring a %s", m->what);
    return;
  }
  *round = (relock__multi_round_t){.op = op, .m = relock__multi_ref(m), .hold = hold, .owner = op->owner, .refs = 1};
  op->round = round;
  op->err = 0;
  for (size_t i = 0; i < m->n; i++) {
    relock_future_t *f = relock_lock_lock_async(m->locks[i], op->owner, 0, op->lease_ms);
    round->slots[i] = (slot_t){.round = round, .f = f, .result = f != NULL ? RELOCK_EPENDING : RELOCK_ENOMEM};
    if (f != NULL)
      round->refs++;
  }
  /* Callbacks only once every try is out: one that answers at once must
   * not decide the round while others are still to be sent. */
  round->refs++;
  for (size_t i = 0; i < m->n; i++) {
    relock_future_t *f = round->slots[i].f;
    if (f == NULL) {
      round->failed++;
      continue;
    }
    if (relock_future_on_done(f, on_try, &round->slots[i]) != 0) {
      relock_future_cancel(f);
      relock_future_release(f);
      round->slots[i] = (slot_t){.round = round, .result = RELOCK_ENOMEM};
      round->failed++;
      round_unref(round);
    }
  }
  if (round->decided == UNDECIDED && round->refused + round->failed > m->n - m->quorum)
    round_decide(round, 0);
  round_unref(round);
}

/* -- timers, cancel, the entry ------------------------------------------------*/

static void on_pause(relock__timer_t *t, int status, void *arg) {
  (void)t;
  acquire_t *op = arg;
  if (status != 0)
    fail(op, RELOCK_ECLOSED, "%s: the client of lock 0 was closed", op->m->what);
  else
    start_round(op);
}

static void on_deadline(relock__timer_t *t, int status, void *arg) {
  (void)t;
  acquire_t *op = arg;
  if (status != 0)
    fail(op, RELOCK_ECLOSED, "%s: the client of lock 0 was closed", op->m->what);
  else
    end(op, 0);
}

static void on_cancel(relock_future_t *f, void *arg) {
  (void)f;
  fail(arg, RELOCK_ECANCELED, "cancelled"); /* the future is cancelled already: only the undoing is left */
}

relock_future_t *relock_multi_lock_lock_async(relock_multi_lock_t *m, uint64_t owner, int64_t wait_ms,
                                              int64_t lease_ms) {
  if (m == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "the group is NULL");
  if (wait_ms < RELOCK_INFINITE)
    return relock__future_failed(m->exec, RELOCK_EINVAL, "wait_ms must be >= 0, or RELOCK_INFINITE (got %lld)",
                                 (long long)wait_ms);
  if (!relock__lease_valid(lease_ms))
    return relock__future_failed(m->exec, RELOCK_EINVAL, RELOCK__LEASE_RANGE_FMT, RELOCK__LEASE_RANGE_ARGS(lease_ms));
  relock_future_t *out;
  if (relock__multi_enter(m, &out) != 0)
    return out;
  acquire_t *op = calloc(1, sizeof(*op) + m->n * sizeof(op->results[0]));
  out = op != NULL ? relock__future_new(m->exec) : NULL;
  if (out == NULL) {
    free(op);
    relock__exec_leave(m->exec);
    return NULL;
  }
  op->m = relock__multi_ref(m);
  op->out = relock_future_retain(out);
  op->owner = owner;
  op->lease_ms = lease_ms;
  op->refs = 1;
  op->bounded = wait_ms != RELOCK_INFINITE && wait_ms <= RELOCK_MAX_LEASE_MS;
  relock__timer_init(&op->pause, on_pause, op);
  relock__timer_init(&op->deadline, on_deadline, op);
  relock__future_set_cancel(out, on_cancel, op);
  if (op->bounded) {
    op->deadline_ns = relock__deadline_after(relock__now_ns(), wait_ms);
    if (wait_ms > 0 && relock__timer_start(&m->client->wheel, &op->deadline, wait_ms) != 0) {
      fail(op, RELOCK_ECLOSED, "%s: the client of lock 0 is closed", m->what);
      relock__exec_leave(m->exec);
      return out;
    }
  }
  op->refs++; /* the first round may end it at once */
  start_round(op);
  acquire_unref(op);
  relock__exec_leave(m->exec);
  return out;
}

/* -- blocking ----------------------------------------------------------------*/

int relock_multi_lock_try_lock(relock_multi_lock_t *m, int64_t wait_ms, int64_t lease_ms, int *acquired) {
  int r = relock__multi_would_block(m);
  return r != 0 ? r
                : relock__sync_wait_flag(relock_multi_lock_lock_async(m, relock_thread_owner(), wait_ms, lease_ms),
                                         acquired);
}

int relock_multi_lock_lock(relock_multi_lock_t *m, int64_t lease_ms) {
  return relock_multi_lock_try_lock(m, RELOCK_INFINITE, lease_ms, NULL);
}
