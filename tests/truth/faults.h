/* The truth checker's fault injector (tests/truth/faults.c): the server's
 * faults, each worker's proxy, SIGSTOP of a worker. Used by the main thread
 * only (the proxies and the test server are not thread-safe). */
#ifndef RELOCK_TRUTH_FAULTS_H
#define RELOCK_TRUTH_FAULTS_H

#include <sys/types.h>

#include "support/redis_server.h"
#include "truth/truth.h"

typedef struct truth_faults truth_faults_t;

/* One proxy per worker in front of redis. */
truth_faults_t *truth_faults_new(truth_shared_t *sh, relock_test_redis_t *redis, int nworkers, uint64_t seed);
void truth_faults_free(truth_faults_t *f);
/* The port worker i connects to, and its pid once started. */
int truth_faults_port(const truth_faults_t *f, int worker);
void truth_faults_set_pid(truth_faults_t *f, int worker, pid_t pid);
/* Injects one random fault (a break of truth is announced in the shared
 * block before it happens); returns when it is over or set going. */
void truth_faults_inject(truth_faults_t *f);
/* Ends every lasting fault: delays, stalls, stopped processes. */
void truth_faults_heal(truth_faults_t *f);
long truth_faults_total(const truth_faults_t *f);
/* " name count" for each fault injected at least once. */
void truth_faults_print(const truth_faults_t *f);

#endif
