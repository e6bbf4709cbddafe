/* A command or script with retries: what the objects (locks, ...) use.
 *
 * A call is sent like any request; if it fails in a way that may be
 * transient (connection lost or refused, no reply in time) and the caller
 * vouched that it is safe to repeat (idempotent, or de-duplicated like the
 * lock release's latch), it is sent again after a jittered back-off (at
 * once when the connection was lost or is down: it then waits in the
 * connection's queue for the reconnect), up to
 * the configured retry attempts - but not a refusal known at once
 * (relock__conn_fails_fast). Other failures and the last attempt's failure
 * complete the call's future.
 *
 * Synced replicas: with wait_replicas n > 0, every attempt is the command
 * followed at once, on the same connection, by WAIT n wait_timeout_ms (one
 * round trip: WAIT is not allowed inside a script). A successful reply is
 * held until WAIT answers: n or more acknowledgements and it is delivered
 * as usual; fewer, and the call fails with RELOCK_ENOTREPLICATED (a
 * message saying "written on the master but acknowledged by only a of n
 * replicas within t ms": the caller puts the object's name in front). An
 * error reply of the command is delivered at once, whatever WAIT says, and
 * so is a reply that wrote_replicas says wrote nothing. A transient
 * failure of either half retries the pair (retry_safe). WAIT blocks the
 * connection for up to its timeout, and every command behind it waits.
 *
 * Until answered: a call that gives something back (what an acquisition
 * whose answer was lost took) must not stop at the retry budget, or what
 * it gives back stays taken for good once Redis is out of reach a little
 * longer (a semaphore's permits have no lease). With until_answered, a
 * transient failure is retried for as long as the client lives: within the
 * budget as above, then every retry interval (jittered), whatever the
 * attempts and the deadline. A close sends one waiting for its next
 * attempt at once (relock__call_hurry), so that a close gives back what it
 * can; what it cannot, fails with RELOCK_ECLOSED. With answer_by_ns too, it
 * is retried until then and no longer (a release retried in the background
 * stops once the lease it releases has surely ended).
 *
 * The publish command: an argument that is relock__publish_undecided
 * (router.h, the pointer itself) is sent as the command the cluster's
 * lock channels are published with. Until the cluster has said which (its
 * PUBSUB SHARDNUMSUB probe, asked with the first slot map), the call
 * waits before its first attempt, within the probe's command timeout; a
 * probe that fails counts as a failed attempt (retried as one). */
#ifndef RELOCK__REDIS_CALL_H
#define RELOCK__REDIS_CALL_H

#include <stddef.h>
#include <stdint.h>

#include <relock/future.h>

#include "redis/conn.h"
#include "redis/redis.h"
#include "redis/scripts.h"

typedef struct relock__call_spec {
  const relock__script_t *script; /* NULL: argv is a plain command */
  int nkeys;                      /* for a script: how many of argv are KEYS */
  int argc;
  const char *const *argv;
  const size_t *lens;
  relock__reply_fn on_reply;      /* NULL: relock__reply_to_future */
  void *arg;
  int retry_safe;
  int flush_on_close;             /* it gives back a hold: a close waits for it (conn.h) */
  int until_answered;             /* retry_safe and transient failures retried for as long as the client lives */
  uint64_t deadline_ns;           /* 0, or no retry starts after it (monotonic) */
  uint64_t answer_by_ns;          /* with until_answered: 0, or no retry starts after it either */
  int wait_replicas;              /* > 0: WAIT for that many replicas (above) */
  int64_t wait_timeout_ms;        /* WAIT's timeout: > 0, < the command timeout */
  /* With wait_replicas: whether a (non-error) reply reports a write that
   * the replicas must have; NULL: every one does. */
  int (*wrote)(const relock_reply_t *reply);
  /* Told of each failed attempt that another one follows (a transient
   * failure, a server's "not now"), with what it failed with, so that a
   * caller whose own deadline comes first can say what Redis answered.
   * NULL: not told. */
  void (*on_retry)(int err, const char *msg, void *arg);
  void *retry_arg;
} relock__call_spec_t;

/* Whether a call that failed with err (msg its message) may succeed later:
 * no answer (lost, refused, timed out), a server's "not now" (LOADING,
 * BUSY, TRYAGAIN, MASTERDOWN, CLUSTERDOWN, READONLY), or a full server
 * (OOM). */
int relock__call_may_pass(int err, const char *msg);

/* Starts the call; the first key (argv[0] of a script, argv[1] of a
 * command) routes it. Returns NULL only when out of memory. */
relock_future_t *relock__call(relock__redis_t *redis, const relock__call_spec_t *spec);

/* The client closes: every until_answered call waiting for its next
 * attempt makes it now, before the connections close (then one sent on a
 * ready connection is answered within its timeout; the others fail with
 * RELOCK_ECLOSED). Call right before relock__redis_close. */
void relock__call_hurry(relock__redis_t *redis);

#endif /* RELOCK__REDIS_CALL_H */
