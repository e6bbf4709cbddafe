/* Helpers for integration tests of the client: a private redis-server, a
 * client on it, synchronous commands through futures, and running the loop
 * until a condition holds (bounded in time). */
#ifndef RELOCK_TEST_CLIENT_FIXTURE_H
#define RELOCK_TEST_CLIENT_FIXTURE_H

#include <stdarg.h>
#include <string.h>

#include <ev.h>

#include <relock/relock.h>

#include "client/client_impl.h"
#include "base/clock.h"
#include "support/redis_server.h"
#include "support/test.h"

/* Valgrind slows everything down; deadlines that only bound a hang grow. */
static inline int64_t fx_slack_ms(int64_t ms) { return relock_test_under_valgrind() ? ms * 10 : ms; }

/* The seed of a randomized test: $RELOCK_TEST_SEED, else a fresh one from
 * the clock (never 0, for xorshift generators); printed, so that a failing
 * run replays. */
static inline uint64_t fx_seed(const char *test) {
  const char *env = getenv("RELOCK_TEST_SEED");
  uint64_t seed = env != NULL ? strtoull(env, NULL, 10) : relock__now_ns() | 1;
  printf("# %s: seed %llu (RELOCK_TEST_SEED=%llu replays it)\n", test, (unsigned long long)seed,
         (unsigned long long)seed);
  return seed;
}

static inline double fx_ms_since(uint64_t t0) { return (double)(relock__now_ns() - t0) / 1e6; }

/* Waits for a future that must succeed; returns its value (a boolean or an
 * integer) and releases it. */
static inline int64_t fx_value(relock_future_t *f) {
  assert_non_null(f);
  int r = relock_future_wait(f, fx_slack_ms(10000));
  if (r != 0)
    fail_msg("operation failed: %s (%s)", relock_future_message(f), relock_err_name(r));
  int64_t v = relock_future_value_type(f) == RELOCK_VALUE_BOOL ? relock_future_bool(f) : relock_future_int(f);
  relock_future_release(f);
  return v;
}

/* Waits for a future that must fail; returns its error, its message in msg
 * (may be NULL), and releases it. */
static inline int fx_error(relock_future_t *f, char *msg, size_t size) {
  assert_non_null(f);
  int r = relock_future_wait(f, fx_slack_ms(10000));
  assert_int_not_equal(r, RELOCK_EPENDING);
  if (msg != NULL)
    snprintf(msg, size, "%s", relock_future_message(f));
  relock_future_release(f);
  return r;
}

/* Sets an option that must be accepted. */
#define FX_SET_(type, opts, name, value)                                                   \
  do {                                                                                     \
    relock_error_t fx_err_;                                                                \
    if (relock_options_set_##type((opts), (name), (value), &fx_err_) != 0)                 \
      fail_msg("option %s: %s (%s)", (name), fx_err_.message, relock_err_name(fx_err_.code)); \
  } while (0)

static inline void fx_set_str(relock_options_t *opts, const char *name, const char *value) {
  FX_SET_(string, opts, name, value);
}
static inline void fx_set_int(relock_options_t *opts, const char *name, int value) {
  FX_SET_(int, opts, name, value);
}
static inline void fx_set_ms(relock_options_t *opts, const char *name, int64_t value) {
  FX_SET_(ms, opts, name, value);
}

/* Options for the private server r (TCP, or its unix socket), with short
 * timeouts; free them with relock_options_free. */
static inline relock_options_t *fx_options(const relock_test_redis_t *r, int use_unix) {
  relock_options_t *opts = relock_options_new(NULL);
  assert_non_null(opts);
  if (use_unix) {
    fx_set_str(opts, RELOCK_OPT_UNIX_PATH, relock_test_redis_unix_path(r));
  } else {
    fx_set_str(opts, RELOCK_OPT_HOST, relock_test_redis_host(r));
    fx_set_int(opts, RELOCK_OPT_PORT, relock_test_redis_port(r));
  }
  fx_set_ms(opts, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(1000));
  fx_set_ms(opts, RELOCK_OPT_CONNECT_TIMEOUT, fx_slack_ms(1000));
  fx_set_ms(opts, RELOCK_OPT_RECONNECT_MIN, 10);
  fx_set_ms(opts, RELOCK_OPT_RECONNECT_MAX, 200);
  return opts;
}

/* A copy of opts, to change without touching them. */
static inline relock_options_t *fx_copy(const relock_options_t *opts) {
  relock_options_t *copy = relock_options_copy(opts, NULL);
  assert_non_null(copy);
  return copy;
}

/* The loop the fixture's clients run on: the white-box tests drive it
 * themselves (fx_run_until) and read the clients' insides between turns,
 * so the clients are embedded ones, on this test thread. One loop for the
 * process, made on first use and kept (still reachable at exit). */
static inline struct ev_loop *fx_loop(void) {
  static struct ev_loop *loop;
  if (loop == NULL && (loop = ev_loop_new(EVFLAG_AUTO)) == NULL)
    fail_msg("ev_loop_new failed");
  return loop;
}

static inline relock_client_t *fx_client(const relock_options_t *opts) {
  relock_error_t err;
  relock_client_t *c = relock_client_new(fx_loop(), opts, &err);
  if (c == NULL)
    fail_msg("relock_client_new: %s (%s)", err.message, relock_err_name(err.code));
  return c;
}

/* f was refused for invalid arguments: a future that has already failed
 * with RELOCK_EINVAL, its message containing phrase; waiting on it returns
 * at once. Releases f. */
#define FX_REFUSED(f, phrase) fx_refused_((f), (phrase), #f)
static inline void fx_refused_(relock_future_t *f, const char *phrase, const char *what) {
  if (f == NULL)
    fail_msg("%s: NULL, not a failed future", what);
  if (relock_future_state(f) != RELOCK_FUTURE_FAILED || relock_future_error(f) != RELOCK_EINVAL)
    fail_msg("%s: %s (%s), not failed with RELOCK_EINVAL", what, relock_err_name(relock_future_error(f)),
             relock_future_message(f));
  if (strstr(relock_future_message(f), phrase) == NULL)
    fail_msg("%s: message \"%s\" lacks \"%s\"", what, relock_future_message(f), phrase);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(relock_future_wait(f, 10000), RELOCK_EINVAL);
  assert_true(fx_ms_since(t0) < 100);
  relock_future_release(f);
}

/* Runs a command and waits for it; the caller releases the future. */
static inline relock_future_t *fx_cmdv(relock_client_t *c, int argc, const char *const *argv) {
  relock_future_t *f = relock_client_command_async(c, argc, argv, NULL);
  assert_non_null(f);
  int r = relock_future_wait(f, fx_slack_ms(10000));
  assert_int_not_equal(r, RELOCK_EPENDING);
  return f;
}

#define FX_CMD(c, ...)                                                                       \
  fx_cmdv((c), (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)),          \
          (const char *const[]){__VA_ARGS__})

/* The reply of a command that must succeed. */
static inline const relock_reply_t *fx_ok(relock_future_t *f) {
  if (relock_future_error(f) != 0)
    fail_msg("command failed: %s (%s)", relock_future_message(f), relock_err_name(relock_future_error(f)));
  const relock_reply_t *reply = relock_future_reply(f);
  assert_non_null(reply);
  return reply;
}

/* A 1 ms timer keeps the loop turning so that conditions on the outside
 * world (another process, the server) are seen too. */
static inline void fx_tick_(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)w;
  (void)revents;
}

/* The loop turns until cond(arg) holds or relock__now_ns() reaches
 * deadline_ns; returns whether it holds. */
static inline int fx_run_until_ns_(struct ev_loop *loop, int (*cond)(void *arg), void *arg, uint64_t deadline_ns) {
  ev_timer tick;
  ev_timer_init(&tick, fx_tick_, 0.001, 0.001);
  ev_timer_start(loop, &tick);
  int ok;
  while (!(ok = cond(arg)) && relock__now_ns() < deadline_ns)
    ev_run(loop, EVRUN_ONCE);
  ev_timer_stop(loop, &tick);
  return ok;
}

/* Runs the loop until cond(arg) holds or timeout_ms (stretched under
 * valgrind) passes; returns whether it holds. */
static inline int fx_run_until(struct ev_loop *loop, int (*cond)(void *arg), void *arg, int64_t timeout_ms) {
  return fx_run_until_ns_(loop, cond, arg, relock__now_ns() + (uint64_t)fx_slack_ms(timeout_ms) * 1000000u);
}

static inline int fx_never_(void *arg) {
  (void)arg;
  return 0;
}

/* Runs the loop for ms of real time, unstretched: for a span the test
 * computed itself (an outage made longer than a bound that it stretched
 * already), where fx_run_until's tenfold stretch under valgrind would
 * stretch it twice. */
static inline void fx_run_for(struct ev_loop *loop, int64_t ms) {
  fx_run_until_ns_(loop, fx_never_, NULL, relock__now_ns() + (uint64_t)ms * 1000000u);
}

/* Integer of a raw RESP reply from relock_test_redis_cmd (":12\r\n"). */
static inline long long fx_raw_int(relock_test_redis_t *r, const char *arg0, ...) {
  const char *argv[16];
  int argc = 0;
  va_list ap;
  va_start(ap, arg0);
  for (const char *a = arg0; a != NULL && argc < 16; a = va_arg(ap, const char *))
    argv[argc++] = a;
  va_end(ap);
  char buf[4096];
  int rc = relock_test_redis_cmdv(r, buf, sizeof buf, argc, argv, NULL);
  if (rc != 0 || buf[0] != ':')
    fail_msg("raw %s: rc %d, reply %.60s", arg0, rc, buf);
  return atoll(buf + 1);
}

/* The fixture of most object tests: a private redis-server, the options
 * for it (fx_options, on its unix socket, embedded) and two clients on the
 * fixture's loop: a, and b, two "processes" (the client under test and a
 * contender, or a peer that listens and looks at keys).
 *   fx_pair_setup         the server, the options and both clients
 *   fx_pair_server_setup  the server and the options; the test makes the
 *                         clients (fx_pair_clients), after changing
 *                         fx->cfg if it needs to
 *   fx_pair_start         either of those with options for the server (aof)
 *   fx_pair_teardown      frees the clients there are, the server, the options
 * param is cmocka's prestate of the test (cmocka_unit_test_prestate_*),
 * NULL without one. */
typedef struct fx_pair {
  relock_test_redis_t *redis;
  relock_options_t *cfg;
  relock_client_t *a;
  relock_client_t *b;
  void *param;
} fx_pair_t;

static inline void fx_pair_clients(fx_pair_t *fx) {
  fx->a = fx_client(fx->cfg);
  fx->b = fx_client(fx->cfg);
}

/* The server started with opts (NULL: the defaults); with_clients: a and b
 * made too. */
static inline int fx_pair_start(void **state, const relock_test_redis_opts_t *opts, int with_clients) {
  fx_pair_t *fx = calloc(1, sizeof(*fx));
  if (fx == NULL || (fx->redis = relock_test_redis_start(opts)) == NULL) {
    free(fx);
    return -1;
  }
  fx->param = *state;
  fx->cfg = fx_options(fx->redis, 1);
  if (with_clients)
    fx_pair_clients(fx);
  *state = fx;
  return 0;
}

static inline int fx_pair_setup(void **state) { return fx_pair_start(state, NULL, 1); }

static inline int fx_pair_server_setup(void **state) { return fx_pair_start(state, NULL, 0); }

static inline int fx_pair_teardown(void **state) {
  fx_pair_t *fx = *state;
  relock_client_free(fx->a);
  relock_client_free(fx->b);
  relock_test_redis_free(fx->redis);
  relock_options_free(fx->cfg);
  free(fx);
  return 0;
}

/* The fixture of tests that make their own clients, threaded or embedded:
 * a private redis-server and options for it over TCP (fx_options). */
typedef struct fx_server {
  relock_test_redis_t *redis;
  relock_options_t *opts;
} fx_server_t;

static inline int fx_server_setup(void **state) {
  fx_server_t *fx = calloc(1, sizeof(*fx));
  if (fx == NULL || (fx->redis = relock_test_redis_start(NULL)) == NULL) {
    free(fx);
    return -1; /* cmocka reports the test as failed in its setup */
  }
  fx->opts = fx_options(fx->redis, 0);
  *state = fx;
  return 0;
}

static inline int fx_server_teardown(void **state) {
  fx_server_t *fx = *state;
  relock_test_redis_free(fx->redis);
  relock_options_free(fx->opts);
  free(fx);
  return 0;
}

/* The server's clock (TIME), in ms since the epoch: what it measures
 * expiries on (a permit's score). */
static inline long long fx_server_ms(relock_test_redis_t *r) {
  char buf[128];
  assert_int_equal(relock_test_redis_cmd(r, buf, sizeof buf, "TIME", NULL), 0);
  /* *2\r\n$10\r\n<seconds>\r\n$6\r\n<micros>\r\n */
  const char *p = strchr(strchr(buf, '\n') + 1, '\n') + 1;
  long long sec = atoll(p);
  p = strchr(strchr(p, '\n') + 1, '\n') + 1;
  return sec * 1000 + atoll(p) / 1000;
}

/* A number stored as a string (GET's bulk reply); -1 for nil. */
static inline long long fx_raw_get(relock_test_redis_t *r, const char *key) {
  char buf[128];
  if (relock_test_redis_cmd(r, buf, sizeof buf, "GET", key, NULL) != 0)
    fail_msg("raw GET %s failed", key);
  if (buf[0] != '$')
    fail_msg("raw GET %s: reply %.60s", key, buf);
  return buf[1] == '-' ? -1 : atoll(strchr(buf, '\n') + 1);
}

/* Keys named by Redis's keyspace notifications of one event ("set", "del",
 * ...), heard through a subscription: what a script wrote and removed, even
 * when nothing of it is left to look at afterwards. */
typedef struct {
  int n;
  char keys[16][256];
} fx_keyevents_t;

static inline void fx_on_keyevent_(relock_subscription_t *sub, const char *payload, size_t len, void *arg) {
  (void)sub;
  fx_keyevents_t *ev = arg;
  if (payload != NULL && ev->n < 16)
    snprintf(ev->keys[ev->n++], sizeof ev->keys[0], "%.*s", (int)len, payload);
}

/* Turns notifications on in r and subscribes c to event; free the result
 * with relock_subscription_free. */
static inline relock_subscription_t *fx_keyevents(relock_client_t *c, relock_test_redis_t *r, const char *event,
                                                  fx_keyevents_t *ev) {
  char channel[128];
  assert_int_equal(relock_test_redis_cmd(r, NULL, 0, "CONFIG", "SET", "notify-keyspace-events", "E$g", NULL), 0);
  snprintf(channel, sizeof channel, "__keyevent@0__:%s", event);
  relock_subscription_t *sub = NULL;
  relock_future_t *f = relock_client_subscribe_async(c, channel, strlen(channel), fx_on_keyevent_, ev, &sub);
  assert_non_null(f);
  assert_int_equal(relock_future_wait(f, fx_slack_ms(5000)), 0);
  relock_future_release(f);
  return sub;
}

/* Runs c's loop until ev has heard n keys (or 2 s pass); returns whether. */
typedef struct {
  fx_keyevents_t *ev;
  int n;
} fx_keyevents_want_t;

static inline int fx_keyevents_heard_(void *arg) {
  fx_keyevents_want_t *w = arg;
  return w->ev->n >= w->n;
}

static inline int fx_keyevents_wait(relock_client_t *c, fx_keyevents_t *ev, int n) {
  fx_keyevents_want_t w = {ev, n};
  return fx_run_until(relock_client_loop(c), fx_keyevents_heard_, &w, 2000);
}

/* -- a belief is never longer than what Redis keeps ----------------------------*/

/* Within within_ms on the fixture's loop, what Redis keeps of key (its
 * PTTL, read first) comes to be at least what owner's hold of l believes
 * (its validity, read after); a key without an expiry keeps anything.
 * within_ms is the library's own bound (a check cycle and a round trip);
 * the wait allows twice that, times the build's slowdown, for a loop that
 * runs late on a machine running other tests. 0 checks once, at once. */
static inline void fx_kept_at_least_believed(relock_test_redis_t *r, const char *key, relock_lock_t *l,
                                             uint64_t owner, int64_t within_ms) {
  uint64_t t0 = relock__now_ns();
  int64_t allowed = 2 * within_ms * relock_test_slowdown();
  for (;;) {
    long long pttl = fx_raw_int(r, "PTTL", key, NULL);
    int64_t valid = relock_lock_validity_ms(l, owner);
    if (pttl == -1 || valid <= pttl)
      return;
    if (fx_ms_since(t0) >= (double)allowed)
      fail_msg("after %.0f ms the holder believes %lld ms more, Redis keeps %s %lld ms", fx_ms_since(t0),
               (long long)valid, key, pttl);
    fx_run_until(fx_loop(), fx_never_, NULL, 5);
  }
}

/* Contender other (owner other_owner) tries for the lock until it gets it
 * (within timeout_ms): by then the holder must have been told of its loss
 * (*told, its lost callback's count, above 0). */
static inline void fx_told_before_taken(const int *told, relock_lock_t *other, uint64_t other_owner,
                                        int64_t timeout_ms) {
  uint64_t t0 = relock__now_ns();
  while (fx_ms_since(t0) < fx_slack_ms(timeout_ms)) {
    if (fx_value(relock_lock_lock_async(other, other_owner, 0, RELOCK_INFINITE)) == 0)
      continue;
    if (*told == 0)
      fail_msg("another client took the lock before its holder was told of the loss");
    return;
  }
  fail_msg("the lock was not free within %lld ms", (long long)timeout_ms);
}

#endif /* RELOCK_TEST_CLIENT_FIXTURE_H */
