/* A client's statistics and event callback (include/relock/stats.h): kept
 * where the work is done - acquisitions (objects/lock_acquire.c), holds
 * (watchdog/renewal.c), commands (redis/request.c), connections
 * (redis/conn.c, sentinel.c, cluster.c) - and read by relock_client_stats.
 *
 * Everything here runs with the client's work paused (the loop thread, or
 * a caller inside the exec's mutex: loop/exec.h), so the counters are plain
 * numbers, and a snapshot under the same mutex is consistent. An update is
 * a test of `on` and a few additions; an event a test of a pointer while no
 * callback is set. Nothing allocates. */
#ifndef RELOCK__STATS_STATS_H
#define RELOCK__STATS_STATS_H

#include <stddef.h>
#include <stdint.h>

#include <relock/stats.h>

#include "base/error.h"

typedef struct relock__stats {
  relock_stats_t s;         /* what relock_client_stats copies (uptime filled then) */
  int on;                   /* RELOCK_OPT_STATISTICS */
  uint64_t born_ns;
  relock_event_cb event_cb; /* NULL: no events */
  void *event_arg;
  relock_client_t *client;  /* for the callback */
  int emitting;             /* the event callback is running (nested: how deep): client.c defers a close */
} relock__stats_t;

void relock__stats_init(relock__stats_t *st, relock_client_t *client, int on);

/* Adds one value of ns nanoseconds to h. */
void relock__histogram_add(relock_histogram_t *h, uint64_t ns);

/* Calls the event callback (the caller has checked it is set: building an
 * event costs more than the test). */
static inline int relock__stats_observed(const relock__stats_t *st) { return st->event_cb != NULL; }
/* The callback may close or free the client (issue 46): while it runs,
 * emitting makes relock_client_close put off the teardown until the loop
 * runs again (client.c), as the emitter goes on walking what the close
 * would free (a hold being released, an acquisition ending); and the
 * thread counts as inside a callback, where a blocking call is refused
 * and a free does not wait. */
static inline void relock__stats_emit(relock__stats_t *st, const relock_event_t *ev) {
  st->emitting++;
  relock__callback_depth++;
  st->event_cb(st->client, ev, st->event_arg);
  relock__callback_depth--;
  st->emitting--;
}

/* -- acquisitions -----------------------------------------------------------*/

void relock__stats_acquire_start(relock__stats_t *st, relock_kind_t kind, const char *name, size_t len,
                                 uint64_t owner);

/* An acquisition started at start_ns ended: its outcome (err its error, 0
 * unless failed; msg NULL or its message), after tries tries, having
 * waited (then WAIT_END goes first) since wait_ns. */
typedef struct relock__acquire_end {
  relock_kind_t kind;
  const char *name;
  size_t len;
  uint64_t owner;
  relock_outcome_t outcome;
  int err;
  const char *msg;
  uint64_t start_ns;
  uint64_t wait_ns;         /* 0: it never waited */
  uint32_t tries;
} relock__acquire_end_t;
void relock__stats_acquire_end(relock__stats_t *st, const relock__acquire_end_t *end);

/* The acquisition found the lock held and waits (an event only: the end
 * counts it). */
void relock__stats_wait_start(relock__stats_t *st, relock_kind_t kind, const char *name, size_t len,
                              uint64_t owner);

/* -- holds ------------------------------------------------------------------*/

/* A hold ended after held_ns: released by its holder (loss < 0), or lost
 * (a relock_loss_t, msg saying how: NULL for a lease that ran out). */
void relock__stats_hold_end(relock__stats_t *st, relock_kind_t kind, int loss, uint64_t held_ns, const char *name,
                            size_t len, uint64_t owner, const char *msg);

/* -- connections ------------------------------------------------------------*/

void relock__stats_reconnect(relock__stats_t *st, const char *address);
void relock__stats_failover(relock__stats_t *st, const char *address, const char *msg);

/* A plain counter of st->s (renewals, redirections...): one more. */
#define RELOCK__STATS_COUNT(st, field, n) \
  do {                                    \
    if ((st)->on)                         \
      (st)->s.field += (n);               \
  } while (0)

#endif /* RELOCK__STATS_STATS_H */
