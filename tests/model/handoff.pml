/* A model of the one-process wake-up (relock_lock(3), "An unlock wakes one
 * relock process"), checked with spin for bounded response: once the lock
 * is free and a waiter waits, some waiter tries within FB ticks (the
 * fallback), never only when its own timer (the holder's TTL) runs out.
 * tests/model/run.sh runs it; README.md next to this file explains it.
 *
 * What is modelled (src/objects/lock_acquire.c, src/objects/wait_queue.c,
 * lua/lock_acquire.lua, lua/lock_release.lua)
 *   - P = 2 relock processes, each with at most one waiter at a time, and a
 *     holder that releases the lock whenever it likes.
 *   - A waiter's tries: lock_acquire.lua runs atomically; a try that finds
 *     the lock held registers the process (ZADD waiters <waker-id>: to the
 *     back of the queue) and answers PTTL; one that takes it unregisters it.
 *     A waiter joins its process's wait queue (nwaiters) only once its first
 *     try answered PTTL (on_try_done() -> join_queue()): while that first
 *     try is in flight the process does not count it. The model takes the
 *     queue that lingers, heard since before the try: join_queue()
 *     (relock__waitq_join()) answers 2 and the waiter waits without
 *     trying again (unless a wake-up was left unclaimed); a queue
 *     subscribed afresh tries again at once.
 *   - A release (lock_release.lua) pops the process registered longest and
 *     publishes its waker id, then the unlock message: the named process
 *     wakes its one waiter (on_handed: wake()), the others let that unlock
 *     pass and arm the fallback (HANDED_FALLBACK_MS) if they have waiters.
 *     With no process registered, the plain unlock wakes one waiter in
 *     every process.
 *   - wake() with no idle waiter marks one whose try is in flight (woken:
 *     it tries again when its PTTL answer comes) or, with none, leaves the
 *     wake-up unclaimed: a waiter joining later tries again at once.
 *   - A waiter may be cancelled at any time (its wait ends: cancel, a
 *     bounded wait's end). A waiter idle in the queue unregisters; one whose
 *     try is in flight cannot: a try that ran registers the process after
 *     its waiter left (the case this model is about).
 *   - Time passes only while every waiter waits on a timer: messages, tries
 *     and answers are prompt (the bound is about what the protocol does,
 *     not about slow networks). Timers: the fallback (FB ticks), a waiter's
 *     own (TTL ticks, the holder's PTTL).
 *
 * Configurations
 *   (default)      the new rule: a process named with no waiter to wake
 *                  passes the wake-up on (publishes a plain unlock, which
 *                  wakes one waiter in every process or leaves it unclaimed)
 *   FALLBACK_ALWAYS  the other new rule: every process that hears a handed
 *                  unlock arms its fallback, waiters or not; the fallback
 *                  wakes whoever is there by then
 *   OLD_HANDOFF    today's on_handed(): the named process with no waiter
 *                  drops the wake-up, the others arm the fallback only with
 *                  waiters in their queue. A waiter whose first try ran just
 *                  before the unlock joins after it, and waits its whole
 *                  TTL while the lock is free.
 *
 * The property: stuck, the ticks for which the lock has been free while a
 * waiter waited, never exceeds FB.
 */

#define P 2
#ifndef FB
#define FB  1      /* ticks: the fallback after a handed unlock */
#endif
#ifndef TTL
#define TTL 3      /* ticks: a waiter's own timer (the holder's PTTL) */
#endif

/* a waiter (w[p]) */
#define NONE  0
#define FIRST 1    /* its first try is on its way (not in the queue yet) */
#define RANF  2    /* its first try ran: PTTL on its way back */
#define TRY   3    /* in the queue, a try on its way */
#define RAN   4    /* in the queue, a try ran: PTTL on its way back */
#define WAIT  5    /* in the queue, idle: waits for a wake-up or a timer */

/* messages (msg[p]) */
#define M_NONE   0
#define M_PLAIN  1 /* an unlock: wake one waiter */
#define M_NAMED  2 /* a handed unlock naming this process */
#define M_HANDED 3 /* a handed unlock naming another process */

bool held = 1;      /* the lock is held */
byte q0, q1;        /* the registered processes, longest first (p + 1; 0: none) */
byte w[P];          /* each process's waiter */
bool woken[P];      /* its try in flight was woken: it tries again on PTTL */
bool unclaimed[P];  /* a wake-up found nobody: a waiter joining tries at once */
byte fb[P];         /* ticks until the fallback fires (0: not armed) */
byte tt[P];         /* ticks until the waiter's own timer fires */
byte msg[P];        /* a message on its way to the process */
bool handed[P];     /* (new rule) a handed wake-up this process holds, not
                       yet used by a try */
byte stuck;         /* ticks the lock has been free while a waiter waited */

#define JOINED(p) (w[p] == TRY || w[p] == RAN || w[p] == WAIT)
#define FLIGHT(p) (w[p] == FIRST || w[p] == RANF || w[p] == TRY || w[p] == RAN)
#define URGENT (msg[0] != M_NONE || msg[1] != M_NONE || FLIGHT(0) || FLIGHT(1))

inline unregister(p) {
  if
  :: q0 == p + 1 -> q0 = q1; q1 = 0
  :: q1 == p + 1 -> q1 = 0
  :: else
  fi
}

/* ZADD with a later score: to the back */
inline register(p) {
  unregister(p);
  if :: q0 == 0 -> q0 = p + 1 :: else -> q1 = p + 1 fi
}

/* wake(q, 0): one waiter. */
inline wake(p) {
  if
  :: w[p] == WAIT -> w[p] = TRY; tt[p] = 0; fb[p] = 0
  :: w[p] == TRY || w[p] == RAN -> woken[p] = 1
  :: else -> unclaimed[p] = 1
  fi
}

inline end_wait(p) {
  w[p] = NONE; woken[p] = 0; tt[p] = 0; fb[p] = 0
}

/* A waiter leaves: with the new rule, a handed wake-up it had not used yet
 * goes on, as if the process had had no waiter (one waiter a process: it
 * has none now). */
inline pass_on(p, other) {
#if !defined(OLD_HANDOFF) && !defined(FALLBACK_ALWAYS)
  if :: handed[p] -> handed[p] = 0; unclaimed[p] = 1; msg[other] = M_PLAIN :: else fi
#else
  skip
#endif
}

/* Redis: a try runs (lock_acquire.lua with the waker id). */
inline try_script(p) {
  stuck = 0;                                         /* a waiter tried */
#ifndef OLD_HANDOFF
  handed[p] = 0;
#endif
  if
  :: !held -> held = 1; unregister(p); end_wait(p)  /* acquired: zrem */
  :: else -> register(p);                            /* PTTL: zadd */
     if :: w[p] == FIRST -> w[p] = RANF :: else -> w[p] = RAN fi
  fi
}

/* The holder (or a waiter that took the lock) releases: lock_release.lua. */
inline release() {
  held = 0;
  if
  :: q0 != 0 ->
     msg[0] = (q0 == 1 -> M_NAMED : M_HANDED);
     msg[1] = (q0 == 2 -> M_NAMED : M_HANDED);
     q0 = q1; q1 = 0                                 /* zpopmin */
  :: else -> msg[0] = M_PLAIN; msg[1] = M_PLAIN
  fi
}

/* on_message() -> on_handed() and the rest, in process p. */
inline deliver(p, other) {
  if
  :: msg[p] == M_PLAIN -> wake(p)
  :: msg[p] == M_NAMED ->
#ifdef OLD_HANDOFF
     wake(p)                          /* nobody here: unclaimed, and that is all */
#else
     if
     :: w[p] == NONE || w[p] == FIRST || w[p] == RANF ->
#ifdef FALLBACK_ALWAYS
        wake(p)                       /* the others' fallback covers it */
#else
        unclaimed[p] = 1;             /* no waiter to wake: pass it on */
        msg[other] = M_PLAIN          /* (after the handed one, if that is
                                       * still on its way: it would only arm
                                       * the fallback) */
#endif
     :: else -> wake(p); handed[p] = 1
     fi
#endif
  :: msg[p] == M_HANDED ->
#ifdef FALLBACK_ALWAYS
     fb[p] = FB
#else
     if :: JOINED(p) -> fb[p] = FB :: else fi
#endif
  fi;
  msg[p] = M_NONE
}

inline tick_process(p) {
  if
  :: fb[p] > 0 -> fb[p]--; if :: fb[p] == 0 -> wake(p) :: else fi
  :: else
  fi;
  if
  :: tt[p] > 0 -> tt[p]--; if :: tt[p] == 0 && w[p] == WAIT -> w[p] = TRY :: else fi
  :: else
  fi
}

active proctype world() {
end:
  do
  /* a waiter comes (relock_lock_lock_async with a wait) */
  :: d_step { w[0] == NONE -> w[0] = FIRST }
  :: d_step { w[1] == NONE -> w[1] = FIRST }
  /* a waiter is cancelled: one idle in the queue unregisters */
  :: d_step { w[0] != NONE -> if :: w[0] == WAIT -> unregister(0) :: else fi; end_wait(0); pass_on(0, 1) }
  :: d_step { w[1] != NONE -> if :: w[1] == WAIT -> unregister(1) :: else fi; end_wait(1); pass_on(1, 0) }
  /* Redis runs a try */
  :: d_step { w[0] == FIRST || w[0] == TRY -> try_script(0) }
  :: d_step { w[1] == FIRST || w[1] == TRY -> try_script(1) }
  /* a PTTL answer arrives: the first one joins the queue */
  :: d_step { w[0] == RANF ->
       if :: unclaimed[0] -> unclaimed[0] = 0; w[0] = TRY :: else -> w[0] = WAIT; tt[0] = TTL fi }
  :: d_step { w[1] == RANF ->
       if :: unclaimed[1] -> unclaimed[1] = 0; w[1] = TRY :: else -> w[1] = WAIT; tt[1] = TTL fi }
  :: d_step { w[0] == RAN ->
       if :: woken[0] -> woken[0] = 0; w[0] = TRY :: else -> w[0] = WAIT; tt[0] = TTL fi }
  :: d_step { w[1] == RAN ->
       if :: woken[1] -> woken[1] = 0; w[1] = TRY :: else -> w[1] = WAIT; tt[1] = TTL fi }
  /* the lock is released */
  :: d_step { held && msg[0] == M_NONE && msg[1] == M_NONE -> release() }
  /* messages arrive */
  :: d_step { msg[0] != M_NONE -> deliver(0, 1) }
  :: d_step { msg[1] != M_NONE -> deliver(1, 0) }
  /* a tick: only while nothing is on its way */
  :: d_step { !URGENT ->
       if
       :: !held && (w[0] == WAIT || w[1] == WAIT) -> if :: stuck <= FB -> stuck++ :: else fi
       :: else -> stuck = 0
       fi;
       tick_process(0);
       tick_process(1) }
  od
}

active proctype monitor() {
end:
  atomic { stuck > FB -> assert(stuck <= FB) }
}
