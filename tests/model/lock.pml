/* A model of relock's reentrant lock protocol (docs/SAFETY.md), and of the
 * read-write lock (readers and a writer), checked with spin. tests/model/run.sh
 * runs every configuration below; README.md next to this file explains the
 * results. tests/model/handoff.pml models the one-process wake-up.
 *
 * What is modelled
 *   - N request slots, each a client process with one operation in flight
 *     at a time, and the owners they act for: slot i acts for owner OWN(i),
 *     whose field in the lock hash is "<client-id>:<owner>". Normally each
 *     slot is its own owner (2 or 3 owners). With SAME_OWNER, slots 0 and 1
 *     act for owner 0: two acquisitions of one owner can be in flight at
 *     once (a re-entry sent while the first answer is outstanding).
 *   - Each hold has a lease kind, chosen per acquisition: a fixed lease LF
 *     (relock_lock_lock_async(lease_ms > 0)) or the watchdog's lease LW
 *     (RELOCK_INFINITE: renewed), with LF > LW + MARGIN so a renewal that
 *     writes LW can cut a fixed belief short. An owner's holds are one entry
 *     in the watchdog's table (src/watchdog/renewal.c): renewed once any of
 *     its acquisitions was a watchdog one, and with one validity deadline,
 *     the latest any acquisition or renewal gave it.
 *   - One Redis. Each Lua script runs as one atomic step (d_step). Keys,
 *     and with OLD_LATCH_TTL the acquisition latches, expire when the clock
 *     reaches their expiry. The lock's key also vanishes without any message
 *     to its holders: an admin's force release, a plain DEL, or data loss
 *     (a restart without persistence, a failover to a replica that never
 *     had it). FMAX such events per run.
 *   - Discrete time: a clock process lets one tick pass whenever it is
 *     scheduled. Times are kept relative (ticks left before a key, a latch
 *     or a belief expires; ticks since a request was sent), so the state
 *     space is finite without a horizon: the check covers runs of any
 *     length. Any process can be left unscheduled while time passes: a
 *     process stall (GC pause, swapped out, stopped), a slow network or a
 *     slow Redis; spin explores every such interleaving.
 *   - Message loss: a request may be lost before Redis runs it, or its reply
 *     may be lost or late. The client then times out (at any moment) and
 *     retries the same request (same bytes, so the same latch key:
 *     src/redis/call.c, retry_safe) or gives up after RETRIES retries.
 *   - Client operations:
 *       acquire (also reentrant)    lua/lock_acquire.lua (read: lua/rwlock_read_acquire.lua),
 *                                   src/objects/lock_acquire.c
 *       give back an acquisition    lua/lock_acquire_undo.lua (read: lua/rwlock_read_release.lua
 *       whose answer was lost,      with "undo"): the latch says whether it counted a hold
 *       late or given up
 *       watchdog renewal            lua/lock_renew.lua, src/watchdog/renewal.c
 *       a fixed lease's check       (the new rule for B below) the field is read, the TTL never written
 *       release with unlock latch   lua/lock_release.lua (read: lua/rwlock_read_release.lua)
 *       its background retry        (the new rule for F below) a release with no answer is
 *                                   sent again, same request id (same unlock latch), until
 *                                   answered or the hold's lease has ended locally
 *       a surplus given back        src/watchdog/hold.c relock__hold_give_back(): releases
 *                                   (lua/lock_release.lua) of holds Redis counts and the owner
 *                                   does not, one at a time, each a new request id
 *       the deadline check          renewal.c check_deadlines(), a fixed lease's on_lease_end()
 *   - The let-go states (class F). An owner lets go of a hold when it asks
 *     to release its last hold (its count goes to 0 locally, whatever the
 *     release's answer will be), when the hold's lease ends locally (a
 *     fixed lease over, a renewed one declared lost by timeout) or when it
 *     is told the hold is lost. A release may be lost before Redis, run with
 *     its reply lost, or answered late; Redis's release script is atomic and
 *     idempotent by its unlock latch. The new rules: (a) nothing renews or
 *     checks a hold the owner let go, whatever its release's answer: the
 *     watchdog's renewal and the fixed lease's check act only on holds the
 *     owner holds; (b) a release with no answer is retried in the
 *     background with the same request id until Redis answers or the
 *     hold's lease has ended locally (then the watchdog's table forgets it:
 *     nobody renews it, Redis lets it expire); (c) the background retry
 *     keeps the owner's turn: the owner's next acquisition waits for it, or
 *     starts once it has given up; (d') an acquisition counts one hold,
 *     what the caller is told: the owner's holds + 1, or 1 for a new hold
 *     (none believed, or the earlier ones let go, lost or forgotten - never
 *     one on top of a hold the owner stopped believing in). If its answer
 *     (lua/lock_acquire.lua's count) shows Redis counting more than the
 *     owner now believes (a fixed lease's field that ended locally within
 *     the margin, a let-go hold whose release has not landed), the
 *     difference is a surplus given back at once: releases of one hold
 *     each, each a new request id, one after another, the owner's turn kept
 *     until they are answered (src/objects/lock.c relock__lock_acquired(),
 *     hold.c relock__hold_give_back()); the owner's count is not touched. A
 *     give-back that gets no answer stops (no background retry); a freed or
 *     not-held answer means Redis counted fewer than it said: the hold is
 *     lost. (e) When the owner's last release is answered "holds remain",
 *     it is sent again (a new request id), the turn kept, until Redis
 *     answers freed or not held (hold.c give_back_surplus()).
 *
 * What is abstracted away
 *   - Pub/sub and the wait queue (handoff.pml has them): they only decide
 *     *when* a waiter tries again; here a client may try at any time. A "not
 *     acquired" (PTTL) answer ends the operation; the next try is a new one.
 *   - Renewal batching: one lock, so a batch is one key. The renewal
 *     cadence, timeouts and back-off: nondeterministic (any moment).
 *   - Hold counts in Redis above CMAX: an acquire that would pass CMAX is not
 *     run (that request can only time out). This only cuts off states.
 *   - Clock drift: local clocks are exact, so MARGIN is slack the model does
 *     not need; it is kept to match the rule as written.
 *   - READ: every owner is a reader; RW: the last owner is a writer
 *     (lua/rwlock_write_acquire.lua: a missing key or its own write hold;
 *     a reader goes ahead unless the writer holds). A writer's own read
 *     holds and the writers' wait queue (which holds new readers back: only
 *     liveness) are left out. A release that leaves other holds sets the
 *     key's expiry from their timeout keys (the longest); each of those is
 *     at least its owner's belief, so the model keeps the key's TTL as it
 *     was.
 *
 * Configurations (cpp symbols, e.g. spin -DN=3 -DOLD -a lock.pml)
 *   N             request slots, 2 (default) or 3
 *   SAME_OWNER    slots 0 and 1 act for one owner (class D)
 *   READ          read holds of a read-write lock (shared by the owners)
 *   RW            READ, and the last owner is a writer
 *   ONLY_WD, ONLY_FIXED   every acquisition takes that lease kind
 *   LW, LF, MARGIN, RETRIES, HMAX, CMAX, FMAX   the bounds below
 *   The old rules, each today's code (before the fix) or a safeguard taken
 *   away; each must produce a counterexample:
 *   OLD_RENEW     (A) lua/lock_renew.lua: PEXPIRE watchdog lease, even when
 *                 the key had a longer TTL (a fixed re-entry, or another
 *                 reader's fixed lease) and the owner's belief follows it
 *   OLD_RELEASE_TTL  (A) lua/lock_release.lua: a release that leaves holds
 *                 PEXPIREs the lease relock__renewal_lease_for() gives (the
 *                 watchdog's for a renewed hold), however long the key had
 *   OLD_FIXED_UNCHECKED  (B) renewal.c: a fixed-lease hold is never
 *                 checked; its belief lasts until its lease ends, whatever
 *                 happened to the key
 *   OLD_LATCH_TTL (C) an acquisition's latch expires after LT ticks,
 *                 before a retry or an undo may come; lua/lock_acquire_undo.lua
 *                 then finds no latch and gives nothing back, and a retry
 *                 counts again
 *   OLD_UNDO_GIVES_UP  (C) the undo is a request like others: after RETRIES
 *                 it is given up
 *   OLD_CONCURRENT_ACQ  (D, SAME_OWNER) an owner's count-changing requests
 *                 (acquire, its undo, release) go out whenever asked, however
 *                 many of them are in flight. The new rule sends them one at a
 *                 time per owner: one that runs after the key expired would
 *                 change the count of the key made afresh since (an undo or a
 *                 stale release deletes a later hold's key)
 *   OLD_REENTRY_VANISHED  (D) on_try_done(): "acquired" (nil) carries no
 *                 count, so a re-entry onto a key that vanished (Redis: a
 *                 fresh count of 1) is counted on top of the owner's holds
 *                 (and every acquisition counts one: OLD_ACQ_COUNTS_ONE).
 *                 The new rule: lock_acquire.lua answers with the field's
 *                 count; fewer than the owner's holds + 1 means the earlier
 *                 holds are gone: lost (ELOST), and this one starts afresh
 *                 with its own deadline
 *   OLD           OLD_LATCH + OLD_CLIENT: the code before the latch rule
 *   OLD_LATCH     lua/lock_acquire.lua before: an existing latch answers
 *                 "acquired" without looking at the hash
 *   OLD_CLIENT    on_try_done() before: any nil answer is reported
 *                 "acquired", however late; the caller counts its lease from
 *                 the report: validity = arrival + lease - MARGIN
 *   OLD_REENTRY   relock__renewal_acquired() before: a new hold is counted
 *                 onto an existing hold whose deadline has passed but that
 *                 the watchdog has not yet declared lost
 *   STAMP_RETRY   the client takes a retry's send time as the acquire's send
 *                 time (today's code keeps the first attempt's)
 *   NO_UNLOCK_LATCH  lua/lock_release.lua without its latch
 *   STRICT_FORCE  no exemption at all for a holder whose key vanished
 *                 (expected to fail: no client can learn of it sooner than
 *                 its next check)
 *   NO_P5         leave property 5 out, so a variant that breaks it too
 *                 (OLD_REENTRY_VANISHED: no count, so one on top, as
 *                 OLD_ACQ_COUNTS_ONE; OLD and OLD_CLIENT, one on top too) is
 *                 shown breaking the property it stands for
 *   OLD_RENEW_AFTER_FAILED_RELEASE  (F) renewal.c relock__renewal_release_done()
 *                 with RELOCK__RELEASE_FAILED: "nothing is known, the deadline
 *                 decides": the hold stays in the table as it was (its count
 *                 too) and the watchdog goes on renewing it once no release is
 *                 in flight; the release is not retried. A release whose
 *                 request was lost leaves its field renewed for ever
 *   RETRY_WITHOUT_TURN  (F, SAME_OWNER) a release retried in the background
 *                 (its retries spent) no longer holds the owner's turn: the
 *                 owner's next acquisition may go while it is retried (rule
 *                 (c) taken away)
 *   OLD_ACQ_COUNTS_ONE  (F) relock__renewal_acquired() before the ledger: a
 *                 hold forgotten (its lease ended locally) or lost makes the
 *                 next acquisition a new hold of count 1, whatever Redis
 *                 answered, and nothing is given back: a field the lease end
 *                 left behind (its TTL outlives the local deadline by the
 *                 margin) is counted in Redis and in nobody's belief, and the
 *                 new hold's renewals keep it
 *   ADOPT_REDIS_COUNT  (F) the rule (d) this model had before (d'): the
 *                 next acquisition takes Redis's count (holds = the answer's
 *                 count), nothing given back. Redis and the ledger agree, but
 *                 the caller made one lock call: its one unlock leaves a hold
 *                 the watchdog renews for ever
 *   NO_LAST_GIVE_BACK  (F) rule (e) taken away: the owner's last release
 *                 answered "holds remain" is over (the caller told)
 *   GIVE_BACK_WITHOUT_TURN  (F, SAME_OWNER) the surplus give-back is sent
 *                 after the owner's turn is left: its next acquisition or
 *                 release may go while the give-back is in flight
 *   STRICT_SURPLUS  property 5 without its exemption for a surplus whose
 *                 give-back got no answer (expected to fail: the rule stops
 *                 such a give-back, and the owner's watchdog renews the
 *                 field with the surplus until the owner's last release)
 *
 * The property (checked by the monitor process at every state)
 *   valid(o)  = owner o believes it holds (holds[o] > 0) and its local
 *               validity deadline (send time of its last successful
 *               acquire/renew + that step's lease - MARGIN) has not passed:
 *               vleft[o], the ticks left until it, is > 0.
 *   (1) for every owner o with counts(o): Redis has o's field with at least
 *       holds[o] holds, and the key's TTL is not smaller than vleft[o] (the
 *       remaining validity, which is already less the margin): the key
 *       cannot expire under a belief.
 *   (2) exclusive lock: no two owners with counts() at once. Read-write
 *       lock: readers share; the writer's belief never overlaps a reader's.
 *   (3) a key that vanished under its holders (force release, DEL, data
 *       loss): each of them is exempt from (1) and (2) only until its next
 *       check (a renewal or a fixed lease's check) that Redis ran after the
 *       vanish has been answered; that answer ends the belief, reporting the
 *       loss (RELOCK_ELOST). A hold that is never checked gets no exemption
 *       at all (it would keep its belief until its lease: OLD_FIXED_UNCHECKED).
 *       So counts(o) = valid(o) and not (vanished under o and o's hold is
 *       checked). The exemption also ends once o has no belief and nothing
 *       in flight. (SAME_OWNER: a check whose flight overlapped an
 *       acquisition of the same owner proves nothing - the field it found
 *       may be the one that acquisition made afresh - so the exemption
 *       lasts until a check without one.)
 *   (4) every hold Redis counted for an acquisition that did not end in a
 *       belief (its answer lost, late, given up) is given back by the time
 *       that acquisition's operation (its undo included) is over, or gone
 *       with the key: took[i], the holds request slot i's current
 *       acquisition counted and nobody believes, is 0 whenever slot i has no
 *       acquisition or undo in flight. A double count (a retry counting
 *       again) shows up here too.
 *   (5) the let-go direction, against what the caller was told: calls[o],
 *       its lock calls answered "acquired" and not unlocked yet (one per
 *       call, whatever Redis counted; the ledger's count holds[o] equals it
 *       under (d'), and under ADOPT_REDIS_COUNT exceeds it). Whenever owner
 *       o's turn is free (no request of its own in flight: no acquisition,
 *       undo, release, background retry or give-back), Redis counts no more
 *       of its holds than calls[o] - with (1), exactly calls[o] while its
 *       belief counts - except:
 *       (5a) with no call left (it has let go: asked to release its last
 *       hold, its lease ended locally, told lost), what Redis still counts
 *       of its holds is gone within the let-go bound: tol[o], the ticks
 *       left of it, set at the let-go to the key's TTL and counted down by
 *       the clock. No renewal sent after the let-go extends it. Five
 *       requests may still extend a let-go field, each by one lease from its
 *       run, and move the bound there: a renewal the owner sent while it
 *       still held (in flight at a lease end; SAME_OWNER: another slot's), a
 *       partial release in flight at the lease end (lock_release.lua extends
 *       a key that keeps holds), a release of rule (e) that leaves holds, a
 *       give-back in flight at the lease end (a release too), and the
 *       owner's next acquisition, which counts on that field (if it
 *       ends in no belief, its undo gives back its own hold and the field
 *       keeps the TTL it gave). A request runs only while it is in flight.
 *       The bound ends when the owner's last release is answered (freed or
 *       not held: the caller is told the lock is free): from then on Redis
 *       counts none of its holds. So a surplus the owner never saw (a field
 *       left within the margin and not acquired again, a release retried
 *       until the lease end) is gone within tol of the let-go, and one an
 *       answer showed is gone once the turn is free again - unless the
 *       request giving it back got no answer: a last release's (its
 *       background retry given up at the lease end) leaves it to tol, a
 *       give-back's to (5b);
 *       (5b) while it holds, a surplus an acquisition's answer showed whose
 *       give-back got no answer (owe[o], a ghost): the rule stops such a
 *       give-back, and the field keeps the surplus, renewed with the
 *       owner's hold, until the owner lets go (its last release gives it
 *       back by (e); a lease end or a loss leaves it to (5a)).
 *       Read holds share the key's TTL, which the other readers' holds
 *       keep: an owner's let-go field is judged while it is the key's only
 *       field, its bound the TTL the key had when it became so.
 */

#ifndef N
#define N 2
#endif
#if N < 2 || N > 3
#error "N must be 2 or 3"
#endif

#ifdef SAME_OWNER
#define NO (N - 1)                         /* owners */
#define OWN(i) ((i) == 0 -> 0 : (i) - 1)   /* slots 0 and 1: owner 0 */
#else
#define NO N
#define OWN(i) (i)
#endif

#ifdef OLD
#define OLD_LATCH
#define OLD_CLIENT
#endif

#ifdef OLD_REENTRY_VANISHED
#define OLD_ACQ_COUNTS_ONE   /* "acquired" carries no count: one on top */
#endif

#ifdef RW
#define READ
#define WRITER (NO - 1)    /* the writer; the others read */
#endif

#ifndef LW
#define LW        3   /* ticks: the watchdog's lease (watchdog timeout) */
#endif
#ifndef LF
#define LF        5   /* ticks: a fixed lease, longer (ARGV lease ms) */
#endif
#ifndef MARGIN
#define MARGIN    1   /* ticks: the drift margin taken off local deadlines */
#endif
#define VW  (LW - MARGIN)       /* ticks a watchdog success is valid from its send */
#define VF  (LF - MARGIN)       /* ticks a fixed success is valid from its send */
#define VMAX (VF > VW -> VF : VW)
#ifndef RETRIES
#define RETRIES   1   /* call.c: retries of a request after a timeout */
#endif
#ifndef HMAX
#define HMAX      2   /* most holds (reentrancy) an owner takes */
#endif
#ifndef CMAX
#define CMAX      3   /* most holds counted in Redis (see above) */
#endif
#ifndef FMAX
#define FMAX      1   /* vanishes (force release, DEL, data loss) per run */
#endif
#ifndef LT
#define LT        1   /* OLD_LATCH_TTL: ticks an acquisition's latch lives */
#endif

/* lease kinds */
#define FIXED 0
#define WD    1
#define LEASE(k)  ((k) == WD -> LW : LF)
#define VAL(k)    ((k) == WD -> VW : VF)

/* client operations (st[i]) */
#define IDLE 0
#define ACQ  1        /* lock_acquire.lua in flight */
#define REN  2        /* lock_renew.lua (or a fixed lease's check) in flight */
#define REL  3        /* lock_release.lua in flight */
#define UNDO 4        /* lock_acquire_undo.lua in flight */
#define GIV  5        /* a surplus given back (rule d'): lock_release.lua of
                         a hold the owner does not believe in, in flight */

/* replies (rep[i]) */
#define R_NONE     0
#define R_ACQUIRED 1  /* lock_acquire.lua: nil */
#define R_PTTL     2  /* lock_acquire.lua: the holder's PTTL */
#define R_RENEWED  3  /* lock_renew.lua: 1 (a check: the field is there) */
#define R_GONE     4  /* lock_renew.lua: 0 */
#define R_NOTOWNER 5  /* lock_release.lua: nil */
#define R_REMAINS  6  /* lock_release.lua: 0 */
#define R_FREED    7  /* lock_release.lua: 1 */
#define R_UNDONE   8  /* lock_acquire_undo.lua: whatever it did */

/* -- Redis -----------------------------------------------------------------*/
byte kttl;            /* ticks until the key expires; 0: no key */
byte rc[NO];          /* owner o's field: its hold count (0: no field). An
                         exclusive lock has one field at most: lock_acquire.lua
                         adds one only to a missing key or to the caller's own */
/* Latches, keyed by request id: one slot each (a new operation takes a new
 * id, and the old id's latch is never asked again, so it is dropped from the
 * state when its operation ends). The new rule: a latch lives as long as its
 * request or its undo may still come (relock__latch_ttl_ms()). */
bool alatch[N];       /* relock_lock_latch:{name}:<request-id> (SET PX) */
#ifdef OLD_LATCH_TTL
byte alttl[N];        /* ticks until it expires */
#endif
bool rlatch[N];       /* redisson_unlock_latch:{name}:<request-id> */
byte rlans[N];        /* the release answer that latch stores */

/* -- the network -----------------------------------------------------------*/
bool req[N];          /* slot i's current request is on its way to Redis */
byte rep[N];          /* a reply on its way back to slot i */

/* -- request slots ---------------------------------------------------------*/
byte st[N];           /* the operation in flight */
bit  kind[N];         /* its lease kind (acquire: asked; renew, release: the hold's) */
byte age[N];          /* ticks since the operation in flight was sent
                         (counted up to VMAX: beyond it, only "late" matters) */
byte tries[N];        /* retries left */
bool post[N];         /* its renewal/check ran after the key vanished */
#ifdef SAME_OWNER
bool mixed[N];        /* an acquisition of the same owner was in flight
                         at some time while its renewal/check was */
#define MIXED(i) mixed[i]
#define MIX(k) if :: st[k] == REN -> mixed[k] = 1 :: else fi
#define MIX_OTHER(i) if :: (i) == 0 -> MIX(1) :: (i) == 1 -> MIX(0) :: else fi
#else
#define MIXED(i) 0
#define MIX_OTHER(i) skip
#endif
byte rleft[N];        /* a release of the last hold: ticks the hold's lease
                         had left locally (its background retry lasts until
                         then; a partial release's, until the owner's lease
                         ends: vleft) */
#ifdef OLD_RENEW_AFTER_FAILED_RELEASE
bit  stale[N];        /* its renewal was sent for a hold the owner let go */
#define STALE(i) stale[i]
#else
#define STALE(i) 0
#endif
byte acnt[N];         /* the count an "acquired" answer reports (the new
                         rule for D: lock_acquire.lua answers with it) */
byte took[N];         /* holds its acquisition counted in Redis that nobody
                         believes yet (a ghost variable: property 4) */
byte gb[N];           /* GIV: the surplus left to give back, this release
                         included (rule d') */
bit  last[N];         /* REL: a release of the owner's last hold (rule e) */

/* -- owners ----------------------------------------------------------------*/
byte holds[NO];       /* the belief: holds the owner thinks it has */
byte vleft[NO];       /* ticks until its local validity deadline */
bit  wd[NO];          /* its hold is renewed by the watchdog */
bool vanished[NO];    /* the key vanished under its field (property 3) */
byte forces;          /* vanishes so far */
byte tol[NO];         /* ticks left of the let-go bound (property 5): a
                         ghost variable */
byte calls[NO];       /* the caller's count: its lock calls answered
                         "acquired" and not unlocked yet (a ghost: what the
                         owner was told; property 5 compares Redis with it) */
bit  owe[NO];         /* a surplus an answer showed is still counted, its
                         give-back having got no answer (a ghost: property 5) */
#ifdef OLD_RENEW_AFTER_FAILED_RELEASE
bit  led[NO];         /* the watchdog's table still lists a hold the owner
                         let go (its release failed): it is renewed */
#endif

/* -- the property ----------------------------------------------------------*/
#define VALID(o) (holds[o] > 0 && vleft[o] > 0)
#ifdef OLD_FIXED_UNCHECKED
#define CHECKED(o) (wd[o])    /* only renewed holds are ever checked */
#else
#define CHECKED(o) 1          /* every hold: renewed, or checked */
#endif
#ifdef STRICT_FORCE
#define COUNTS(o) VALID(o)
#else
#define COUNTS(o) (VALID(o) && !(vanished[o] && CHECKED(o)))
#endif
#define HELD(o)   (!COUNTS(o) || (rc[o] >= holds[o] && kttl >= vleft[o]))
#if defined(RW)
#define APART(o, p) (((o) != WRITER && (p) != WRITER) || !(COUNTS(o) && COUNTS(p)))
#elif defined(READ)
#define APART(o, p) 1
#else
#define APART(o, p) (!(COUNTS(o) && COUNTS(p)))
#endif
#define UNDONE(i) (st[i] == ACQ || st[i] == UNDO || took[i] == 0)
/* Owner o has nothing in flight. */
#ifdef SAME_OWNER
#define OWNER_IDLE(o) ((o) == 0 -> (st[0] == IDLE && st[1] == IDLE) : st[(o) + 1] == IDLE)
#else
#define OWNER_IDLE(o) (st[o] == IDLE)
#endif
/* Another owner's field is in the key (read holds share it; an exclusive
 * lock has one field at most). */
#if NO == 1
#define OTHER_FIELD(o) 0
#elif NO == 2
#define OTHER_FIELD(o) (rc[1 - (o)] > 0)
#else
#define OTHER_FIELD(o) ((o) == 0 -> (rc[1] > 0 || rc[2] > 0) : ((o) == 1 -> (rc[0] > 0 || rc[2] > 0) : (rc[0] > 0 || rc[1] > 0)))
#endif
/* (5): with the owner's turn free, Redis counts no more of its holds than
 * its caller's lock calls - except, with no call left, within the let-go
 * bound, and, while it holds, a surplus whose give-back got no answer. */
#ifdef STRICT_SURPLUS
#define OWED(o) 0
#else
#define OWED(o) owe[o]
#endif
#define LETGO(o)  (!OWNER_IDLE(o) || rc[o] <= calls[o] || OTHER_FIELD(o) || (calls[o] == 0 && tol[o] > 0) || (calls[o] > 0 && OWED(o)))
#if NO == 1
#define OWNERS_SAFE HELD(0)
#define LETGO_SAFE LETGO(0)
#elif NO == 2
#define OWNERS_SAFE (HELD(0) && HELD(1) && APART(0, 1))
#define LETGO_SAFE (LETGO(0) && LETGO(1))
#else
#define OWNERS_SAFE (HELD(0) && HELD(1) && HELD(2) && APART(0, 1) && APART(0, 2) && APART(1, 2))
#define LETGO_SAFE (LETGO(0) && LETGO(1) && LETGO(2))
#endif
#if N == 2
#define SLOTS_SAFE (UNDONE(0) && UNDONE(1))
#else
#define SLOTS_SAFE (UNDONE(0) && UNDONE(1) && UNDONE(2))
#endif
#ifdef NO_P5
#undef LETGO_SAFE
#define LETGO_SAFE 1      /* property 5 left out (see NO_P5) */
#endif
#define SAFE (OWNERS_SAFE && SLOTS_SAFE && LETGO_SAFE)

/* Another slot of the same owner has a request in flight that changes its
 * count (an acquisition, its undo, a release): the new rule for D sends an
 * owner's count-changing requests one at a time, a later one held back until
 * the earlier one is answered or given up. Without it, one that runs after
 * the key expired changes the count of the key made afresh since. */
#if defined(SAME_OWNER) && !defined(OLD_CONCURRENT_ACQ)
#ifdef RETRY_WITHOUT_TURN
/* a release retried in the background (its retries spent) has let go of
 * the owner's turn */
#define COUNTING_REL(k) (st[k] == REL && tries[k] > 0)
#else
#define COUNTING_REL(k) (st[k] == REL)
#endif
#ifdef GIVE_BACK_WITHOUT_TURN
#define COUNTING_GIV(k) 0     /* the give-back goes after the turn is left */
#else
#define COUNTING_GIV(k) (st[k] == GIV)
#endif
#define COUNTING(k) (st[k] == ACQ || st[k] == UNDO || COUNTING_REL(k) || COUNTING_GIV(k))
#define COUNTING_ELSEWHERE(i) ((i) == 0 -> COUNTING(1) : ((i) == 1 -> COUNTING(0) : 0))
#else
#define COUNTING_ELSEWHERE(i) 0
#endif

/* A belief starts, or is extended, to d ticks from now. */
inline believe(o, d) {
  if
  :: holds[o] == 0 || d > vleft[o] -> vleft[o] = d
  :: else
  fi
}

/* The belief ends (released, lost or past its deadline). */
inline unbelieve(o) {
  holds[o] = 0; vleft[o] = 0; wd[o] = 0; calls[o] = 0; owe[o] = 0
}

/* The owner lets go (property 5): whatever Redis still counts of its holds
 * from before must be gone within the key's TTL as it is now. */
inline let_go(o) {
  if :: rc[o] > 0 && tol[o] < kttl -> tol[o] = kttl :: else fi
}

/* A new request (a new request id: no latch for it exists yet). */
inline send(i, op) {
  st[i] = op; age[i] = 0; tries[i] = RETRIES; req[i] = 1; rep[i] = R_NONE
}

/* No belief and nothing in flight: nothing from before the vanish is left
 * to answer this owner. */
inline forget_vanished(o) {
  if :: holds[o] == 0 && OWNER_IDLE(o) -> vanished[o] = 0 :: else fi
}

/* The operation is over: forget what only it needed (took[i] stays: it is
 * what property 4 looks at). */
inline done(i) {
  st[i] = IDLE; age[i] = 0; tries[i] = 0; kind[i] = 0; post[i] = 0; acnt[i] = 0; rleft[i] = 0;
  gb[i] = 0; last[i] = 0;
#ifdef OLD_RENEW_AFTER_FAILED_RELEASE
  stale[i] = 0;
#endif
#ifdef SAME_OWNER
  mixed[i] = 0;
#endif
  alatch[i] = 0; rlatch[i] = 0; rlans[i] = 0;
#ifdef OLD_LATCH_TTL
  alttl[i] = 0;
#endif
  forget_vanished(OWN(i))
}

/* The acquisition in slot i is given back: lock_acquire_undo.lua with its
 * latch (kept), sent until answered. */
inline give_back(i) {
  st[i] = UNDO; age[i] = 0; tries[i] = RETRIES; req[i] = 1; rep[i] = R_NONE
}

/* (d') n holds Redis counts and the owner does not are given back, one
 * release at a time, each a new request id (no unlock latch yet), the
 * owner's turn kept (the acquisition's latch is dropped: it is over). */
inline give_surplus(i, n) {
  alatch[i] = 0; acnt[i] = 0; rlatch[i] = 0; rlans[i] = 0; kind[i] = wd[OWN(i)]; gb[i] = n;
  send(i, GIV)
}

/* ==========================================================================
 * Redis: one step runs one script for one slot, atomically.
 * ========================================================================*/

/* Owner o's field is gone: every count of it with it. */
#define UNTAKE(k, o) if :: OWN(k) == o -> took[k] = 0 :: else fi
#ifdef READ
#define REARM(o) if :: rc[o] > holds[o] && !OTHER_FIELD(o) && tol[o] < kttl -> tol[o] = kttl :: else fi
#endif
inline field_gone(o) {
  rc[o] = 0; tol[o] = 0; UNTAKE(0, o); UNTAKE(1, o);
#if N > 2
  UNTAKE(2, o);
#endif
#ifdef READ
  /* a let-go field left alone: its bound runs from now */
  REARM(0); REARM(1);
#if NO > 2
  REARM(2);
#endif
#endif
  skip
}

/* The key is gone (expired, deleted, vanished): every field with it. */
inline key_gone() {
  kttl = 0; rc[0] = 0; took[0] = 0; took[1] = 0; tol[0] = 0;
#if NO > 1
  rc[1] = 0; tol[1] = 0;
#endif
#if NO > 2
  rc[2] = 0; tol[2] = 0;
#endif
#if N > 2
  took[2] = 0
#endif
}

#define NO_FIELDS_LEFT ((rc[0] == 0) && (NO < 2 || rc[1 % NO] == 0) && (NO < 3 || rc[2 % NO] == 0))

/* TTL := max(TTL, lease): extend(), lock_acquire.lua. */
inline extend(l) {
  if :: kttl < l -> kttl = l :: else fi
}

/* An acquisition's TTL carries a field the owner let go (and does not
 * count yet): the bound of property 5 is one lease from now. */
#define REARM_ACQ(i, o) if :: rc[o] > holds[o] + took[i] && tol[o] < kttl -> tol[o] = kttl :: else fi

/* lua/lock_acquire.lua (READ: rwlock_read_acquire.lua; RW: the writer's
 * rwlock_write_acquire.lua).
 * KEYS[2] is the latch of this request id. */
inline acquire_script(i, o) {
#ifdef OLD_LATCH
  if
  :: alatch[i] -> rep[i] = R_ACQUIRED  /* "if exists(latch) return nil" */
  :: else ->
#else
  if
  :: alatch[i] && rc[o] > 0 ->         /* a retry that still holds:     */
     extend(LEASE(kind[i])); REARM_ACQ(i, o); acnt[i] = rc[o]; rep[i] = R_ACQUIRED
  :: else ->                           /* otherwise decide afresh       */
#endif
     if
#if defined(RW)
     :: (o == WRITER && (rc[o] > 0 || kttl == 0)) || (o != WRITER && rc[WRITER] == 0) ->
#elif defined(READ)
     :: true ->                        /* no writer: a reader goes ahead */
#else
     :: rc[o] > 0 || kttl == 0 ->      /* mine, or no key: hincrby ...  */
#endif
        extend(LEASE(kind[i])); REARM_ACQ(i, o);
        rc[o]++; took[i]++;
#ifdef READ
        /* the others' let-go fields share the key with this one: not
         * judged now, their bound re-armed when they are alone again */
        if :: o != 0 -> tol[0] = 0 :: else fi;
        if :: o != 1 -> tol[1] = 0 :: else fi;
#if NO > 2
        if :: o != 2 -> tol[2] = 0 :: else fi;
#endif
#endif
        alatch[i] = 1;                 /* set latch px */
        acnt[i] = rc[o];
#ifdef OLD_LATCH_TTL
        alttl[i] = LT;
#endif
        rep[i] = R_ACQUIRED
     :: else -> rep[i] = R_PTTL        /* held by another: its PTTL     */
     fi
  fi
}

/* lua/lock_renew.lua for a renewed hold; for a fixed one (the new rule) a
 * check: the field is read, the TTL left as it is. */
inline renew_script(i, o) {
  if :: vanished[o] -> post[i] = 1 :: else fi;
  if
  :: rc[o] > 0 ->
     if
     :: kind[i] == WD ->
#ifdef OLD_RENEW
        kttl = LW;                     /* pexpire watchdog lease */
#else
        extend(LW);                    /* only ever extends */
#endif
        /* sent while the owner held, run after it let go: the bound is one
         * lease from now (property 5); a renewal sent after the let-go
         * (OLD_RENEW_AFTER_FAILED_RELEASE) moves no bound */
        if :: holds[o] == 0 && !STALE(i) && tol[o] < kttl -> tol[o] = kttl :: else fi
     :: else
     fi;
     rep[i] = R_RENEWED
  :: else -> rep[i] = R_GONE
  fi
}

/* lua/lock_release.lua. KEYS[3] is the unlock latch of this request id;
 * ARGV[2] the lease relock__renewal_lease_for() gives: the watchdog's for a
 * renewed hold, the fixed lease otherwise. */
inline release_script(i, o) {
  if
#ifndef NO_UNLOCK_LATCH
  :: rlatch[i] -> rep[i] = rlans[i]    /* a retry: the first answer     */
#endif
  :: else ->
     if
     :: rc[o] == 0 -> rep[i] = R_NOTOWNER
     :: else ->
        rc[o]--;
        if
        :: rc[o] > 0 ->
#ifdef OLD_RELEASE_TTL
           kttl = LEASE(kind[i]);      /* pexpire ARGV[2] */
#elif !defined(READ)
           extend(LEASE(kind[i]));     /* only ever extends */
#endif
           /* run after the owner let go (sent while it held, in flight at
            * its lease end): the bound is one lease from now (property 5) */
           if
           :: holds[o] == 0 && tol[o] < kttl -> tol[o] = kttl
           :: rc[o] <= holds[o] -> tol[o] = 0  /* no surplus: no bound */
           :: else
           fi;
           rep[i] = R_REMAINS
        :: else ->
           field_gone(o);
           if :: NO_FIELDS_LEFT -> key_gone() :: else fi;  /* del, publish */
           rep[i] = R_FREED
        fi;
        rlatch[i] = 1; rlans[i] = rep[i]
     fi
  fi
}

/* lua/lock_acquire_undo.lua: gives back the hold this acquisition counted,
 * if its latch says it counted one and the field is there. */
inline undo_script(i, o) {
  if
  :: alatch[i] && rc[o] > 0 ->
     alatch[i] = 0; rc[o]--;
     if :: took[i] > 0 -> took[i]-- :: else fi;
     if
     :: rc[o] == 0 -> field_gone(o); if :: NO_FIELDS_LEFT -> key_gone() :: else fi
     :: rc[o] > 0 && rc[o] <= holds[o] -> tol[o] = 0  /* no surplus: no bound */
     :: else
     fi
  :: else -> alatch[i] = 0              /* del latch: nothing to give back */
  fi;
  rep[i] = R_UNDONE
}

/* A request Redis can run now (CMAX: see the header). */
#define RUNNABLE(i) (req[i] && !(st[i] == ACQ && rc[OWN(i)] >= CMAX))

inline run_script(i) {
  req[i] = 0;
  if
  :: st[i] == ACQ -> acquire_script(i, OWN(i))
  :: st[i] == REN -> renew_script(i, OWN(i))
  :: st[i] == REL || st[i] == GIV -> release_script(i, OWN(i))
  :: st[i] == UNDO -> undo_script(i, OWN(i))
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
 * The clock: a tick passes; the key, latches, beliefs and requests age.
 * ========================================================================*/
inline age_owner(o) {
  if :: vleft[o] > 0 -> vleft[o]-- :: else fi;
  if :: tol[o] > 0 -> tol[o]-- :: else fi
}

inline age_slot(i) {
  if :: (st[i] == ACQ || st[i] == REN) && age[i] < VMAX -> age[i]++ :: else fi;
  if :: rleft[i] > 0 -> rleft[i]-- :: else fi;
#ifdef OLD_LATCH_TTL
  if :: alttl[i] > 0 -> alttl[i]--; if :: alttl[i] == 0 -> alatch[i] = 0 :: else fi :: else fi
#endif
}

active proctype clock() {
end:
  do
  :: d_step {
       if
       :: kttl > 0 -> kttl--; if :: kttl == 0 -> key_gone() :: else fi
       :: else
       fi;
       age_owner(0);
#if NO > 1
       age_owner(1);
#endif
#if NO > 2
       age_owner(2);
#endif
       age_slot(0);
       age_slot(1);
#if N > 2
       age_slot(2)
#endif
     }
  od
}

/* ==========================================================================
 * The key vanishes without a message to its holders: force release
 * (lua/lock_force_release.lua), a plain DEL, or data loss.
 * ========================================================================*/
#define VANISH(o) if :: rc[o] > 0 -> vanished[o] = 1 :: else fi
active proctype vanish() {
end:
  do
  :: d_step { forces < FMAX && kttl > 0 ->
       forces++;
       VANISH(0);
#if NO > 1
       VANISH(1);
#endif
#if NO > 2
       VANISH(2);
#endif
       key_gone() }
  od
}

/* ==========================================================================
 * A request slot: the lock object's operations in src/objects/lock_acquire.c
 * and lock.c, the watchdog in src/watchdog/renewal.c and the retries in
 * src/redis/call.c.
 * ========================================================================*/
active [N] proctype client() {
  byte i = _pid - 3;   /* redis, clock and vanish are pids 0..2 */
  byte o = OWN(i);
  byte d;              /* scratch: a deadline's ticks */
end:
  do
  /* relock_lock_lock_async() -> try_acquire(): first or reentrant hold,
   * with a fixed lease or the watchdog's. */
  :: atomic { st[i] == IDLE && holds[o] < HMAX && !COUNTING_ELSEWHERE(i) ->
#if defined(ONLY_WD)
       kind[i] = WD;
#elif defined(ONLY_FIXED)
       kind[i] = FIXED;
#else
       if :: kind[i] = WD :: kind[i] = FIXED fi;
#endif
       MIX_OTHER(i); send(i, ACQ) }

  /* renewal.c on_cycle() -> send_batch(): a watchdog renewal, or (new rule)
   * a fixed lease's check, while held. */
  :: atomic { st[i] == IDLE && holds[o] > 0 && vleft[o] > 0 && CHECKED(o) ->
       kind[i] = wd[o];
#ifdef SAME_OWNER
       if :: COUNTING_ELSEWHERE(i) -> mixed[i] = 1 :: else fi;
#endif
       send(i, REN) }
#ifdef OLD_RENEW_AFTER_FAILED_RELEASE
  /* The old rule: the table still lists the hold whose release failed,
   * and the watchdog renews it. */
  :: atomic { st[i] == IDLE && holds[o] == 0 && led[o] ->
       kind[i] = WD; stale[i] = 1; send(i, REN) }
#endif

  /* relock_lock_unlock_async(): the caller gives up one hold (it stops
   * using the lock before it calls release). */
  :: atomic { st[i] == IDLE && calls[o] > 0 && !COUNTING_ELSEWHERE(i) ->
       kind[i] = wd[o]; holds[o]--; calls[o]--;
       if
       :: holds[o] == 0 -> rleft[i] = vleft[o]; last[i] = 1; unbelieve(o); let_go(o)
       :: else
       fi;
       send(i, REL) }

  /* renewal.c check_deadlines() (a renewed hold: lost, ETIMEDOUT) or
   * on_lease_end() (a fixed one: over): the local deadline has passed. */
  :: atomic { holds[o] > 0 && vleft[o] == 0 -> unbelieve(o); let_go(o); forget_vanished(o) }

  /* lock_acquire.c on_try_done(): the answer is nil, "acquired". */
  :: atomic { st[i] == ACQ && rep[i] == R_ACQUIRED -> rep[i] = R_NONE;
#ifdef OLD_CLIENT
       /* reported whenever it arrives; the caller's lease runs from the
        * report */
       d = VAL(kind[i]); believe(o, d); d = 0;
       if :: kind[i] == WD -> wd[o] = 1 :: holds[o] == 0 && kind[i] == FIXED -> wd[o] = 0 :: else fi;
       holds[o]++; calls[o]++; if :: took[i] > 0 -> took[i]-- :: else fi;
       done(i)
#else
       if
       :: age[i] < VAL(kind[i]) ->            /* in time: valid until send */
#ifndef OLD_REENTRY                           /* time + lease - MARGIN     */
          if :: vleft[o] == 0 -> unbelieve(o); let_go(o) :: else fi;
#endif
#ifndef OLD_REENTRY_VANISHED
          /* Redis counts fewer holds than this one and the owner's: the
           * earlier ones are gone (the key vanished and this acquisition
           * made it afresh). They are lost; this one starts anew. */
          if :: acnt[i] <= holds[o] -> unbelieve(o); let_go(o) :: else fi;
#endif
          d = VAL(kind[i]) - age[i]; believe(o, d); d = 0;
          if :: kind[i] == WD -> wd[o] = 1 :: holds[o] == 0 && kind[i] == FIXED -> wd[o] = 0 :: else fi;
#ifdef ADOPT_REDIS_COUNT
          /* the old rule (d): the count is Redis's, one more than the
           * owner's or more when a hold it let go is still there */
          holds[o] = acnt[i];
#else
          /* (d') one hold more, what the caller is told: its holds + 1, or
           * 1 for a new hold (none believed, or let go or lost above) */
          holds[o]++;
#endif
          calls[o]++;
          if :: took[i] > 0 -> took[i]-- :: else fi;
#ifdef OLD_RENEW_AFTER_FAILED_RELEASE
          led[o] = 0;                         /* the listed hold counted on */
#endif
          /* held now: the let-go bound is not looked at until the next
           * let-go, which sets it from the key's TTL (never below it) */
          tol[o] = 0;
          if :: rc[o] <= holds[o] -> owe[o] = 0 :: else fi;
#if defined(ADOPT_REDIS_COUNT) || defined(OLD_ACQ_COUNTS_ONE)
          done(i)
#else
          /* (d') Redis counted more than the owner believes now: the
           * surplus is given back at once, the turn kept */
          if
          :: acnt[i] > holds[o] -> d = acnt[i] - holds[o]; give_surplus(i, d); d = 0
          :: else -> done(i)
          fi
#endif
       :: else -> give_back(i)                /* late: not trusted, undone */
       fi
#endif
     }

  /* on_try_done(): a PTTL answer, not acquired (the caller may try again). */
  :: atomic { st[i] == ACQ && rep[i] == R_PTTL -> rep[i] = R_NONE; done(i) }

  /* renewal.c on_batch_reply(): 1 extends a renewed hold's deadline from
   * the batch's send time (a fixed one's check changes nothing); 0 means
   * the lock is lost (ELOST). Either way a check that ran after the key
   * vanished ends the exemption (property 3). */
  :: atomic { st[i] == REN && rep[i] == R_RENEWED -> rep[i] = R_NONE;
       if :: kind[i] == WD && holds[o] > 0 && age[i] < VW -> believe(o, VW - age[i]) :: else fi;
       /* (SAME_OWNER: a field found may be one the owner's own acquisition
        * made afresh while this check was in flight: such a check proves
        * nothing, the exemption lasts until a check without one.) */
       if :: post[i] && !MIXED(i) -> vanished[o] = 0 :: else fi;
       done(i) }
  :: atomic { st[i] == REN && rep[i] == R_GONE -> rep[i] = R_NONE;
       unbelieve(o); let_go(o);
#ifdef OLD_RENEW_AFTER_FAILED_RELEASE
       led[o] = 0;
#endif
       if :: post[i] && !MIXED(i) -> vanished[o] = 0 :: else fi;
       done(i) }

  /* lock.c on_release_done() -> renewal_release_done(): freed or not the
   * owner forget the hold (lost, if it was not); 0 keeps the others. */
  :: atomic { st[i] == REL && (rep[i] == R_FREED || rep[i] == R_NOTOWNER) ->
       rep[i] = R_NONE; unbelieve(o);
       /* the last release answered: the caller is told the lock is free,
        * so from now Redis counts none of its holds (property 5) */
       if :: last[i] -> tol[o] = 0 :: else fi;
       done(i) }
  :: atomic { st[i] == REL && rep[i] == R_REMAINS -> rep[i] = R_NONE;
#ifndef NO_LAST_GIVE_BACK
       /* (e) holds remain after the owner's last one: a surplus, released
        * again (a new request id) until freed or not held, the turn kept */
       if
       :: last[i] -> rlatch[i] = 0; rlans[i] = 0; tries[i] = RETRIES; req[i] = 1
       :: else -> done(i)
       fi
#else
       if :: last[i] -> tol[o] = 0 :: else fi;  /* the caller told, too */
       done(i)
#endif
     }

  /* hold.c on_surplus_done(): a surplus release answered. 0: the next one
   * goes (a new id) while the owner holds; freed or not held: it freed
   * what the owner believes in (Redis counted fewer than it said): lost. */
  :: atomic { st[i] == GIV && rep[i] == R_REMAINS -> rep[i] = R_NONE;
       if
       :: gb[i] > 1 && holds[o] > 0 -> d = gb[i] - 1; give_surplus(i, d); d = 0
       :: else -> if :: rc[o] <= holds[o] -> owe[o] = 0 :: else fi; done(i)
       fi }
  :: atomic { st[i] == GIV && (rep[i] == R_FREED || rep[i] == R_NOTOWNER) -> rep[i] = R_NONE;
       if :: holds[o] > 0 -> unbelieve(o); let_go(o) :: else fi;
       done(i) }

  /* The undo answered: whatever it gave back, the acquisition is over. */
  :: atomic { st[i] == UNDO && rep[i] == R_UNDONE -> rep[i] = R_NONE; done(i) }

  /* call.c: the request timed out or the connection dropped. Whether or not
   * Redis ran it, its reply is dropped. Transient: retry the same request
   * (same latch key), or give up: an acquisition given up is given back
   * (its undo); a failed renewal changes nothing. The undo itself is
   * retried until answered. A release with no answer (the new rule for F)
   * is retried in the background with its unlock latch, keeping the
   * owner's turn, until answered or the hold's lease has ended locally
   * (rleft: the last hold's; a partial release's, the owner's vleft); then
   * the table forgets it and nothing renews it. (The old rule: given up,
   * the hold stays listed and renewed.) */
  :: atomic { st[i] != IDLE ->
       req[i] = 0; rep[i] = R_NONE;
       if
       :: tries[i] > 0 -> tries[i]--; req[i] = 1;
#ifdef STAMP_RETRY
          age[i] = 0
#else
          skip
#endif
#ifndef OLD_UNDO_GIVES_UP
       :: tries[i] == 0 && st[i] == UNDO -> req[i] = 1
#endif
       :: tries[i] == 0 && st[i] == ACQ -> give_back(i)
       /* (d') a give-back with no answer stops (no background retry): what
        * it left the owner's last release gives back (e) */
       :: tries[i] == 0 && st[i] == GIV ->
          if :: holds[o] > 0 && rc[o] > holds[o] -> owe[o] = 1 :: else fi;
          done(i)
#ifdef OLD_RENEW_AFTER_FAILED_RELEASE
       :: tries[i] == 0 && st[i] == REL ->
          if :: holds[o] == 0 && kind[i] == WD -> led[o] = 1 :: else fi;
          done(i)
#else
       :: tries[i] == 0 && st[i] == REL && (rleft[i] > 0 || vleft[o] > 0) -> req[i] = 1
       :: tries[i] == 0 && st[i] == REL && rleft[i] == 0 && vleft[o] == 0 ->
          /* the lease has ended locally: the table forgets the hold (a
           * partial release's: the owner's holds are over, as at its
           * deadline) */
          if :: holds[o] > 0 -> unbelieve(o); let_go(o) :: else fi;
          done(i)
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
  /* one assertion per property, so a violation names it: (1)-(3), (4), (5) */
  atomic { !SAFE -> assert(OWNERS_SAFE); assert(SLOTS_SAFE); assert(LETGO_SAFE) }
}
