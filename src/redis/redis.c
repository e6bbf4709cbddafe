/* The Redis side of a client: its connections, opened and closed together
 * (redis.h). */
#include <config.h>

#include <string.h>

#include <relock/error.h>

#include "redis/redis.h"

static void part_closed(relock__redis_t *r) {
  if (--r->open == 0 && r->on_closed != NULL)
    r->on_closed(r, r->closed_arg);
}

static void on_cmd_closed(relock__conn_t *conn, void *arg) {
  (void)conn;
  part_closed(arg);
}

static void on_pubsub_closed(relock__pubsub_t *ps, void *arg) {
  (void)ps;
  part_closed(arg);
}

static void on_sentinel_closed(relock__sentinel_t *s, void *arg) {
  (void)s;
  part_closed(arg);
}

static void on_cluster_closed(relock__cluster_t *cl, void *arg) {
  (void)cl;
  part_closed(arg);
}

int relock__redis_init(relock__redis_t *r, relock__exec_t *exec, relock__wheel_t *wheel,
                       const relock__settings_t *settings, relock__tls_t *tls, uint64_t *rng,
                       void (*on_closed)(relock__redis_t *r, void *arg), void *closed_arg) {
  memset(r, 0, sizeof(*r));
  r->exec = exec;
  r->loop = exec->loop;
  r->wheel = wheel;
  r->settings = settings;
  r->rng = rng;
  relock__list_init(&r->until_answered);
  relock__conn_t *steered[] = {&r->cmd, &r->pubsub.conn};
  if (settings->nsentinels > 0 &&
      (r->sentinel = relock__sentinel_new(exec, wheel, settings, tls, rng, steered, 2, on_sentinel_closed, r)) == NULL)
    return RELOCK_ENOMEM;
  if (relock__pubsub_init(&r->pubsub, exec, wheel, settings, rng, on_pubsub_closed, r) != 0) {
    if (r->sentinel != NULL)
      relock__sentinel_close(r->sentinel); /* never started: gone at once (r->on_closed is not set yet) */
    return RELOCK_ENOMEM;
  }
  if (settings->ncluster_nodes > 0 &&
      (r->cluster = relock__cluster_new(exec, wheel, settings, tls, rng, &r->cmd, &r->pubsub, on_cluster_closed, r)) ==
          NULL) {
    relock__pubsub_close(&r->pubsub); /* never started: its on_closed is not set to reach r yet either */
    return RELOCK_ENOMEM;
  }
  relock__conn_hooks_t hooks = {.on_closed = on_cmd_closed, .arg = r};
  relock__conn_init(&r->cmd, exec->loop, wheel, settings, "command", &hooks, rng);
  r->cmd.tls = tls;
  r->pubsub.conn.tls = tls;
  r->on_closed = on_closed;
  r->closed_arg = closed_arg;
  if (r->sentinel != NULL)
    relock__sentinel_start(r->sentinel);
  if (r->cluster != NULL)
    relock__cluster_start(r->cluster);
  relock__conn_start(&r->cmd);
  return 0;
}

void relock__redis_close(relock__redis_t *r) {
  if (r->closing)
    return;
  r->closing = 1;
  r->open = 2 + (r->sentinel != NULL) + (r->cluster != NULL);
  if (r->sentinel != NULL)
    relock__sentinel_close(r->sentinel); /* first: the others must not relocate while closing */
  if (r->cluster != NULL)
    relock__cluster_close(r->cluster); /* the same */
  relock__pubsub_close(&r->pubsub);
  relock__conn_close(&r->cmd);
}
