/* Key -> connection, and lock channel -> subscriber: the one place that
 * knows the topology. One node (the settings' address, or the
 * Sentinel-discovered master: sentinel.h steers the connections), or a
 * Redis Cluster (cluster.h: the master of the key's slot, sharded pub/sub
 * on the channel's). Nothing above it knows which: commands and scripts
 * (call.c) ask it where a slot is served, whether an error reply is a
 * redirection, and which publish command a script uses; the client asks
 * whether a command needs a call to follow redirections. */
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

/* The connection that serves slot (relock__route_slot's; -1: a keyless
 * command): relock__route's for a key of that slot. Asked again before a
 * retry: a Cluster's map may have moved the slot meanwhile. */
relock__conn_t *relock__route_slot_conn(relock__redis_t *redis, int slot);

/* Whether a command may be answered with a redirection (MOVED, ASK: a
 * Cluster's), which only a call (call.h) follows. */
int relock__route_redirects(const relock__redis_t *redis);

/* Reads an error reply (err, len bytes) that from answered: a redirection
 * sets *to to the connection the command goes to next and returns 1
 * (MOVED: the map is updated) or 2 (ASK: for one attempt, with ASKING).
 * 0: not a redirection (never one on one node); -1: a malformed one, or
 * out of memory. */
int relock__route_redirect(relock__redis_t *redis, const relock__conn_t *from, const char *err, size_t len,
                           relock__conn_t **to);

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

/* A future that succeeds once relock__route_publish_command no longer
 * returns relock__publish_undecided (at once if it does not), or fails
 * when the cluster's answer does not come (the command timeout) or the
 * client closes. Cancelling it is allowed. NULL when out of memory. */
relock_future_t *relock__route_await_publish_command(relock__redis_t *redis);

/* The masters a keyless command that answers for one node (SCAN) must be
 * sent to, one by one, to cover every key: a future that succeeds with an
 * array reply of their addresses - a Cluster's masters once its slot map
 * is loaded (cluster.h), else the one node's. NULL when out of memory. */
relock_future_t *relock__route_masters(relock__redis_t *redis);

/* The connection to the node at address (as relock__route_masters gives
 * it), or NULL if the client knows no node there. */
relock__conn_t *relock__route_node(relock__redis_t *redis, const char *address);

extern const char relock__publish_undecided[];

#endif /* RELOCK__REDIS_ROUTER_H */
