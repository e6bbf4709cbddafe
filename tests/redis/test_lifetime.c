/* Objects outlive their client: every call on an object (each kind of
 * lock, the semaphores, the latch, the multi-lock and RedLock) whose
 * client is closed, or freed, answers RELOCK_ECLOSED - its future fails
 * with it, its blocking twin returns it - and touches nothing freed; a
 * constructor on a closed client fails with RELOCK_ECLOSED; an object
 * freed after its client is fine. Generated: every kind x every public
 * call, after close and after free, embedded and threaded. relock_client(3)
 * "Lifetimes" is the rule this checks. Against a real redis-server. */
#include <config.h>

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <relock/relock.h>

#include "support/client_fixture.h"


/* -- the objects --------------------------------------------------------------*/

enum { LOCK = 1, FENCED = 2, SEMAPHORE = 4, PERMITS = 8, LATCH = 16, HOLDS = 32 };

typedef struct kind {
  const char *name;
  relock_lock_t *(*make)(relock_client_t *c, const char *name, relock_error_t *err);
  int is; /* which calls apply: LOCK, FENCED, ... */
} kind_t;

static relock_lock_t *make_semaphore(relock_client_t *c, const char *name, relock_error_t *err) {
  return (relock_lock_t *)(void *)relock_semaphore_new(c, name, err);
}
static relock_lock_t *make_permits(relock_client_t *c, const char *name, relock_error_t *err) {
  return (relock_lock_t *)(void *)relock_permit_semaphore_new(c, name, err);
}
static relock_lock_t *make_latch(relock_client_t *c, const char *name, relock_error_t *err) {
  return (relock_lock_t *)(void *)relock_latch_new(c, name, err);
}

static const kind_t kinds[] = {
    {"lock", relock_lock_new, LOCK | HOLDS},
    {"fair lock", relock_fair_lock_new, LOCK | HOLDS},
    {"read lock", relock_read_lock_new, LOCK | HOLDS},
    {"write lock", relock_write_lock_new, LOCK | HOLDS},
    {"fenced lock", relock_fenced_lock_new, LOCK | HOLDS | FENCED},
    {"spin lock", relock_spin_lock_new, LOCK | HOLDS},
    {"semaphore", make_semaphore, SEMAPHORE},
    {"permit semaphore", make_permits, PERMITS},
    {"latch", make_latch, LATCH},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

/* A future's outcome: it must have failed by now or fail soon. */
static int async_error(relock_future_t *f) {
  if (f == NULL)
    return RELOCK_ENOMEM;
  int r = relock_future_wait(f, fx_slack_ms(2000));
  relock_future_release(f);
  return r;
}

#define SEM(o) ((relock_semaphore_t *)(void *)(o))
#define PSEM(o) ((relock_permit_semaphore_t *)(void *)(o))
#define LAT(o) ((relock_latch_t *)(void *)(o))
#define ID "0123456789abcdef0123456789abcdef"

static void noop_lost(relock_lock_t *l, uint64_t o, int r, const char *m, void *a) {
  (void)l, (void)o, (void)r, (void)m, (void)a;
}
static void noop_message(relock_subscription_t *s, const char *p, size_t n, void *a) {
  (void)s, (void)p, (void)n, (void)a;
}
static void noop_wait(relock_lock_t *l, uint64_t o, int64_t t, void *a) { (void)l, (void)o, (void)t, (void)a; }

/* One public call on an object, its error code. */
typedef struct call {
  const char *name;
  int applies; /* the kinds it is for */
  int (*run)(relock_lock_t *o);
} call_t;

/* Every call, once: X(kind of call, its name without relock_, which objects, the call). */
#define CALLS(X) \
  X(A, lock_lock_async, LOCK, relock_lock_lock_async(o, 1, 0, RELOCK_INFINITE)) \
  X(A, lock_unlock_async, LOCK, relock_lock_unlock_async(o, 1)) \
  X(A, lock_force_unlock_async, LOCK, relock_lock_force_unlock_async(o)) \
  X(A, lock_is_locked_async, LOCK, relock_lock_is_locked_async(o)) \
  X(A, lock_is_held_by_thread_async, LOCK, relock_lock_is_held_by_thread_async(o, 1)) \
  X(A, lock_hold_count_async, LOCK, relock_lock_hold_count_async(o, 1)) \
  X(A, lock_remaining_ttl_async, LOCK, relock_lock_remaining_ttl_async(o)) \
  X(A, lock_validate_async, LOCK, relock_lock_validate_async(o, 1)) \
  X(B, lock_on_lost, LOCK, relock_lock_on_lost(o, noop_lost, NULL)) \
  X(B, lock_watch_loss, HOLDS, relock_lock_watch_loss(o, 1)) \
  X(B, lock_on_wait, LOCK, relock_lock_on_wait(o, noop_wait, NULL)) \
  X(B, lock_validity_ms, LOCK, relock_lock_validity_ms(o, 1)) \
  X(B, lock_lock, LOCK, relock_lock_lock(o, RELOCK_INFINITE)) \
  X(B, lock_try_lock, LOCK, relock_lock_try_lock(o, 0, RELOCK_INFINITE, NULL)) \
  X(B, lock_unlock, LOCK, relock_lock_unlock(o)) \
  X(B, lock_interrupt, LOCK, relock_lock_interrupt(o, 1)) \
  X(B, lock_force_unlock, LOCK, relock_lock_force_unlock(o, NULL)) \
  X(B, lock_is_locked, LOCK, relock_lock_is_locked(o, NULL)) \
  X(B, lock_is_held_by_thread, LOCK, relock_lock_is_held_by_thread(o, NULL)) \
  X(B, lock_hold_count, LOCK, relock_lock_hold_count(o, NULL)) \
  X(B, lock_validate, LOCK, relock_lock_validate(o, NULL)) \
  X(B, lock_remaining_ttl, LOCK, relock_lock_remaining_ttl(o, NULL)) \
  X(A, fenced_lock_token_async, FENCED, relock_fenced_lock_token_async(o)) \
  X(B, fenced_lock_lock, FENCED, relock_fenced_lock_lock(o, RELOCK_INFINITE, NULL)) \
  X(B, fenced_lock_try_lock, FENCED, relock_fenced_lock_try_lock(o, 0, RELOCK_INFINITE, NULL)) \
  X(B, fenced_lock_token, FENCED, relock_fenced_lock_token(o, NULL)) \
  X(A, semaphore_acquire_async, SEMAPHORE, relock_semaphore_acquire_async(SEM(o), 1, 0)) \
  X(A, semaphore_release_async, SEMAPHORE, relock_semaphore_release_async(SEM(o), 1)) \
  X(A, semaphore_try_set_permits_async, SEMAPHORE, relock_semaphore_try_set_permits_async(SEM(o), 1)) \
  X(A, semaphore_add_permits_async, SEMAPHORE, relock_semaphore_add_permits_async(SEM(o), 1)) \
  X(A, semaphore_drain_permits_async, SEMAPHORE, relock_semaphore_drain_permits_async(SEM(o))) \
  X(A, semaphore_available_async, SEMAPHORE, relock_semaphore_available_async(SEM(o))) \
  X(B, semaphore_acquire, SEMAPHORE, relock_semaphore_acquire(SEM(o), 1, 0, NULL)) \
  X(B, semaphore_release, SEMAPHORE, relock_semaphore_release(SEM(o), 1)) \
  X(B, semaphore_try_set_permits, SEMAPHORE, relock_semaphore_try_set_permits(SEM(o), 1, NULL)) \
  X(B, semaphore_available, SEMAPHORE, relock_semaphore_available(SEM(o), NULL)) \
  X(B, semaphore_add_permits, SEMAPHORE, relock_semaphore_add_permits(SEM(o), 1, NULL)) \
  X(B, semaphore_drain_permits, SEMAPHORE, relock_semaphore_drain_permits(SEM(o), NULL)) \
  X(A, permit_semaphore_acquire_async, PERMITS, relock_permit_semaphore_acquire_async(PSEM(o), 0, 10000)) \
  X(A, permit_semaphore_release_async, PERMITS, relock_permit_semaphore_release_async(PSEM(o), ID)) \
  X(A, permit_semaphore_try_set_permits_async, PERMITS, relock_permit_semaphore_try_set_permits_async(PSEM(o), 1)) \
  X(A, permit_semaphore_add_permits_async, PERMITS, relock_permit_semaphore_add_permits_async(PSEM(o), 1)) \
  X(A, permit_semaphore_available_async, PERMITS, relock_permit_semaphore_available_async(PSEM(o))) \
  X(B, permit_semaphore_acquire, PERMITS, relock_permit_semaphore_acquire(PSEM(o), 0, 10000, NULL)) \
  X(B, permit_semaphore_release, PERMITS, relock_permit_semaphore_release(PSEM(o), ID, NULL)) \
  X(B, permit_semaphore_try_set_permits, PERMITS, relock_permit_semaphore_try_set_permits(PSEM(o), 1, NULL)) \
  X(B, permit_semaphore_available, PERMITS, relock_permit_semaphore_available(PSEM(o), NULL)) \
  X(B, permit_semaphore_add_permits, PERMITS, relock_permit_semaphore_add_permits(PSEM(o), 1, NULL)) \
  X(A, latch_try_set_count_async, LATCH, relock_latch_try_set_count_async(LAT(o), 1)) \
  X(A, latch_count_down_async, LATCH, relock_latch_count_down_async(LAT(o))) \
  X(A, latch_count_async, LATCH, relock_latch_count_async(LAT(o))) \
  X(A, latch_await_async, LATCH, relock_latch_await_async(LAT(o), 0)) \
  X(A, latch_delete_async, LATCH, relock_latch_delete_async(LAT(o))) \
  X(B, latch_await, LATCH, relock_latch_await(LAT(o), 0, NULL)) \
  X(B, latch_count_down, LATCH, relock_latch_count_down(LAT(o), NULL)) \
  X(B, latch_try_set_count, LATCH, relock_latch_try_set_count(LAT(o), 1, NULL)) \
  X(B, latch_count, LATCH, relock_latch_count(LAT(o), NULL)) \
  X(B, latch_delete, LATCH, relock_latch_delete(LAT(o), NULL))

#define RUN_A(expr) async_error(expr)
#define RUN_B(expr) (int)(expr)
#define DEFINE(k, id, applies, expr) \
  static int run_##id(relock_lock_t *o) { return RUN_##k(expr); }
CALLS(DEFINE)

#define ROW(k, id, applies, expr) {"relock_" #id, applies, run_##id},
static const call_t calls[] = {CALLS(ROW)};
#define NCALLS (sizeof calls / sizeof calls[0])

/* The group's calls, on a multi-lock or RedLock. */
typedef struct multi_call {
  const char *name;
  int (*run)(relock_multi_lock_t *m);
} multi_call_t;

static void noop_multi_lost(relock_multi_lock_t *m, uint64_t o, int r, const char *msg, void *a) {
  (void)m, (void)o, (void)r, (void)msg, (void)a;
}

#define MULTI_CALLS(X) \
  X(A, multi_lock_lock_async, relock_multi_lock_lock_async(m, 1, 0, RELOCK_INFINITE)) \
  X(A, multi_lock_unlock_async, relock_multi_lock_unlock_async(m, 1)) \
  X(B, multi_lock_results, relock_multi_lock_results(m, (int[2]){0}, 2)) \
  X(B, multi_lock_validity_ms, relock_multi_lock_validity_ms(m, 1)) \
  X(B, multi_lock_on_lost, relock_multi_lock_on_lost(m, noop_multi_lost, NULL)) \
  X(B, multi_lock_lock, relock_multi_lock_lock(m, RELOCK_INFINITE)) \
  X(B, multi_lock_try_lock, relock_multi_lock_try_lock(m, 0, RELOCK_INFINITE, NULL)) \
  X(B, multi_lock_unlock, relock_multi_lock_unlock(m))

#define DEFINE_M(k, id, expr) \
  static int run_##id(relock_multi_lock_t *m) { return RUN_##k(expr); }
MULTI_CALLS(DEFINE_M)

#define ROW_M(k, id, expr) {"relock_" #id, run_##id},
static const multi_call_t multi_calls[] = {MULTI_CALLS(ROW_M)};
#define NMULTI (sizeof multi_calls / sizeof multi_calls[0])

/* -- the check ----------------------------------------------------------------*/

enum { CLOSED, FREED };

static relock_client_t *client_for(const fx_server_t *fx, int threaded) {
  relock_error_t err;
  relock_client_t *c = relock_client_new(threaded ? NULL : fx_loop(), fx->opts, &err);
  if (c == NULL)
    fail_msg("relock_client_new: %s", err.message);
  return c;
}

/* Every object made on a live client, the client closed (or freed), then
 * every call on every object: each must answer RELOCK_ECLOSED. Lists every
 * call that did not, then fails with their number. */
static void check_after(const fx_server_t *fx, int threaded, int how) {
  relock_client_t *c = client_for(fx, threaded);
  relock_lock_t *objs[NKINDS];
  for (size_t k = 0; k < NKINDS; k++) {
    relock_error_t err;
    objs[k] = kinds[k].make(c, "lifetime", &err);
    if (objs[k] == NULL)
      fail_msg("%s: %s", kinds[k].name, err.message);
  }
  relock_lock_t *members[2] = {relock_lock_new(c, "m1", NULL), relock_lock_new(c, "m2", NULL)};
  relock_lock_t *red[2] = {relock_lock_new(c, "r1", NULL), relock_lock_new(c, "r2", NULL)};
  relock_multi_lock_t *multi = relock_multi_lock_new(members, 2, NULL);
  relock_multi_lock_t *redlock = relock_redlock_new(red, 2, NULL);
  assert_non_null(multi);
  assert_non_null(redlock);
  /* a hold, so that close has something of the objects' to let go of */
  assert_int_equal(fx_value(relock_lock_lock_async(objs[0], 7, 0, RELOCK_INFINITE)), 1);

  if (how == CLOSED)
    assert_int_equal(relock_client_close(c, NULL, NULL), 0);
  else
    relock_client_free(c);

  int wrong = 0;
  for (size_t k = 0; k < NKINDS; k++)
    for (size_t i = 0; i < NCALLS; i++) {
      if (!(calls[i].applies & kinds[k].is))
        continue;
      int r = calls[i].run(objs[k]);
      if (r != RELOCK_ECLOSED) {
        printf("# %s on a %s: %s (%s), not RELOCK_ECLOSED\n", calls[i].name, kinds[k].name, relock_err_name(r),
               relock_last_error_message());
        wrong++;
      }
    }
  relock_multi_lock_t *groups[2] = {multi, redlock};
  for (size_t g = 0; g < 2; g++)
    for (size_t i = 0; i < NMULTI; i++) {
      int r = multi_calls[i].run(groups[g]);
      if (r != RELOCK_ECLOSED) {
        printf("# %s on a %s: %s (%s), not RELOCK_ECLOSED\n", multi_calls[i].name, g ? "RedLock" : "multi-lock",
               relock_err_name(r), relock_last_error_message());
        wrong++;
      }
    }
  /* the getters still answer: they ask nothing of the client */
  assert_string_equal(relock_lock_name(objs[0]), "lifetime");
  assert_true(relock_lock_field(objs[0], 1, NULL, 0) > 1);
  assert_int_equal(relock_multi_lock_size(multi), 2);

  if (how == CLOSED) {
    /* nothing new on a closed client */
    for (size_t k = 0; k < NKINDS; k++) {
      relock_error_t err = {0, ""};
      relock_lock_t *o = kinds[k].make(c, "late", &err);
      if (o != NULL || err.code != RELOCK_ECLOSED) {
        printf("# a new %s on a closed client: %s (%s), not refused with RELOCK_ECLOSED\n", kinds[k].name,
               o != NULL ? "made" : relock_err_name(err.code), err.message);
        wrong++;
        relock_lock_free(o);
      }
    }
    /* nor a command of the client's own */
    const char *ping[] = {"PING"};
    relock_subscription_t *sub = NULL;
    struct {
      const char *name;
      relock_future_t *f;
    } own[] = {
        {"relock_client_command_async", relock_client_command_async(c, 1, ping, NULL)},
        {"relock_client_commandf_async", relock_client_commandf_async(c, "PING")},
        {"relock_client_subscribe_async", relock_client_subscribe_async(c, "ch", 2, noop_message, NULL, &sub)},
        {"relock_client_masters_async", relock_client_masters_async(c)},
        {"relock_client_command_at_async", relock_client_command_at_async(c, "127.0.0.1:1", 1, ping, NULL)},
    };
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
      int r = async_error(own[i].f);
      if (r != RELOCK_ECLOSED) {
        printf("# %s on a closed client: %s (%s), not RELOCK_ECLOSED\n", own[i].name, relock_err_name(r),
               relock_last_error_message());
        wrong++;
      }
    }
    relock_subscription_free(sub);
  }
  /* freed after the client (or, closed, before it): both are fine */
  for (size_t k = 0; k < NKINDS; k++)
    relock_lock_free(objs[k]);
  relock_multi_lock_free(multi);
  relock_multi_lock_free(redlock);
  if (how == CLOSED)
    relock_client_free(c);
  if (wrong > 0)
    fail_msg("%d calls on objects of a %s client did not answer RELOCK_ECLOSED", wrong,
             how == CLOSED ? "closed" : "freed");
}

static void test_embedded_after_close(void **state) { check_after(*state, 0, CLOSED); }
static void test_embedded_after_free(void **state) { check_after(*state, 0, FREED); }
static void test_threaded_after_close(void **state) { check_after(*state, 1, CLOSED); }
static void test_threaded_after_free(void **state) { check_after(*state, 1, FREED); }

/* An operation in flight when the client is freed ends with it; its future
 * and its object are the caller's to let go of afterwards, in any order. */
static void test_operation_in_flight_outlives_the_client(void **state) {
  fx_server_t *fx = *state;
  for (int threaded = 0; threaded < 2; threaded++) {
    relock_client_t *a = client_for(fx, threaded), *b = client_for(fx, threaded);
    relock_lock_t *la = relock_lock_new(a, "busy", NULL), *lb = relock_lock_new(b, "busy", NULL);
    assert_int_equal(fx_value(relock_lock_lock_async(la, 1, 0, RELOCK_INFINITE)), 1);
    relock_future_t *waiting = relock_lock_lock_async(lb, 2, RELOCK_INFINITE, RELOCK_INFINITE);
    assert_int_equal(relock_future_wait(waiting, 100), RELOCK_EPENDING);
    relock_client_free(b);
    assert_int_equal(relock_future_wait(waiting, fx_slack_ms(2000)), RELOCK_ECLOSED);
    relock_lock_free(lb);
    relock_future_release(waiting); /* after the object and the client */
    assert_int_equal(fx_value(relock_lock_unlock_async(la, 1)), 1);
    relock_lock_free(la);
    relock_client_free(a);
  }
}

/* The loop goes first: an embedded client whose loop the caller destroys
 * (ev_loop_destroy) before relock_client_free. The client detaches when
 * the loop is destroyed (its ev_cleanup watcher): what was pending fails
 * with RELOCK_ECLOSED, later calls answer it, and the objects, the
 * subscription, the futures and the client are freed safely afterwards.
 * In a forked child, so that a crash fails this case alone. */
static void loop_destroyed_first(const fx_server_t *fx) {
  struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
  if (loop == NULL)
    _exit(2);
  relock_client_t *c = relock_client_new(loop, fx->opts, NULL);
  relock_lock_t *l = relock_lock_new(c, "loop-destroyed", NULL);
  relock_future_t *held = relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE);
  if (c == NULL || l == NULL || relock_future_wait(held, fx_slack_ms(5000)) != 0 || !relock_future_bool(held))
    _exit(3);
  relock_future_t *waiting = relock_lock_lock_async(l, 2, RELOCK_INFINITE, RELOCK_INFINITE);
  relock_subscription_t *sub = NULL;
  relock_future_t *subscribed = relock_client_subscribe_async(c, "loop-destroyed", 14, NULL, NULL, &sub);
  relock_future_release(subscribed); /* refused (no callback): nothing on the loop */
  const char *ping[] = {"PING"};
  relock_future_t *inflight = relock_client_command_async(c, 1, ping, NULL);
  ev_loop_destroy(loop);
  printf("# after ev_loop_destroy: the waiter %s, the PING %s\n", relock_err_name(relock_future_error(waiting)), relock_err_name(relock_future_error(inflight)));
  if (relock_future_error(waiting) != RELOCK_ECLOSED || relock_future_error(inflight) == RELOCK_EPENDING)
    _exit(4);
  relock_future_t *after = relock_lock_unlock_async(l, 1);
  if (relock_future_error(after) != RELOCK_ECLOSED)
    _exit(5);
  relock_future_release(after);
  relock_future_release(held);
  relock_future_release(waiting);
  relock_future_release(inflight);
  relock_lock_free(l);
  relock_client_free(c);
  fflush(stdout);
  _exit(0);
}

static void test_loop_destroyed_before_free(void **state) {
  fflush(stdout);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL); /* not cmocka's: it would go on with the parent's tests */
    signal(SIGABRT, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    alarm((unsigned)(20 * relock_test_slowdown()));
    loop_destroyed_first(*state);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (WIFSIGNALED(status))
    fail_msg("crashed: signal %d (%s) after ev_loop_destroy", WTERMSIG(status), strsignal(WTERMSIG(status)));
  if (WEXITSTATUS(status) == 99)
    fail_msg("valgrind found memory errors or leaks after ev_loop_destroy (see the log)");
  if (WEXITSTATUS(status) != 0)
    fail_msg("the child failed at step %d (4: pending futures not failed with RELOCK_ECLOSED by the loop's "
             "destruction; 5: a later call not refused with it)", WEXITSTATUS(status));
}

#define T(name) cmocka_unit_test_setup_teardown(name, fx_server_setup, fx_server_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_embedded_after_close),
      T(test_embedded_after_free),
      T(test_threaded_after_close),
      T(test_threaded_after_free),
      T(test_operation_in_flight_outlives_the_client),
      T(test_loop_destroyed_before_free),
  };
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("no redis-server");
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("test_lifetime", tests, NULL, NULL);
}
