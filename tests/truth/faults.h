/* The truth checker's fault injector (tests/truth/faults.c): the server's
 * faults, each worker's proxy, SIGSTOP of a worker. Used by the main thread
 * only (the proxies and the test server are not thread-safe). */
#ifndef RELOCK_TRUTH_FAULTS_H
#define RELOCK_TRUTH_FAULTS_H

#include <sys/types.h>

#include "support/cluster.h"
#include "support/redis_server.h"
#include "support/sentinel.h"
#include "truth/truth.h"

typedef struct truth_faults truth_faults_t;

/* The servers under test: one of the three, by topology. */
typedef struct truth_topo {
  int kind; /* enum truth_topology */
  relock_test_redis_t *redis;
  relock_test_sentinel_t *sentinel;
  relock_test_cluster_t *cluster;
} truth_topo_t;

/* Single node: one proxy per worker in front of redis. Sentinel and
 * cluster: no proxies (a worker finds its nodes through the sentinels or
 * the cluster's slot map, which a proxy in front of one address cannot
 * front), the truth's node is the master (of the truth slot). */
truth_faults_t *truth_faults_new(truth_shared_t *sh, const truth_topo_t *topo, int nworkers, uint64_t seed);
void truth_faults_free(truth_faults_t *f);
/* The node that holds the truth now (the master, the truth slot's
 * master), and its unix socket: the supervisor's own commands go there.
 * Follows the faults' failovers and migrations. */
relock_test_redis_t *truth_faults_node(truth_faults_t *f);
const char *truth_faults_unix_path(truth_faults_t *f);
/* Called (from inject) whenever the truth moved to another node, before
 * the move is announced over (the observer's target). */
void truth_faults_on_move(truth_faults_t *f, void (*cb)(void *arg, const char *unix_path), void *arg);
/* Topology faults the fixtures could not carry out (a failover that did
 * not end, a migration refused): a failed run, never a silent skip. */
long truth_faults_failures(const truth_faults_t *f);
/* The port worker i connects to (0: none, it uses sh->addrs), and its pid once started. */
int truth_faults_port(const truth_faults_t *f, int worker);
void truth_faults_set_pid(truth_faults_t *f, int worker, pid_t pid);
/* Injects one random fault (a break of truth is announced in the shared
 * block before it happens); returns when it is over or set going. */
void truth_faults_inject(truth_faults_t *f);
/* Ends every lasting fault: delays, stalls, stopped processes. */
void truth_faults_heal(truth_faults_t *f);
long truth_faults_total(const truth_faults_t *f);
long truth_faults_count(const truth_faults_t *f, enum truth_fault what);
/* " name count" for each fault injected at least once. */
void truth_faults_print(const truth_faults_t *f);

#endif
