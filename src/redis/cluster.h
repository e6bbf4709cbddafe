/* Redis Cluster: which master serves each of the 16384 hash slots, one
 * command connection per master (opened on first use), and following the
 * slots as they move (resharding, failover).
 *
 * The slot map is loaded with CLUSTER SHARDS (CLUSTER SLOTS before Redis
 * 7) from any reachable node: the "any" connection (the client's command
 * connection, steered here from node to node, seeds first) carries the
 * loads, the keyless commands, and every command before the first map;
 * it, and the classic subscriber, send nothing to a node before it has
 * shown to be a cluster node (conn_state.h's check_cluster): a seed that is
 * a standalone server is refused, never used as the cluster.
 * The map is loaded again:
 *   - when a MOVED answer arrives (that slot is remapped at once, the full
 *     map follows: a resharding seldom moves one slot alone);
 *   - when a node's connection fails or drops, and then every 100 ms for as
 *     long as a node that serves slots cannot be reached (a failover: its
 *     replica is promoted within about two node timeouts), each second
 *     after 5 s of that.
 * Loads are never closer than 100 ms, never more than one at a time, and
 * back off to 6.4 s apart while they fail.
 * Requests waiting for a node that is down and serves no slot any more are
 * failed as not sent (RELOCK_ECONNLOST, so that calls re-route at once).
 *
 * Sharded pub/sub: once, with the first load, PUBSUB SHARDNUMSUB is asked
 * (as Redisson does; again with each load, or at once for a script that
 * waits for it, while no answer came); if the cluster knows it, lock channels are
 * subscribed with SSUBSCRIBE on the master of their slot (one subscriber
 * connection per master) and published with SPUBLISH; otherwise with the
 * classic SUBSCRIBE on one node (the client's subscriber connection,
 * steered like the "any" connection), a message reaching every node.
 * When a channel's slot moves, its listeners move to the new owner's
 * subscriber and are told of the gap. */
#ifndef RELOCK__REDIS_CLUSTER_H
#define RELOCK__REDIS_CLUSTER_H

#include <stddef.h>

#include "config/settings.h"
#include "loop/exec.h"
#include "loop/wheel.h"
#include "redis/conn.h"
#include "redis/pubsub.h"
#include "redis/tls.h"

typedef struct relock__cluster relock__cluster_t;

/* At most this many redirections (MOVED, ASK) for one command: a slot
 * bouncing further is a cluster being reconfigured faster than a client
 * can follow, reported as such. */
#define RELOCK__REDIRECTS_MAX 5

/* Makes the object; any and classic (borrowed, outliving it) are the
 * client's command connection and subscriber, steered among the nodes
 * from start on. NULL when out of memory. */
relock__cluster_t *relock__cluster_new(relock__exec_t *exec, relock__wheel_t *wheel,
                                       const relock__settings_t *settings, relock__tls_t *tls, uint64_t *rng,
                                       relock__conn_t *any, relock__pubsub_t *classic,
                                       void (*on_closed)(relock__cluster_t *cl, void *arg), void *closed_arg);

/* Becomes the locator of any and classic, and loads the first map. */
void relock__cluster_start(relock__cluster_t *cl);

/* Closes the masters' connections (give-backs in flight are drained, as
 * conn.h says); on_closed runs once all are down (possibly from inside
 * this call), after which the object is freed. */
void relock__cluster_close(relock__cluster_t *cl);

/* The connection for slot: its master's, or the "any" connection while
 * the slot has no known master (slot < 0: a keyless command). */
relock__conn_t *relock__cluster_conn(relock__cluster_t *cl, int slot);

/* Reads an error reply that from answered: MOVED updates the map and sets
 * *to to the new master's connection (returns 1); ASK sets *to to the
 * importing node's connection (returns 2; the map stays). 0: not a
 * redirection; -1: a malformed one, or out of memory. */
int relock__cluster_redirect(relock__cluster_t *cl, const relock__conn_t *from, const char *err, size_t len,
                             relock__conn_t **to);

/* Whether lock channels use sharded pub/sub (known once the probe that
 * goes with the first load has answered; 0 before). */
int relock__cluster_sharded(const relock__cluster_t *cl);

/* Whether that is known. */
int relock__cluster_probed(const relock__cluster_t *cl);

/* A future that succeeds once it is known (at once if it is), or fails
 * with the probe's error when the probe gets no answer (the "any"
 * connection failed, or timed out: within the command timeout) or the
 * client closes; a probe is sent if none is in flight. Cancelling it is
 * allowed. NULL when out of memory. */
relock_future_t *relock__cluster_await_probe(relock__cluster_t *cl);

/* A future that succeeds with the masters of the slot map (an array reply
 * of "host:port" strings, in the order of their first slot), once a map
 * is loaded (at once if one is), or fails with the error of the load that
 * failed first, or when the client closes. For the commands that answer
 * for one node (SCAN). Cancelling it is allowed. NULL when out of memory. */
relock_future_t *relock__cluster_masters(relock__cluster_t *cl);

/* The command connection of the node at address ("host:port", as
 * relock__cluster_masters gives it), or NULL if no node known has it. */
relock__conn_t *relock__cluster_node_conn(relock__cluster_t *cl, const char *address);

/* The subscriber for a lock channel of slot: the master's sharded one, or
 * classic. NULL when out of memory. */
relock__pubsub_t *relock__cluster_subscriber(relock__cluster_t *cl, int slot);

#endif /* RELOCK__REDIS_CLUSTER_H */
