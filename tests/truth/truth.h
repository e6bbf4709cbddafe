/* The truth checker's shared state: what every worker process believes it
 * holds, published in shared memory for the observer, which compares it
 * with what Redis keeps (tests/truth/README.md).
 *
 * The supervisor makes the shared block (a memfd every worker maps), the
 * workers write their beliefs into their own slots, and the observer reads
 * every slot under a sequence lock: a slot's seq is odd while its owner
 * writes it, and a copy taken between two equal, even reads of seq is
 * consistent. Times are CLOCK_MONOTONIC nanoseconds, which every process
 * of the machine shares. */
#ifndef RELOCK_TRUTH_H
#define RELOCK_TRUTH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The objects under test. Names of one group share Redis keys: the
 * reentrant, spin and fenced locks and the multi-lock all contend on the
 * "h" names, in Redisson's one hash layout. */
enum truth_kind {
  K_REENTRANT, K_SPIN, K_FENCED, K_MULTI, /* the "h" names */
  K_FAIR,                                 /* "f" */
  K_READ, K_WRITE,                        /* "rw" */
  K_SEMAPHORE,                            /* "s" */
  K_PERMIT,                               /* "p" */
  K_COUNT
};
extern const char *const truth_kind_names[K_COUNT];

/* The names: index -> Redis key. On a cluster every name has the hash tag
 * {truth} (truth_use_topology_names), so that all their keys share one
 * slot and one script on its master sees them all. */
enum { N_H0, N_H1, N_H2, N_F0, N_F1, N_RW0, N_RW1, N_S0, N_P0, N_COUNT };
extern const char *truth_names[N_COUNT];
#define TRUTH_HASH_TAG "{truth}"

/* Where the workers' Redis is (truth --topology). */
enum truth_topology { T_SINGLE, T_SENTINEL, T_CLUSTER };
extern const char *const truth_topology_names[3];
/* Switches truth_names to the tagged ones for a cluster (every process). */
void truth_use_topology_names(int topology);
/* Redisson's suffixName: "{name}suffix", or "namesuffix" when the name has
 * a hash tag already (the permit semaphore's ":timeout" key, a read hold's
 * timeout keys). */
void truth_suffix_name(char *out, size_t size, int name, const char *suffix);
/* The name group a kind contends on: N_H0.., and how many names. */
int truth_kind_first_name(enum truth_kind k);
int truth_kind_name_count(enum truth_kind k);
/* Whether a name's beliefs exclude each other (locks) or share (read,
 * semaphores: see the observer). */
enum truth_group { G_HASH, G_FAIR, G_RW, G_SEMAPHORE, G_PERMIT };
enum truth_group truth_name_group(int name);

#define TRUTH_PERMITS 2 /* each semaphore's permits */
#define TRUTH_MAX_WORKERS 8
#define TRUTH_SLOTS 24 /* belief slots per worker (TRUTH_SLOTS_PER_OWNER each: 6 owners at most) */
#define TRUTH_TRACE 1024 /* trace lines kept per worker */
#define TRUTH_LINE 120

/* One belief: "owner field holds count on name until deadline". */
typedef struct truth_belief {
  _Atomic uint32_t seq;
  int32_t name;        /* -1: the slot is empty */
  int32_t kind;        /* enum truth_kind of the first hold */
  int32_t count;       /* holds (locks), permits (semaphore), 1 (permit) */
  int32_t fixed;       /* the latest hold's lease was fixed, not the watchdog */
  int32_t foreign;     /* a Redisson thread's: never told of a loss */
  int32_t tracked;     /* a permit the library watches or tracks (a lease): told of its loss */
  uint32_t epoch;      /* changes whenever the belief is made or its count changes (not its deadline) */
  uint64_t since_ns;   /* when the first hold's acquisition was sent */
  uint64_t latest_ns;  /* when the latest hold's acquisition was sent (a re-entry after a break is not exempt) */
  uint64_t deadline_ns; /* the library's validity end; UINT64_MAX: none */
  uint64_t untold_ns;  /* the library said it holds it no more (validity 0) with no lost callback yet, since */
  int64_t lease_ms;    /* the longest lease of its holds (the watchdog's for a renewed one) */
  char field[80];      /* the hash field, or the permit's id in hex */
} truth_belief_t;

/* A let-go (in truth_worker_slot_t.letgo) reuses the belief's layout: name,
 * field, kind, since_ns = when its owner asked to release the last hold,
 * lease_ms = the longest lease it had; from then on nobody believes in it,
 * so it must not be renewed, and must be gone within its lease and a
 * margin. A busy record (truth_worker_slot_t.busy, one per owner): name =
 * the name the owner's operation in flight is on (-1: none), field = the
 * owner's field there, since_ns = its start, deadline_ns = when a waiting
 * acquisition's wait ends (0: not a waiting one), kind = its kind. */
#define TRUTH_SLOTS_PER_OWNER 4
#define TRUTH_MAX_OWNERS 8

/* The faults the supervisor injects (tests/truth/faults.c); the first ones
 * break truth (Redis forgets holds). */
enum truth_fault {
  F_DEL, F_FLUSHALL, F_RESTART_LOST, F_FORCE_RELEASE, /* truth breaks */
  F_RESTART_AOF, F_DEBUG_SLEEP, F_CLIENT_KILL, F_CLIENT_PAUSE, F_SERVER_STOP,
  F_PROXY_DELAY, F_PROXY_CUT, F_PROXY_STALL, F_PROXY_BLACKHOLE, F_WORKER_STOP, F_CLOCK_STEP, F_PROXY_OUTAGE,
  /* --topology sentinel: a forced failover and a kill -9 of the master,
   * both breaks of truth (writes the old master acknowledged may be lost:
   * asynchronous replication); --topology cluster: CLUSTER FAILOVER on a
   * replica of the truth slot's master (coordinated: nothing acknowledged
   * is lost, no break) and a live migration of the truth slot (no break) */
  F_FAILOVER, F_KILL_MASTER, F_CLUSTER_FAILOVER, F_SLOT_MIGRATION,
  /* the topologies' outage past the watchdog timeout, for every client at
   * once: CLIENT PAUSE WRITE on the master for 2.3-3.3 s (the sentinels'
   * and the cluster bus's pings still answered: no failover) */
  F_WRITE_PAUSE,
  F_COUNT
};
extern const char *const truth_fault_names[F_COUNT];

/* A break of truth that no client is told of by Redis itself (a DEL, a
 * FLUSHALL, a restart that lost data) or that is told by a message (a force
 * release): beliefs taken before it may outlive Redis's state until the
 * documented bound, never longer. */
typedef struct truth_break {
  _Atomic uint64_t at_ns; /* 0: none yet */
  _Atomic int what;       /* enum truth_fault */
  _Atomic int pending;    /* breaks sent and not yet answered */
} truth_break_t;

typedef struct truth_worker_slot {
  truth_belief_t beliefs[TRUTH_SLOTS];
  _Atomic long ops;         /* operations completed */
  _Atomic long acquired;    /* acquisitions that succeeded */
  _Atomic long errors;      /* operations failed with an error (clear codes) */
  _Atomic long lost;        /* lost callbacks */
  _Atomic long hung;        /* operations over their bound */
  _Atomic long foreign_slow; /* Redisson operations over 10 s (not ours to bound) */
  _Atomic long closes;      /* client closes and reopenings */
  _Atomic long interrupts;
  _Atomic long cancels;
  _Atomic long force_releases;
  _Atomic uint64_t last_loss_latency_ms; /* max loss notice after a break */
  _Atomic int trace_next;
  char trace[TRUTH_TRACE][TRUTH_LINE];
  _Atomic int done;
  _Atomic int ready; /* a Java worker's peer has started */
  truth_belief_t letgo[TRUTH_SLOTS];     /* holds let go, by belief slot */
  truth_belief_t busy[TRUTH_MAX_OWNERS]; /* each owner's operation in flight */
  truth_belief_t abandoned[TRUTH_MAX_OWNERS]; /* each owner's latest acquisition that ended in an error (as a let-go) */
  /* A violation a worker found itself (a loss never told, a late
   * "acquired", a fencing token not above the last one): the observer
   * reports it with the name's trace. */
  _Atomic int complaints;
  int32_t complaint_name;
  char complaint[240];
  _Atomic long stops; /* SIGSTOPs of the worker (odd while stopped): its own timings are void across one */
  _Atomic int64_t wall_offset_ns; /* the worker's wall clock's step (tests/support/wall_clock.h) */
} truth_worker_slot_t;

typedef struct truth_shared {
  _Atomic int stop;     /* workers: release everything and exit */
  /* After a break of truth the semaphores' counts are set anew, once
   * nobody holds, takes or gives back a permit: while sem_paused no worker
   * starts a semaphore acquisition; sem_inflight counts the acquisitions
   * and releases under way. */
  _Atomic int sem_paused;
  _Atomic int sem_inflight;
  _Atomic int sem_uncertain; /* semaphore releases that failed since the last reset */
  _Atomic long unreturned;   /* give-backs client closes could not make (relock_client_unreturned) */
  _Atomic long acquired_by_kind[K_COUNT];
  truth_break_t breaks[N_COUNT];
  truth_break_t global_break;
  /* Until when Redisson may cut the name's TTL with no belief of its
   * stated: an acquisition in flight (its wait, and a second for the JVM)
   * or an unlock in flight (a second) - its watchdog renews with a plain
   * PEXPIRE, from the moment it holds until its unlock is done, while the
   * Java worker states a belief only once it has heard the answer. */
  _Atomic uint64_t foreign_trying_ns[N_COUNT];
  _Atomic long violations;
  /* Fencing tokens handed out per name (the largest, and when it was
   * recorded: a FLUSHALL or a lost restart starts them afresh). */
  _Atomic int64_t max_token[N_COUNT];
  /* Wake-ups: when a release that freed the lock was answered, and when
   * the latest acquisition of the name was answered, per name. */
  _Atomic uint64_t taken_ns[N_COUNT];
  /* when each worker last had an acquisition on each name: a waiting one
   * registers its process with the name's waiters for a while after
   * (lua/lock_acquire.lua: the holder's TTL and 2 s), and a hand-off may go
   * to it */
  _Atomic uint64_t busy_at[N_COUNT][TRUTH_MAX_WORKERS];
  /* a ring: name, when, the waiter then (worker * 16 + owner + 1; 0: none),
   * the workers (bit w) busy on the name then and the releaser's: a fault
   * on one of them may hold the hand-off up, one elsewhere cannot */
  _Atomic uint64_t freed[256][4];
  _Atomic int freed_next;
  /* The faults' intervals (start, end of their effect), a ring. */
  _Atomic uint64_t fault_at[64][3]; /* start, end, victim + 1 (0: every worker) */
  _Atomic int fault_next;
  _Atomic long sem_ops; /* semaphore operations started and finished (the counts are compared when still) */
  /* A failover (--topology sentinel), announced as global_break is and
   * in it too: Redis may roll back to an earlier state then, so a count
   * Redis keeps above what its owner believes, first seen within
   * TRUTH_SURPLUS_BOUND_MS of it, is excused (a lost release of a
   * re-entry), and untracked permits may be left taken until the reset. */
  truth_break_t rollback;
  /* A topology change under way (a failover, a slot migration): the truth
   * is moving between nodes, the observer takes no snapshot meanwhile. */
  _Atomic int moving;
  int topology;          /* enum truth_topology */
  char addrs[1024];      /* the sentinels' or the cluster's seed addresses */
  char master_name[64];  /* the sentinels' master name */
  int njava;
  int nworkers;
  unsigned kinds; /* the kinds the workers use (bit k: enum truth_kind k) */
  truth_worker_slot_t w[TRUTH_MAX_WORKERS];
} truth_shared_t;

/* The client's settings every worker uses; the bounds follow from them. */
#define TRUTH_COMMAND_TIMEOUT_MS 500
#define TRUTH_WATCHDOG_MS 2100
/* How long after a break of truth a belief may still stand: the next
 * renewal or check (a third of the watchdog timeout), its answer within a
 * command timeout and its retries, and scheduling slack. */
#define TRUTH_BREAK_BOUND_MS (TRUTH_WATCHDOG_MS / 3 + 3 * TRUTH_COMMAND_TIMEOUT_MS + 500)
/* How long a hold nobody believes in may stay: the longest fixed lease the
 * workers ask for, an acquisition in flight, slack. */
#define TRUTH_MAX_FIXED_LEASE_MS 4000
#define TRUTH_ORPHAN_BOUND_MS (TRUTH_MAX_FIXED_LEASE_MS + TRUTH_WATCHDOG_MS + 6 * TRUTH_COMMAND_TIMEOUT_MS + 1000)
/* A let-go hold is gone within its lease and this: a renewal sent before
 * the release was asked may run late (a stalled connection delivers it),
 * and Redis's expiry has its own rounding. */
#define TRUTH_LETGO_MARGIN_MS (3 * TRUTH_COMMAND_TIMEOUT_MS + 1000)
/* How long Redis may count more holds of an owner than it believes while
 * the owner has no operation in flight there: a give-back of a lost or
 * late acquisition, retried until Redis answers, or a hold declared lost
 * past its validity that Redis kept a moment longer, under a re-entry made
 * right then - its lease at most, and the margin of a let-go. */
#define TRUTH_SURPLUS_BOUND_MS (TRUTH_MAX_FIXED_LEASE_MS + TRUTH_LETGO_MARGIN_MS)
/* A loss the library shows (validity 0) must be told by its lost callback
 * within this many of the worker's refreshes (5 ms each: they do not count
 * while the worker is stopped). */
#define TRUTH_UNTOLD_TICKS 200
/* A freed lock is taken by a relock waiter within this, when no fault
 * came near. */
#define TRUTH_WAKE_BOUND_MS 600

/* Records a break at ns (never moving an announced break earlier). */
void truth_break_at(truth_break_t *b, enum truth_fault what, uint64_t ns);

uint64_t truth_now_ns(void);
uint64_t truth_rnd(uint64_t *s);

/* Beliefs: the owner writes (one writer at a time per slot: callers keep
 * their own mutex when several threads write), the observer reads. */
void truth_belief_write(truth_belief_t *b, const truth_belief_t *value);
void truth_belief_clear(truth_belief_t *b);
/* A consistent copy; returns its seq (even). */
uint32_t truth_belief_read(const truth_belief_t *b, truth_belief_t *out);

/* A violation worker w found by itself (tests/truth/observer.c reports it). */
void truth_complain(truth_shared_t *sh, int w, int name, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* A fault's interval: its start (returns its entry), then the end of its effect. */
int truth_fault_begin(truth_shared_t *sh, uint64_t start_ns, int victim);
void truth_fault_end(truth_shared_t *sh, int entry, uint64_t end_ns);
/* Whether a fault touched [from, to] on worker w's side (-1: any). */
int truth_fault_near(truth_shared_t *sh, uint64_t from_ns, uint64_t to_ns, int w);

/* One line into a worker's trace ring (monotonic ms stamp first). */
void truth_trace(truth_worker_slot_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the latest trace lines of every worker that mention name (NULL:
 * all) or a fault, merged by time, to stdout as TAP comments. */
void truth_trace_dump(truth_shared_t *sh, const char *name);

/* The latest lines of worker w's trace. */
void truth_trace_dump_worker(truth_shared_t *sh, int w, int last);

/* The worker process (tests/truth/worker.c). embedded: the client on this
 * process's own libev loop; else threaded. */
int truth_worker_main(truth_shared_t *sh, int id, int port, uint64_t seed, int embedded);
/* A Redisson worker (tests/truth/java_worker.c): the interop peer, built in
 * $RELOCK_BUILDDIR/tests/interop/peer. */
int truth_java_worker_main(truth_shared_t *sh, int id, int port, uint64_t seed);

#endif
