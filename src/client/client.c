/* The client: owns the settings, the wheel and the connections; the generic
 * command and pub/sub API; closing. */
#include <config.h>

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <relock/error.h>

#include "client/client_impl.h"
#include "base/clock.h"
#include "base/error.h"
#include "future/promise.h"
#include "redis/router.h"

/* -- closing ----------------------------------------------------------------*/

static void client_destroy(relock_client_t *c) {
  ev_timer_stop(c->loop, &c->close_notify);
  relock__htab_cleanup(&c->waitqs); /* empty: every wait completed on close */
  relock__settings_cleanup(&c->settings);
  if (c->own_loop)
    ev_loop_destroy(c->loop);
  free(c);
}

static void on_close_notify(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  relock_client_t *c = w->data;
  c->in_close_cb = 1; /* a relock_client_free in there is only noted */
  if (c->close_cb != NULL)
    c->close_cb(c, c->close_arg);
  c->in_close_cb = 0;
  if (c->free_when_down)
    client_destroy(c);
}

/* Every request has completed and every timer of ours is stopped: the
 * wheel can go. */
static void on_redis_closed(relock__redis_t *r, void *arg) {
  (void)r;
  relock_client_t *c = arg;
  relock__wheel_close(&c->wheel);
  c->down = 1;
  ev_timer_start(c->loop, &c->close_notify);
}

int relock_client_close(relock_client_t *c, relock_close_cb cb, void *arg) {
  if (c == NULL)
    return RELOCK_EINVAL;
  if (c->closing)
    return RELOCK_ECLOSED;
  c->closing = 1;
  c->close_cb = cb;
  c->close_arg = arg;
  relock__renewal_close(&c->renewal); /* no renewal outlives close */
  relock__redis_close(&c->redis);
  return 0;
}

void relock_client_free(relock_client_t *c) {
  if (c == NULL)
    return;
  if (!c->closing)
    relock_client_close(c, NULL, NULL);
  /* The close callback (if any) is owed first. Block for it only where
   * blocking is allowed; elsewhere the client frees itself once down. */
  if (!relock__future_would_block(c->loop)) {
    while (!c->down || ev_is_active(&c->close_notify)) {
      if (!ev_run(c->loop, EVRUN_ONCE))
        break;
    }
  }
  if (c->down && !ev_is_active(&c->close_notify) && !c->in_close_cb)
    client_destroy(c);
  else
    c->free_when_down = 1;
}

/* -- creation ---------------------------------------------------------------*/

static uint64_t seed(void) {
  uint64_t s = 0;
  if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s)
    s = relock__now_ns() ^ ((uint64_t)getpid() << 32);
  return s != 0 ? s : 0x9e3779b97f4a7c15ull; /* xorshift must not start at 0 */
}

relock_client_t *relock_client_new(struct ev_loop *loop, const relock_options_t *opts, relock_error_t *err) {
  relock_client_t *c = calloc(1, sizeof(*c));
  if (c == NULL) {
    relock__error_set(err, RELOCK_ENOMEM, "out of memory creating a client");
    return NULL;
  }
  if (relock__settings_init(&c->settings, opts, err) != 0) {
    free(c);
    return NULL;
  }
  c->loop = loop;
  if (loop == NULL) {
    c->loop = ev_loop_new(EVFLAG_AUTO);
    c->own_loop = 1;
    if (c->loop == NULL) {
      relock__settings_cleanup(&c->settings);
      free(c);
      relock__error_set(err, RELOCK_EIO, "cannot create an event loop");
      return NULL;
    }
  }
  c->rng = seed();
  ev_timer_init(&c->close_notify, on_close_notify, 0.0, 0.0);
  c->close_notify.data = c;
  int r = relock__wheel_init(&c->wheel, c->loop, RELOCK__WHEEL_DEFAULT_TICK_MS, RELOCK__WHEEL_DEFAULT_SLOTS);
  if (r != 0)
    goto fail_wheel;
  if (relock__htab_init(&c->waitqs, 64) != 0) {
    r = RELOCK_ENOMEM;
    goto fail_waitqs;
  }
  if ((r = relock__renewal_init(&c->renewal, &c->redis, &c->wheel, c->settings.opt.watchdog_timeout_ms)) != 0)
    goto fail_renewal;
  if ((r = relock__redis_init(&c->redis, c->loop, &c->wheel, &c->settings, &c->rng, on_redis_closed, c)) != 0)
    goto fail_redis;
  relock__error_set(err, 0, NULL);
  return c;

fail_redis:
  relock__renewal_close(&c->renewal);
fail_renewal:
  relock__htab_cleanup(&c->waitqs);
fail_waitqs:
  relock__wheel_close(&c->wheel);
fail_wheel:
  if (c->own_loop)
    ev_loop_destroy(c->loop);
  relock__settings_cleanup(&c->settings);
  free(c);
  relock__error_set(err, r, "out of memory creating a client");
  return NULL;
}

struct ev_loop *relock_client_loop(const relock_client_t *c) { return c != NULL ? c->loop : NULL; }

const char *relock_client_id(const relock_client_t *c) { return c != NULL ? c->settings.client_id : NULL; }

/* -- commands ---------------------------------------------------------------*/

/* Sends a formatted request, or fails its future if the client is closing. */
static relock_future_t *send_request(relock_client_t *c, relock_future_t *f, relock__request_t *req,
                                     const char *key, size_t keylen) {
  if (req == NULL) {
    relock_future_release(f); /* the request's reference */
    relock_future_release(f);
    return NULL;
  }
  relock__conn_send(relock__route(&c->redis, key, keylen), req, c->settings.opt.command_timeout_ms);
  return f;
}

relock_future_t *relock_client_command_async(relock_client_t *c, int argc, const char *const *argv,
                                             const size_t *argvlen) {
  if (c == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "client is NULL");
  if (argc <= 0)
    return relock__future_failed(c->loop, RELOCK_EINVAL, "argc must be > 0 (got %d)", argc);
  if (argv == NULL)
    return relock__future_failed(c->loop, RELOCK_EINVAL, "argv is NULL");
  for (int i = 0; i < argc; i++)
    if (argv[i] == NULL && (argvlen == NULL || argvlen[i] > 0))
      return relock__future_failed(c->loop, RELOCK_EINVAL, "argv[%d] is NULL", i);
  size_t small[16];
  size_t *lens = small;
  if (argvlen == NULL) {
    if (argc > 16 && (lens = malloc((size_t)argc * sizeof(*lens))) == NULL)
      return NULL;
    for (int i = 0; i < argc; i++)
      lens[i] = strlen(argv[i]);
  }
  const size_t *use = argvlen != NULL ? argvlen : lens;
  relock_future_t *f = relock__future_new(c->loop);
  relock__request_t *req = NULL;
  if (f != NULL)
    req = relock__request_argv(relock_future_retain(f), argc, argv, use);
  const char *key = argc > 1 ? argv[1] : NULL;
  size_t keylen = argc > 1 ? use[1] : 0;
  if (lens != small)
    free(lens);
  if (f == NULL)
    return NULL;
  return send_request(c, f, req, key, keylen);
}

relock_future_t *relock_client_commandf_async(relock_client_t *c, const char *format, ...) {
  if (c == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "client is NULL");
  if (format == NULL)
    return relock__future_failed(c->loop, RELOCK_EINVAL, "format is NULL");
  relock_future_t *f = relock__future_new(c->loop);
  if (f == NULL)
    return NULL;
  const char *invalid;
  va_list ap;
  va_start(ap, format);
  relock__request_t *req = relock__request_vformat(relock_future_retain(f), format, ap, &invalid);
  va_end(ap);
  if (req == NULL && invalid != NULL) {
    relock_future_release(f); /* the request's reference */
    relock__future_fail(f, RELOCK_EINVAL, "%s: \"%.40s\"", invalid, format);
    return f;
  }
  return send_request(c, f, req, NULL, 0);
}

/* -- pub/sub ----------------------------------------------------------------*/

struct relock_subscription {
  relock__listener_t listener;
  relock_message_cb cb;
  void *arg;
};

static void on_message(relock__listener_t *l, const char *payload, size_t len, void *arg) {
  (void)l;
  relock_subscription_t *sub = arg;
  sub->cb(sub, payload, len, sub->arg);
}

relock_future_t *relock_client_subscribe(relock_client_t *c, const char *channel, size_t len, relock_message_cb cb,
                                         void *arg, relock_subscription_t **out) {
  if (out != NULL)
    *out = NULL;
  if (c == NULL || channel == NULL || cb == NULL || out == NULL)
    return relock__future_failed(c != NULL ? c->loop : NULL, RELOCK_EINVAL, "%s is NULL",
                                 c == NULL ? "client" : channel == NULL ? "channel" : cb == NULL ? "cb" : "sub");
  relock_subscription_t *sub = calloc(1, sizeof(*sub));
  if (sub == NULL)
    return NULL;
  sub->cb = cb;
  sub->arg = arg;
  relock_future_t *f = relock__pubsub_subscribe(&c->redis.pubsub, &sub->listener, channel, len, 0, on_message, sub);
  if (f == NULL) {
    free(sub);
    return NULL;
  }
  *out = sub;
  return f;
}

void relock_subscription_free(relock_subscription_t *sub) {
  if (sub == NULL)
    return;
  relock__pubsub_unsubscribe(&sub->listener);
  free(sub);
}
