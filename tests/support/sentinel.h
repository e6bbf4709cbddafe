/* A Redis Sentinel topology for integration tests: one master, N replicas
 * and M sentinels, every one a private redis-server (redis_server.h) on
 * loopback in its own temp dir, stopped by pid when freed or when the test
 * program ends. Forces failovers (SENTINEL FAILOVER, kill -9 of the master)
 * and waits, with deadlines, until the sentinels agree again.
 *
 * Data nodes and sentinels are relock_test_redis_t: kill9, pause, stop,
 * restart and cmd work on them (cmd reaches a sentinel over its unix
 * socket). Indexes: data nodes 0..nodes-1 (0 is the first master),
 * sentinels 0..sentinels-1.
 *
 * Not thread-safe: call it from the test's main thread. */
#ifndef RELOCK_TEST_SENTINEL_H
#define RELOCK_TEST_SENTINEL_H

#include <stdint.h>

#include "support/redis_server.h"

typedef struct relock_test_sentinel relock_test_sentinel_t;

/* Zero-initialise; every field's zero is the default. */
typedef struct relock_test_sentinel_opts {
  int replicas;              /* 0 = 2; -1 = none */
  int sentinels;             /* 0 = 3 */
  int quorum;                /* 0 = a majority of the sentinels */
  const char *master_name;   /* NULL = "mymaster" */
  int down_after_ms;         /* 0 = 1000 */
  int failover_timeout_ms;   /* 0 = 3000 */
  /* The data nodes' password: requirepass and masterauth on each, and
   * "sentinel auth-pass" on the sentinels. */
  const char *password;
  /* The sentinels' own requirepass (and sentinel-pass between them, on
   * 6.2+; before, their requirepass serves between them too). */
  const char *sentinel_password;
  /* Certificates of tests/support/tls.sh: data nodes and sentinels listen
   * with TLS only (unix sockets stay plain), with tls-replication yes so
   * replicas and sentinels connect with TLS too. */
  const char *tls_dir;
  /* How long start waits for the sentinels to agree; 0 = 30 s. */
  int ready_timeout_ms;
} relock_test_sentinel_opts_t;

/* Starts the data nodes (replicas with --replicaof the first), then the
 * sentinels, and returns once every sentinel agrees on the master and
 * knows all replicas and the other sentinels (relock_test_sentinel_settle).
 * NULL on failure, with why on stderr; what was started is stopped. */
relock_test_sentinel_t *relock_test_sentinel_start(const relock_test_sentinel_opts_t *opts);
/* Stops every process (by pid), removes their dirs, frees. NULL is ok. */
void relock_test_sentinel_free(relock_test_sentinel_t *t);

int relock_test_sentinel_nodes(const relock_test_sentinel_t *t);     /* data nodes */
int relock_test_sentinel_sentinels(const relock_test_sentinel_t *t); /* sentinels */
relock_test_redis_t *relock_test_sentinel_node(relock_test_sentinel_t *t, int i);
relock_test_redis_t *relock_test_sentinel_sentinel(relock_test_sentinel_t *t, int i);
/* The index of the data node listening on port, -1 if none. */
int relock_test_sentinel_node_by_port(const relock_test_sentinel_t *t, int port);
const char *relock_test_sentinel_master_name(const relock_test_sentinel_t *t);
/* The sentinels' addresses for RELOCK_OPT_SENTINELS: "127.0.0.1:p1,...". */
const char *relock_test_sentinel_addrs(const relock_test_sentinel_t *t);

/* The index of the master as last agreed (start, agree, failover), -1 while
 * they disagree. Not a query: call agree to look again. */
int relock_test_sentinel_master(const relock_test_sentinel_t *t);
relock_test_redis_t *relock_test_sentinel_master_node(relock_test_sentinel_t *t);

/* Asks the running sentinels once. Returns the index of the data node they
 * all name for the master name, when they all do and it is running and
 * answers ROLE as a master; else -1. */
int relock_test_sentinel_agree_now(relock_test_sentinel_t *t);
/* Waits (polling) up to timeout_ms for agree_now; its index, or -1 with
 * what each sentinel said on stderr. */
int relock_test_sentinel_agree(relock_test_sentinel_t *t, int timeout_ms);
/* Waits up to timeout_ms until the topology is whole again: the sentinels
 * agree; every other running data node is a replica of that master with its
 * link up; every running sentinel has the master's flags "master" alone,
 * knows the other sentinels, and lists every running replica with flags
 * "slave" alone. A running data node that still believes it is a master
 * (the old master after SENTINEL FAILOVER, a killed master restarted) or
 * follows another node is made a replica of the agreed master here, at
 * once: Sentinel does the same itself (+convert-to-slave), but only some
 * 10 s later, and failing over again before it would promote a node it
 * still lists as a replica but that is not one. Returns the master's index
 * or -1 with the reason on stderr. */
int relock_test_sentinel_settle(relock_test_sentinel_t *t, int timeout_ms);

/* SENTINEL FAILOVER on a running sentinel, then waits up to timeout_ms for
 * the sentinels to agree on another master. Returns the milliseconds from
 * the command to that agreement, -1 on failure (the sentinel's error or a
 * timeout, on stderr). *switch_ms (may be NULL): from the command to the
 * first +switch-master a sentinel published, -1 if none was heard. Call
 * settle before the next failover. */
int64_t relock_test_sentinel_failover(relock_test_sentinel_t *t, int timeout_ms, int64_t *switch_ms);
/* kill -9 of the current master, then the same wait and figures as
 * failover (from the kill). The old master stays down; restart_node brings
 * it back as a replica. */
int64_t relock_test_sentinel_kill_master(relock_test_sentinel_t *t, int timeout_ms, int64_t *switch_ms);
/* When the last failover or kill_master sent its command or its SIGKILL:
 * CLOCK_MONOTONIC, in milliseconds (0: none yet). */
int64_t relock_test_sentinel_last_start_ms(const relock_test_sentinel_t *t);
/* Restarts data node i (same port and dir) and, unless it is the agreed
 * master, makes it a replica of that master. 0 or -1. */
int relock_test_sentinel_restart_node(relock_test_sentinel_t *t, int i);

#endif /* RELOCK_TEST_SENTINEL_H */
