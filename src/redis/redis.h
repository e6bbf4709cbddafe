/* The Redis side of a client, as the layers above it use it: the loop,
 * wheel, settings and random state the connections run on, the command
 * connection and the subscriber. Commands (call.h) and routing (router.h)
 * take this rather than the client, so that nothing in src/redis/ or
 * src/watchdog/ depends on the client that embeds it. */
#ifndef RELOCK__REDIS_REDIS_H
#define RELOCK__REDIS_REDIS_H

#include <stdint.h>

#include <ev.h>

#include "base/list.h"
#include "config/settings.h"
#include "loop/exec.h"
#include "loop/wheel.h"
#include "redis/cluster.h"
#include "redis/conn.h"
#include "redis/pubsub.h"
#include "redis/sentinel.h"
#include "redis/tls.h"

typedef struct relock__redis relock__redis_t;

struct relock__redis {
  relock__exec_t *exec;     /* the loop and the threads allowed on it */
  struct ev_loop *loop;     /* exec->loop */
  relock__wheel_t *wheel;
  const relock__settings_t *settings;
  uint64_t *rng;            /* xorshift state for jitter and request ids */
  relock__conn_t cmd;       /* commands and scripts */
  relock__pubsub_t pubsub;  /* the subscriber connection, opened on first use */
  relock__sentinel_t *sentinel; /* where both go, with Sentinel; NULL: the settings' node */
  relock__cluster_t *cluster;   /* Redis Cluster: the masters; cmd and pubsub then go to any node */
  relock__link_t until_answered; /* the calls retried until answered (call.h): a close sends those
                                    waiting for their next attempt at once */
  int closing;              /* no retry starts any more */
  int open;                 /* connections not yet fully down after close */
  void (*on_closed)(relock__redis_t *r, void *arg);
  void *closed_arg;
};

/* Sets up the connections (the command connection starts connecting at
 * once, with Sentinel once the master is found), over TLS when tls is not NULL (borrowed: it must outlive the
 * connections). Returns 0 or RELOCK_ENOMEM (nothing to undo then). */
int relock__redis_init(relock__redis_t *r, relock__exec_t *exec, relock__wheel_t *wheel,
                       const relock__settings_t *settings, relock__tls_t *tls, uint64_t *rng,
                       void (*on_closed)(relock__redis_t *r, void *arg), void *closed_arg);

/* Fails everything pending with RELOCK_ECLOSED and closes the connections;
 * on_closed runs once all are fully down (possibly from inside this call).
 * A call retried until answered that waits for its next attempt is sent
 * first: it gives something back (call.h). */
void relock__redis_close(relock__redis_t *r);

#endif /* RELOCK__REDIS_REDIS_H */
