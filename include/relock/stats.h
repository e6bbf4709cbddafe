/* What a client did: statistics always kept, and events as they happen.
 * relock_stats(3).
 *
 *   relock_stats_t st;
 *   relock_client_stats(client, &st, sizeof st);
 *   char text[65536];
 *   size_t n = relock_stats_prometheus(&st, "service=\"billing\"", text, sizeof text);
 *   // n < sizeof text: text holds the whole exposition, NUL-terminated
 *
 * Statistics are counters and fixed-bucket histograms in the client,
 * updated where the work is done, with no allocation and no lock of their
 * own: a few additions per acquisition, release or command. They are on
 * unless RELOCK_OPT_STATISTICS is 0, which exists to measure what they
 * cost (bench/).
 *
 * Versioning: fields are only ever appended to these structs, and arrays
 * never change size. relock_client_stats is told the size of the struct
 * the caller was built with and fills no more, so a program built against
 * an older header keeps working with a newer library. */
#ifndef RELOCK_STATS_H
#define RELOCK_STATS_H

#include <stddef.h>
#include <stdint.h>

#include <relock/client.h>
#include <relock/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The kinds of object whose acquisitions are counted apart. */
typedef enum relock_kind {
  RELOCK_KIND_LOCK = 0,         /* relock_lock_new */
  RELOCK_KIND_FAIR_LOCK,        /* relock_fair_lock_new */
  RELOCK_KIND_READ_LOCK,        /* relock_read_lock_new */
  RELOCK_KIND_WRITE_LOCK,       /* relock_write_lock_new */
  RELOCK_KIND_FENCED_LOCK,      /* relock_fenced_lock_new */
  RELOCK_KIND_SPIN_LOCK,        /* relock_spin_lock_new */
  RELOCK_KIND_SEMAPHORE,        /* relock_semaphore_acquire* */
  RELOCK_KIND_PERMIT_SEMAPHORE, /* relock_permit_semaphore_acquire* */
  RELOCK_KIND_LATCH             /* relock_latch_await* */
} relock_kind_t;
#define RELOCK_KINDS 9        /* the kinds this library has */
#define RELOCK_STATS_KINDS 16 /* the kinds a snapshot has room for: kinds to come keep the layout */

/* How an acquisition ended. */
typedef enum relock_outcome {
  RELOCK_OUTCOME_ACQUIRED = 0,
  RELOCK_OUTCOME_BUSY,      /* held by others, and it was not to wait (wait 0) */
  RELOCK_OUTCOME_TIMED_OUT, /* its wait ran out: held by others all along, or Redis did not answer in time */
  RELOCK_OUTCOME_CANCELLED, /* relock_future_cancel, relock_lock_interrupt */
  RELOCK_OUTCOME_FAILED     /* any other error (its code: the future's) */
} relock_outcome_t;
#define RELOCK_OUTCOMES 5

/* Why a hold ended without its holder releasing it. */
typedef enum relock_loss {
  RELOCK_LOSS_DELETED = 0,   /* gone from Redis: deleted, force-released, or lost in a failover */
  RELOCK_LOSS_CUT,           /* another client cut its expiry below its lease */
  RELOCK_LOSS_UNREACHABLE,   /* its lease ran out while Redis could not be reached to renew it */
  RELOCK_LOSS_UNREPLICATED,  /* its lease ran out while too few replicas acknowledged its renewals */
  RELOCK_LOSS_LEASE_ENDED    /* its fixed lease ran out before it was released */
} relock_loss_t;
#define RELOCK_LOSSES 5

/* Histogram buckets: bucket i counts the values above bound i-1 and up to
 * bound i (not cumulative); the last counts the rest (bound: INT64_MAX). */
#define RELOCK_STATS_BUCKETS 23
#define RELOCK_STATS_TRY_BUCKETS 10

/* A duration histogram's upper bound i, in microseconds: 50 us, 100 us,
 * 250 us, 500 us, 1 ms, 2.5, 5, 10, 25, 50, 100, 250, 500 ms, 1 s, 2.5, 5,
 * 10, 30, 60, 300, 900, 3600 s, then INT64_MAX; -1 for i out of range. */
RELOCK_EXTERN int64_t relock_stats_bound_us(int i);

/* The tries histogram's upper bound i: 1, 2, 3, 4, 6, 8, 16, 32, 64, then
 * INT64_MAX; -1 for i out of range. */
RELOCK_EXTERN int64_t relock_stats_try_bound(int i);

typedef struct relock_histogram {
  uint64_t count;  /* values recorded */
  uint64_t sum_ns; /* their sum, in nanoseconds */
  uint64_t bucket[RELOCK_STATS_BUCKETS];
} relock_histogram_t;

/* One kind's acquisitions and holds. */
typedef struct relock_kind_stats {
  uint64_t started;                  /* acquisitions started */
  uint64_t outcome[RELOCK_OUTCOMES]; /* ... ended, by outcome (started - their sum: in progress) */
  uint64_t waited;                   /* ... ended after waiting: a try found it held (cancelled ones too) */
  uint64_t tries;                    /* tries sent by the ended ones, in all */
  uint64_t tries_bucket[RELOCK_STATS_TRY_BUCKETS]; /* ended ones by their tries (relock_stats_try_bound) */
  relock_histogram_t wait;           /* acquired ones: from the call to "acquired" */
  relock_histogram_t hold;           /* holds tracked by the client (a lease, or the watchdog): from acquired to
                                        released (the last of a re-entered hold) or lost */
  uint64_t released;                 /* holds released by their holder (the last release of a re-entered one) */
  uint64_t lost[RELOCK_LOSSES];      /* holds that ended otherwise, by cause */
} relock_kind_stats_t;

typedef struct relock_stats {
  uint32_t size;                   /* bytes filled: the smaller of the library's struct and the caller's */
  uint32_t kinds;                  /* RELOCK_KINDS of the library that filled it */
  uint64_t uptime_ns;              /* since the client was made */
  relock_kind_stats_t kind[RELOCK_STATS_KINDS]; /* by relock_kind_t */
  uint64_t renewals;               /* holds renewed by the watchdog (each hold in a batch counts) */
  uint64_t renewal_failures;       /* renewal batches that failed: no answer, an error, too few replicas */
  uint64_t reconnects;             /* connections made again after one was lost */
  uint64_t failovers;              /* masters followed after a failover (Sentinel's switch, a cluster's shard) */
  uint64_t redirections;           /* MOVED and ASK answers followed (Redis Cluster) */
  uint64_t script_loads;           /* scripts sent again in full after Redis answered NOSCRIPT */
  uint64_t commands;               /* commands and scripts answered (pub/sub's excluded) */
  uint64_t command_errors;         /* ... answered with an error */
  uint64_t command_failures;       /* commands that got no answer: timed out, connection lost */
  relock_histogram_t command_time; /* answered ones: from sent to answered */
  /* Releases that got no answer (Redis out of reach, the command timed
   * out): the hold is let go at once - never renewed again - and the
   * release is retried in the background until Redis answers or the
   * hold's lease has ended (docs/SAFETY.md, "Letting go"). */
  uint64_t release_retries;        /* background attempts sent */
  uint64_t releases_settled;       /* ... releases that Redis then answered */
  uint64_t releases_expired;       /* ... releases given up at the lease's end: Redis lets the key expire */
} relock_stats_t;

/* Fills stats (size bytes: sizeof the caller's relock_stats_t) with the
 * client's statistics, consistent with each other (taken at one moment).
 * Works on a closing or closed client, until relock_client_free. Any
 * thread for a threaded client; the loop's for an embedded one. 0, or
 * RELOCK_EINVAL (NULL, or size below the first two fields),
 * RELOCK_EWRONGTHREAD, RELOCK_EFORKED. */
RELOCK_EXTERN int relock_client_stats(relock_client_t *client, relock_stats_t *stats, size_t size);

/* Writes stats in Prometheus's text exposition format (version 0.0.4) into
 * buf (size bytes; NULL with size 0 to measure), each sample labelled with
 * labels too when not NULL or empty (e.g. "service=\"billing\"", written as
 * it is). Kinds never used are left out. Returns the length of the whole
 * text, as snprintf does: when it is >= size, buf holds only whole lines,
 * NUL-terminated. Never allocates. */
RELOCK_EXTERN size_t relock_stats_prometheus(const relock_stats_t *stats, const char *labels, char *buf, size_t size);

/* Names for labels and logs: "lock", "fair_lock", ...; "acquired",
 * "busy", ...; "deleted", "cut", ... ("?" out of range). */
RELOCK_EXTERN const char *relock_kind_name(relock_kind_t kind);
RELOCK_EXTERN const char *relock_outcome_name(relock_outcome_t outcome);
RELOCK_EXTERN const char *relock_loss_name(relock_loss_t loss);

/* -- events ----------------------------------------------------------------*/

typedef enum relock_event_type {
  RELOCK_EVENT_ACQUIRE_START = 0, /* an acquisition starts (in the calling thread) */
  RELOCK_EVENT_ACQUIRE_END,       /* ... ends: outcome, duration since its start, error */
  RELOCK_EVENT_WAIT_START,        /* ... found it held and waits */
  RELOCK_EVENT_WAIT_END,          /* ... waits no more (it ends, or is acquired): duration waited */
  RELOCK_EVENT_RELEASE,           /* a hold was released (its last release): duration held */
  RELOCK_EVENT_LOSS,              /* a hold ended otherwise: loss, duration held, message */
  RELOCK_EVENT_RECONNECT,         /* a connection was made again: address */
  RELOCK_EVENT_FAILOVER,          /* a new master is followed: address (the new master), message */
  RELOCK_EVENT_RELEASE_RETRIED    /* a release got no answer: the hold is let go, the release retried in the
                                     background; duration_ns: until the lock is free at the latest; message */
} relock_event_type_t;

/* What an event tells; fields that do not apply to its type are 0 or
 * NULL. Pointers are valid during the callback only. Fields are only ever
 * appended. */
typedef struct relock_event {
  relock_event_type_t type;
  relock_kind_t kind;   /* lock events */
  const char *name;     /* the lock's (semaphore's, latch's) name, NUL-terminated */
  size_t name_len;
  uint64_t owner;       /* the acquisition's or hold's owner */
  int outcome;          /* ACQUIRE_END: a relock_outcome_t; LOSS: a relock_loss_t */
  int error;            /* ACQUIRE_END: 0, or the error it failed with */
  int64_t duration_ns;  /* ACQUIRE_END, WAIT_END, RELEASE, LOSS (see above) */
  const char *address;  /* RECONNECT, FAILOVER: "host:port" (a Unix socket's path) */
  const char *message;  /* LOSS, FAILOVER, a failed ACQUIRE_END: what happened */
} relock_event_t;

typedef void (*relock_event_cb)(relock_client_t *client, const relock_event_t *event, void *arg);

/* Calls cb(client, event, arg) on each event from now on (cb NULL: no
 * more). It runs where the event happens - the loop thread, or the
 * calling thread for ACQUIRE_START and for what a call finishes at once -
 * with the client's work paused: it must return quickly, and must not
 * block (a blocking call or relock_future_wait from inside it fails with
 * RELOCK_EWOULDBLOCK). It may read the event, call relock_client_stats,
 * and call the rest of the library, closing or freeing the client
 * included (relock_client_close). Without a callback an event costs
 * one test of a pointer. Any thread for a threaded client; the loop's for
 * an embedded one. 0, RELOCK_EINVAL (NULL client), RELOCK_EWRONGTHREAD,
 * RELOCK_EFORKED. */
RELOCK_EXTERN int relock_client_on_event(relock_client_t *client, relock_event_cb cb, void *arg);

#ifdef __cplusplus
}
#endif
#endif /* RELOCK_STATS_H */
