/* Helpers for integration tests of threaded clients against topologies
 * of real servers (Sentinel, Cluster): the clients and locks a test opened
 * (freed by teardown even after a failed assertion), waiting on futures,
 * looking at a node directly (never through the library), lost-lock
 * callbacks counted, a port nothing listens on. */
#ifndef RELOCK_TEST_THREADED_FIXTURE_H
#define RELOCK_TEST_THREADED_FIXTURE_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support/client_fixture.h"

static inline int64_t now_ms(void) { return (int64_t)(relock__now_ns() / 1000000u); }

static inline void pause_ms(int ms) { usleep((useconds_t)ms * 1000u); }

/* The clients and locks of the running test: teardown frees whatever a
 * failed assertion left behind (their loop threads would otherwise call
 * back into a finished test). */
#define MAX_OPEN 16
static relock_client_t *open_clients[MAX_OPEN];
static relock_lock_t *open_locks[MAX_OPEN];
static int n_clients, n_locks;

/* A threaded client (NULL loop). */
static inline relock_client_t *client_of(const relock_options_t *opts) {
  relock_error_t err;
  relock_client_t *c = relock_client_new(NULL, opts, &err);
  if (c == NULL)
    fail_msg("relock_client_new: %s (%s)", err.message, relock_err_name(err.code));
  assert_true(n_clients < MAX_OPEN);
  open_clients[n_clients++] = c;
  return c;
}

static inline relock_lock_t *lock_of(relock_client_t *c, const char *name) {
  relock_error_t err = {-1, ""};
  relock_lock_t *l = relock_lock_new(c, name, &err);
  if (l == NULL)
    fail_msg("relock_lock_new: %s", err.message);
  assert_true(n_locks < MAX_OPEN);
  open_locks[n_locks++] = l;
  return l;
}

static inline int teardown(void **state) {
  (void)state;
  while (n_locks > 0)
    relock_lock_free(open_locks[--n_locks]);
  while (n_clients > 0)
    relock_client_free(open_clients[--n_clients]);
  return 0;
}

/* Waits for a future; its error (0: its boolean/integer in *value). */
static inline int outcome(relock_future_t *f, int64_t timeout_ms, int64_t *value, char *msg, size_t msglen) {
  assert_non_null(f);
  int r = relock_future_wait(f, fx_slack_ms(timeout_ms));
  if (r == 0 && value != NULL)
    *value = relock_future_value_type(f) == RELOCK_VALUE_BOOL ? relock_future_bool(f) : relock_future_int(f);
  if (msg != NULL)
    snprintf(msg, msglen, "%s", relock_future_message(f));
  relock_future_release(f);
  return r;
}

/* A value that must come: fails the test on any error. */
static inline int64_t value_of(relock_future_t *f) {
  int64_t v = -1;
  char msg[512];
  int r = outcome(f, 10000, &v, msg, sizeof msg);
  if (r != 0)
    fail_msg("operation failed: %s (%s)", msg, relock_err_name(r));
  return v;
}

#define ACQUIRE(l, owner, wait) value_of(relock_lock_lock_async((l), (owner), (wait), RELOCK_INFINITE))
#define RELEASE(l, owner) value_of(relock_lock_unlock_async((l), (owner)))

/* Whether node r has owner's field in the lock hash. */
static inline int field_on(relock_test_redis_t *r, relock_lock_t *l, uint64_t owner) {
  char field[160], buf[256];
  relock_lock_field(l, owner, field, sizeof field);
  if (relock_test_redis_cmd(r, buf, sizeof buf, "HEXISTS", relock_lock_name(l), field, NULL) != 0)
    return -1;
  return buf[0] == ':' ? atoi(buf + 1) : -1;
}

static inline long long pttl_on(relock_test_redis_t *r, const char *key) {
  char buf[64];
  if (relock_test_redis_cmd(r, buf, sizeof buf, "PTTL", key, NULL) != 0 || buf[0] != ':')
    return -3;
  return atoll(buf + 1);
}

/* Lost callbacks, counted (they run on the client's loop thread). */
typedef struct {
  int count;
  int reason;
  int64_t at_ms;
} lost_t;

static inline void on_lost(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg) {
  (void)lock;
  (void)owner;
  lost_t *lost = arg;
  printf("# lost callback: %s (%s)\n", message, relock_err_name(reason));
  __atomic_store_n(&lost->reason, reason, __ATOMIC_SEQ_CST);
  __atomic_store_n(&lost->at_ms, now_ms(), __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&lost->count, 1, __ATOMIC_SEQ_CST);
}

static inline int lost_count(lost_t *lost) { return __atomic_load_n(&lost->count, __ATOMIC_SEQ_CST); }

/* The client's statistics say it followed a failover (relock/stats.h):
 * within ms, polled. */
static inline int followed_failover(relock_client_t *c, int64_t ms) {
  int64_t t0 = now_ms();
  relock_stats_t st;
  do {
    assert_int_equal(relock_client_stats(c, &st, sizeof st), 0);
    if (st.failovers >= 1)
      return 1;
    pause_ms(10);
  } while (now_ms() - t0 < ms);
  return 0;
}

/* A port nothing listens on (bound, then closed). */
static inline int dead_port(void) {
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  int fd = socket(AF_INET, SOCK_STREAM, 0), port;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
  port = ntohs(sa.sin_port);
  close(fd);
  return port;
}



/* Whether node r's copy of key gets renewed within timeout_ms: its PTTL,
 * which only falls between renewals, is seen to jump up. */
static inline int renewed_on(relock_test_redis_t *r, const char *key, int timeout_ms) {
  int64_t deadline = now_ms() + fx_slack_ms(timeout_ms);
  long long last = pttl_on(r, key);
  while (now_ms() < deadline) {
    long long p = pttl_on(r, key);
    if (last > 0 && p > last + 20)
      return 1;
    last = p;
    pause_ms(10);
  }
  return 0;
}

/* PUBSUB NUMSUB of channel on node r. */
static inline long long numsub(relock_test_redis_t *r, const char *channel) {
  char buf[256];
  if (relock_test_redis_cmd(r, buf, sizeof buf, "PUBSUB", "NUMSUB", channel, NULL) != 0)
    return -1;
  const char *p = strrchr(buf, ':');
  return p != NULL ? atoll(p + 1) : -1;
}

#endif /* RELOCK_TEST_THREADED_FIXTURE_H */
