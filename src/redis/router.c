/* Key -> connection, lock channel -> subscriber (router.h). */
#include <config.h>

#include <string.h>

#include <relock/error.h>

#include "future/promise.h"
#include "redis/cluster.h"
#include "redis/reply.h"
#include "redis/router.h"
#include "redis/slot.h"

relock__conn_t *relock__route(relock__redis_t *redis, const char *key, size_t len) {
  if (redis->cluster == NULL)
    return &redis->cmd;
  return relock__cluster_conn(redis->cluster, key != NULL ? relock__key_slot(key, len) : -1);
}

int relock__route_slot(const relock__redis_t *redis, const char *key, size_t len) {
  return redis->cluster != NULL ? relock__key_slot(key, len) : 0;
}

relock__conn_t *relock__route_slot_conn(relock__redis_t *redis, int slot) {
  return redis->cluster != NULL ? relock__cluster_conn(redis->cluster, slot) : &redis->cmd;
}

int relock__route_redirects(const relock__redis_t *redis) { return redis->cluster != NULL; }

int relock__route_redirect(relock__redis_t *redis, const relock__conn_t *from, const char *err, size_t len,
                           relock__conn_t **to) {
  return redis->cluster != NULL ? relock__cluster_redirect(redis->cluster, from, err, len, to) : 0;
}

relock_future_t *relock__route_subscribe(relock__redis_t *redis, relock__listener_t *l, const char *channel,
                                         size_t len, relock__message_fn fn, void *arg) {
  relock__pubsub_t *ps = &redis->pubsub;
  if (redis->cluster != NULL && (ps = relock__cluster_subscriber(redis->cluster, relock__key_slot(channel, len))) == NULL)
    return NULL;
  return relock__pubsub_subscribe(ps, l, channel, len, 1, fn, arg);
}

/* Its own object, so that its address tells it apart from any "PUBLISH"
 * (it says PUBLISH too, should it ever be sent as it is). */
const char relock__publish_undecided[] = "PUBLISH";

const char *relock__route_publish_command(const relock__redis_t *redis) {
  if (redis->cluster == NULL)
    return "PUBLISH";
  if (!relock__cluster_probed(redis->cluster))
    return relock__publish_undecided;
  return relock__cluster_sharded(redis->cluster) ? "SPUBLISH" : "PUBLISH";
}

relock_future_t *relock__route_await_publish_command(relock__redis_t *redis) {
  if (redis->cluster != NULL)
    return relock__cluster_await_probe(redis->cluster);
  relock_future_t *f = relock__future_new(redis->exec); /* one node: known from the start */
  if (f != NULL)
    relock__future_succeed(f);
  return f;
}

relock_future_t *relock__route_masters(relock__redis_t *redis) {
  if (redis->cluster != NULL)
    return relock__cluster_masters(redis->cluster);
  relock_future_t *f = relock__future_new(redis->exec);
  if (f == NULL)
    return NULL;
  relock_reply_t node = {.type = RELOCK_REPLY_STRING, .str = redis->cmd.address, .len = strlen(redis->cmd.address)};
  relock_reply_t *one = &node;
  relock_reply_t array = {.type = RELOCK_REPLY_ARRAY, .element = &one, .elements = 1};
  relock_reply_t *copy = relock__reply_dup(&array);
  if (copy == NULL)
    relock__future_fail(f, RELOCK_ENOMEM, "out of memory listing the masters");
  else if (!relock__future_succeed_ptr(f, copy, relock__reply_free))
    relock__reply_free(copy);
  return f;
}

relock__conn_t *relock__route_node(relock__redis_t *redis, const char *address) {
  if (redis->cluster != NULL)
    return relock__cluster_node_conn(redis->cluster, address);
  return strcmp(address, redis->cmd.address) == 0 ? &redis->cmd : NULL;
}
