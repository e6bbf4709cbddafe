/* A model of relock's reentrant lock protocol (DESIGN.md §3-§6), checked
 * with spin. tests/model/run.sh runs every configuration below; README.md
 * next to this file explains the results.
 *
 * What is modelled
 *   - N clients (2 or 3; -DN=3), one owner each: client i's field in the lock
 *     hash is "<client-id>:<owner>" of client i.
 *   - One Redis. Each Lua script runs as one atomic step (d_step): Redis
 *     runs scripts one at a time. Keys expire when the clock reaches their
 *     expiry time (PEXPIRE / SET PX).
 *   - Discrete time: a clock process lets one tick pass whenever it is
 *     scheduled. Times are kept relative (ticks left before a key, a latch or
 *     a belief expires; ticks since a request was sent), so the state space
 *     is finite without a horizon: the check covers runs of any length.
 *     Any process can be left unscheduled while time passes: that is a
 *     process stall (GC pause, swapped out, stopped), a slow network or a
 *     slow Redis; spin explores every such interleaving.
 *   - Message loss: a request may be lost before Redis runs it, or its reply
 *     may be lost or late. The client then times out (at any moment:
 *     timeouts are not modelled as durations) and retries the same request
 *     (same bytes, so the same latch key: src/call.c, retry_safe) or gives
 *     up after RETRIES retries.
 *   - Client operations, one in flight per client at a time:
 *       acquire (also reentrant)     lua/lock_acquire.lua, src/lock_acquire.c
 *       watchdog renewal             lua/lock_renew.lua,   src/renewal.c
 *       release with unlock latch    lua/lock_release.lua, src/lock.c
 *       the watchdog's deadline check (lost: ETIMEDOUT)    src/renewal.c
 *   - Force release by an admin                lua/lock_force_release.lua
 *
 * What is abstracted away
 *   - Pub/sub and the wait queue (src/lock_acquire.c §4 machinery): they only
 *     decide *when* a waiter tries again; here a client may try at any time.
 *     A "not acquired" (PTTL) answer ends the operation; the next try is a
 *     new acquire (today's code reuses the latch id for the next try of the
 *     same operation, which is equivalent: a latch is only written by a try
 *     that acquired, and that ends the operation).
 *   - Renewal batching: one lock, so a batch is one key.
 *   - Durations of timeouts, back-off and the renewal period: all
 *     nondeterministic (any moment), which covers every concrete setting.
 *   - Hold counts in Redis above CMAX: an acquire that would pass CMAX is not
 *     run (that request can only time out). This only cuts off states.
 *   - Clock drift: local clocks are exact, so MARGIN is slack the model does
 *     not need; it is kept to match the rule as written.
 *   - Cluster, failover and persistence: one Redis that never loses data.
 *
 * Configurations (cpp symbols, e.g. spin -DN=3 -DOLD -a lock.pml)
 *   N             number of clients, 2 (default) or 3
 *   LEASE, MARGIN, RETRIES, HMAX, CMAX, FMAX   the bounds below
 *   OLD           OLD_LATCH + OLD_CLIENT: today's code
 *   OLD_LATCH     today's lua/lock_acquire.lua: an existing latch answers
 *                 "acquired" without looking at the hash
 *   OLD_CLIENT    today's on_try_done() in src/lock_acquire.c: any nil answer
 *                 is reported "acquired", however late it arrives. The
 *                 report carries no deadline (a fixed lease is not tracked
 *                 at all), so the caller counts its lease from the report:
 *                 validity = arrival + LEASE - MARGIN.
 *   OLD_REENTRY   today's relock__renewal_acquired() in src/watchdog/renewal.c: a
 *                 new hold is counted onto an existing hold whose deadline
 *                 has passed but that the watchdog has not yet declared
 *                 lost (the new rule first drops such a hold: it is lost)
 *   STAMP_RETRY   the client takes a retry's send time as the acquire's send
 *                 time (today's code keeps the first attempt's, sent_ns in
 *                 try_acquire(); this shows what the server rule protects)
 *   NO_UNLOCK_LATCH  lua/lock_release.lua without its latch
 *   STRICT_FORCE  count a force-released holder's belief like any other
 *                 (expected to fail: the known limit of force release)
 *
 * The property (checked by the monitor process at every state)
 *   valid(i)  = client i believes it holds (holds[i] > 0) and its local
 *               validity deadline (send time of its last successful
 *               acquire/renew + LEASE - MARGIN) has not passed: vleft[i],
 *               the ticks left until it, is > 0. A belief counts only until
 *               its deadline: after it, the client must not use the lock.
 *   SAFE      = for every client i with valid(i) and not revoked(i):
 *                 its field exists in Redis (holder == i), and
 *                 no other client j != i has valid(j) and not revoked(j).
 *   revoked(i): an admin force-released the lock while i's field held it
 *               (until client i has no belief and nothing in flight).
 *   Force release cannot be made safe by the protocol: the holder learns of
 *   it only through its next renewal (answer 0) or its deadline, so its
 *   belief, although valid by its own clock, may overlap a new holder's
 *   until its validity deadline. That is the known limit; STRICT_FORCE
 *   shows the overlap is reachable, and everything else is checked without
 *   the revoked holder.
 */

#ifndef N
#define N 2
#endif
#if N < 2 || N > 3
#error "N must be 2 or 3"
#endif

#ifdef OLD
#define OLD_LATCH
#define OLD_CLIENT
#endif

#ifndef LEASE
#define LEASE     3   /* ticks: the lease (ARGV lease ms / watchdog timeout) */
#endif
#ifndef MARGIN
#define MARGIN    1   /* ticks: the drift margin taken off local deadlines */
#endif
#define VALIDITY  (LEASE - MARGIN) /* ticks a success is valid from its send */
#ifndef RETRIES
#define RETRIES   1   /* call.c: retries of a request after a timeout */
#endif
#ifndef HMAX
#define HMAX      2   /* most holds (reentrancy) a client takes */
#endif
#ifndef CMAX
#define CMAX      3   /* most holds counted in Redis (see above) */
#endif
#ifndef FMAX
#define FMAX      1   /* force releases per run */
#endif

/* client operations (st[i]) */
#define IDLE 0
#define ACQ  1        /* lock_acquire.lua in flight */
#define REN  2        /* lock_renew.lua in flight */
#define REL  3        /* lock_release.lua in flight */

/* replies (rep[i]) */
#define R_NONE     0
#define R_ACQUIRED 1  /* lock_acquire.lua: nil */
#define R_PTTL     2  /* lock_acquire.lua: the holder's PTTL */
#define R_RENEWED  3  /* lock_renew.lua: 1 */
#define R_GONE     4  /* lock_renew.lua: 0 */
#define R_NOTOWNER 5  /* lock_release.lua: nil */
#define R_REMAINS  6  /* lock_release.lua: 0 */
#define R_FREED    7  /* lock_release.lua: 1 */

/* -- Redis -----------------------------------------------------------------*/
/* The lock hash. At most one field at a time: lock_acquire.lua adds a field
 * only to a missing key or to the caller's own field. */
byte holder;          /* 0: the key does not exist; i+1: client i's field */
byte cnt;             /* the field's hold count */
byte kttl;            /* ticks until the key expires (PEXPIRE lease) */
/* Latches, keyed by request id. A client has at most one request id in use
 * (a new operation takes a new id, and the old id's latch is never asked
 * again, so it is dropped from the state when its operation ends): one slot
 * each. A latch is set for relock__latch_ttl_ms(), computed to outlive every
 * retry of its request, and longer than the lease: so here it lives as long
 * as its operation (it never expires under a retry) and outlives the key. */
bool alatch[N];       /* relock_lock_latch:{name}:<request-id> (SET PX) */
bool rlatch[N];       /* redisson_unlock_latch:{name}:<request-id> */
byte rlans[N];        /* the release answer that latch stores */

/* -- the network -----------------------------------------------------------*/
bool req[N];          /* client i's current request is on its way to Redis */
byte rep[N];          /* a reply on its way back to client i */

/* -- clients ---------------------------------------------------------------*/
byte st[N];           /* the operation in flight */
byte holds[N];        /* the belief: holds the client thinks it has */
byte vleft[N];        /* ticks until the local validity deadline */
byte age[N];          /* ticks since the operation in flight was sent
                         (counted up to VALIDITY: beyond it, only "late"
                         matters) */
byte tries[N];        /* retries left */
bool revoked[N];      /* force-released under this client (see above) */
byte forces;          /* force releases so far */

/* -- the property ----------------------------------------------------------*/
#define VALID(i) (holds[i] > 0 && vleft[i] > 0)
#ifdef STRICT_FORCE
#define COUNTS(i) VALID(i)
#else
#define COUNTS(i) (VALID(i) && !revoked[i])
#endif
#define HELD(i)   (!COUNTS(i) || holder == i + 1)
#define APART(i, j) (!(COUNTS(i) && COUNTS(j)))
#if N == 2
#define SAFE (HELD(0) && HELD(1) && APART(0, 1))
#else
#define SAFE (HELD(0) && HELD(1) && HELD(2) && APART(0, 1) && APART(0, 2) && APART(1, 2))
#endif

/* A client's belief starts, or is extended, to d ticks from now. */
inline believe(i, d) {
  if
  :: holds[i] == 0 || d > vleft[i] -> vleft[i] = d
  :: else
  fi
}

/* A new request (a new request id: no latch for it exists yet). */
inline send(i, op) {
  st[i] = op; age[i] = 0; tries[i] = RETRIES; req[i] = 1; rep[i] = R_NONE
}

/* Nothing in flight and no belief: nothing from before a force release is
 * left to answer this client. */
inline forget_revoked(i) {
  if :: st[i] == IDLE && holds[i] == 0 -> revoked[i] = 0 :: else fi
}

/* The operation is over: forget what only it needed. */
inline done(i) {
  st[i] = IDLE; age[i] = 0; tries[i] = 0; alatch[i] = 0; rlatch[i] = 0; rlans[i] = 0;
  forget_revoked(i)
}

/* ==========================================================================
 * Redis: one step runs one script for one client, atomically.
 * ========================================================================*/

/* lua/lock_acquire.lua. KEYS[2] is the latch of this request id. */
inline acquire_script(i) {
#ifdef OLD_LATCH
  if
  :: alatch[i] -> rep[i] = R_ACQUIRED  /* "if exists(latch) return nil" */
  :: else ->
#else
  if
  :: alatch[i] && holder == i + 1 ->   /* a retry that still holds:     */
     kttl = LEASE; rep[i] = R_ACQUIRED      /* re-extend, answer "acquired" */
  :: else ->                                /* otherwise decide afresh       */
#endif
     if
     :: holder == 0 || holder == i + 1 ->   /* hincrby, pexpire, set latch px */
        holder = i + 1; cnt++; kttl = LEASE;
        alatch[i] = 1; rep[i] = R_ACQUIRED
     :: else -> rep[i] = R_PTTL              /* held by another: its PTTL     */
     fi
  fi
}

/* lua/lock_renew.lua, for one key. */
inline renew_script(i) {
  if
  :: holder == i + 1 -> kttl = LEASE; rep[i] = R_RENEWED
  :: else -> rep[i] = R_GONE
  fi
}

/* lua/lock_release.lua. KEYS[3] is the unlock latch of this request id. */
inline release_script(i) {
  if
#ifndef NO_UNLOCK_LATCH
  :: rlatch[i] -> rep[i] = rlans[i]    /* a retry: the first answer     */
#endif
  :: else ->
     if
     :: holder != i + 1 -> rep[i] = R_NOTOWNER
     :: else ->
        cnt--;
        if
        :: cnt > 0 -> kttl = LEASE; rep[i] = R_REMAINS
        :: else -> holder = 0; kttl = 0; rep[i] = R_FREED  /* del, publish */
        fi;
        rlatch[i] = 1; rlans[i] = rep[i]
     fi
  fi
}

/* A request Redis can run now (CMAX: see the header). */
#define RUNNABLE(i) (req[i] && !(st[i] == ACQ && holder == i + 1 && cnt >= CMAX))

inline run_script(i) {
  req[i] = 0;
  if
  :: st[i] == ACQ -> acquire_script(i)
  :: st[i] == REN -> renew_script(i)
  :: st[i] == REL -> release_script(i)
  fi
}

active proctype redis() {
end:
  do
  :: d_step { RUNNABLE(0) -> run_script(0) }
  :: d_step { RUNNABLE(1) -> run_script(1) }
#if N > 2
  :: d_step { RUNNABLE(2) -> run_script(2) }
#endif
  od
}

/* ==========================================================================
 * The clock: a tick passes; the key, beliefs and requests age.
 * ========================================================================*/
inline age_client(i) {
  if :: vleft[i] > 0 -> vleft[i]-- :: else fi;
  if :: (st[i] == ACQ || st[i] == REN) && age[i] < VALIDITY -> age[i]++ :: else fi
}

active proctype clock() {
end:
  do
  :: d_step {
       if
       :: holder != 0 -> kttl--; if :: kttl == 0 -> holder = 0; cnt = 0 :: else fi
       :: else
       fi;
       age_client(0);
       age_client(1);
#if N > 2
       age_client(2)
#endif
     }
  od
}

/* ==========================================================================
 * The admin: relock_lock_force_release_async(), lua/lock_force_release.lua.
 * ========================================================================*/
active proctype admin() {
end:
  do
  :: d_step { forces < FMAX && holder != 0 ->
       forces++; revoked[holder - 1] = 1; holder = 0; cnt = 0; kttl = 0 }
  od
}

/* ==========================================================================
 * A client: the lock object's operations in src/lock_acquire.c, src/lock.c,
 * the watchdog in src/renewal.c and the retries in src/call.c.
 * ========================================================================*/
active [N] proctype client() {
  byte i = _pid - 3;   /* redis, clock and admin are pids 0..2 */
end:
  do
  /* relock_lock_acquire_async() -> try_acquire(): first or reentrant hold. */
  :: atomic { st[i] == IDLE && holds[i] < HMAX -> send(i, ACQ) }

  /* renewal.c on_cycle() -> send_batch(): a watchdog renewal while held. */
  :: atomic { st[i] == IDLE && holds[i] > 0 && vleft[i] > 0 -> send(i, REN) }

  /* relock_lock_release_async(): the caller gives up one hold (it stops
   * using the lock before it calls release). */
  :: atomic { st[i] == IDLE && holds[i] > 0 ->
       holds[i]--; if :: holds[i] == 0 -> vleft[i] = 0 :: else fi;
       send(i, REL) }

  /* renewal.c check_deadlines(): the local deadline has passed without a
   * renewal: the lock is lost (ETIMEDOUT), with no network needed. */
  :: atomic { holds[i] > 0 && vleft[i] == 0 -> holds[i] = 0; forget_revoked(i) }

  /* lock_acquire.c on_try_done(): the answer is nil, "acquired". */
  :: atomic { st[i] == ACQ && rep[i] == R_ACQUIRED -> rep[i] = R_NONE;
#ifdef OLD_CLIENT
       /* today: reported whenever it arrives; the caller's lease runs from
        * the report */
       believe(i, VALIDITY); holds[i]++; done(i)
#else
       if
       :: age[i] < VALIDITY ->                /* in time: valid until send */
#ifndef OLD_REENTRY                           /* time + LEASE - MARGIN     */
          if :: vleft[i] == 0 -> holds[i] = 0 :: else fi;
#endif
          believe(i, VALIDITY - age[i]); holds[i]++; done(i)
       :: else ->                             /* late: unknown. Every hold */
          holds[i] = 0; vleft[i] = 0;         /* is past its deadline; give */
          done(i); send(i, REL)               /* back the one just taken    */
       fi
#endif
     }

  /* on_try_done(): a PTTL answer, not acquired (the caller may try again). */
  :: atomic { st[i] == ACQ && rep[i] == R_PTTL -> rep[i] = R_NONE; done(i) }

  /* renewal.c on_batch_reply(): 1 extends the deadline from the batch's
   * send time; 0 means the lock is lost (ELOST). */
  :: atomic { st[i] == REN && rep[i] == R_RENEWED -> rep[i] = R_NONE;
       if :: holds[i] > 0 && age[i] < VALIDITY -> believe(i, VALIDITY - age[i]) :: else fi;
       done(i) }
  :: atomic { st[i] == REN && rep[i] == R_GONE -> rep[i] = R_NONE;
       holds[i] = 0; vleft[i] = 0; done(i) }

  /* lock.c on_release_done() -> renewal_release_done(): freed or not the
   * owner forget the hold (lost, if it was not); 0 keeps the others. */
  :: atomic { st[i] == REL && (rep[i] == R_FREED || rep[i] == R_NOTOWNER) ->
       rep[i] = R_NONE; holds[i] = 0; vleft[i] = 0; done(i) }
  :: atomic { st[i] == REL && rep[i] == R_REMAINS -> rep[i] = R_NONE; done(i) }

  /* call.c: the request timed out or the connection dropped. Whether or not
   * Redis ran it, its reply is dropped (a late reply to a timed-out request
   * is discarded). Transient: retry the same request (same latch key), or
   * give up: the operation fails (an acquire that Redis did run is not
   * undone: the lease frees it; a failed renewal changes nothing; a failed
   * release leaves the hold as it was). */
  :: atomic { st[i] != IDLE ->
       req[i] = 0; rep[i] = R_NONE;
       if
       :: tries[i] > 0 -> tries[i]--; req[i] = 1;
#ifdef STAMP_RETRY
          age[i] = 0
#else
          skip
#endif
       :: else -> done(i)
       fi }
  od
}

/* ==========================================================================
 * The monitor: SAFE in every reachable state.
 * ========================================================================*/
active proctype monitor() {
end:
  atomic { !SAFE -> assert(SAFE) }
}
