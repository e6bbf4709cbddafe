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

static inline double fx_ms_since(uint64_t t0) { return (double)(relock__now_ns() - t0) / 1e6; }

/* A config for the private server r (TCP, or its unix socket). */
static inline void fx_config(relock_config_t *cfg, const relock_test_redis_t *r, int use_unix) {
  relock_config_init(cfg);
  if (use_unix) {
    cfg->unix_path = relock_test_redis_unix_path(r);
  } else {
    cfg->host = relock_test_redis_host(r);
    cfg->port = relock_test_redis_port(r);
  }
  cfg->command_timeout_ms = fx_slack_ms(1000);
  cfg->connect_timeout_ms = fx_slack_ms(1000);
  cfg->reconnect_min_ms = 10;
  cfg->reconnect_max_ms = 200;
}

static inline relock_client_t *fx_client(const relock_config_t *cfg) {
  relock_error_t err;
  relock_client_t *c = relock_client_new(NULL, cfg, &err);
  if (c == NULL)
    fail_msg("relock_client_new: %s (%s)", err.message, relock_err_name(err.code));
  return c;
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

/* Runs the loop until cond(arg) holds or timeout_ms passes; returns whether
 * it holds. A 1 ms timer keeps the loop turning so that conditions on the
 * outside world (another process, the server) are seen too. */
static inline void fx_tick_(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)w;
  (void)revents;
}

static inline int fx_run_until(struct ev_loop *loop, int (*cond)(void *arg), void *arg, int64_t timeout_ms) {
  ev_timer tick;
  ev_timer_init(&tick, fx_tick_, 0.001, 0.001);
  ev_timer_start(loop, &tick);
  uint64_t deadline = relock__now_ns() + (uint64_t)fx_slack_ms(timeout_ms) * 1000000u;
  int ok;
  while (!(ok = cond(arg)) && relock__now_ns() < deadline)
    ev_run(loop, EVRUN_ONCE);
  ev_timer_stop(loop, &tick);
  return ok;
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
  relock_future_t *f = relock_client_subscribe(c, channel, strlen(channel), fx_on_keyevent_, ev, &sub);
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

#endif /* RELOCK_TEST_CLIENT_FIXTURE_H */
