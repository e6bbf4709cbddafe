/* Key -> connection, and lock channel -> subscriber: the one place that
 * knows the topology. One node (the settings' address, or the
 * Sentinel-discovered master: sentinel.h steers the connections), or a
 * Redis Cluster (cluster.h: the master of the key's slot, sharded pub/sub
 * on the channel's). Nothing above it knows which. */
#ifndef RELOCK__REDIS_ROUTER_H
#define RELOCK__REDIS_ROUTER_H

#include <stddef.h>

#include <relock/future.h>

#include "redis/conn.h"
#include "redis/pubsub.h"
#include "redis/redis.h"

/* The connection that serves key (len bytes; NULL for a keyless command). */
relock__conn_t *relock__route(relock__redis_t *redis, const char *key, size_t len);

/* The key's hash slot in a cluster; 0 for every key elsewhere. Keys that
 * one script touches must share it (renewals are batched per slot). */
int relock__route_slot(const relock__redis_t *redis, const char *key, size_t len);

/* Subscribes l to a lock's channel (len bytes) where its unlocks are
 * published (pubsub.h's subscribe, routed). NULL when out of memory. */
relock_future_t *relock__route_subscribe(relock__redis_t *redis, relock__listener_t *l, const char *channel,
                                         size_t len, relock__message_fn fn, void *arg);

/* The command a script publishes unlocks with: SPUBLISH on a cluster with
 * sharded pub/sub, else PUBLISH - or, on a cluster that has not answered
 * whether it has sharded pub/sub yet, relock__publish_undecided: passed as
 * an argument of a call (the pointer itself, not a copy), it is replaced
 * by the command once the cluster has answered, and the script waits for
 * that (call.h). A guess would publish where nobody listens: a waiter
 * not woken, a force release the holder does not hear. */
const char *relock__route_publish_command(const relock__redis_t *redis);

extern const char relock__publish_undecided[];

#endif /* RELOCK__REDIS_ROUTER_H */
