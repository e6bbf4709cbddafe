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
#include "redis/call.h"
#include "redis/router.h"

/* -- closing ----------------------------------------------------------------*/

/* Threads blocked in lock() are listed in c->blocked by nodes on their own
 * stacks; the close has completed their futures, but they may wake (and
 * unlink their node) only after c is gone. Unlinked here, under the mutex,
 * each node's unlink touches nothing but itself. */
static void detach_blocked(relock_client_t *c) {
  while (!relock__list_empty(&c->blocked))
    relock__list_remove(c->blocked.next);
}

relock_client_t *relock__client_ref(relock_client_t *c) {
  __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
  return c;
}

/* What relock_client_free left for the objects still reading it: the
 * settings (a lock's field names the client id) and the exec (their
 * calls enter it, to be refused). */
void relock__client_unref(relock_client_t *c) {
  if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) > 0)
    return;
  relock__settings_cleanup(&c->settings);
  relock__exec_unref(c->exec); /* threaded: the loop goes with the last future */
  free(c);
}

int relock__client_enter(relock_client_t *c, relock_future_t **refused) {
  if (relock__future_enter(c->exec, refused) != 0)
    return -1;
  if (!c->closing)
    return 0;
  *refused = relock__future_failed(c->exec, RELOCK_ECLOSED, RELOCK__CLOSED_MSG);
  relock__exec_leave(c->exec);
  return -1;
}

int relock__client_enter_code(relock_client_t *c) {
  relock_error_t err;
  int r = relock__exec_enter(c->exec, &err);
  if (r != 0)
    return relock__last_error_set(r, err.message);
  if (!c->closing)
    return 0;
  relock__exec_leave(c->exec);
  return relock__last_error_set(RELOCK_ECLOSED, RELOCK__CLOSED_MSG);
}

/* Everything but what the objects still read (relock__client_unref), and
 * the handle's reference. Threaded, the caller holds the mutex (or the
 * loop thread is joined and no thread is listed in c->blocked any more). */
static void client_destroy(relock_client_t *c) {
  detach_blocked(c);
  if (!c->loop_gone) { /* else the loop is freed, and nothing of c's was left on it */
    ev_timer_stop(c->loop, &c->close_notify);
    ev_timer_stop(c->loop, &c->close_later);
    if (!c->exec->threaded)
      ev_cleanup_stop(c->loop, &c->loop_cleanup);
  }
  if (c->waitqs != NULL)
    c->waitqs_free(c->waitqs); /* no queue left: every wait completed on close */
  c->waitqs = NULL;
  relock__htab_cleanup(&c->turns);  /* empty: every request completed on close */
  relock__tls_free(c->tls); /* the connections are down */
  c->tls = NULL;
  relock__client_unref(c);
}

/* A threaded client freed from its own loop thread (from a callback): the
 * thread cannot join itself, so it ends on its own once the client is gone. */
static void destroy_from_loop_thread(relock_client_t *c) {
  relock__exec_t *x = relock__exec_ref(c->exec);
  client_destroy(c);
  relock__exec_stop_from_loop_thread(x);
  relock__exec_unref(x);
}

static void on_close_notify(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  relock_client_t *c = w->data;
  c->in_close_cb = 1; /* a relock_client_free in there is only noted */
  relock_close_cb cb = c->close_cb;
  c->close_cb = NULL; /* once: a free from a callback may run this again (free_later) */
  if (cb != NULL)
    cb(c, c->close_arg);
  c->in_close_cb = 0;
  relock__exec_broadcast(c->exec); /* a relock_client_free waiting in another thread */
  if (c->free_when_down) {
    if (c->exec->threaded)
      destroy_from_loop_thread(c);
    else
      client_destroy(c);
  }
}

/* Every request has completed and every timer of ours is stopped: the
 * wheel can go. */
static void on_redis_closed(relock__redis_t *r, void *arg) {
  (void)r;
  relock_client_t *c = arg;
  relock__wheel_close(&c->wheel);
  c->down = 1;
  ev_timer_start(c->loop, &c->close_notify);
  relock__exec_changed();
}

/* What a close tears down. */
static void close_now(relock_client_t *c) {
  if (c->settings.opt.release_on_close) { /* sent before the connections close, which wait for them */
    relock__ledger_release_all(&c->ledger);
  }
  relock__renewal_close(&c->renewal); /* no renewal outlives close */
  relock__ledger_close(&c->ledger);
  relock__call_hurry(&c->redis);       /* give-backs waiting to retry: now, within the close */
  relock__redis_close(&c->redis);
}

static void on_close_later(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  close_now(w->data);
}

static int client_close(relock_client_t *c, relock_close_cb cb, void *arg) {
  if (c->closing)
    return RELOCK_ECLOSED;
  c->closing = 1; /* from now on calls are refused (RELOCK_ECLOSED) */
  c->close_cb = cb;
  c->close_arg = arg;
  /* From inside an event or a message, whose caller goes on with the hold,
   * the acquisition or the subscriber connection the teardown would free
   * (a close from the RELEASE event freed the hold being released under
   * release_done; from WAIT_END, the acquisition ending), the teardown
   * waits for the loop: the close callback runs after it all the same. */
  if (c->in_callback > 0 || c->stats.emitting > 0) {
    ev_timer_start(c->loop, &c->close_later);
    relock__exec_changed();
    return 0;
  }
  close_now(c);
  return 0;
}

int relock_client_close(relock_client_t *c, relock_close_cb cb, void *arg) {
  if (c == NULL)
    return RELOCK_EINVAL;
  int r = relock__exec_enter(c->exec, NULL);
  if (r != 0)
    return r;
  r = client_close(c, cb, arg);
  relock__exec_leave(c->exec);
  return r;
}

/* Down, and the close callback has run. */
static int finished(const relock_client_t *c) {
  return c->down && !ev_is_active(&c->close_notify) && !c->in_close_cb;
}

/* The caller destroys an embedded client's loop before freeing the client
 * (issue 46: relock_client_free then stopped its watchers on the freed
 * loop, SIGSEGV). libev calls this first, with the loop still working (a
 * cleanup callback may use it), so the close is done now: what is pending
 * fails with RELOCK_ECLOSED, the connections go, the close callback runs;
 * then nothing of the client's is on the loop, and it never touches the
 * loop again. */
static void on_loop_destroyed(struct ev_loop *loop, ev_cleanup *w, int revents) {
  (void)revents;
  relock_client_t *c = relock__client_ref(w->data); /* a free from a callback may destroy it in here */
  if (!c->closing)
    client_close(c, NULL, NULL);
  while (!finished(c) && ev_run(loop, EVRUN_ONCE))
    ;
  c->loop_gone = 1;
  relock__client_unref(c);
}

/* Threaded, from any thread but the loop's: waits for the close, stops the
 * loop thread, frees. */
static void free_threaded(relock_client_t *c) {
  relock__exec_t *x = c->exec;
  relock__exec_lock(x);
  if (!c->closing)
    client_close(c, NULL, NULL);
  ev_async_send(x->loop, &x->wake); /* the loop thread looks at the close */
  while (!finished(c))
    relock__exec_wait(x, 0);
  detach_blocked(c); /* while the mutex keeps waking threads out */
  relock__exec_unlock(x);
  if (relock__exec_stop(x)) {
    client_destroy(c);
    return;
  }
  /* Other clients keep the loop running (relock_client_new_beside): c goes
   * under the mutex, as from a callback. */
  relock__exec_ref(x);
  relock__exec_lock(x);
  client_destroy(c);
  relock__exec_unlock(x);
  relock__exec_unref(x);
}

/* Threaded, inside a future's callback on a thread that is not the loop's
 * (a callback added to a completed future runs at once on the adding
 * thread, a cancelled future's in the cancelling thread): that thread
 * holds the client's lock, maybe more than once, so it can neither wait
 * for the loop thread nor join it. The loop thread frees the client once
 * it is down (on_close_notify), as after a free from its own callbacks;
 * if it is down already, close_notify is armed again to get there. */
static void free_later(relock_client_t *c) {
  if (!c->closing)
    client_close(c, NULL, NULL);
  c->free_when_down = 1;
  if (finished(c)) {
    ev_timer_start(c->loop, &c->close_notify); /* the close callback ran: it is not called again */
    relock__exec_changed();
  }
}

void relock_client_free(relock_client_t *c) {
  if (c == NULL)
    return;
  /* From a thread that may not touch the client, or in a forked child,
   * nothing can be done safely: the client is left alone. */
  if (relock__exec_enter(c->exec, NULL) != 0)
    return;
  if (c->exec->threaded && !relock__exec_on_loop_thread(c->exec) && relock__in_future_callback()) {
    free_later(c);
    relock__exec_leave(c->exec); /* wakes the loop thread to do it */
    return;
  }
  if (c->exec->threaded && !relock__exec_on_loop_thread(c->exec)) {
    relock__exec_unlock(c->exec); /* free_threaded takes it again, once */
    free_threaded(c);
    return;
  }
  if (c->loop_gone) { /* its loop destroyed: closed then (on_loop_destroyed), nothing left to wait for */
    relock__exec_t *x = relock__exec_ref(c->exec);
    client_destroy(c);
    relock__exec_leave(x);
    relock__exec_unref(x);
    return;
  }
  if (!c->closing)
    client_close(c, NULL, NULL);
  /* The close callback (if any) is owed first. Block for it only where
   * blocking is allowed; elsewhere the client frees itself once down. */
  if (!c->exec->threaded && !relock__future_would_block(c->exec)) {
    while (!c->down || ev_is_active(&c->close_notify)) {
      if (!ev_run(c->loop, EVRUN_ONCE))
        break;
    }
  }
  if (finished(c)) {
    relock__exec_t *x = relock__exec_ref(c->exec);
    if (x->threaded)
      destroy_from_loop_thread(c);
    else
      client_destroy(c);
    relock__exec_leave(x);
    relock__exec_unref(x);
    return;
  }
  c->free_when_down = 1;
  relock__exec_leave(c->exec);
}

/* -- creation ---------------------------------------------------------------*/

static uint64_t seed(void) {
  uint64_t s = 0;
  if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s)
    s = relock__now_ns() ^ ((uint64_t)getpid() << 32);
  return s != 0 ? s : 0x9e3779b97f4a7c15ull; /* xorshift must not start at 0 */
}

/* Sets up everything on c->exec (its mutex held, threaded). */
static int client_init(relock_client_t *c) {
  c->loop = c->exec->loop;
  c->rng = seed();
  relock__list_init(&c->blocked);
  ev_timer_init(&c->close_notify, on_close_notify, 0.0, 0.0);
  c->close_notify.data = c;
  ev_timer_init(&c->close_later, on_close_later, 0.0, 0.0);
  c->close_later.data = c;
  ev_cleanup_init(&c->loop_cleanup, on_loop_destroyed);
  c->loop_cleanup.data = c;
  relock__stats_init(&c->stats, c, c->settings.opt.statistics);
  c->settings.stats = &c->stats;
  int r = relock__wheel_init(&c->wheel, c->loop, RELOCK__WHEEL_DEFAULT_TICK_MS, RELOCK__WHEEL_DEFAULT_SLOTS);
  if (r != 0)
    return r;
  if (relock__htab_init(&c->turns, 16) != 0) {
    r = RELOCK_ENOMEM;
    goto fail_turns;
  }
  if ((r = relock__ledger_init(&c->ledger, &c->redis, &c->wheel, c->settings.opt.watchdog_timeout_ms)) != 0)
    goto fail_ledger;
  relock__renewal_init(&c->renewal, &c->redis, &c->wheel, &c->ledger);
  if ((r = relock__redis_init(&c->redis, c->exec, &c->wheel, &c->settings, c->tls, &c->rng, on_redis_closed,
                              c)) != 0)
    goto fail_redis;
  if (!c->exec->threaded) /* a threaded client's loop is its own */
    ev_cleanup_start(c->loop, &c->loop_cleanup);
  return 0;

fail_redis:
  relock__renewal_close(&c->renewal);
  relock__ledger_close(&c->ledger);
fail_ledger:
  relock__htab_cleanup(&c->turns);
fail_turns:
  relock__wheel_close(&c->wheel);
  return r;
}

/* A client on loop (embedded), on share's loop thread (threaded, beside
 * another client), or on a loop thread of its own (both NULL). */
static relock_client_t *client_new(struct ev_loop *loop, relock__exec_t *share, const relock_options_t *opts,
                                   relock_error_t *err) {
  relock_client_t *c = calloc(1, sizeof(*c));
  if (c == NULL) {
    relock__error_set(err, RELOCK_ENOMEM, "out of memory creating a client");
    return NULL;
  }
  c->refs = 1; /* the handle's */
  if (relock__settings_init(&c->settings, opts, err) != 0) {
    free(c);
    return NULL;
  }
  /* Loaded now: a CA or key file that cannot be read fails the creation. */
  if (relock__tls_new(&c->settings, &c->tls, err) != 0) {
    relock__settings_cleanup(&c->settings);
    free(c);
    return NULL;
  }
  if (share != NULL) {
    c->exec = relock__exec_ref(share);
    relock__exec_attach(share);
  } else if (loop != NULL) {
    c->exec = relock__exec_embedded(loop);
  } else {
    c->exec = relock__exec_threaded(err);
  }
  if (c->exec == NULL) {
    if (loop != NULL)
      relock__error_set(err, RELOCK_ENOMEM, "out of memory creating a client");
    relock__tls_free(c->tls);
    relock__settings_cleanup(&c->settings);
    free(c);
    return NULL;
  }
  relock__exec_lock(c->exec); /* threaded: the loop thread is running already */
  int r = client_init(c);
  relock__exec_unlock(c->exec);
  if (r != 0) {
    relock__exec_stop(c->exec);
    relock__exec_unref(c->exec);
    relock__tls_free(c->tls);
    relock__settings_cleanup(&c->settings);
    free(c);
    relock__error_set(err, r, "out of memory creating a client");
    return NULL;
  }
  if (c->exec->threaded) /* the connection started above: let the loop see its watchers */
    ev_async_send(c->loop, &c->exec->wake);
  relock__error_set(err, 0, NULL);
  return c;
}

relock_client_t *relock_client_new(struct ev_loop *loop, const relock_options_t *opts, relock_error_t *err) {
  return client_new(loop, NULL, opts, err);
}

relock_client_t *relock_client_new_beside(relock_client_t *peer, const relock_options_t *opts, relock_error_t *err) {
  if (peer == NULL) {
    relock__error_set(err, RELOCK_EINVAL, "peer is NULL");
    return NULL;
  }
  int r = relock__exec_enter(peer->exec, err);
  if (r != 0)
    return NULL;
  int closing = peer->closing;
  relock__exec_leave(peer->exec);
  if (closing) {
    relock__error_set(err, RELOCK_ECLOSED, "peer is closed: its loop thread is going away");
    return NULL;
  }
  if (!peer->exec->threaded) /* an embedded peer's loop: the same as relock_client_new on it */
    return client_new(peer->loop, NULL, opts, err);
  return client_new(NULL, peer->exec, opts, err);
}

struct ev_loop *relock_client_loop(const relock_client_t *c) { return c != NULL ? c->loop : NULL; }

const char *relock_client_id(const relock_client_t *c) { return c != NULL ? c->settings.client_id : NULL; }

size_t relock_client_unreturned(const relock_client_t *c) {
  if (c == NULL)
    return 0;
  return __atomic_load_n(&c->give_backs_owed, __ATOMIC_RELAXED) +
         __atomic_load_n(&c->give_backs_failed, __ATOMIC_RELAXED);
}

int relock_client_released(const relock_client_t *c, size_t *released, size_t *not_released) {
  if (c == NULL)
    return RELOCK_EINVAL;
  if (!__atomic_load_n(&c->down, __ATOMIC_ACQUIRE))
    return RELOCK_EPENDING; /* the close's releases may still be unanswered */
  if (released != NULL)
    *released = c->ledger.close_released;
  if (not_released != NULL)
    *not_released = c->ledger.close_unreleased;
  return 0;
}

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

/* The failed future of a command's argv that is not one, else NULL. */
static relock_future_t *argv_refused(relock_client_t *c, int argc, const char *const *argv, const size_t *argvlen) {
  if (argc <= 0)
    return relock__future_failed(c->exec, RELOCK_EINVAL, "argc must be > 0 (got %d)", argc);
  if (argv == NULL)
    return relock__future_failed(c->exec, RELOCK_EINVAL, "argv is NULL");
  for (int i = 0; i < argc; i++)
    if (argv[i] == NULL && (argvlen == NULL || argvlen[i] > 0))
      return relock__future_failed(c->exec, RELOCK_EINVAL, "argv[%d] is NULL", i);
  return NULL;
}

/* argv's lengths: argvlen, or strlen of each (NUL-terminated strings) in
 * small when argc fits, else in an array *owned the caller frees (NULL:
 * nothing to free); NULL out of memory. */
static const size_t *argv_lens(int argc, const char *const *argv, const size_t *argvlen, size_t small[16],
                               size_t **owned) {
  *owned = NULL;
  if (argvlen != NULL)
    return argvlen;
  size_t *lens = argc > 16 ? (*owned = malloc((size_t)argc * sizeof(*lens))) : small;
  for (int i = 0; lens != NULL && i < argc; i++)
    lens[i] = strlen(argv[i]);
  return lens;
}

static relock_future_t *command_async(relock_client_t *c, int argc, const char *const *argv,
                                     const size_t *argvlen) {
  relock_future_t *f = argv_refused(c, argc, argv, argvlen);
  if (f != NULL)
    return f;
  size_t small[16], *owned;
  const size_t *use = argv_lens(argc, argv, argvlen, small, &owned);
  if (use == NULL)
    return NULL;
  if (relock__route_redirects(&c->redis)) {
    /* Through a call, which follows MOVED and ASK (not retried otherwise:
     * the command may not be safe to repeat). */
    relock__call_spec_t spec = {.argc = argc, .argv = argv, .lens = use};
    f = relock__call(&c->redis, &spec);
    free(owned);
    return f;
  }
  f = relock__future_new(c->exec);
  relock__request_t *req = NULL;
  if (f != NULL)
    req = relock__request_argv(relock_future_retain(f), argc, argv, use);
  const char *key = argc > 1 ? argv[1] : NULL;
  size_t keylen = argc > 1 ? use[1] : 0;
  free(owned);
  if (f == NULL)
    return NULL;
  return send_request(c, f, req, key, keylen);
}

relock_future_t *relock_client_command_async(relock_client_t *c, int argc, const char *const *argv,
                                             const size_t *argvlen) {
  if (c == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "client is NULL");
  relock_future_t *f;
  if (relock__future_enter(c->exec, &f) != 0)
    return f;
  f = command_async(c, argc, argv, argvlen);
  relock__exec_leave(c->exec);
  return f;
}

relock_future_t *relock_client_masters_async(relock_client_t *c) {
  if (c == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "client is NULL");
  relock_future_t *f;
  if (relock__client_enter(c, &f) != 0)
    return f;
  f = relock__route_masters(&c->redis);
  relock__exec_leave(c->exec);
  return f;
}

/* To one node, as it is: no call, so no redirection followed (the command
 * is for that node) and never sent twice. */
static relock_future_t *command_at(relock_client_t *c, const char *address, int argc, const char *const *argv,
                                   const size_t *argvlen) {
  if (address == NULL)
    return relock__future_failed(c->exec, RELOCK_EINVAL, "address is NULL");
  relock_future_t *f = argv_refused(c, argc, argv, argvlen);
  if (f != NULL)
    return f;
  relock__conn_t *conn = relock__route_node(&c->redis, address);
  if (conn == NULL)
    return relock__future_failed(c->exec, RELOCK_EINVAL, "%.300s is not a node this client knows "
                                 "(relock_client_masters_async lists them)", address);
  size_t small[16], *owned;
  const size_t *use = argv_lens(argc, argv, argvlen, small, &owned);
  if (use == NULL)
    return NULL;
  f = relock__future_new(c->exec);
  relock__request_t *req = NULL;
  if (f != NULL)
    req = relock__request_argv(relock_future_retain(f), argc, argv, use);
  free(owned);
  if (f == NULL)
    return NULL;
  if (req == NULL) {
    relock_future_release(f); /* the request's reference */
    relock_future_release(f);
    return NULL;
  }
  relock__conn_send(conn, req, c->settings.opt.command_timeout_ms);
  return f;
}

relock_future_t *relock_client_command_at_async(relock_client_t *c, const char *address, int argc,
                                                const char *const *argv, const size_t *argvlen) {
  if (c == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "client is NULL");
  relock_future_t *f;
  if (relock__client_enter(c, &f) != 0)
    return f;
  f = command_at(c, address, argc, argv, argvlen);
  relock__exec_leave(c->exec);
  return f;
}

static relock_future_t *commandf_async(relock_client_t *c, const char *format, va_list ap) {
  if (format == NULL)
    return relock__future_failed(c->exec, RELOCK_EINVAL, "format is NULL");
  relock_future_t *f = relock__future_new(c->exec);
  if (f == NULL)
    return NULL;
  const char *invalid;
  relock__request_t *req = relock__request_vformat(relock_future_retain(f), format, ap, &invalid);
  if (req == NULL && invalid != NULL) {
    relock_future_release(f); /* the request's reference */
    relock__future_fail(f, RELOCK_EINVAL, "%s: \"%.40s\"", invalid, format);
    return f;
  }
  return send_request(c, f, req, NULL, 0);
}

relock_future_t *relock_client_commandf_async(relock_client_t *c, const char *format, ...) {
  if (c == NULL)
    return relock__future_failed(NULL, RELOCK_EINVAL, "client is NULL");
  relock_future_t *f;
  if (relock__future_enter(c->exec, &f) != 0)
    return f;
  va_list ap;
  va_start(ap, format);
  f = commandf_async(c, format, ap);
  va_end(ap);
  relock__exec_leave(c->exec);
  return f;
}

/* -- pub/sub ----------------------------------------------------------------*/

struct relock_subscription {
  relock__listener_t listener;
  relock_client_t *client;  /* no reference: messages come only while its connections are up */
  relock__exec_t *exec;     /* a reference: the subscription may outlive the client */
  relock_message_cb cb;
  void *arg;
};

static void on_message(relock__listener_t *l, const char *payload, size_t len, void *arg) {
  (void)l;
  relock_subscription_t *sub = arg;
  relock_client_t *c = sub->client; /* the callback may free sub, and close or free c (then put off: client_close) */
  c->in_callback++;
  sub->cb(sub, payload, len, sub->arg);
  c->in_callback--;
}

static relock_future_t *subscribe(relock_client_t *c, const char *channel, size_t len, relock_message_cb cb,
                                  void *arg, relock_subscription_t **out) {
  relock_subscription_t *sub = calloc(1, sizeof(*sub));
  if (sub == NULL)
    return NULL;
  sub->cb = cb;
  sub->arg = arg;
  sub->client = c;
  relock_future_t *f = relock__pubsub_subscribe(&c->redis.pubsub, &sub->listener, channel, len, 0, on_message, sub);
  if (f == NULL) {
    free(sub);
    return NULL;
  }
  sub->exec = relock__exec_ref(c->exec);
  *out = sub;
  return f;
}

relock_future_t *relock_client_subscribe_async(relock_client_t *c, const char *channel, size_t len, relock_message_cb cb,
                                               void *arg, relock_subscription_t **out) {
  if (out != NULL)
    *out = NULL;
  if (c == NULL || channel == NULL || cb == NULL || out == NULL)
    return relock__future_failed(c != NULL ? c->exec : NULL, RELOCK_EINVAL, "%s is NULL",
                                 c == NULL ? "client" : channel == NULL ? "channel" : cb == NULL ? "cb" : "sub");
  relock_future_t *f;
  if (relock__future_enter(c->exec, &f) != 0)
    return f;
  f = subscribe(c, channel, len, cb, arg, out);
  relock__exec_leave(c->exec);
  return f;
}

void relock_subscription_free(relock_subscription_t *sub) {
  if (sub == NULL)
    return;
  relock__exec_t *x = sub->exec;
  if (relock__exec_enter(x, NULL) != 0)
    return; /* the wrong thread, or a forked child: nothing safe to do */
  relock__pubsub_unsubscribe(&sub->listener);
  free(sub);
  relock__exec_leave(x);
  relock__exec_unref(x);
}
