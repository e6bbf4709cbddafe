/* Freeing or closing a client from inside a future's callback works, in
 * every place a callback runs: the callback added to a completed future
 * (run at once, on the adding thread, with a threaded client's lock held),
 * one run by a cancel (in the cancelling thread, the lock held too), and
 * one run on the loop (the loop thread, threaded; the caller's loop,
 * embedded). The free is done once it is safe (relock_future(3),
 * relock_client(3)); nothing hangs. Each scenario runs in a thread of its
 * own joined with a deadline, so that a deadlock fails the test instead
 * of hanging it. Against a real redis-server. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <config.h>

#include <dirent.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "support/client_fixture.h"


/* One scenario: what its callback does, where the callback ran, and
 * whether it returned. */
typedef struct scene {
  const fx_server_t *fx;
  int threaded;
  int close;           /* the callback closes (the scenario frees later); else it frees */
  int at_once;         /* the callback is added to a completed future */
  int cancel;          /* the callback runs in the thread that cancels its future */
  relock_client_t *client;
  pthread_t caller;    /* the thread that adds the callback */
  int ran;             /* atomic */
  int on_caller;       /* it ran on the caller's thread */
  int returned;        /* relock_client_free / _close returned (atomic) */
  int close_result;
  int closed;          /* the close callback ran (atomic) */
  char error[512];
} scene_t;

static void on_closed(relock_client_t *c, void *arg) {
  (void)c;
  __atomic_store_n(&((scene_t *)arg)->closed, 1, __ATOMIC_SEQ_CST);
}

static void in_callback(relock_future_t *f, void *arg) {
  (void)f;
  scene_t *s = arg;
  s->on_caller = pthread_equal(pthread_self(), s->caller);
  __atomic_store_n(&s->ran, 1, __ATOMIC_SEQ_CST);
  if (s->close)
    s->close_result = relock_client_close(s->client, on_closed, s);
  else
    relock_client_free(s->client);
  __atomic_store_n(&s->returned, 1, __ATOMIC_SEQ_CST);
}

static int flag(void *arg) { return __atomic_load_n((int *)arg, __ATOMIC_SEQ_CST); }

/* Waits (running the loop, embedded) until *what is set. */
static int await_flag(scene_t *s, int *what, int64_t ms) {
  if (!s->threaded)
    return fx_run_until(fx_loop(), flag, what, ms);
  uint64_t deadline = relock__now_ns() + (uint64_t)fx_slack_ms(ms) * 1000000u;
  while (!flag(what) && relock__now_ns() < deadline)
    usleep(1000);
  return flag(what);
}

/* The process's threads (/proc/self/task): a threaded client's loop
 * thread ends only when the client is freed. */
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

static int threads_are(void *arg) { return threads_now() == *(int *)arg; }

static void *run_scene(void *arg) {
  scene_t *s = arg;
  s->caller = pthread_self();
  int before = threads_now();
  relock_error_t err;
  s->client = relock_client_new(s->threaded ? NULL : fx_loop(), s->fx->opts, &err);
  if (s->client == NULL) {
    snprintf(s->error, sizeof s->error, "relock_client_new: %.200s", err.message);
    return NULL;
  }
  /* At once: a PING already answered. On the loop: a BLPOP that Redis
   * answers (nil) 200 ms later, the callback added before. */
  const char *ping[] = {"PING"}, *blpop[] = {"BLPOP", "free-in-callback", "0.2"};
  relock_future_t *f = s->at_once ? relock_client_command_async(s->client, 1, ping, NULL)
                                  : relock_client_command_async(s->client, 3, blpop, NULL);
  if (s->at_once && relock_future_wait(f, fx_slack_ms(5000)) != 0) {
    snprintf(s->error, sizeof s->error, "PING: %s", relock_future_message(f));
    relock_future_release(f);
    relock_client_free(s->client);
    return NULL;
  }
  int r = relock_future_on_done(f, in_callback, s);
  if (r == 0 && s->cancel && !relock_future_cancel(f))
    snprintf(s->error, sizeof s->error, "the BLPOP was not pending: nothing to cancel");
  relock_future_release(f);
  if (r != 0) {
    snprintf(s->error, sizeof s->error, "relock_future_on_done: %s", relock_err_name(r));
    return NULL;
  }
  if (!await_flag(s, &s->returned, 5000)) {
    snprintf(s->error, sizeof s->error, "the callback %s", s->ran ? "never returned" : "never ran");
    return NULL;
  }
  if (s->close) {
    if (s->close_result != 0)
      snprintf(s->error, sizeof s->error, "relock_client_close from the callback: %s",
               relock_err_name(s->close_result));
    else if (!await_flag(s, &s->closed, 5000))
      snprintf(s->error, sizeof s->error, "the close callback never ran");
    relock_client_free(s->client);
  } else if (!s->threaded) {
    fx_run_for(fx_loop(), 50); /* the deferred free completes on the loop (valgrind checks it did) */
  }
  /* Threaded, the free is done when the loop thread is gone: it was. */
  uint64_t deadline = relock__now_ns() + (uint64_t)fx_slack_ms(5000) * 1000000u;
  while (s->threaded && !threads_are(&before) && relock__now_ns() < deadline)
    usleep(1000);
  if (s->threaded && !threads_are(&before) && s->error[0] == '\0')
    snprintf(s->error, sizeof s->error, "the client's loop thread still runs: %d threads, %d before the client",
             threads_now(), before);
  return NULL;
}

/* Runs s in a thread of its own: a deadlock is a failure, not a hang. */
static void play(scene_t *s) {
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, run_scene, s), 0);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 10 * relock_test_slowdown();
  if (pthread_timedjoin_np(t, NULL, &ts) != 0)
    fail_msg("hung: relock_client_%s from a callback (%s client, %s) has not returned after %d s (deadlock)",
             s->close ? "close" : "free", s->threaded ? "threaded" : "embedded",
             s->at_once  ? "the at-once callback of a completed future"
             : s->cancel ? "a callback run by relock_future_cancel"
                         : "a callback on the loop",
             10 * relock_test_slowdown());
  if (s->error[0] != '\0')
    fail_msg("%s", s->error);
  assert_true(s->ran);
  if (s->at_once || s->cancel)
    assert_true(s->on_caller);
  else if (s->threaded)
    assert_false(s->on_caller); /* on the loop thread */
}

static void test_threaded_free_at_once(void **state) {
  scene_t s = {.fx = *state, .threaded = 1, .at_once = 1};
  play(&s);
}

static void test_threaded_close_at_once(void **state) {
  scene_t s = {.fx = *state, .threaded = 1, .at_once = 1, .close = 1};
  play(&s);
}

static void test_threaded_free_on_loop_thread(void **state) {
  scene_t s = {.fx = *state, .threaded = 1};
  play(&s);
}

static void test_threaded_close_on_loop_thread(void **state) {
  scene_t s = {.fx = *state, .threaded = 1, .close = 1};
  play(&s);
}

/* A cancel runs the callbacks in the cancelling thread, the lock held. */
static void test_threaded_free_in_cancel(void **state) {
  scene_t s = {.fx = *state, .threaded = 1, .cancel = 1};
  play(&s);
}

/* Embedded: the scenario's thread makes the loop's client and runs the
 * loop; fx_loop is the process's, used by one thread at a time. */
static void test_embedded_free_at_once(void **state) {
  scene_t s = {.fx = *state, .at_once = 1};
  play(&s);
}

static void test_embedded_free_on_loop(void **state) {
  scene_t s = {.fx = *state};
  play(&s);
}

static void test_embedded_close_at_once(void **state) {
  scene_t s = {.fx = *state, .at_once = 1, .close = 1};
  play(&s);
}

#define T(name) cmocka_unit_test_setup_teardown(name, fx_server_setup, fx_server_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_threaded_free_at_once),
      T(test_threaded_close_at_once),
      T(test_threaded_free_on_loop_thread),
      T(test_threaded_close_on_loop_thread),
      T(test_threaded_free_in_cancel),
      T(test_embedded_free_at_once),
      T(test_embedded_free_on_loop),
      T(test_embedded_close_at_once),
  };
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("no redis-server");
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("test_free_in_callback", tests, NULL, NULL);
}
