/* Every callback is a safe place (issue 46, section 4): from inside each
 * callback and event the library calls - a future's done callback (run on
 * the loop, at once on a completed future, by a cancel), the close
 * callback, a subscription's message, a lock's lost callback (its field
 * deleted; its watchdog lease run out), a lock's wait callback, a
 * multi-lock's and a permit semaphore's lost callbacks, and each event of
 * relock_client_on_event - each lifetime-changing entry point is called:
 * relock_client_close, relock_client_free, the free of the callback's own
 * object, relock_future_cancel, relock_future_release, a new acquisition
 * and a blocking call. Each pair, embedded and threaded, is a TAP case; it
 * must work or be refused with a clear code (a blocking call: always
 * RELOCK_EWOULDBLOCK), and never crash, hang or leak.
 *
 * Generated: sites[] x actions[] x the two modes. Each case runs in a
 * forked child of its own, which makes its client (through a proxy of its
 * own, to cut or stall the connection) on the server the parent started:
 * a crash is that case's failure alone, a hang is bounded (the parent
 * kills the child), and valgrind (exit 99) and LeakSanitizer (abort) judge
 * each child's memory at its exit. test_headers_covered fails when a public
 * header gains a callback type or an event type that sites[] lacks. */
#define _GNU_SOURCE
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <relock/relock.h>

#include "support/client_fixture.h"
#include "support/proxy.h"

#if defined(__SANITIZE_ADDRESS__)
#define MATRIX_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MATRIX_LSAN 1
#endif
#endif
#ifdef MATRIX_LSAN
#include <sanitizer/lsan_interface.h>
#endif

static relock_test_redis_t *g_redis; /* the parent's server, shared by every case */

/* -- the table ----------------------------------------------------------------*/

typedef enum action_id { A_CLOSE, A_FREE, A_OBJ_FREE, A_CANCEL, A_RELEASE, A_ACQUIRE, A_BLOCK } action_id_t;

typedef struct action {
  action_id_t id;
  const char *name;
} action_t;

static const action_t actions[] = {
    {A_CLOSE, "relock_client_close"},
    {A_FREE, "relock_client_free"},
    {A_OBJ_FREE, "free of its object"},
    {A_CANCEL, "relock_future_cancel"},
    {A_RELEASE, "relock_future_release"},
    {A_ACQUIRE, "a new acquisition"},
    {A_BLOCK, "a blocking call"},
};
#define NACTIONS (sizeof actions / sizeof actions[0])

typedef struct scene scene_t;

/* Where a callback runs: the public type it has (or, for an event, its
 * RELOCK_EVENT_ name), and what arms and triggers it. */
typedef struct site {
  const char *name;
  const char *type; /* the header's typedef, or the event's name */
  void (*arm)(scene_t *s);
  int event; /* RELOCK_EVENT_*, for an event site; -1 else */
} site_t;

struct scene {
  const site_t *site;
  const action_t *action;
  int threaded;
  int fd; /* the pipe to the parent: the failure's message */
  relock_test_proxy_t *proxy;
  relock_options_t *opts;
  relock_client_t *c;
  relock_lock_t *busy;  /* held by owner 1: what pending waits for */
  relock_lock_t *t;     /* the site's lock (its object) */
  relock_lock_t *o;     /* what a new acquisition / blocking call takes */
  relock_multi_lock_t *multi;
  relock_permit_semaphore_t *ps;
  relock_subscription_t *sub;
  relock_future_t *pending; /* a waiter on busy (owner 2): what the cancel cancels */
  relock_future_t *own;     /* the site's future (future sites), the scene's reference */
  relock_future_t *trigger; /* what triggered the site, the scene's reference */
  relock_future_t *acquired; /* the new acquisition's */
  relock_future_t *aux;      /* another future of the trigger's */
  char busy_name[64], t_name[64], o_name[64];
  int ran, returned; /* atomic */
  int rc;
  int freed_client;
  int stalled;
  int threads_before;
  pthread_t main;
  int on_main;
};

/* -- the child's helpers -------------------------------------------------------*/

static void die(scene_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(scene_t *s, const char *fmt, ...) {
  char buf[600];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof buf - 1)
    n = (int)sizeof buf - 1;
  if (write(s->fd, buf, (size_t)n) < 0) {
    /* the parent reports the exit code alone */
  }
  _exit(1);
}

#define CHECK(s, cond, ...)                                                                                          \
  do {                                                                                                               \
    if (!(cond))                                                                                                     \
      die((s), __VA_ARGS__);                                                                                         \
  } while (0)

static int flag(void *arg) { return __atomic_load_n((int *)arg, __ATOMIC_SEQ_CST); }

/* Waits (running the loop, embedded) until *what is set. */
static int await_flag(scene_t *s, int *what, int64_t ms) {
  if (!s->threaded)
    return fx_run_until(fx_loop(), flag, what, ms);
  uint64_t deadline = relock__now_ns() + (uint64_t)fx_slack_ms(ms) * 1000000u;
  while (!flag(what) && relock__now_ns() < deadline)
    usleep(500);
  return flag(what);
}

/* A future that must succeed: its value, released. */
static int64_t must(scene_t *s, relock_future_t *f, const char *what) {
  CHECK(s, f != NULL, "%s: NULL future", what);
  int r = relock_future_wait(f, fx_slack_ms(5000));
  CHECK(s, r == 0, "setup: %s: %s (%s)", what, relock_err_name(r), relock_future_message(f));
  int64_t v = relock_future_value_type(f) == RELOCK_VALUE_BOOL ? relock_future_bool(f) : relock_future_int(f);
  relock_future_release(f);
  return v;
}

static void raw(scene_t *s, const char *a0, const char *a1, const char *a2) {
  char buf[256];
  const char *argv[3] = {a0, a1, a2};
  int rc = relock_test_redis_cmdv(g_redis, buf, sizeof buf, a2 != NULL ? 3 : 2, argv, NULL);
  CHECK(s, rc == 0 && buf[0] != '-', "raw %s %s: rc %d, %.80s", a0, a1, rc, buf);
}

static int threads_now(void) {
  DIR *d = opendir("/proc/self/task");
  if (d == NULL)
    return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static void tick_(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)w;
  (void)revents;
}

/* Embedded: runs the loop until no watcher of the library's is left on it
 * (or ms passes); whether none is. */
static int loop_quiesces(int64_t ms) {
  struct ev_loop *loop = fx_loop();
  ev_timer tick;
  ev_timer_init(&tick, tick_, 0.001, 0.001);
  ev_timer_start(loop, &tick);
  ev_unref(loop); /* the tick keeps nothing alive: ev_run says 0 once the library's watchers are gone */
  uint64_t deadline = relock__now_ns() + (uint64_t)fx_slack_ms(ms) * 1000000u;
  int active = 1;
  while (active && relock__now_ns() < deadline)
    active = ev_run(loop, EVRUN_ONCE);
  ev_ref(loop);
  ev_timer_stop(loop, &tick);
  return !active;
}

/* -- what a callback does: the action -----------------------------------------*/

static void free_object(scene_t *s) {
  if (s->sub != NULL) {
    relock_subscription_t *sub = s->sub;
    s->sub = NULL;
    relock_subscription_free(sub);
  } else if (s->multi != NULL) {
    relock_multi_lock_t *m = s->multi;
    s->multi = NULL;
    relock_multi_lock_free(m);
  } else if (s->ps != NULL) {
    relock_permit_semaphore_t *ps = s->ps;
    s->ps = NULL;
    relock_permit_semaphore_free(ps);
  } else {
    relock_lock_t *t = s->t;
    s->t = NULL;
    relock_lock_free(t);
  }
}

static void act(scene_t *s) {
  if (__atomic_exchange_n(&s->ran, 1, __ATOMIC_SEQ_CST))
    return; /* once: a callback that comes again does nothing */
  s->on_main = pthread_equal(pthread_self(), s->main);
  switch (s->action->id) {
  case A_CLOSE:
    s->rc = relock_client_close(s->c, NULL, NULL);
    break;
  case A_FREE:
    s->freed_client = 1;
    relock_client_free(s->c);
    break;
  case A_OBJ_FREE:
    free_object(s);
    break;
  case A_CANCEL:
    s->rc = relock_future_cancel(s->pending);
    break;
  case A_RELEASE:
    if (s->own != NULL) { /* the future whose callback this is: the scene's reference */
      relock_future_t *f = s->own;
      s->own = NULL;
      relock_future_release(f);
    } else {
      relock_future_t *f = s->pending;
      s->pending = NULL;
      relock_future_release(f);
    }
    break;
  case A_ACQUIRE:
    s->acquired = relock_lock_lock_async(s->o, 77, 0, RELOCK_INFINITE);
    break;
  case A_BLOCK: {
    int got = -1;
    s->rc = relock_lock_try_lock(s->o, 0, RELOCK_INFINITE, &got);
    break;
  }
  }
  __atomic_store_n(&s->returned, 1, __ATOMIC_SEQ_CST);
}

/* -- the callbacks ------------------------------------------------------------*/

static void on_future(relock_future_t *f, void *arg) {
  (void)f;
  act(arg);
}
static void on_close(relock_client_t *c, void *arg) {
  (void)c;
  act(arg);
}
static void on_message(relock_subscription_t *sub, const char *payload, size_t len, void *arg) {
  (void)sub;
  if (payload != NULL && len > 0) /* not a restore after a reconnect */
    act(arg);
}
static void on_lost(relock_lock_t *l, uint64_t owner, int reason, const char *msg, void *arg) {
  (void)l;
  (void)owner;
  (void)reason;
  (void)msg;
  act(arg);
}
static void on_wait(relock_lock_t *l, uint64_t owner, int64_t ttl, void *arg) {
  (void)l;
  (void)owner;
  (void)ttl;
  act(arg);
}
static void on_multi_lost(relock_multi_lock_t *m, uint64_t owner, int reason, const char *msg, void *arg) {
  (void)m;
  (void)owner;
  (void)reason;
  (void)msg;
  act(arg);
}
static void on_permit_lost(relock_permit_semaphore_t *ps, const char *id, int reason, const char *msg, void *arg) {
  (void)ps;
  (void)id;
  (void)reason;
  (void)msg;
  act(arg);
}
static void on_event(relock_client_t *c, const relock_event_t *ev, void *arg) {
  (void)c;
  scene_t *s = arg;
  if ((int)ev->type != s->site->event)
    return;
  if (ev->type != RELOCK_EVENT_RECONNECT && ev->type != RELOCK_EVENT_FAILOVER &&
      (ev->name == NULL || ev->name_len != strlen(s->t_name) || memcmp(ev->name, s->t_name, ev->name_len) != 0))
    return; /* the scene's own setup: busy's waiter */
  act(s);
}

/* -- the sites: each arms its callback and triggers it ------------------------*/

static void hold_t(scene_t *s) { CHECK(s, must(s, relock_lock_lock_async(s->t, 1, 0, RELOCK_INFINITE), "t") == 1, "t not acquired"); }

static void arm_future_loop(scene_t *s) {
  s->own = relock_lock_lock_async(s->t, 1, 0, RELOCK_INFINITE);
  CHECK(s, relock_future_on_done(s->own, on_future, s) == 0, "relock_future_on_done failed");
}
static void arm_future_at_once(scene_t *s) {
  s->own = relock_lock_lock_async(s->t, 1, 0, RELOCK_INFINITE);
  CHECK(s, relock_future_wait(s->own, fx_slack_ms(5000)) == 0, "t's acquisition failed");
  CHECK(s, relock_future_on_done(s->own, on_future, s) == 0, "relock_future_on_done failed");
}
static void arm_future_cancel(scene_t *s) {
  hold_t(s);
  s->own = relock_lock_lock_async(s->t, 3, fx_slack_ms(5000), RELOCK_INFINITE);
  CHECK(s, relock_future_on_done(s->own, on_future, s) == 0, "relock_future_on_done failed");
  CHECK(s, relock_future_cancel(s->own) == 1, "the waiter was not pending");
}
static void arm_close(scene_t *s) { CHECK(s, relock_client_close(s->c, on_close, s) == 0, "close failed"); }
static void arm_message(scene_t *s) {
  char ch[80];
  snprintf(ch, sizeof ch, "%s:ch", s->t_name);
  must(s, relock_client_subscribe_async(s->c, ch, strlen(ch), on_message, s, &s->sub), "subscribe");
  raw(s, "PUBLISH", ch, "hello");
}
static void arm_lost_deleted(scene_t *s) {
  hold_t(s);
  CHECK(s, relock_lock_on_lost(s->t, on_lost, s) == 0, "on_lost");
  raw(s, "DEL", s->t_name, NULL);
}
static void stall(scene_t *s) {
  relock_test_proxy_stall(s->proxy, 1);
  s->stalled = 1;
}
static void arm_lost_lease(scene_t *s) {
  hold_t(s);
  CHECK(s, relock_lock_on_lost(s->t, on_lost, s) == 0, "on_lost");
  stall(s);
}
static void arm_wait(scene_t *s) {
  hold_t(s);
  CHECK(s, relock_lock_on_wait(s->t, on_wait, s) == 0, "on_wait");
  s->trigger = relock_lock_lock_async(s->t, 2, fx_slack_ms(5000), RELOCK_INFINITE);
}
static void arm_multi_lost(scene_t *s) {
  relock_lock_t *m1 = s->t;
  relock_error_t err;
  s->multi = relock_multi_lock_new(&m1, 1, &err);
  CHECK(s, s->multi != NULL, "relock_multi_lock_new: %s", err.message);
  s->t = NULL; /* the group's now */
  CHECK(s, must(s, relock_multi_lock_lock_async(s->multi, 1, 0, RELOCK_INFINITE), "multi") == 1, "multi not held");
  CHECK(s, relock_multi_lock_on_lost(s->multi, on_multi_lost, s) == 0, "multi on_lost");
  raw(s, "DEL", s->t_name, NULL);
}
static void arm_permit_lost(scene_t *s) {
  relock_error_t err;
  s->ps = relock_permit_semaphore_new(s->c, s->t_name, &err);
  CHECK(s, s->ps != NULL, "relock_permit_semaphore_new: %s", err.message);
  relock_lock_free(s->t);
  s->t = NULL;
  must(s, relock_permit_semaphore_try_set_permits_async(s->ps, 1), "try_set_permits");
  relock_future_t *f = relock_permit_semaphore_acquire_async(s->ps, 0, RELOCK_INFINITE);
  CHECK(s, relock_future_wait(f, fx_slack_ms(5000)) == 0 && relock_future_value_type(f) == RELOCK_VALUE_STRING,
        "no permit: %s", relock_future_message(f));
  relock_future_release(f);
  CHECK(s, relock_permit_semaphore_on_lost(s->ps, on_permit_lost, s) == 0, "permit on_lost");
  char timeout[96];
  snprintf(timeout, sizeof timeout, "{%s}:timeout", s->t_name);
  raw(s, "DEL", timeout, NULL);
}
static void on_events(scene_t *s) { CHECK(s, relock_client_on_event(s->c, on_event, s) == 0, "on_event"); }
static void arm_ev_acquire(scene_t *s) { /* ACQUIRE_START (in this thread), ACQUIRE_END */
  on_events(s);
  s->trigger = relock_lock_lock_async(s->t, 1, 0, RELOCK_INFINITE);
}
static void arm_ev_wait_start(scene_t *s) {
  hold_t(s);
  on_events(s);
  s->trigger = relock_lock_lock_async(s->t, 2, fx_slack_ms(5000), RELOCK_INFINITE);
}
/* A waiter that gets the lock: owner 1's release goes after its first try
 * on the connection, so that try finds the lock held (a short wait that
 * runs out is no trigger: under valgrind it may run out before the first
 * try's answer, and a wait that never began has no end). */
static void arm_ev_wait_end(scene_t *s) {
  hold_t(s);
  on_events(s);
  s->trigger = relock_lock_lock_async(s->t, 2, fx_slack_ms(5000), RELOCK_INFINITE);
  s->aux = relock_lock_unlock_async(s->t, 1);
}
static void arm_ev_release(scene_t *s) {
  hold_t(s);
  on_events(s);
  s->trigger = relock_lock_unlock_async(s->t, 1);
}
static void arm_ev_loss_deleted(scene_t *s) {
  hold_t(s);
  on_events(s);
  raw(s, "DEL", s->t_name, NULL);
}
static void arm_ev_loss_lease(scene_t *s) {
  hold_t(s);
  on_events(s);
  stall(s);
}
/* A release that gets no answer (the proxy stalls): the hold is let go,
 * the release retried in the background, the event told. */
static void arm_ev_release_retried(scene_t *s) {
  hold_t(s);
  on_events(s);
  stall(s);
  s->trigger = relock_lock_unlock_async(s->t, 1);
}
static void arm_ev_reconnect(scene_t *s) {
  on_events(s);
  relock_test_proxy_cut(s->proxy);
}

/* Every callback type of include/relock/ and every event type of
 * relock/stats.h has a site here; test_headers_covered checks it. Not
 * triggered here: RELOCK_EVENT_FAILOVER, which needs a Sentinel or a
 * Cluster failover (test_sentinel and test_cluster see it); its site has
 * no arm and makes no case. */
static const site_t sites[] = {
    {"future callback on the loop", "relock_future_cb", arm_future_loop, -1},
    {"future callback at once (completed future)", "relock_future_cb", arm_future_at_once, -1},
    {"future callback run by a cancel", "relock_future_cb", arm_future_cancel, -1},
    {"close callback", "relock_close_cb", arm_close, -1},
    {"subscription message", "relock_message_cb", arm_message, -1},
    {"lost callback, field deleted", "relock_lost_cb", arm_lost_deleted, -1},
    {"lost callback, watchdog lease ran out", "relock_lost_cb", arm_lost_lease, -1},
    {"wait callback", "relock_wait_cb", arm_wait, -1},
    {"multi-lock lost callback", "relock_multi_lost_cb", arm_multi_lost, -1},
    {"permit lost callback", "relock_permit_lost_cb", arm_permit_lost, -1},
    {"event ACQUIRE_START", "RELOCK_EVENT_ACQUIRE_START", arm_ev_acquire, RELOCK_EVENT_ACQUIRE_START},
    {"event ACQUIRE_END", "RELOCK_EVENT_ACQUIRE_END", arm_ev_acquire, RELOCK_EVENT_ACQUIRE_END},
    {"event WAIT_START", "RELOCK_EVENT_WAIT_START", arm_ev_wait_start, RELOCK_EVENT_WAIT_START},
    {"event WAIT_END", "RELOCK_EVENT_WAIT_END", arm_ev_wait_end, RELOCK_EVENT_WAIT_END},
    {"event RELEASE", "RELOCK_EVENT_RELEASE", arm_ev_release, RELOCK_EVENT_RELEASE},
    {"event LOSS, field deleted", "RELOCK_EVENT_LOSS", arm_ev_loss_deleted, RELOCK_EVENT_LOSS},
    {"event LOSS, watchdog lease ran out", "RELOCK_EVENT_LOSS", arm_ev_loss_lease, RELOCK_EVENT_LOSS},
    {"event RELEASE_RETRIED", "RELOCK_EVENT_RELEASE_RETRIED", arm_ev_release_retried, RELOCK_EVENT_RELEASE_RETRIED},
    {"event RECONNECT", "RELOCK_EVENT_RECONNECT", arm_ev_reconnect, RELOCK_EVENT_RECONNECT},
    {"event FAILOVER", "RELOCK_EVENT_FAILOVER", NULL, RELOCK_EVENT_FAILOVER}, /* not here: see above */
    /* relock_event_cb is the type of every event above */
    {"(the events' callback)", "relock_event_cb", NULL, -1},
};
#define NSITES (sizeof sites / sizeof sites[0])

/* -- one case, in the child ---------------------------------------------------*/

static void set_opt(scene_t *s, int r, const relock_error_t *err) { CHECK(s, r == 0, "option: %s", err->message); }

static void setup(scene_t *s, int index) {
  s->main = pthread_self();
  s->proxy = relock_test_proxy_start(relock_test_redis_host(g_redis), relock_test_redis_port(g_redis));
  CHECK(s, s->proxy != NULL, "the proxy did not start");
  relock_error_t err;
  s->opts = relock_options_new(&err);
  CHECK(s, s->opts != NULL, "options");
  set_opt(s, relock_options_set_string(s->opts, RELOCK_OPT_HOST, "127.0.0.1", &err), &err);
  set_opt(s, relock_options_set_int(s->opts, RELOCK_OPT_PORT, relock_test_proxy_port(s->proxy), &err), &err);
  set_opt(s, relock_options_set_ms(s->opts, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(1000), &err), &err);
  set_opt(s, relock_options_set_ms(s->opts, RELOCK_OPT_CONNECT_TIMEOUT, fx_slack_ms(1000), &err), &err);
  set_opt(s, relock_options_set_ms(s->opts, RELOCK_OPT_RECONNECT_MIN, 10, &err), &err);
  set_opt(s, relock_options_set_ms(s->opts, RELOCK_OPT_RECONNECT_MAX, 100, &err), &err);
  /* short: a loss is found within a third of it, a lease runs out in it */
  set_opt(s, relock_options_set_ms(s->opts, RELOCK_OPT_WATCHDOG_TIMEOUT, 90 * relock_test_slowdown(), &err), &err);
  if (s->site->event == RELOCK_EVENT_RELEASE_RETRIED) /* the release fails after one command timeout */
    set_opt(s, relock_options_set_int(s->opts, RELOCK_OPT_RETRY_ATTEMPTS, 0, &err), &err);
  s->threads_before = threads_now();
  s->c = relock_client_new(s->threaded ? NULL : fx_loop(), s->opts, &err);
  CHECK(s, s->c != NULL, "relock_client_new: %s", err.message);
  snprintf(s->busy_name, sizeof s->busy_name, "cbm:%d:busy", index);
  snprintf(s->t_name, sizeof s->t_name, "cbm:%d:t", index);
  snprintf(s->o_name, sizeof s->o_name, "cbm:%d:o", index);
  CHECK(s, (s->busy = relock_lock_new(s->c, s->busy_name, &err)) != NULL, "lock: %s", err.message);
  CHECK(s, (s->t = relock_lock_new(s->c, s->t_name, &err)) != NULL, "lock: %s", err.message);
  CHECK(s, (s->o = relock_lock_new(s->c, s->o_name, &err)) != NULL, "lock: %s", err.message);
  CHECK(s, must(s, relock_lock_lock_async(s->busy, 1, 0, RELOCK_INFINITE), "busy") == 1, "busy not acquired");
  s->pending = relock_lock_lock_async(s->busy, 2, fx_slack_ms(8000), RELOCK_INFINITE);
  CHECK(s, s->pending != NULL && !relock_future_is_done(s->pending), "busy's waiter is not pending");
}

/* A future the scene still has: it must complete (cancelled if pending). */
static void settle(scene_t *s, relock_future_t **fp, const char *what) {
  relock_future_t *f = *fp;
  if (f == NULL)
    return;
  *fp = NULL;
  if (!s->freed_client)
    relock_future_cancel(f);
  else if (!s->threaded) /* the loop has run until the client was gone */
    CHECK(s, relock_future_is_done(f), "%s still pending after the client was freed", what);
  /* threaded, a free from a callback is done by the loop thread: the
   * close fails what is pending, soon */
  int r = relock_future_wait(f, fx_slack_ms(5000));
  CHECK(s, r != RELOCK_EPENDING, "%s never completed", what);
  relock_future_release(f);
}

static void run_case(scene_t *s, int index) {
  setup(s, index);
  s->site->arm(s);
  CHECK(s, await_flag(s, &s->ran, 5000), "the callback never ran");
  CHECK(s, await_flag(s, &s->returned, 5000), "the callback never returned (%s from inside it)", s->action->name);
  int closed = s->site->arm == arm_close;
  switch (s->action->id) {
  case A_CLOSE:
    CHECK(s, s->rc == (closed ? RELOCK_ECLOSED : 0), "relock_client_close answered %s", relock_err_name(s->rc));
    break;
  case A_CANCEL:
    CHECK(s, s->rc == 0 || s->rc == 1, "relock_future_cancel answered %d", s->rc);
    break;
  case A_ACQUIRE:
    CHECK(s, s->acquired != NULL, "the acquisition returned NULL");
    break;
  case A_BLOCK:
    CHECK(s, s->rc == RELOCK_EWOULDBLOCK || (closed && s->rc == RELOCK_ECLOSED),
          "the blocking call answered %s (%s), not RELOCK_EWOULDBLOCK, %s", relock_err_name(s->rc),
          relock_last_error_message(), s->on_main ? "on the calling thread" : "on the loop");
    break;
  default:
    break;
  }
  if (s->stalled)
    relock_test_proxy_stall(s->proxy, 0);
  if (s->freed_client && !s->threaded)
    CHECK(s, loop_quiesces(5000), "watchers of the library left on the loop after a free from a callback");
  settle(s, &s->acquired, "the new acquisition");
  settle(s, &s->trigger, "the trigger");
  settle(s, &s->aux, "the trigger's other future");
  settle(s, &s->own, "the site's future");
  settle(s, &s->pending, "busy's waiter");
  relock_lock_free(s->t);
  relock_lock_free(s->o);
  relock_lock_free(s->busy);
  relock_multi_lock_free(s->multi);
  relock_permit_semaphore_free(s->ps);
  relock_subscription_free(s->sub);
  if (!s->freed_client)
    relock_client_free(s->c);
  if (!s->threaded) {
    CHECK(s, loop_quiesces(5000), "watchers of the library left on the loop after relock_client_free");
  } else {
    uint64_t deadline = relock__now_ns() + (uint64_t)fx_slack_ms(5000) * 1000000u;
    while (threads_now() != s->threads_before && relock__now_ns() < deadline)
      usleep(1000);
    CHECK(s, threads_now() == s->threads_before, "the client's loop thread still runs (%d threads, %d before)",
          threads_now(), s->threads_before);
  }
  relock_options_free(s->opts);
  relock_test_proxy_stop(s->proxy);
}

/* -- the parent ---------------------------------------------------------------*/

typedef struct matrix_case {
  const site_t *site;
  const action_t *action;
  int threaded;
  int index;
  char name[160];
} matrix_case_t;

static void test_case(void **state) {
  const matrix_case_t *mc = *state;
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    /* cmocka's handlers would carry on with the parent's tests in here */
    const int deadly[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGALRM};
    for (size_t k = 0; k < sizeof deadly / sizeof deadly[0]; k++)
      signal(deadly[k], SIG_DFL);
    alarm((unsigned)(30 * relock_test_slowdown())); /* the parent kills it sooner */
    scene_t s = {.site = mc->site, .action = mc->action, .threaded = mc->threaded, .fd = fds[1]};
    run_case(&s, mc->index);
#ifdef MATRIX_LSAN
    if (__lsan_do_recoverable_leak_check() != 0)
      die(&s, "LeakSanitizer found leaks (see the log)");
#endif
    fflush(stdout);
    _exit(0); /* valgrind judges the child at its exit too (exit 99) */
  }
  close(fds[1]);
  int status = 0;
  uint64_t deadline = relock__now_ns() + (uint64_t)(15000 * relock_test_slowdown()) * 1000000u;
  pid_t w;
  while ((w = waitpid(pid, &status, WNOHANG)) == 0 && relock__now_ns() < deadline)
    usleep(1000);
  int hung = w == 0;
  if (hung) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  char msg[600] = "";
  ssize_t n = read(fds[0], msg, sizeof msg - 1);
  msg[n > 0 ? n : 0] = '\0';
  close(fds[0]);
  if (hung)
    fail_msg("hung: %s from inside the %s (%s) did not finish in %d s%s%s", mc->action->name, mc->site->name,
             mc->threaded ? "threaded" : "embedded", 15 * relock_test_slowdown(), msg[0] ? ": " : "", msg);
  if (WIFSIGNALED(status))
    fail_msg("crashed: signal %d (%s) with %s from inside the %s (%s)%s%s", WTERMSIG(status), strsignal(WTERMSIG(status)),
             mc->action->name, mc->site->name, mc->threaded ? "threaded" : "embedded", msg[0] ? ": " : "", msg);
  if (WEXITSTATUS(status) == 99)
    fail_msg("valgrind found memory errors or leaks (see the log)");
  if (WEXITSTATUS(status) != 0)
    fail_msg("%s", msg[0] ? msg : "the child failed without a message");
}

/* -- the headers' callbacks, all in sites[] ----------------------------------*/

static int listed(const char *type) {
  for (size_t i = 0; i < NSITES; i++)
    if (strcmp(sites[i].type, type) == 0)
      return 1;
  return 0;
}

/* Every "typedef ... (*relock_..._cb)(" of the headers of include/relock/ and every
 * RELOCK_EVENT_ of relock/stats.h is a site's type. */
static void test_headers_covered(void **state) {
  (void)state;
  const char *srcdir = getenv("RELOCK_SRCDIR");
  char dirname[4096];
  snprintf(dirname, sizeof dirname, "%s/include/relock", srcdir != NULL ? srcdir : ".");
  DIR *d = opendir(dirname);
  if (d == NULL)
    fail_msg("cannot read %s (RELOCK_SRCDIR)", dirname);
  regex_t cb, ev;
  assert_int_equal(regcomp(&cb, "typedef[^;]*\\(\\*(relock_[a-z_]+)\\)", REG_EXTENDED), 0);
  assert_int_equal(regcomp(&ev, "^[[:space:]]*(RELOCK_EVENT_[A-Z_]+)", REG_EXTENDED), 0);
  int types = 0, events = 0, missing = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t len = strlen(e->d_name);
    if (len < 3 || strcmp(e->d_name + len - 2, ".h") != 0)
      continue;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dirname, e->d_name);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[1024];
    while (fgets(line, sizeof line, fp) != NULL) {
      regmatch_t m[2];
      for (int k = 0; k < 2; k++) {
        if (regexec(k == 0 ? &cb : &ev, line, 2, m, 0) != 0)
          continue;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(m[1].rm_eo - m[1].rm_so), line + m[1].rm_so);
        if (k == 0)
          types++;
        else
          events++;
        if (!listed(name)) {
          printf("# %s: %s has no site in test_callback_matrix's sites[]\n", e->d_name, name);
          missing++;
        }
      }
    }
    fclose(fp);
  }
  closedir(d);
  regfree(&cb);
  regfree(&ev);
  printf("# %d callback types and %d event types in the headers\n", types, events);
  assert_true(types >= 8 && events >= 8); /* the scan found them at all */
  if (missing > 0)
    fail_msg("%d callback or event type(s) of include/relock/ lack a site (see above)", missing);
}

static int group_setup(void **state) {
  (void)state;
  g_redis = relock_test_redis_start(NULL);
  return g_redis != NULL ? 0 : -1;
}

static int group_teardown(void **state) {
  (void)state;
  relock_test_redis_free(g_redis);
  return 0;
}

int main(void) {
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("no redis-server");
  size_t max = NSITES * NACTIONS * 2 + 1;
  struct CMUnitTest *tests = calloc(max, sizeof(*tests));
  matrix_case_t *cases = calloc(max, sizeof(*cases));
  assert_non_null(tests);
  assert_non_null(cases);
  size_t n = 0;
  tests[n++] = (struct CMUnitTest){.name = "headers: every callback and event type has a site",
                                   .test_func = test_headers_covered};
  int index = 0;
  for (int threaded = 0; threaded < 2; threaded++)
    for (size_t i = 0; i < NSITES; i++)
      for (size_t a = 0; a < NACTIONS && sites[i].arm != NULL; a++) {
        matrix_case_t *mc = &cases[index];
        mc->site = &sites[i];
        mc->action = &actions[a];
        mc->threaded = threaded;
        mc->index = index++;
        snprintf(mc->name, sizeof mc->name, "%s: %s from inside the %s", threaded ? "threaded" : "embedded",
                 actions[a].name, sites[i].name);
        tests[n++] = (struct CMUnitTest){.name = mc->name, .test_func = test_case, .initial_state = mc};
      }
  cmocka_set_message_output(CM_OUTPUT_TAP);
  int r = _cmocka_run_group_tests("test_callback_matrix", tests, n, group_setup, group_teardown);
  free(tests);
  free(cases);
  return r;
}
