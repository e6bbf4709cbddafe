/* Threads: a client made without a loop runs its own loop thread, so a held
 * lock is renewed while the program does anything else, and every thread
 * may call it; a client on the caller's loop refuses other threads; a
 * blocked lock() can be interrupted; freeing the client releases blocked
 * threads; a forked child is refused. Against a real redis-server. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <config.h>

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/client_fixture.h"


/* A threaded client (NULL loop), as a simple program makes one. */
static relock_client_t *threaded(const relock_options_t *opts) {
  relock_error_t err;
  relock_client_t *c = relock_client_new(NULL, opts, &err);
  if (c == NULL)
    fail_msg("relock_client_new: %s", err.message);
  return c;
}

static relock_lock_t *lock_of(relock_client_t *c, const char *name) {
  relock_error_t err;
  relock_lock_t *l = relock_lock_new(c, name, &err);
  if (l == NULL)
    fail_msg("relock_lock_new: %s", err.message);
  return l;
}

/* Ends a forked child with code. Through exec, not _exit: the child holds
 * a copy of the parent's threaded client, which by design it must not
 * touch (let alone free), and valgrind would count that copy as the
 * child's leak at its exit. */
static void child_exit(int code) {
  char cmd[16];
  snprintf(cmd, sizeof cmd, "exit %d", code);
  execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
  _exit(code); /* no shell: the plain way */
}

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0)
    ;
}

/* -- the README's first program keeps its lock ------------------------------*/

/* In a child process with a client of its own: tries the lock every 100 ms
 * for ms; exits 1 if it ever got it, 0 if never, 2 on an error. The client
 * is an embedded one on a loop of the child's own (the sync calls drive it):
 * a child of a multi-threaded process should not start threads (glibc's
 * state after fork is only half-defined, and ThreadSanitizer kills such a
 * child outright), and which mode the contender uses is not what this test
 * is about. */
static void contender(const relock_options_t *opts, const char *name, int64_t ms) {
  struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
  if (loop == NULL)
    child_exit(2);
  relock_client_t *c = relock_client_new(loop, opts, NULL);
  if (c == NULL)
    child_exit(2);
  relock_lock_t *l = lock_of(c, name);
  uint64_t t0 = relock__now_ns();
  int got = 0, rc = 0;
  while (!got && rc == 0 && fx_ms_since(t0) < (double)ms) {
    rc = relock_lock_try_lock(l, 0, RELOCK_INFINITE, &got);
    if (!got)
      sleep_ms(100);
  }
  if (got)
    relock_lock_unlock(l);
  relock_lock_free(l);
  relock_client_free(c);
  ev_loop_destroy(loop);
  child_exit(rc != 0 ? 2 : got);
}

static void test_readme_program_keeps_its_lease(void **state) {
  fx_server_t *fx = *state;
  relock_options_t *opts = fx_copy(fx->opts);
  fx_set_ms(opts, RELOCK_OPT_WATCHDOG_TIMEOUT, 1000);
  /* The README's program, with a 1 s watchdog: lock, work 3 s, unlock. */
  relock_client_t *client = relock_client_new(NULL, opts, NULL);
  assert_non_null(client);
  relock_lock_t *lock = relock_lock_new(client, "invoices:run", NULL);
  assert_int_equal(relock_lock_lock(lock, RELOCK_INFINITE), 0);

  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0)
    contender(opts, "invoices:run", 3000);
  sleep_ms(3000); /* no library call: only the loop thread can renew */
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0); /* never acquired while we held it */

  assert_int_equal(relock_lock_unlock(lock), 0);
  relock_lock_free(lock);
  relock_client_free(client);
  relock_options_free(opts);
}

/* -- many threads, one client -------------------------------------------------*/

typedef struct work {
  relock_client_t *client;
  int names;           /* the lock names to spread over (1: all contend) */
  int sections;        /* per thread */
  long *counters;      /* one per name, incremented non-atomically under the lock */
  int index;
  int failures;
} work_t;

static void *worker(void *arg) {
  work_t *w = arg;
  relock_lock_t *locks[64];
  for (int i = 0; i < w->names; i++) {
    char name[32];
    snprintf(name, sizeof name, "threads:%d", i);
    locks[i] = relock_lock_new(w->client, name, NULL);
  }
  for (int s = 0; s < w->sections; s++) {
    int i = (s + w->index) % w->names;
    if (relock_lock_lock(locks[i], RELOCK_INFINITE) != 0) {
      w->failures++;
      continue;
    }
    long v = w->counters[i]; /* a torn increment shows a second holder */
    sched_yield();
    w->counters[i] = v + 1;
    if (relock_lock_unlock(locks[i]) != 0)
      w->failures++;
  }
  for (int i = 0; i < w->names; i++)
    relock_lock_free(locks[i]);
  return NULL;
}

static void run_threads(fx_server_t *fx, int nthreads, int names, int sections) {
  relock_client_t *c = threaded(fx->opts);
  long counters[64] = {0};
  pthread_t t[16];
  work_t w[16];
  for (int i = 0; i < nthreads; i++) {
    w[i] = (work_t){.client = c, .names = names, .sections = sections, .counters = counters, .index = i};
    assert_int_equal(pthread_create(&t[i], NULL, worker, &w[i]), 0);
  }
  long total = 0;
  for (int i = 0; i < nthreads; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(w[i].failures, 0);
  }
  for (int i = 0; i < names; i++)
    total += counters[i];
  assert_int_equal(total, (long)nthreads * sections);
  relock_client_free(c);
}

static void test_eight_threads_one_name(void **state) {
  int rounds = relock_test_under_valgrind() ? 1 : 20;
  int sections = relock_test_under_valgrind() ? 20 : 300;
  for (int r = 0; r < rounds; r++)
    run_threads(*state, 8, 1, sections);
}

static void test_eight_threads_sixty_four_names(void **state) {
  run_threads(*state, 8, 64, relock_test_under_valgrind() ? 64 : 640);
}

/* -- acquire in one thread, release in another --------------------------------*/

typedef struct handover {
  relock_lock_t *lock;
  uint64_t owner;
  int rc;
} handover_t;

static void *release_it(void *arg) {
  handover_t *h = arg;
  relock_future_t *f = relock_lock_unlock_async(h->lock, h->owner);
  h->rc = relock_future_wait(f, fx_slack_ms(5000));
  relock_future_release(f);
  return NULL;
}

static void test_acquire_in_one_thread_release_in_another(void **state) {
  fx_server_t *fx = *state;
  relock_client_t *c = threaded(fx->opts);
  relock_lock_t *l = lock_of(c, "threads:handover");
  relock_future_t *f = relock_lock_lock_async(l, 4242, RELOCK_INFINITE, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(f, fx_slack_ms(5000)), 0);
  assert_true(relock_future_bool(f));
  relock_future_release(f);
  handover_t h = {l, 4242, -1};
  pthread_t t;
  pthread_create(&t, NULL, release_it, &h);
  pthread_join(t, NULL);
  assert_int_equal(h.rc, 0);
  int locked = 1;
  assert_int_equal(relock_lock_is_locked(l, &locked), 0);
  assert_false(locked);
  relock_lock_free(l);
  relock_client_free(c);
}

/* -- embedded mode refuses other threads -------------------------------------*/

typedef struct foreign {
  relock_client_t *client;
  relock_lock_t *lock;
  int acquire_err;
  int command_err;
  int blocking_err;
  char message[256];
} foreign_t;

static void *call_from_elsewhere(void *arg) {
  foreign_t *x = arg;
  relock_future_t *f = relock_lock_lock_async(x->lock, 1, 0, 1000);
  x->acquire_err = relock_future_error(f);
  snprintf(x->message, sizeof x->message, "%s", relock_future_message(f));
  relock_future_release(f);
  f = relock_client_commandf_async(x->client, "PING");
  x->command_err = relock_future_error(f);
  relock_future_release(f);
  x->blocking_err = relock_lock_lock(x->lock, 1000);
  return NULL;
}

static void test_embedded_client_refuses_other_threads(void **state) {
  fx_server_t *fx = *state;
  relock_client_t *c = fx_client(fx->opts); /* on the fixture's loop, this thread's */
  relock_lock_t *l = lock_of(c, "threads:embedded");
  foreign_t x = {.client = c, .lock = l};
  pthread_t t;
  pthread_create(&t, NULL, call_from_elsewhere, &x);
  pthread_join(t, NULL);
  assert_int_equal(x.acquire_err, RELOCK_EWRONGTHREAD);
  assert_non_null(strstr(x.message, "another thread"));
  char owner[64]; /* it names the loop's thread: this one */
  snprintf(owner, sizeof owner, "(thread %llu)", (unsigned long long)relock_thread_owner());
  assert_non_null(strstr(x.message, owner));
  assert_int_equal(x.command_err, RELOCK_EWRONGTHREAD);
  assert_int_equal(x.blocking_err, RELOCK_EWRONGTHREAD);
  /* The loop's own thread goes on as if nothing happened. */
  relock_future_t *f = relock_lock_lock_async(l, 1, 0, 1000);
  assert_int_equal(relock_future_wait(f, fx_slack_ms(5000)), 0);
  assert_true(relock_future_bool(f));
  relock_future_release(f);
  relock_lock_free(l);
  relock_client_free(c);
}

/* -- interrupting a blocked lock() -------------------------------------------*/

typedef struct blocked {
  relock_lock_t *lock;
  uint64_t owner;      /* set by the thread */
  volatile int started;
  int rc;
  char message[256];
} blocked_t;

static void *block_in_lock(void *arg) {
  blocked_t *b = arg;
  b->owner = relock_thread_owner();
  __atomic_store_n(&b->started, 1, __ATOMIC_RELEASE);
  b->rc = relock_lock_lock(b->lock, RELOCK_INFINITE);
  snprintf(b->message, sizeof b->message, "%s", relock_last_error_message());
  return NULL;
}

/* Waits until b's thread is blocked in lock(): its acquisition is listed. */
static void wait_blocked(relock_client_t *c, blocked_t *b) {
  while (!__atomic_load_n(&b->started, __ATOMIC_ACQUIRE))
    sleep_ms(1);
  for (int i = 0; i < 5000; i++) {
    relock__exec_lock(c->exec);
    int listed = !relock__list_empty(&c->blocked);
    relock__exec_unlock(c->exec);
    if (listed)
      return;
    sleep_ms(1);
  }
  fail_msg("the thread never blocked in lock()");
}

/* A lock of c that owner 7 holds: a blocking lock() of any thread waits. */
static relock_lock_t *held_by_another(relock_client_t *c, const char *name) {
  relock_lock_t *l = lock_of(c, name);
  relock_future_t *held = relock_lock_lock_async(l, 7, 0, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(held, fx_slack_ms(5000)), 0);
  assert_true(relock_future_bool(held));
  relock_future_release(held);
  return l;
}

static void test_interrupt_a_blocked_lock(void **state) {
  fx_server_t *fx = *state;
  relock_client_t *c = threaded(fx->opts);
  relock_lock_t *l = held_by_another(c, "threads:interrupt");

  blocked_t b = {.lock = l};
  pthread_t t;
  pthread_create(&t, NULL, block_in_lock, &b);
  wait_blocked(c, &b);
  sleep_ms(50); /* it is waiting for the unlock message by now */
  assert_int_equal(relock_lock_interrupt(l, b.owner), 1);
  pthread_join(t, NULL);
  assert_int_equal(b.rc, RELOCK_EINTERRUPTED);
  assert_non_null(strstr(b.message, "interrupted"));
  /* It does not hold the lock; the first owner still does. */
  relock_future_t *f = relock_lock_is_held_by_thread_async(l, b.owner);
  assert_int_equal(relock_future_wait(f, fx_slack_ms(5000)), 0);
  assert_false(relock_future_bool(f));
  relock_future_release(f);
  f = relock_lock_hold_count_async(l, 7);
  assert_int_equal(relock_future_wait(f, fx_slack_ms(5000)), 0);
  assert_int_equal(relock_future_int(f), 1);
  relock_future_release(f);
  assert_int_equal(relock_lock_interrupt(l, b.owner), 0); /* nothing left to interrupt */
  relock_lock_free(l);
  relock_client_free(c);
}

/* Interrupted twice before it wakes: the second finds the wait cancelled
 * already (and interrupts nothing more), but the blocked call still
 * reports the interruption, message included. Both interrupts run under
 * the client's mutex, which the woken thread needs to return: it cannot
 * wake in between. */
static void test_interrupt_twice_still_reports_the_interruption(void **state) {
  fx_server_t *fx = *state;
  relock_client_t *c = threaded(fx->opts);
  relock_lock_t *l = held_by_another(c, "threads:interrupt-twice");

  blocked_t b = {.lock = l};
  pthread_t t;
  pthread_create(&t, NULL, block_in_lock, &b);
  wait_blocked(c, &b);
  relock__exec_lock(c->exec); /* recursive: the interrupts take it again */
  assert_int_equal(relock_lock_interrupt(l, b.owner), 1);
  assert_int_equal(relock_lock_interrupt(l, b.owner), 0); /* cancelled already */
  relock__exec_unlock(c->exec);
  pthread_join(t, NULL);
  assert_int_equal(b.rc, RELOCK_EINTERRUPTED);
  assert_non_null(strstr(b.message, "interrupted"));
  relock_lock_free(l);
  relock_client_free(c);
}

/* How many blocking acquisitions c lists. */
static int blocked_count(relock_client_t *c) {
  int n = 0;
  relock__exec_lock(c->exec);
  for (relock__link_t *l = c->blocked.next; l != &c->blocked; l = l->next)
    n++;
  relock__exec_unlock(c->exec);
  return n;
}

/* Joins t within ms, failing (not hanging) when it does not return. */
static void join_within(pthread_t t, int64_t ms, const char *what) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += (time_t)(ms / 1000);
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  if (pthread_timedjoin_np(t, NULL, &ts) != 0)
    fail_msg("%s did not return within %lld ms", what, (long long)ms);
}

/* Found by the truth checker (tests/truth): two threads wait for one lock,
 * so interrupting one undoes nothing on the wire (the other still needs the
 * subscription) and no reply comes to wake anyone. The interrupted thread
 * must wake all the same - a cancellation wakes the threads waiting on the
 * future, as a completion does. */
static void test_interrupt_wakes_with_nothing_else_happening(void **state) {
  fx_server_t *fx = *state;
  relock_client_t *c = threaded(fx->opts);
  relock_lock_t *l = held_by_another(c, "threads:interrupt-quiet");
  blocked_t b[2] = {{.lock = l}, {.lock = l}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, block_in_lock, &b[i]);
  for (int i = 0; i < 2000 && blocked_count(c) < 2; i++)
    sleep_ms(1);
  assert_int_equal(blocked_count(c), 2);
  sleep_ms(100); /* both wait for the unlock message by now: the wire is quiet */
  for (int i = 0; i < 2; i++) {
    assert_int_equal(relock_lock_interrupt(l, b[i].owner), 1);
    join_within(t[i], fx_slack_ms(3000), "the interrupted lock()");
    assert_int_equal(b[i].rc, RELOCK_EINTERRUPTED);
  }
  relock_lock_free(l);
  relock_client_free(c);
}

/* -- freeing the client releases blocked threads ----------------------------*/

/* -- waits: each thread asleep on a word of its own ------------------------------*/

typedef struct waiting {
  relock_future_t *future;
  int rc;
} waiting_t;

static void *wait_on(void *arg) {
  waiting_t *w = arg;
  w->rc = relock_future_wait(w->future, fx_slack_ms(5000));
  return NULL;
}

/* Writes over the stack a finished wait kept its record on. */
static void __attribute__((noinline)) scribble(void) {
  volatile char junk[4096];
  for (size_t i = 0; i < sizeof(junk); i++)
    junk[i] = (char)0xa5;
}

/* A wait that gives up leaves nothing behind that the future's completion
 * would touch later (its record was on the stack, written over here), and
 * three threads waiting for one future are all woken when it completes.
 * BLPOP answers when its own timeout passes, nothing else happening on the
 * connection meanwhile. */
static void test_a_timed_out_wait_leaves_nothing_and_every_waiter_wakes(void **state) {
  fx_server_t *fx = *state;
  relock_client_t *c = threaded(fx->opts);
  relock_future_t *f = relock_client_commandf_async(c, "BLPOP threads:nothing %s", "0.5");
  assert_non_null(f);
  assert_int_equal(relock_future_wait(f, 50), RELOCK_EPENDING);
  scribble();
  waiting_t w[3];
  pthread_t t[3];
  for (int i = 0; i < 3; i++) {
    w[i] = (waiting_t){f, -1};
    assert_int_equal(pthread_create(&t[i], NULL, wait_on, &w[i]), 0);
  }
  for (int i = 0; i < 3; i++)
    join_within(t[i], fx_slack_ms(3000), "a wait for the BLPOP");
  for (int i = 0; i < 3; i++)
    assert_int_equal(w[i].rc, 0);
  const relock_reply_t *reply = relock_future_reply(f);
  assert_non_null(reply);
  assert_int_equal(reply->type, RELOCK_REPLY_NIL);
  relock_future_release(f);
  relock_client_free(c);
}

static void test_free_releases_blocked_threads(void **state) {
  fx_server_t *fx = *state;
  relock_client_t *c = threaded(fx->opts);
  relock_lock_t *l = held_by_another(c, "threads:free");
  blocked_t b[3] = {{.lock = l}, {.lock = l}, {.lock = l}};
  pthread_t t[3];
  for (int i = 0; i < 3; i++)
    pthread_create(&t[i], NULL, block_in_lock, &b[i]);
  for (int i = 0; i < 3; i++)
    wait_blocked(c, &b[i]);
  sleep_ms(50);
  relock_client_free(c);
  for (int i = 0; i < 3; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(b[i].rc, RELOCK_ECLOSED);
  }
  relock_lock_free(l); /* after its client: allowed */
}

/* -- fork ----------------------------------------------------------------------*/

static void test_forked_child_is_refused(void **state) {
  fx_server_t *fx = *state;
  relock_client_t *c = threaded(fx->opts);
  relock_lock_t *l = lock_of(c, "threads:fork");
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int ok = relock_lock_lock(l, 1000) == RELOCK_EFORKED &&
             strstr(relock_last_error_message(), "fork") != NULL;
    relock_future_t *f = relock_client_commandf_async(c, "PING");
    ok = ok && relock_future_error(f) == RELOCK_EFORKED;
    relock_future_release(f);
    child_exit(ok ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  /* The parent's client is untouched. */
  assert_int_equal(relock_lock_lock(l, 1000), 0);
  assert_int_equal(relock_lock_unlock(l), 0);
  relock_lock_free(l);
  relock_client_free(c);
}

static void *owner_of_thread(void *arg) {
  uint64_t *ids = arg;
  ids[0] = relock_thread_owner();
  ids[1] = relock_thread_owner(); /* asked again: the same */
  ids[2] = (uint64_t)syscall(SYS_gettid);
  return NULL;
}

/* relock_thread_owner is the calling thread's id however often it is asked
 * (the library keeps it per thread), and a forked child's is its own, not
 * the id of the parent's thread it was forked from. */
static void test_thread_owner_is_the_thread_id(void **state) {
  (void)state;
  uint64_t self = relock_thread_owner();
  assert_int_equal(self, (uint64_t)syscall(SYS_gettid));
  assert_int_equal(relock_thread_owner(), self);
  uint64_t ids[3] = {0};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, owner_of_thread, ids), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(ids[0], ids[2]);
  assert_int_equal(ids[1], ids[2]);
  assert_int_not_equal(ids[0], self);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) /* the child's one thread: its id is its pid */
    child_exit(relock_thread_owner() == (uint64_t)getpid() && relock_thread_owner() != self ? 0 : 1);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_int_equal(relock_thread_owner(), self); /* the parent's is unchanged */
}

#define T(name) cmocka_unit_test_setup_teardown(name, fx_server_setup, fx_server_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_readme_program_keeps_its_lease),
      T(test_eight_threads_one_name),
      T(test_eight_threads_sixty_four_names),
      T(test_acquire_in_one_thread_release_in_another),
      T(test_embedded_client_refuses_other_threads),
      T(test_interrupt_a_blocked_lock),
      T(test_interrupt_twice_still_reports_the_interruption),
      T(test_interrupt_wakes_with_nothing_else_happening),
      T(test_a_timed_out_wait_leaves_nothing_and_every_waiter_wakes),
      T(test_free_releases_blocked_threads),
      T(test_forked_child_is_refused),
      T(test_thread_owner_is_the_thread_id),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP); /* the harness counts the cases */
  return cmocka_run_group_tests_name("threads", tests, NULL, NULL);
}
