/* A Redis Cluster for integration tests: masters and their replicas, every
 * one a private redis-server (redis_server.h) on loopback in its own temp
 * dir, joined by `redis-cli --cluster create` and stopped by pid when freed
 * or when the test program ends. Forces what a cluster client must live
 * through - failovers (CLUSTER FAILOVER, kill -9 of a master), a slot
 * resharded under its feet (with a test's own steps between the phases), a
 * node answering CLUSTERDOWN - and waits, with deadlines, until every node
 * agrees again.
 *
 * Nodes are relock_test_redis_t: kill9, pause, stop and cmd work on them
 * (cmd reaches a node over its unix socket, plain even with TLS). Index i
 * is the i-th node started; redis-cli makes the first `masters` of them the
 * masters, but roles change with failovers: ask (owner, replica_of,
 * other_master), never assume. Everything here asks the servers
 * themselves, never the library under test.
 *
 * A node paused with relock_test_redis_pause must be resumed before any
 * call here that asks every running node: each question to it would wait
 * out the command timeout.
 *
 * Not thread-safe: call it from the test's main thread. */
#ifndef RELOCK_TEST_CLUSTER_H
#define RELOCK_TEST_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "support/redis_server.h"

#define RELOCK_TEST_CLUSTER_SLOTS 16384

typedef struct relock_test_cluster relock_test_cluster_t;

/* Zero-initialise; every field's zero is the default. */
typedef struct relock_test_cluster_opts {
  int masters;          /* 0 = 3; at least 3 (redis-cli's minimum) */
  int replicas;         /* replicas per master: 0 = 1, -1 = none */
  /* requirepass and masterauth on every node (and AUTH for MIGRATE). */
  const char *password;
  /* Certificates of tests/support/tls.sh: every node listens with TLS only
   * (unix sockets stay plain), with tls-cluster and tls-replication yes,
   * so the bus, replication and MIGRATE use TLS too; nodes connect to each
   * other with client.crt (the bus demands a client certificate). */
  const char *tls_dir;
  /* More redis-server arguments for every node, NULL-terminated, last so
   * they override ours, e.g. {"--rename-command", "PUBSUB", "", NULL}. */
  const char *const *extra_args;
  int node_timeout_ms;  /* cluster-node-timeout; 0 = 1000 */
  /* How long start (and the waits without a timeout argument: migrate_end,
   * set_down) wait for the cluster; 0 = 30 s. */
  int ready_timeout_ms;
} relock_test_cluster_opts_t;

/* Starts every node, creates the cluster with redis-cli and returns once
 * wait_ok passes. NULL on failure, with why (and redis-cli's output) on
 * stderr; what was started is stopped. redis-cli is $REDIS_CLI if set and
 * non-empty, else the redis-cli next to $REDIS_SERVER when that is a path,
 * else "redis-cli" on $PATH. */
relock_test_cluster_t *relock_test_cluster_start(const relock_test_cluster_opts_t *opts);
/* Stops every node (by pid), removes their dirs, frees. NULL is ok. */
void relock_test_cluster_free(relock_test_cluster_t *t);

int relock_test_cluster_nodes(const relock_test_cluster_t *t);
relock_test_redis_t *relock_test_cluster_node(relock_test_cluster_t *t, int i);
/* The index of the node listening on port, -1 if none. */
int relock_test_cluster_node_by_port(const relock_test_cluster_t *t, int port);
/* Every node's address, for a client's seeds: "127.0.0.1:p1,127.0.0.1:p2,...". */
const char *relock_test_cluster_seeds(const relock_test_cluster_t *t);
/* A node's cluster id (CLUSTER MYID, read at start; kept across restarts). */
const char *relock_test_cluster_node_id(const relock_test_cluster_t *t, int i);

/* CLUSTER KEYSLOT asked of a running node; -1 on error. */
int relock_test_cluster_keyslot(relock_test_cluster_t *t, const char *key, size_t len);
/* The index of the master serving slot in a running node's CLUSTER SLOTS
 * (the first that answers); -1 if none does or the slot is unassigned. */
int relock_test_cluster_owner(relock_test_cluster_t *t, int slot);
/* A running replica of master (by ROLE), one with its link up if there is
 * one; -1 if none. */
int relock_test_cluster_replica_of(relock_test_cluster_t *t, int master);
/* A running master (by ROLE) other than m, the lowest index; -1 if none. */
int relock_test_cluster_other_master(relock_test_cluster_t *t, int m);

/* Waits up to timeout_ms until the cluster is whole: every running node
 * says cluster_state:ok, their CLUSTER SLOTS name the same owner for every
 * slot and each owner is running, none flags a running node fail or fail?,
 * and every running replica's link to its master is up. 0, or -1 with
 * what is wrong and each node's state on stderr. */
int relock_test_cluster_wait_ok(relock_test_cluster_t *t, int timeout_ms);

/* CLUSTER FAILOVER on a replica of master, then waits until that replica
 * is a master and wait_ok passes. Its index, or -1. */
int relock_test_cluster_failover(relock_test_cluster_t *t, int master, int timeout_ms);
/* kill -9 of master (which must have a running replica: nothing is killed
 * otherwise), then waits until one of its replicas is promoted and wait_ok
 * passes. Returns the new master's index or -1. *promotion_ms (may be
 * NULL): the ms from the SIGKILL to the first ROLE (polled every 10 ms)
 * in which that replica called itself master; -1 if never. The old master
 * stays down: restart brings it back as a replica. */
int relock_test_cluster_kill_master(relock_test_cluster_t *t, int master, int timeout_ms, int *promotion_ms);
/* kill_master in two steps, for a caller that acts at the kill: kill9
 * sends the SIGKILL (0, or -1 with nothing killed), await_promotion does
 * the rest and returns what kill_master does. last_kill_ms: when the last
 * SIGKILL went, on CLOCK_MONOTONIC in ms (0: never). */
int relock_test_cluster_kill9_master(relock_test_cluster_t *t, int master);
int relock_test_cluster_await_promotion(relock_test_cluster_t *t, int timeout_ms, int *promotion_ms);
int64_t relock_test_cluster_last_kill_ms(const relock_test_cluster_t *t);
/* Restarts a node (killed, stopped or running: same port, dir and
 * nodes.conf) and waits for wait_ok: it rejoins, as a replica of the node
 * that took its slots if it lost them. 0 or -1. */
int relock_test_cluster_restart(relock_test_cluster_t *t, int node, int timeout_ms);

/* Resharding of one slot from its owner to master `to`, in phases so a
 * test can act in between (a client meets -ASK between keys and end):
 *   begin: CLUSTER SETSLOT slot IMPORTING <source-id> on `to`, then
 *          MIGRATING <to-id> on the source;
 *   keys:  MIGRATE of every key in the slot (CLUSTER GETKEYSINSLOT, then
 *          MIGRATE ... KEYS, with AUTH when there is a password) to the
 *          node the source says it migrates to (keys without NUL bytes);
 *   end:   CLUSTER SETSLOT slot NODE <to-id> on `to`, the source, then
 *          every other running master; waits until wait_ok passes with
 *          every running node naming `to`.
 * migrate_slot does all three. Each returns 0 or -1, why on stderr. */
int relock_test_cluster_migrate_begin(relock_test_cluster_t *t, int slot, int to);
int relock_test_cluster_migrate_keys(relock_test_cluster_t *t, int slot);
int relock_test_cluster_migrate_end(relock_test_cluster_t *t, int slot, int to);
int relock_test_cluster_migrate_slot(relock_test_cluster_t *t, int slot, int to);

/* CLUSTERDOWN on demand, by real Redis behaviour: a node whose own slot map
 * has a hole (CLUSTER DELSLOTS) goes to cluster_state:fail, since
 * cluster-require-full-coverage is yes by default, and answers every keyed
 * command with "-CLUSTERDOWN The cluster is down" ("-CLUSTERDOWN Hash slot
 * not served" for keys of the missing slot); keyless commands (PING) still
 * work.
 *   node >= 0, a master: DELSLOTS of the first slot it serves, on it
 *     alone. Only it goes down, and it stays down: nobody else claims that
 *     slot, so gossip never gives it back; the other nodes keep serving
 *     their slots and still send that slot's clients to it (-MOVED).
 *   node == -1: DELSLOTS of slot 0 on its owner, then on every other
 *     running node: every running node goes down.
 * on = 1 returns once the nodes concerned report cluster_state:fail;
 * on = 0 gives the slot back to its owner (ADDSLOTS there, SETSLOT NODE on
 * the other masters that dropped it; replicas refuse SETSLOT and learn it
 * by gossip) and waits for wait_ok. Keys are never lost:
 * DELSLOTS leaves them in place. One set_down at a time. 0 or -1. */
int relock_test_cluster_set_down(relock_test_cluster_t *t, int node, int on);

#endif /* RELOCK_TEST_CLUSTER_H */
