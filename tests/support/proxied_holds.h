/* Shared by the tests that take every kind of hold through the test proxy
 * (test_let_go.c, test_fixed_lease.c): the kinds, how to make each, and a
 * fixture of a redis-server with the proxy in front of it. */
#ifndef RELOCK_TEST_PROXIED_HOLDS_H
#define RELOCK_TEST_PROXIED_HOLDS_H

#include "support/client_fixture.h"
#include "support/proxy.h"

/* Every kind of hold: each lock kind, and a permit of a permit-expirable
 * semaphore. */
typedef enum { K_LOCK, K_FAIR, K_READ, K_WRITE, K_FENCED, K_SPIN, K_PERMIT, KINDS } kind_t;
static const char *const kind_names[KINDS] = {"lock", "fair lock", "read lock", "write lock",
                                              "fenced lock", "spin lock", "permit"};

/* A lock of kind (not K_PERMIT) named name, or NULL. */
static inline relock_lock_t *new_lock(relock_client_t *c, kind_t kind, const char *name) {
  switch (kind) {
  case K_FAIR: return relock_fair_lock_new(c, name, NULL);
  case K_READ: return relock_read_lock_new(c, name, NULL);
  case K_WRITE: return relock_write_lock_new(c, name, NULL);
  case K_FENCED: return relock_fenced_lock_new(c, name, NULL);
  case K_SPIN: return relock_spin_lock_new(c, name, NULL);
  default: return relock_lock_new(c, name, NULL);
  }
}

typedef struct {
  relock_test_redis_t *redis;
  relock_test_proxy_t *proxy;
  relock_options_t *via; /* through the proxy; the test sets its timings */
} fx_t;

/* cmocka's setup: the server, the proxy, options for a client through it. */
static inline int proxied_setup(void **state) {
  fx_t *fx = calloc(1, sizeof(*fx));
  fx->redis = relock_test_redis_start(NULL);
  if (fx->redis == NULL)
    return -1;
  fx->proxy = relock_test_proxy_start(relock_test_redis_host(fx->redis), relock_test_redis_port(fx->redis));
  if (fx->proxy == NULL)
    return -1;
  relock_options_t *cfg = fx_options(fx->redis, 0);
  fx->via = fx_copy(cfg);
  relock_options_free(cfg);
  fx_set_int(fx->via, RELOCK_OPT_PORT, relock_test_proxy_port(fx->proxy));
  *state = fx;
  return 0;
}

static inline int proxied_teardown(void **state) {
  fx_t *fx = *state;
  relock_test_proxy_stop(fx->proxy);
  relock_test_redis_free(fx->redis);
  relock_options_free(fx->via);
  free(fx);
  return 0;
}

#endif
