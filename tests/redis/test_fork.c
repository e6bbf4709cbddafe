/* After fork(), the child may not use a client its parent made (issue 46):
 * every exported function of the library is called in a forked child of a
 * process whose THREADED client is busy - a lock held and renewed every
 * few ms, a waiter waiting, a thread of the parent's sending PINGs - so
 * that the parent's loop thread (or that thread) may hold the client's
 * mutex at the fork. Each call must answer RELOCK_EFORKED (a code, a
 * future failed with it, NULL with err saying it), or - for what does not
 * touch the client (relock_strerror, the options, a completed future's
 * outcome, a name) - the right answer, and never hang on a mutex that no
 * thread of the child will ever release: the parent bounds each child and
 * kills it. One TAP case per exported function; test_exports_have_cases
 * fails when the library exports a function (nm -D of the built library,
 * and the RELOCK_EXTERN declarations of include/relock/) that calls[]
 * lacks, or calls[] names one it no longer exports. Against a real
 * redis-server. */
#define _GNU_SOURCE
#include <config.h>

#include <dirent.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <relock/relock.h>

#include "support/client_fixture.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define FORK_VALGRIND 1
#endif
#endif

/* -- the parent's busy client -----------------------------------------------*/

typedef struct env {
  relock_test_redis_t *redis;
  relock_options_t *opts;
  relock_client_t *c;
  relock_lock_t *l;      /* held by owner 1, renewed */
  relock_lock_t *busy;   /* held by owner 1: waiting waits for it */
  relock_lock_t *fenced;
  relock_lock_t *spare;  /* for a group made in the child */
  relock_multi_lock_t *multi;
  relock_semaphore_t *sem;
  relock_permit_semaphore_t *ps;
  relock_latch_t *latch;
  relock_subscription_t *sub;
  relock_future_t *waiting; /* pending */
  relock_future_t *done;    /* a PING answered */
  pthread_t pinger;
  int stop;                 /* atomic */
} env_t;

static env_t g;

static void on_msg(relock_subscription_t *sub, const char *payload, size_t len, void *arg) {
  (void)sub;
  (void)payload;
  (void)len;
  (void)arg;
}

/* Keeps the client's mutex busy from a thread of the parent's too. */
static void *pinger(void *arg) {
  (void)arg;
  const char *ping[] = {"PING"};
  while (!__atomic_load_n(&g.stop, __ATOMIC_SEQ_CST)) {
    relock_future_t *f = relock_client_command_async(g.c, 1, ping, NULL);
    relock_future_wait(f, fx_slack_ms(2000));
    relock_future_release(f);
  }
  return NULL;
}

static int group_setup(void **state) {
  (void)state;
  if ((g.redis = relock_test_redis_start(NULL)) == NULL)
    return -1;
  g.opts = fx_options(g.redis, 0);
  fx_set_ms(g.opts, RELOCK_OPT_WATCHDOG_TIMEOUT, 30 * relock_test_slowdown()); /* a renewal every 10 ms */
  relock_error_t err;
  g.c = relock_client_new(NULL, g.opts, &err);
  assert_non_null(g.c);
  g.l = relock_lock_new(g.c, "fork:l", NULL);
  g.busy = relock_lock_new(g.c, "fork:busy", NULL);
  g.fenced = relock_fenced_lock_new(g.c, "fork:fenced", NULL);
  g.spare = relock_lock_new(g.c, "fork:spare", NULL);
  relock_lock_t *member = relock_lock_new(g.c, "fork:member", NULL);
  g.multi = relock_multi_lock_new(&member, 1, NULL);
  g.sem = relock_semaphore_new(g.c, "fork:sem", NULL);
  g.ps = relock_permit_semaphore_new(g.c, "fork:ps", NULL);
  g.latch = relock_latch_new(g.c, "fork:latch", NULL);
  assert_true(g.l && g.busy && g.fenced && g.spare && g.multi && g.sem && g.ps && g.latch);
  assert_int_equal(fx_value(relock_lock_lock_async(g.l, 1, 0, RELOCK_INFINITE)), 1);
  /* a fixed lease, long: held however late the parent's loop thread runs */
  assert_int_equal(fx_value(relock_lock_lock_async(g.busy, 1, 0, 600000)), 1);
  g.waiting = relock_lock_lock_async(g.busy, 2, RELOCK_INFINITE, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(g.waiting, 50), RELOCK_EPENDING);
  fx_value(relock_client_subscribe_async(g.c, "fork:ch", 7, on_msg, NULL, &g.sub));
  g.done = FX_CMD(g.c, "PING");
  assert_int_equal(relock_future_error(g.done), 0);
  assert_int_equal(pthread_create(&g.pinger, NULL, pinger, NULL), 0);
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  __atomic_store_n(&g.stop, 1, __ATOMIC_SEQ_CST);
  pthread_join(g.pinger, NULL);
  relock_future_release(g.done);
  relock_future_cancel(g.waiting);
  relock_future_release(g.waiting);
  relock_subscription_free(g.sub);
  relock_lock_free(g.l);
  relock_lock_free(g.busy);
  relock_lock_free(g.fenced);
  relock_lock_free(g.spare);
  relock_multi_lock_free(g.multi);
  relock_semaphore_free(g.sem);
  relock_permit_semaphore_free(g.ps);
  relock_latch_free(g.latch);
  relock_client_free(g.c);
  relock_options_free(g.opts);
  relock_test_redis_free(g.redis);
  return 0;
}

/* -- in the child: one call and what it must answer ---------------------------*/

static char why[512];

#define WHY(...) (snprintf(why, sizeof why, __VA_ARGS__), 1)

/* A code: RELOCK_EFORKED. */
static int want_code(int r) {
  return r == RELOCK_EFORKED ? 0 : WHY("answered %s (%d), not RELOCK_EFORKED", relock_err_name(r), r);
}

/* A future failed with RELOCK_EFORKED (waiting on it returns at once). */
static int want_future(relock_future_t *f) {
  if (f == NULL)
    return WHY("NULL, not a future failed with RELOCK_EFORKED");
  int e = relock_future_error(f), w = relock_future_wait(f, 1000);
  relock_future_release(f);
  if (e != RELOCK_EFORKED || w != RELOCK_EFORKED)
    return WHY("a future of %s (wait: %s), not failed with RELOCK_EFORKED", relock_err_name(e),
               relock_err_name(w));
  return 0;
}

/* An object made on the parent's client: NULL with err RELOCK_EFORKED, or
 * one whose calls answer it (made without touching the client). Kept in
 * made[] (reachable): its free, refused, leaves it alone. */
static void *made[8];
static int nmade;
static int want_object(void *obj, const relock_error_t *err, relock_future_t *(*try)(void *obj)) {
  if (obj == NULL)
    return err->code == RELOCK_EFORKED ? 0 : WHY("NULL with %s, not RELOCK_EFORKED", relock_err_name(err->code));
  made[nmade++ % 8] = obj;
  return try != NULL ? want_future(try(obj)) : 0;
}
static relock_future_t *try_lock_obj(void *o) { return relock_lock_lock_async(o, 9, 0, RELOCK_INFINITE); }
static relock_future_t *try_sem_obj(void *o) { return relock_semaphore_acquire_async(o, 1, 0); }
static relock_future_t *try_ps_obj(void *o) { return relock_permit_semaphore_acquire_async(o, 0, RELOCK_INFINITE); }
static relock_future_t *try_latch_obj(void *o) { return relock_latch_count_async(o); }
static relock_future_t *try_multi_obj(void *o) { return relock_multi_lock_lock_async(o, 9, 0, RELOCK_INFINITE); }

static int want(int ok, const char *what) { return ok ? 0 : WHY("wrong answer: %s", what); }

static void on_done_cb(relock_future_t *f, void *arg) {
  (void)f;
  (void)arg;
}

/* A client the child makes itself works: embedded on a loop of its own
 * (no thread: a thread started after a fork of a threaded process is
 * more than some tools support), a PING answered. */
static int child_client(void) {
  struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
  relock_error_t err;
  relock_client_t *c = relock_client_new(loop, g.opts, &err);
  if (c == NULL)
    return WHY("the child's own client: %s", err.message);
  const char *ping[] = {"PING"};
  relock_future_t *f = relock_client_command_async(c, 1, ping, NULL);
  int r = relock_future_wait(f, fx_slack_ms(5000));
  relock_future_release(f);
  relock_client_free(c);
  ev_loop_destroy(loop);
  return r == 0 ? 0 : WHY("the child's own client's PING: %s", relock_err_name(r));
}

/* A permit id of this client's (its first 16 hex digits the client
 * id's): one the calls look up in the client, not refused before. */
static const char *own_id(void) {
  static char id[RELOCK_PERMIT_ID_SIZE];
  const char *cid = relock_client_id(g.c);
  size_t n = 0;
  for (const char *p = cid; *p != '\0' && n < 16; p++)
    if (*p != '-')
      id[n++] = *p;
  memcpy(id + n, "0000000000000000", 16);
  id[32] = '\0';
  return id;
}
#define ID32 own_id()

static int call(const char *fn) {
  relock_error_t err = {0, ""};
  const char *ping[] = {"PING"};
  int i1 = 0;
  int64_t v = 0;
  char id[RELOCK_PERMIT_ID_SIZE], field[128], text[256];
  relock_future_t *const inputs[1] = {g.waiting};
  relock_lock_t *member = g.spare;
  relock_stats_t st;
  memset(&st, 0, sizeof st);
#define IS(name) (strcmp(fn, #name) == 0)
#define CODE(name, expr)                                                                                             \
  if (IS(name))                                                                                                      \
    return want_code(expr);
#define FUT(name, expr)                                                                                              \
  if (IS(name))                                                                                                      \
    return want_future(expr);
#define OBJ(name, expr, try)                                                                                         \
  if (IS(name))                                                                                                      \
    return want_object((void *)(expr), &err, try);
#define OK(name, cond)                                                                                               \
  if (IS(name))                                                                                                      \
    return want(cond, #cond);
#define VOID(name, expr)                                                                                             \
  if (IS(name)) {                                                                                                    \
    expr;                                                                                                            \
    return 0;                                                                                                        \
  }
  /* the client */
  CODE(relock_client_close, relock_client_close(g.c, NULL, NULL))
  FUT(relock_client_command_async, relock_client_command_async(g.c, 1, ping, NULL))
  FUT(relock_client_command_at_async, relock_client_command_at_async(g.c, "127.0.0.1:1", 1, ping, NULL))
  FUT(relock_client_commandf_async, relock_client_commandf_async(g.c, "PING"))
  VOID(relock_client_free, relock_client_free(g.c))
  OK(relock_client_id, relock_client_id(g.c) != NULL && strlen(relock_client_id(g.c)) == 36)
  OK(relock_client_loop, relock_client_loop(g.c) != NULL)
  FUT(relock_client_masters_async, relock_client_masters_async(g.c))
  if (IS(relock_client_new))
    return child_client();
  OBJ(relock_client_new_beside, relock_client_new_beside(g.c, g.opts, &err), NULL)
  CODE(relock_client_on_event, relock_client_on_event(g.c, NULL, NULL))
  OK(relock_client_released, relock_client_released(g.c, NULL, NULL) == RELOCK_EPENDING) /* not down: an atomic read */
  CODE(relock_client_stats, relock_client_stats(g.c, &st, sizeof st))
  if (IS(relock_client_subscribe_async)) {
    relock_subscription_t *sub = (relock_subscription_t *)&err; /* must be set to NULL */
    int r = want_future(relock_client_subscribe_async(g.c, "x", 1, on_msg, NULL, &sub));
    return r != 0 ? r : want(sub == NULL, "*sub NULL");
  }
  OK(relock_client_unreturned, relock_client_unreturned(g.c) == 0)
  /* futures: reading a completed one needs no client */
  OK(relock_future_bool, relock_future_bool(g.done) == 0)
  OK(relock_future_int, relock_future_int(g.done) == 0)
  OK(relock_future_ptr, relock_future_ptr(g.done) == (void *)relock_future_reply(g.done))
  OK(relock_future_string, relock_future_string(g.done, NULL) == NULL)
  OK(relock_future_reply, relock_future_reply(g.done) != NULL && strcmp(relock_future_reply(g.done)->str, "PONG") == 0)
  OK(relock_future_value_type, relock_future_value_type(g.done) == RELOCK_VALUE_PTR)
  OK(relock_future_state, relock_future_state(g.done) == RELOCK_FUTURE_SUCCEEDED &&
                              relock_future_state(g.waiting) == RELOCK_FUTURE_PENDING)
  OK(relock_future_error, relock_future_error(g.done) == 0 && relock_future_error(g.waiting) == RELOCK_EPENDING)
  OK(relock_future_message, relock_future_message(g.done) != NULL)
  OK(relock_future_is_done, relock_future_is_done(g.done) && !relock_future_is_done(g.waiting))
  OK(relock_future_loop, relock_future_loop(g.done) == relock_client_loop(g.c))
  OK(relock_future_retain, relock_future_retain(g.done) == g.done)
  VOID(relock_future_release, relock_future_release(g.done))
  OK(relock_future_cancel, relock_future_cancel(g.waiting) == 0 && !relock_future_is_done(g.waiting)) /* refused */
  CODE(relock_future_on_done, relock_future_on_done(g.waiting, on_done_cb, NULL))
  CODE(relock_future_wait, relock_future_wait(g.waiting, 1000))
  if (IS(relock_future_all) || IS(relock_future_any)) {
    relock_future_t *f = IS(relock_future_all) ? relock_future_all(inputs, 1, &err) : relock_future_any(inputs, 1, &err);
    if (f == NULL)
      return err.code == RELOCK_EFORKED ? 0 : WHY("NULL with %s, not RELOCK_EFORKED", relock_err_name(err.code));
    return want_future(f);
  }
  /* locks */
  OBJ(relock_lock_new, relock_lock_new(g.c, "fork:new", &err), try_lock_obj)
  OBJ(relock_fair_lock_new, relock_fair_lock_new(g.c, "fork:new", &err), try_lock_obj)
  OBJ(relock_read_lock_new, relock_read_lock_new(g.c, "fork:new", &err), try_lock_obj)
  OBJ(relock_write_lock_new, relock_write_lock_new(g.c, "fork:new", &err), try_lock_obj)
  OBJ(relock_fenced_lock_new, relock_fenced_lock_new(g.c, "fork:new", &err), try_lock_obj)
  OBJ(relock_spin_lock_new, relock_spin_lock_new(g.c, "fork:new", &err), try_lock_obj)
  CODE(relock_fenced_lock_lock, relock_fenced_lock_lock(g.fenced, RELOCK_INFINITE, &v))
  CODE(relock_fenced_lock_try_lock, relock_fenced_lock_try_lock(g.fenced, 0, RELOCK_INFINITE, &v))
  CODE(relock_fenced_lock_token, relock_fenced_lock_token(g.fenced, &v))
  FUT(relock_fenced_lock_token_async, relock_fenced_lock_token_async(g.fenced))
  OK(relock_lock_field, relock_lock_field(g.l, 1, field, sizeof field) > 36)
  OK(relock_lock_name, strcmp(relock_lock_name(g.l), "fork:l") == 0)
  VOID(relock_lock_free, relock_lock_free(g.l))
  CODE(relock_lock_force_unlock, relock_lock_force_unlock(g.l, &i1))
  FUT(relock_lock_force_unlock_async, relock_lock_force_unlock_async(g.l))
  CODE(relock_lock_hold_count, relock_lock_hold_count(g.l, &v))
  FUT(relock_lock_hold_count_async, relock_lock_hold_count_async(g.l, 1))
  CODE(relock_lock_interrupt, relock_lock_interrupt(g.busy, 2))
  CODE(relock_lock_is_held_by_thread, relock_lock_is_held_by_thread(g.l, &i1))
  FUT(relock_lock_is_held_by_thread_async, relock_lock_is_held_by_thread_async(g.l, 1))
  CODE(relock_lock_is_locked, relock_lock_is_locked(g.l, &i1))
  FUT(relock_lock_is_locked_async, relock_lock_is_locked_async(g.l))
  CODE(relock_lock_lock, relock_lock_lock(g.busy, RELOCK_INFINITE))
  FUT(relock_lock_lock_async, relock_lock_lock_async(g.busy, 3, RELOCK_INFINITE, RELOCK_INFINITE))
  CODE(relock_lock_on_lost, relock_lock_on_lost(g.l, NULL, NULL))
  CODE(relock_lock_on_wait, relock_lock_on_wait(g.l, NULL, NULL))
  CODE(relock_lock_remaining_ttl, relock_lock_remaining_ttl(g.l, &v))
  FUT(relock_lock_remaining_ttl_async, relock_lock_remaining_ttl_async(g.l))
  CODE(relock_lock_try_lock, relock_lock_try_lock(g.busy, RELOCK_INFINITE, RELOCK_INFINITE, &i1))
  CODE(relock_lock_unlock, relock_lock_unlock(g.l))
  FUT(relock_lock_unlock_async, relock_lock_unlock_async(g.l, 1))
  CODE(relock_lock_validate, relock_lock_validate(g.l, &i1))
  FUT(relock_lock_validate_async, relock_lock_validate_async(g.l, 1))
  CODE(relock_lock_validity_ms, (int)relock_lock_validity_ms(g.l, 1))
  CODE(relock_lock_watch_loss, relock_lock_watch_loss(g.l, 1))
  OK(relock_thread_owner, relock_thread_owner() != 0)
  /* groups */
  OBJ(relock_multi_lock_new, relock_multi_lock_new(&member, 1, &err), try_multi_obj)
  OBJ(relock_redlock_new, relock_redlock_new(&member, 1, &err), try_multi_obj)
  VOID(relock_multi_lock_free, relock_multi_lock_free(g.multi))
  CODE(relock_multi_lock_lock, relock_multi_lock_lock(g.multi, RELOCK_INFINITE))
  FUT(relock_multi_lock_lock_async, relock_multi_lock_lock_async(g.multi, 1, 0, RELOCK_INFINITE))
  CODE(relock_multi_lock_on_lost, relock_multi_lock_on_lost(g.multi, NULL, NULL))
  OK(relock_multi_lock_quorum, relock_multi_lock_quorum(g.multi) == 1)
  OK(relock_multi_lock_size, relock_multi_lock_size(g.multi) == 1)
  if (IS(relock_multi_lock_results)) {
    int r = relock_multi_lock_results(g.multi, &i1, 1);
    return r == RELOCK_EFORKED || r == 1 ? 0 : WHY("answered %s", relock_err_name(r));
  }
  CODE(relock_multi_lock_try_lock, relock_multi_lock_try_lock(g.multi, 0, RELOCK_INFINITE, &i1))
  CODE(relock_multi_lock_unlock, relock_multi_lock_unlock(g.multi))
  FUT(relock_multi_lock_unlock_async, relock_multi_lock_unlock_async(g.multi, 1))
  CODE(relock_multi_lock_validity_ms, (int)relock_multi_lock_validity_ms(g.multi, 1))
  /* semaphores and the latch */
  OBJ(relock_semaphore_new, relock_semaphore_new(g.c, "fork:new", &err), try_sem_obj)
  OBJ(relock_permit_semaphore_new, relock_permit_semaphore_new(g.c, "fork:new", &err), try_ps_obj)
  OBJ(relock_latch_new, relock_latch_new(g.c, "fork:new", &err), try_latch_obj)
  CODE(relock_semaphore_acquire, relock_semaphore_acquire(g.sem, 1, 0, &i1))
  FUT(relock_semaphore_acquire_async, relock_semaphore_acquire_async(g.sem, 1, 0))
  CODE(relock_semaphore_add_permits, relock_semaphore_add_permits(g.sem, 1, &v))
  FUT(relock_semaphore_add_permits_async, relock_semaphore_add_permits_async(g.sem, 1))
  CODE(relock_semaphore_available, relock_semaphore_available(g.sem, &v))
  FUT(relock_semaphore_available_async, relock_semaphore_available_async(g.sem))
  CODE(relock_semaphore_drain_permits, relock_semaphore_drain_permits(g.sem, &v))
  FUT(relock_semaphore_drain_permits_async, relock_semaphore_drain_permits_async(g.sem))
  VOID(relock_semaphore_free, relock_semaphore_free(g.sem))
  OK(relock_semaphore_name, strcmp(relock_semaphore_name(g.sem), "fork:sem") == 0)
  CODE(relock_semaphore_release, relock_semaphore_release(g.sem, 1))
  FUT(relock_semaphore_release_async, relock_semaphore_release_async(g.sem, 1))
  CODE(relock_semaphore_try_set_permits, relock_semaphore_try_set_permits(g.sem, 1, &i1))
  FUT(relock_semaphore_try_set_permits_async, relock_semaphore_try_set_permits_async(g.sem, 1))
  CODE(relock_permit_semaphore_acquire, relock_permit_semaphore_acquire(g.ps, 0, RELOCK_INFINITE, id))
  FUT(relock_permit_semaphore_acquire_async, relock_permit_semaphore_acquire_async(g.ps, 0, RELOCK_INFINITE))
  CODE(relock_permit_semaphore_add_permits, relock_permit_semaphore_add_permits(g.ps, 1, &v))
  FUT(relock_permit_semaphore_add_permits_async, relock_permit_semaphore_add_permits_async(g.ps, 1))
  CODE(relock_permit_semaphore_available, relock_permit_semaphore_available(g.ps, &v))
  FUT(relock_permit_semaphore_available_async, relock_permit_semaphore_available_async(g.ps))
  VOID(relock_permit_semaphore_free, relock_permit_semaphore_free(g.ps))
  OK(relock_permit_semaphore_name, strcmp(relock_permit_semaphore_name(g.ps), "fork:ps") == 0)
  CODE(relock_permit_semaphore_on_lost, relock_permit_semaphore_on_lost(g.ps, NULL, NULL))
  CODE(relock_permit_semaphore_release, relock_permit_semaphore_release(g.ps, ID32, &i1))
  FUT(relock_permit_semaphore_release_async, relock_permit_semaphore_release_async(g.ps, ID32))
  CODE(relock_permit_semaphore_try_set_permits, relock_permit_semaphore_try_set_permits(g.ps, 1, &i1))
  FUT(relock_permit_semaphore_try_set_permits_async, relock_permit_semaphore_try_set_permits_async(g.ps, 1))
  FUT(relock_permit_semaphore_validate_async, relock_permit_semaphore_validate_async(g.ps, ID32))
  CODE(relock_permit_semaphore_validity_ms, (int)relock_permit_semaphore_validity_ms(g.ps, ID32))
  CODE(relock_latch_await, relock_latch_await(g.latch, 0, &i1))
  FUT(relock_latch_await_async, relock_latch_await_async(g.latch, 0))
  CODE(relock_latch_count, relock_latch_count(g.latch, &v))
  FUT(relock_latch_count_async, relock_latch_count_async(g.latch))
  CODE(relock_latch_count_down, relock_latch_count_down(g.latch, &v))
  FUT(relock_latch_count_down_async, relock_latch_count_down_async(g.latch))
  CODE(relock_latch_delete, relock_latch_delete(g.latch, &i1))
  FUT(relock_latch_delete_async, relock_latch_delete_async(g.latch))
  VOID(relock_latch_free, relock_latch_free(g.latch))
  OK(relock_latch_name, strcmp(relock_latch_name(g.latch), "fork:latch") == 0)
  CODE(relock_latch_try_set_count, relock_latch_try_set_count(g.latch, 1, &i1))
  FUT(relock_latch_try_set_count_async, relock_latch_try_set_count_async(g.latch, 1))
  VOID(relock_subscription_free, relock_subscription_free(g.sub))
  /* what touches no client */
  OK(relock_strerror, strstr(relock_strerror(RELOCK_EFORKED), "fork") != NULL)
  OK(relock_err_name, strcmp(relock_err_name(RELOCK_EFORKED), "RELOCK_EFORKED") == 0)
  OK(relock_last_error_message, relock_last_error_message() != NULL)
  OK(relock_version, relock_version() > 0)
  OK(relock_version_string, relock_version_string() != NULL)
  OK(relock_tls_available, relock_tls_available() == 0 || relock_tls_available() == 1)
  OK(relock_kind_name, strcmp(relock_kind_name(RELOCK_KIND_LOCK), "lock") == 0)
  OK(relock_outcome_name, strcmp(relock_outcome_name(RELOCK_OUTCOME_ACQUIRED), "acquired") == 0)
  OK(relock_loss_name, strcmp(relock_loss_name(RELOCK_LOSS_DELETED), "deleted") == 0)
  OK(relock_stats_bound_us, relock_stats_bound_us(0) == 50)
  OK(relock_stats_try_bound, relock_stats_try_bound(0) == 1)
  OK(relock_stats_prometheus, relock_stats_prometheus(&st, NULL, text, sizeof text) > 0)
  if (strncmp(fn, "relock_options_", 15) == 0) {
    relock_options_t *o = relock_options_copy(g.opts, &err), *n = relock_options_new(&err);
    const char *s = NULL;
    int r = o == NULL || n == NULL                                              ? WHY("no options")
            : IS(relock_options_copy) || IS(relock_options_new) || IS(relock_options_free) ? 0
            : IS(relock_options_from_env)   ? want(relock_options_from_env(n, &err) == 0, "from_env")
            : IS(relock_options_get_int)    ? want(relock_options_get_int(o, RELOCK_OPT_PORT, &i1, &err) == 0 && i1 > 0, "port")
            : IS(relock_options_get_ms)     ? want(relock_options_get_ms(o, RELOCK_OPT_WATCHDOG_TIMEOUT, &v, &err) == 0, "ms")
            : IS(relock_options_get_string) ? want(relock_options_get_string(o, RELOCK_OPT_HOST, &s, &err) == 0 && s, "host")
            : IS(relock_options_set)        ? want(relock_options_set(n, RELOCK_OPT_PORT, "7000", &err) == 0, "set")
            : IS(relock_options_set_int)    ? want(relock_options_set_int(n, RELOCK_OPT_PORT, 7000, &err) == 0, "set_int")
            : IS(relock_options_set_ms)     ? want(relock_options_set_ms(n, RELOCK_OPT_COMMAND_TIMEOUT, 50, &err) == 0, "set_ms")
            : IS(relock_options_set_string) ? want(relock_options_set_string(n, RELOCK_OPT_HOST, "h", &err) == 0, "set_string")
            : IS(relock_options_set_url)    ? want(relock_options_set_url(n, "redis://h:1/2", &err) == 0, "set_url")
            : IS(relock_options_validate)   ? want(relock_options_validate(o, &err) == 0, "validate")
                                            : WHY("no case in the options' calls");
    relock_options_free(o);
    relock_options_free(n);
    return r;
  }
  return WHY("%s has no case in call()", fn);
}

/* Every function the cases cover: a new export without one here fails
 * test_exports_have_cases. */
static const char *const calls[] = {
    "relock_client_close", "relock_client_command_async", "relock_client_command_at_async",
    "relock_client_commandf_async", "relock_client_free", "relock_client_id", "relock_client_loop",
    "relock_client_masters_async", "relock_client_new", "relock_client_new_beside", "relock_client_on_event",
    "relock_client_released", "relock_client_stats", "relock_client_subscribe_async", "relock_client_unreturned",
    "relock_err_name", "relock_fair_lock_new", "relock_fenced_lock_lock", "relock_fenced_lock_new",
    "relock_fenced_lock_token", "relock_fenced_lock_token_async", "relock_fenced_lock_try_lock", "relock_future_all",
    "relock_future_any", "relock_future_bool", "relock_future_cancel", "relock_future_error", "relock_future_int",
    "relock_future_is_done", "relock_future_loop", "relock_future_message", "relock_future_on_done",
    "relock_future_ptr", "relock_future_release", "relock_future_reply", "relock_future_retain",
    "relock_future_state", "relock_future_string", "relock_future_value_type", "relock_future_wait",
    "relock_kind_name", "relock_last_error_message", "relock_latch_await", "relock_latch_await_async",
    "relock_latch_count", "relock_latch_count_async", "relock_latch_count_down", "relock_latch_count_down_async",
    "relock_latch_delete", "relock_latch_delete_async", "relock_latch_free", "relock_latch_name", "relock_latch_new",
    "relock_latch_try_set_count", "relock_latch_try_set_count_async", "relock_lock_field", "relock_lock_force_unlock",
    "relock_lock_force_unlock_async", "relock_lock_free", "relock_lock_hold_count", "relock_lock_hold_count_async",
    "relock_lock_interrupt", "relock_lock_is_held_by_thread", "relock_lock_is_held_by_thread_async",
    "relock_lock_is_locked", "relock_lock_is_locked_async", "relock_lock_lock", "relock_lock_lock_async",
    "relock_lock_name", "relock_lock_new", "relock_lock_on_lost", "relock_lock_on_wait", "relock_lock_remaining_ttl",
    "relock_lock_remaining_ttl_async", "relock_lock_try_lock", "relock_lock_unlock", "relock_lock_unlock_async",
    "relock_lock_validate", "relock_lock_validate_async", "relock_lock_validity_ms", "relock_lock_watch_loss",
    "relock_loss_name", "relock_multi_lock_free", "relock_multi_lock_lock", "relock_multi_lock_lock_async",
    "relock_multi_lock_new", "relock_multi_lock_on_lost", "relock_multi_lock_quorum", "relock_multi_lock_results",
    "relock_multi_lock_size", "relock_multi_lock_try_lock", "relock_multi_lock_unlock",
    "relock_multi_lock_unlock_async", "relock_multi_lock_validity_ms", "relock_options_copy", "relock_options_free",
    "relock_options_from_env", "relock_options_get_int", "relock_options_get_ms", "relock_options_get_string",
    "relock_options_new", "relock_options_set", "relock_options_set_int", "relock_options_set_ms",
    "relock_options_set_string", "relock_options_set_url", "relock_options_validate", "relock_outcome_name",
    "relock_permit_semaphore_acquire", "relock_permit_semaphore_acquire_async", "relock_permit_semaphore_add_permits",
    "relock_permit_semaphore_add_permits_async", "relock_permit_semaphore_available",
    "relock_permit_semaphore_available_async", "relock_permit_semaphore_free", "relock_permit_semaphore_name",
    "relock_permit_semaphore_new", "relock_permit_semaphore_on_lost", "relock_permit_semaphore_release",
    "relock_permit_semaphore_release_async", "relock_permit_semaphore_try_set_permits",
    "relock_permit_semaphore_try_set_permits_async", "relock_permit_semaphore_validate_async",
    "relock_permit_semaphore_validity_ms", "relock_read_lock_new", "relock_redlock_new", "relock_semaphore_acquire",
    "relock_semaphore_acquire_async", "relock_semaphore_add_permits", "relock_semaphore_add_permits_async",
    "relock_semaphore_available", "relock_semaphore_available_async", "relock_semaphore_drain_permits",
    "relock_semaphore_drain_permits_async", "relock_semaphore_free", "relock_semaphore_name", "relock_semaphore_new",
    "relock_semaphore_release", "relock_semaphore_release_async", "relock_semaphore_try_set_permits",
    "relock_semaphore_try_set_permits_async", "relock_spin_lock_new", "relock_stats_bound_us",
    "relock_stats_prometheus", "relock_stats_try_bound", "relock_strerror", "relock_subscription_free",
    "relock_thread_owner", "relock_tls_available", "relock_version", "relock_version_string",
    "relock_write_lock_new",
};
#define NCALLS (sizeof calls / sizeof calls[0])

/* -- the parent: a child per function -------------------------------------------*/

static void test_call(void **state) {
  const char *fn = *state;
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    const int deadly[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGALRM};
    for (size_t k = 0; k < sizeof deadly / sizeof deadly[0]; k++)
      signal(deadly[k], SIG_DFL); /* not cmocka's: it would carry on with the parent's tests in here */
    alarm((unsigned)(20 * relock_test_slowdown()));
    int r = call(fn);
    fflush(stdout);
    /* The verdict, '0' or '1' and why, through the pipe. Under valgrind
     * the child's memory errors count (as they happen); its leak check at
     * exit does not: it cannot tell memory that only the parent's vanished
     * threads pointed to (their stacks are not in the child: a PING in
     * flight, a reply being copied) from a leak, so the child ends by
     * SIGKILL, before that check, once it has told its verdict. */
#ifdef FORK_VALGRIND
    unsigned errors = RUNNING_ON_VALGRIND ? VALGRIND_COUNT_ERRORS : 0;
    if (r == 0 && errors > 0)
      r = WHY("valgrind found %u memory error(s) in the child (see the log)", errors);
#endif
    char verdict[600];
    int n = snprintf(verdict, sizeof verdict, "%c%s", r == 0 ? '0' : '1', r == 0 ? "" : why);
    if (write(fds[1], verdict, (size_t)(n < (int)sizeof verdict ? n : (int)sizeof verdict - 1)) < 0)
      r = 1;
#ifdef FORK_VALGRIND
    if (RUNNING_ON_VALGRIND)
      kill(getpid(), SIGKILL);
#endif
    _exit(r != 0);
  }
  close(fds[1]);
  int status = 0;
  int64_t bound_ms = 5000 * relock_test_slowdown();
  uint64_t deadline = relock__now_ns() + (uint64_t)bound_ms * 1000000u;
  pid_t w;
  while ((w = waitpid(pid, &status, WNOHANG)) == 0 && relock__now_ns() < deadline)
    usleep(500);
  if (w == 0) {
    if (getenv("TEST_FORK_GDB") != NULL) {
      char cmd[128];
      snprintf(cmd, sizeof cmd, "gdb -p %d -batch -ex 'thread apply all bt' 2>/dev/null | grep -E '^#|^Thread' >&2", (int)pid);
      if (system(cmd) != 0) {
      }
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  char msg[600] = "";
  ssize_t n = read(fds[0], msg, sizeof msg - 1);
  msg[n > 0 ? n : 0] = '\0';
  close(fds[0]);
  if (w != 0 && (msg[0] == '0' || msg[0] == '1')) { /* its verdict, whatever its end (valgrind: SIGKILL) */
    if (msg[0] == '1')
      fail_msg("%s in the forked child: %s", fn, msg + 1);
    return;
  }
  if (w == 0)
    fail_msg("hung: %s in a child forked from a busy threaded client did not return in %lld ms (a mutex held "
             "at the fork?)", fn, (long long)bound_ms);
  if (WIFSIGNALED(status))
    fail_msg("crashed: %s in the forked child: signal %d (%s)", fn, WTERMSIG(status), strsignal(WTERMSIG(status)));
  if (WEXITSTATUS(status) == 99)
    fail_msg("valgrind found memory errors or leaks in the child calling %s (see the log)", fn);
  if (WEXITSTATUS(status) != 0)
    fail_msg("%s in the forked child: %s", fn, msg[0] ? msg : "failed without a message");
}

/* -- every export has a case ------------------------------------------------*/

static int covered(const char *name) {
  for (size_t i = 0; i < NCALLS; i++)
    if (strcmp(calls[i], name) == 0)
      return 1;
  return 0;
}

static char exported[512][64];
static int nexported;

static void add_export(const char *name) {
  for (int i = 0; i < nexported; i++)
    if (strcmp(exported[i], name) == 0)
      return;
  if (nexported < 512)
    snprintf(exported[nexported++], sizeof exported[0], "%s", name);
}

/* The library's exports: the functions nm -D lists as defined in the
 * built shared library, and the RELOCK_EXTERN declarations of the
 * headers (a build without a shared library still has those). */
static void test_exports_have_cases(void **state) {
  (void)state;
  const char *build = getenv("RELOCK_BUILDDIR"), *src = getenv("RELOCK_SRCDIR");
  char cmd[4200], path[4096];
  int from_nm = 0, from_headers = 0;
  snprintf(path, sizeof path, "%s/.libs/librelock.so", build != NULL ? build : ".");
  if (access(path, R_OK) == 0) {
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s' 2>/dev/null", path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[512], type[8], name[256];
    while (fgets(line, sizeof line, p) != NULL)
      if (sscanf(line, "%*s %7s %255s", type, name) == 2 && strcmp(type, "T") == 0 && strncmp(name, "relock_", 7) == 0) {
        add_export(name);
        from_nm++;
      }
    pclose(p);
  }
  snprintf(path, sizeof path, "%s/include/relock", src != NULL ? src : ".");
  DIR *d = opendir(path);
  if (d == NULL)
    fail_msg("cannot read %s (RELOCK_SRCDIR)", path);
  regex_t re;
  assert_int_equal(regcomp(&re, "^RELOCK_EXTERN[^(]*[ *](relock_[a-z0-9_]+)\\(", REG_EXTENDED), 0);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t len = strlen(e->d_name);
    if (len < 3 || strcmp(e->d_name + len - 2, ".h") != 0)
      continue;
    char file[8192];
    snprintf(file, sizeof file, "%s/%s", path, e->d_name);
    FILE *fp = fopen(file, "r");
    assert_non_null(fp);
    char line[1024];
    regmatch_t m[2];
    while (fgets(line, sizeof line, fp) != NULL)
      if (regexec(&re, line, 2, m, 0) == 0) {
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(m[1].rm_eo - m[1].rm_so), line + m[1].rm_so);
        add_export(name);
        from_headers++;
      }
    fclose(fp);
  }
  closedir(d);
  regfree(&re);
  printf("# %d exports: %d from nm -D, %d declared in include/relock/\n", nexported, from_nm, from_headers);
  int missing = 0, stale = 0;
  for (int i = 0; i < nexported; i++)
    if (!covered(exported[i])) {
      printf("# %s is exported but has no case in test_fork's calls[]\n", exported[i]);
      missing++;
    }
  for (size_t i = 0; i < NCALLS; i++) {
    int found = 0;
    for (int k = 0; k < nexported && !found; k++)
      found = strcmp(exported[k], calls[i]) == 0;
    if (!found) {
      printf("# %s is in calls[] but no longer exported\n", calls[i]);
      stale++;
    }
  }
  assert_true(from_headers > 100);
  if (missing + stale > 0)
    fail_msg("%d exports without a case, %d cases of no export (see above)", missing, stale);
}

int main(void) {
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("no redis-server");
  struct CMUnitTest tests[NCALLS + 1];
  memset(tests, 0, sizeof tests);
  tests[0] = (struct CMUnitTest){.name = "every export has a case", .test_func = test_exports_have_cases};
  static char names[NCALLS][96];
  for (size_t i = 0; i < NCALLS; i++) {
    snprintf(names[i], sizeof names[i], "%s in a child forked from a busy threaded client", calls[i]);
    tests[i + 1] = (struct CMUnitTest){.name = names[i], .test_func = test_call, .initial_state = (void *)calls[i]};
  }
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return _cmocka_run_group_tests("test_fork", tests, NCALLS + 1, group_setup, group_teardown);
}
