/* The truth checker's observer (tests/truth/observer.c): compares every
 * worker's beliefs with an atomic snapshot of Redis. Used by one thread. */
#ifndef RELOCK_TRUTH_OBSERVER_H
#define RELOCK_TRUTH_OBSERVER_H

#include "truth/truth.h"

typedef struct truth_observer truth_observer_t;

/* Connects (lazily, and again after each failure) to unix_path. */
truth_observer_t *truth_observer_new(truth_shared_t *sh, const char *unix_path);
/* The node that holds the truth now (after a failover or a migration):
 * the next snapshot is taken there. Thread-safe. */
void truth_observer_set_target(truth_observer_t *o, const char *unix_path);
/* A cluster node's port and unix socket, to follow a -MOVED answer to
 * (before the observer's thread starts). */
void truth_observer_add_node(truth_observer_t *o, int port, const char *unix_path);
void truth_observer_free(truth_observer_t *o);
/* One check; non-zero when it found a violation (already printed, with the
 * state and trace). A snapshot Redis did not answer is no check. */
int truth_observer_check(truth_observer_t *o);
/* Checks made, and beliefs seen exempt (taken before a break). */
long truth_observer_checks(const truth_observer_t *o);
long truth_observer_exempt(const truth_observer_t *o);
/* Checks at which a relock belief outran a TTL a Redisson holder had cut
 * (tolerated for the bound of a break). */
long truth_observer_cuts(const truth_observer_t *o);
/* Checks at which a Redisson thread believed a hold Redis no longer had. */
long truth_observer_foreign_void(const truth_observer_t *o);
void truth_observer_print_counts(const truth_observer_t *o);
/* Snapshots refused or not answered (a node moving: -MOVED, -ASK,
 * -TRYAGAIN, not the master), and MOVED answers followed. */
long truth_observer_failed_snapshots(const truth_observer_t *o);
/* Releases that freed an "h" lock with a relock waiter waiting on, and how
 * many of them saw it still free TRUTH_WAKE_BOUND_MS later. */
void truth_observer_wakes(const truth_observer_t *o, long *all, long *slow);
/* How many violations of each kind were found (a line each). */
void truth_observer_print_violations(const truth_observer_t *o);

#endif
