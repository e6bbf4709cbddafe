/* A command or script with retries: what the objects (locks, ...) use.
 *
 * A call is sent like any request; if it fails in a way that may be
 * transient (connection lost or refused, no reply in time) and the caller
 * vouched that it is safe to repeat (idempotent, or de-duplicated like the
 * lock release's latch), it is sent again after a jittered back-off (at
 * once after a lost connection: it then waits in the connection's queue
 * for the reconnect), up to
 * the configured retry attempts - but not a refusal known at once
 * (relock__conn_fails_fast). Other failures and the last attempt's failure
 * complete the call's future. */
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
  uint64_t deadline_ns;           /* 0, or no retry starts after it (monotonic) */
} relock__call_spec_t;

/* Starts the call; the first key (argv[0] of a script, argv[1] of a
 * command) routes it. Returns NULL only when out of memory. */
relock_future_t *relock__call(relock__redis_t *redis, const relock__call_spec_t *spec);

#endif /* RELOCK__REDIS_CALL_H */
