/* relock against real Redisson (tests/interop/Peer.java, Redisson from
 * Maven Central) on one private redis-server: for each kind of lock, a Java
 * holder's release wakes a C waiter and a C holder's release wakes a Java
 * waiter within 50 ms (pub/sub, not polling: the holders' leases are long);
 * a fair queue of C and Java waiters keeps its order, and a Java tryLock
 * queued behind C waiters keeps its place (Redisson's deadline arithmetic);
 * Java readers and a C writer exclude each other both ways; fenced tokens
 * increase across both;
 * Redisson's forceUnlock is noticed by a C holder as a loss; semaphore
 * permits and a count-down latch's opening go both ways within 50 ms; a
 * watched C permit stays taken for Redisson past its first lease, and
 * Redisson's tryRelease of it is a loss for C. */
#include <config.h>

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <relock/latch.h>
#include <relock/permit_semaphore.h>
#include <relock/semaphore.h>

#include "support/client_fixture.h"
#include "support/java_peer.h"

#define HANDOFF_MS 50 /* the bound: a release to the other side's acquisition */

typedef struct {
  relock_test_redis_t *redis;
  relock_options_t *cfg;
  relock_client_t *c; /* threaded: its loop runs while the test reads the peer */
  java_peer_t *java;
} fx_t;

static int setup(void **state) {
  fx_t *fx = calloc(1, sizeof(*fx));
  fx->redis = relock_test_redis_start(NULL);
  if (fx->redis == NULL)
    return -1;
  fx->cfg = fx_options(fx->redis, 0);
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 1500);
  char url[128];
  snprintf(url, sizeof url, "redis://%s:%d", relock_test_redis_host(fx->redis), relock_test_redis_port(fx->redis));
  fx->java = java_peer_start(url, 0, 0);
  relock_error_t err;
  fx->c = relock_client_new(NULL, fx->cfg, &err);
  if (fx->c == NULL)
    fail_msg("client: %s", err.message);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fx_t *fx = *state;
  relock_client_free(fx->c);
  java_peer_stop(fx->java);
  relock_test_redis_free(fx->redis);
  relock_options_free(fx->cfg);
  free(fx);
  return 0;
}

typedef relock_lock_t *(*make_fn)(relock_client_t *c, const char *name, relock_error_t *err);

/* The Java kind for a C constructor. */
static const struct {
  make_fn make;
  const char *java;
} kinds[] = {{relock_lock_new, "lock"},     {relock_fair_lock_new, "fair"},     {relock_write_lock_new, "write"},
             {relock_fenced_lock_new, "fenced"}, {relock_spin_lock_new, "spin"}, {relock_read_lock_new, "read"}};

static const char *java_kind(make_fn make) {
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (kinds[i].make == make)
      return kinds[i].java;
  return "?";
}

/* When a future completed, on the client's loop thread. */
typedef struct done_at {
  pthread_mutex_t mu;
  uint64_t ns;
} done_at_t;

static void record(relock_future_t *f, void *arg) {
  (void)f;
  done_at_t *d = arg;
  pthread_mutex_lock(&d->mu);
  d->ns = relock__now_ns();
  pthread_mutex_unlock(&d->mu);
}

static uint64_t done_ns(done_at_t *d) {
  pthread_mutex_lock(&d->mu);
  uint64_t ns = d->ns;
  pthread_mutex_unlock(&d->mu);
  return ns;
}

static double ms_between(uint64_t later, uint64_t earlier) {
  return later >= earlier ? (double)(later - earlier) / 1e6 : -(double)(earlier - later) / 1e6;
}

static void within_handoff(const char *what, double ms, double bound) {
  printf("# %s: %.2f ms\n", what, ms);
  if (ms >= (double)fx_slack_ms((int64_t)bound))
    fail_msg("%s took %.2f ms (bound %.0f ms)", what, ms, bound);
}

/* C waits on wait (still pending after 300 ms); the peer's tag runs line,
 * whose op answers "ok"; wait completes within bound of that answer
 * (reported as what). Returns wait's value; releases wait. */
static int64_t c_woken_by_java(fx_t *fx, relock_future_t *wait, const char *tag, const char *op, const char *line,
                               const char *what, double bound) {
  done_at_t got = {PTHREAD_MUTEX_INITIALIZER, 0};
  relock_future_on_done(wait, record, &got);
  assert_int_equal(relock_future_wait(wait, 300), RELOCK_EPENDING);
  uint64_t java_ns;
  java_peer_send(fx->java, "%s", line);
  assert_string_equal(java_peer_expect(fx->java, tag, op, 10000, &java_ns), "ok");
  int64_t value = fx_value(relock_future_retain(wait));
  relock_future_release(wait);
  within_handoff(what, ms_between(done_ns(&got), java_ns), bound);
  return value;
}

/* Java holds (a 30 s lease: its TTL cannot explain a prompt wake-up), C
 * waits; Java releases; C has it within the bound. */
static void java_to_c(fx_t *fx, make_fn make, const char *name, const char *java_holder_kind, double bound) {
  relock_lock_t *l = make(fx->c, name, NULL);
  java_peer_send(fx->java, "j1 lock %s %s 30000", java_holder_kind, name);
  java_peer_expect(fx->java, "j1", "lock", 10000, NULL);
  relock_future_t *wait = relock_lock_lock_async(l, 1, 20000, RELOCK_INFINITE);
  char line[256], what[128];
  snprintf(line, sizeof line, "j1 unlock %s %s", java_holder_kind, name);
  snprintf(what, sizeof what, "Java %s release -> C %s acquisition", java_holder_kind, java_kind(make));
  assert_true(c_woken_by_java(fx, wait, "j1", "unlock", line, what, bound) >= 1);
  assert_int_equal(fx_value(relock_lock_unlock_async(l, 1)), 1);
  relock_lock_free(l);
}

/* C holds, Java waits; C releases; Java has it within the bound. */
static void c_to_java(fx_t *fx, make_fn make, const char *name, const char *java_waiter_kind, double bound) {
  relock_lock_t *l = make(fx->c, name, NULL);
  assert_true(fx_value(relock_lock_lock_async(l, 1, 0, 30000)) >= 1);
  java_peer_send(fx->java, "j2 lock %s %s -1", java_waiter_kind, name);
  assert_false(java_peer_has(fx->java, "j2", "lock", 300)); /* waiting */
  assert_int_equal(fx_value(relock_lock_unlock_async(l, 1)), 1);
  uint64_t released = relock__now_ns(), acquired;
  java_peer_expect(fx->java, "j2", "lock", 10000, &acquired);
  char what[128];
  snprintf(what, sizeof what, "C %s release -> Java %s acquisition", java_kind(make), java_waiter_kind);
  within_handoff(what, ms_between(acquired, released), bound);
  java_peer_send(fx->java, "j2 unlock %s %s", java_waiter_kind, name);
  assert_string_equal(java_peer_expect(fx->java, "j2", "unlock", 10000, NULL), "ok");
  relock_lock_free(l);
}

/* -- each kind, both ways ---------------------------------------------------------*/

static void test_lock_both_ways(void **state) {
  java_to_c(*state, relock_lock_new, "i-lock", "lock", HANDOFF_MS);
  c_to_java(*state, relock_lock_new, "i-lock", "lock", HANDOFF_MS);
}

/* A C release with a C waiter registered names that process on the unlock
 * channel (a waker id) before Redisson's "0": Redisson's waiter takes the
 * id for a number that is neither of its messages, still wakes on the "0",
 * and both waiters get the lock in turn. */
static void test_c_waker_id_and_a_java_waiter(void **state) {
  fx_t *fx = *state;
  relock_error_t err;
  relock_client_t *c2 = relock_client_new(NULL, fx->cfg, &err);
  assert_non_null(c2);
  relock_lock_t *l = relock_lock_new(fx->c, "i-herd", NULL), *l2 = relock_lock_new(c2, "i-herd", NULL);
  assert_int_equal(fx_value(relock_lock_lock_async(l, 1, 0, 30000)), 1);
  relock_future_t *wait = relock_lock_lock_async(l2, 2, 20000, 30000);
  java_peer_send(fx->java, "j5 lock lock i-herd -1");
  assert_false(java_peer_has(fx->java, "j5", "lock", 300)); /* both waiting */
  assert_int_equal(relock_future_state(wait), RELOCK_FUTURE_PENDING);
  char buf[64];
  relock_test_redis_cmd(fx->redis, buf, sizeof buf, "ZCARD", "relock_lock_latch:{i-herd}:waiters", NULL);
  assert_string_equal(buf, ":1\r\n"); /* the C waiter's process is registered */
  assert_int_equal(fx_value(relock_lock_unlock_async(l, 1)), 1);
  /* one of them has it; the other gets it at its release */
  if (java_peer_has(fx->java, "j5", "lock", 2000)) {
    java_peer_expect(fx->java, "j5", "lock", 10000, NULL);
    assert_int_equal(relock_future_state(wait), RELOCK_FUTURE_PENDING);
    java_peer_send(fx->java, "j5 unlock lock i-herd");
    assert_string_equal(java_peer_expect(fx->java, "j5", "unlock", 10000, NULL), "ok");
    assert_int_equal(fx_value(relock_future_retain(wait)), 1);
    assert_int_equal(fx_value(relock_lock_unlock_async(l2, 2)), 1);
  } else {
    assert_int_equal(fx_value(relock_future_retain(wait)), 1);
    assert_int_equal(fx_value(relock_lock_unlock_async(l2, 2)), 1);
    java_peer_expect(fx->java, "j5", "lock", 10000, NULL);
    java_peer_send(fx->java, "j5 unlock lock i-herd");
    assert_string_equal(java_peer_expect(fx->java, "j5", "unlock", 10000, NULL), "ok");
  }
  relock_future_release(wait);
  relock_lock_free(l);
  relock_lock_free(l2);
  relock_client_free(c2);
}

static void test_fair_lock_both_ways(void **state) {
  java_to_c(*state, relock_fair_lock_new, "i-fair", "fair", HANDOFF_MS);
  c_to_java(*state, relock_fair_lock_new, "i-fair", "fair", HANDOFF_MS);
}

static void test_fenced_lock_both_ways(void **state) {
  java_to_c(*state, relock_fenced_lock_new, "i-fenced", "fenced", HANDOFF_MS);
  c_to_java(*state, relock_fenced_lock_new, "i-fenced", "fenced", HANDOFF_MS);
}

/* No pub/sub: the waiter's back-off (C: at most 128 ms jittered up by half;
 * Redisson's spin lock: its own back-off) bounds the hand-off instead. */
static void test_spin_lock_both_ways(void **state) {
  java_to_c(*state, relock_spin_lock_new, "i-spin", "spin", 200);
  c_to_java(*state, relock_spin_lock_new, "i-spin", "spin", 1000);
}

static void test_write_lock_both_ways(void **state) {
  java_to_c(*state, relock_write_lock_new, "i-rw", "write", HANDOFF_MS);
  c_to_java(*state, relock_write_lock_new, "i-rw", "write", HANDOFF_MS);
}

/* Java readers hold, a C writer waits; the last Java reader's release
 * wakes it. A C writer holds, Java readers wait; its release wakes both. */
static void test_java_readers_and_c_writer(void **state) {
  fx_t *fx = *state;
  relock_lock_t *w = relock_write_lock_new(fx->c, "i-rw2", NULL), *r = relock_read_lock_new(fx->c, "i-rw2", NULL);
  java_peer_send(fx->java, "r1 lock read i-rw2 30000");
  java_peer_send(fx->java, "r2 lock read i-rw2 30000");
  java_peer_expect(fx->java, "r1", "lock", 10000, NULL);
  java_peer_expect(fx->java, "r2", "lock", 10000, NULL);
  assert_int_equal(fx_value(relock_lock_lock_async(r, 5, 0, RELOCK_INFINITE)), 1); /* C reads along */
  assert_int_equal(fx_value(relock_lock_unlock_async(r, 5)), 1);
  done_at_t got = {PTHREAD_MUTEX_INITIALIZER, 0};
  relock_future_t *wait = relock_lock_lock_async(w, 1, 20000, RELOCK_INFINITE);
  relock_future_on_done(wait, record, &got);
  java_peer_send(fx->java, "r1 unlock read i-rw2");
  java_peer_expect(fx->java, "r1", "unlock", 10000, NULL);
  assert_int_equal(relock_future_wait(wait, 300), RELOCK_EPENDING); /* r2 still reads */
  uint64_t released;
  java_peer_send(fx->java, "r2 unlock read i-rw2");
  java_peer_expect(fx->java, "r2", "unlock", 10000, &released);
  assert_int_equal(fx_value(relock_future_retain(wait)), 1);
  relock_future_release(wait);
  within_handoff("last Java read release -> C write acquisition", ms_between(done_ns(&got), released), HANDOFF_MS);

  /* the C writer holds; two Java readers wait; its release lets both in */
  java_peer_send(fx->java, "r1 lock read i-rw2 -1");
  java_peer_send(fx->java, "r2 lock read i-rw2 -1");
  assert_false(java_peer_has(fx->java, "r1", "lock", 300));
  assert_int_equal(fx_value(relock_lock_unlock_async(w, 1)), 1);
  uint64_t freed = relock__now_ns(), a1, a2;
  java_peer_expect(fx->java, "r1", "lock", 10000, &a1);
  java_peer_expect(fx->java, "r2", "lock", 10000, &a2);
  within_handoff("C write release -> both Java readers", ms_between(a1 > a2 ? a1 : a2, freed), HANDOFF_MS);
  assert_int_equal(fx_value(relock_lock_lock_async(w, 1, 0, RELOCK_INFINITE)), 0); /* they read now */
  java_peer_send(fx->java, "r1 unlock read i-rw2");
  java_peer_send(fx->java, "r2 unlock read i-rw2");
  java_peer_expect(fx->java, "r1", "unlock", 10000, NULL);
  java_peer_expect(fx->java, "r2", "unlock", 10000, NULL);
  relock_lock_free(w);
  relock_lock_free(r);
}

/* A Java writer holds, C readers wait; its release (message "1") wakes them. */
static void test_java_writer_and_c_readers(void **state) {
  java_to_c(*state, relock_read_lock_new, "i-rw3", "write", HANDOFF_MS);
  c_to_java(*state, relock_read_lock_new, "i-rw3", "write", HANDOFF_MS);
}

/* -- the fair queue, mixed ----------------------------------------------------------*/

static long long llen(fx_t *fx, const char *key) { return fx_raw_int(fx->redis, "LLEN", key, NULL); }

static void await_llen(fx_t *fx, const char *key, long long n) {
  for (int i = 0; i < 200 && llen(fx, key) != n; i++)
    usleep(10000);
  assert_int_equal(llen(fx, key), n);
}

static void test_fair_queue_of_c_and_java_keeps_its_order(void **state) {
  fx_t *fx = *state;
  const char *q = "redisson_lock_queue:{i-fq}";
  relock_lock_t *l = relock_fair_lock_new(fx->c, "i-fq", NULL);
  assert_int_equal(fx_value(relock_lock_lock_async(l, 100, 0, 30000)), 1);
  relock_future_t *c1 = relock_lock_lock_async(l, 1, 30000, RELOCK_INFINITE);
  await_llen(fx, q, 1);
  java_peer_send(fx->java, "j1 lock fair i-fq -1");
  await_llen(fx, q, 2);
  relock_future_t *c2 = relock_lock_lock_async(l, 2, 30000, RELOCK_INFINITE);
  await_llen(fx, q, 3);
  java_peer_send(fx->java, "j2 lock fair i-fq -1");
  await_llen(fx, q, 4);
  assert_int_equal(fx_value(relock_lock_unlock_async(l, 100)), 1);
  /* C1, then Java 1, then C2, then Java 2 - nobody else meanwhile */
  assert_int_equal(fx_value(relock_future_retain(c1)), 1);
  relock_future_release(c1);
  assert_false(java_peer_has(fx->java, "j1", "lock", 100));
  assert_int_equal(fx_value(relock_lock_unlock_async(l, 1)), 1);
  assert_string_equal(java_peer_expect(fx->java, "j1", "lock", 10000, NULL), "ok");
  assert_int_equal(relock_future_wait(c2, 100), RELOCK_EPENDING);
  java_peer_send(fx->java, "j1 unlock fair i-fq");
  java_peer_expect(fx->java, "j1", "unlock", 10000, NULL);
  assert_int_equal(fx_value(relock_future_retain(c2)), 1);
  relock_future_release(c2);
  assert_false(java_peer_has(fx->java, "j2", "lock", 100));
  assert_int_equal(fx_value(relock_lock_unlock_async(l, 2)), 1);
  assert_string_equal(java_peer_expect(fx->java, "j2", "lock", 10000, NULL), "ok");
  java_peer_send(fx->java, "j2 unlock fair i-fq");
  java_peer_expect(fx->java, "j2", "unlock", 10000, NULL);
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", q, NULL), 0);
  relock_lock_free(l);
}

/* A client whose fair lock waiters wait fair_wait_ms per place (Redisson's
 * fairLockWaitTimeout), threaded like the fixture's. */
static relock_client_t *client_with_fair_wait(fx_t *fx, int64_t fair_wait_ms) {
  relock_options_t *o = fx_copy(fx->cfg);
  fx_set_ms(o, RELOCK_OPT_FAIR_LOCK_WAIT_TIMEOUT, fair_wait_ms);
  relock_error_t err;
  relock_client_t *c = relock_client_new(NULL, o, &err);
  relock_options_free(o);
  if (c == NULL)
    fail_msg("client: %s", err.message);
  return c;
}

/* The C waiter (owner 1 on waiter) has the lock: it gives it back, and the
 * Java waiter tag, in a tryLock behind it, has it within the bound. */
static void c_hands_down_to_java(fx_t *fx, relock_lock_t *waiter, relock_future_t *c_wait, const char *tag,
                                 const char *name) {
  assert_int_equal(fx_value(c_wait), 1);
  assert_false(java_peer_has(fx->java, tag, "trylock", 0));
  assert_int_equal(fx_value(relock_lock_unlock_async(waiter, 1)), 1);
  uint64_t released = relock__now_ns(), got;
  assert_string_equal(java_peer_expect(fx->java, tag, "trylock", 20000, &got), "true");
  within_handoff("C fair waiter release -> Java tryLock behind it", ms_between(got, released), HANDOFF_MS);
  java_peer_send(fx->java, "%s unlock fair %s", tag, name);
  assert_string_equal(java_peer_expect(fx->java, tag, "unlock", 10000, NULL), "ok");
}

/* Redisson's queue arithmetic, with C waiters in it: a waiter's deadline
 * is the one ahead's (the holder's remaining TTL for the head) plus its
 * wait timeout, and every acquisition brings the others' nearer by the
 * acquirer's wait timeout. A C waiter that left the holder's TTL out, or
 * chained nothing from the Java waiter ahead, gave the Java tryLock behind
 * it a deadline that ran out while it waited: the next release dropped it
 * from the queue, and it waited its whole tryLock for nothing.
 * Part 1: Java lock() (Redisson's 300 s wait) ahead of a C waiter (6 s)
 * ahead of a Java tryLock: Java's acquisition takes 300 s off the others.
 * Part 2: a C head (6 s) under a 30 s holder, a Java tryLock(2 s) behind it
 * joining a second later; the holder releases 2.5 s after the C waiter
 * joined (past its 2 s without the holder's TTL): the Java waiter must
 * still be in line. */
static void test_java_tryLock_behind_c_fair_waiters_keeps_its_place(void **state) {
  fx_t *fx = *state;
  const char *q = "redisson_lock_queue:{i-fmix}";
  relock_client_t *c2 = client_with_fair_wait(fx, 6000);
  relock_lock_t *holder = relock_fair_lock_new(fx->c, "i-fmix", NULL);
  relock_lock_t *waiter = relock_fair_lock_new(c2, "i-fmix", NULL);

  assert_int_equal(fx_value(relock_lock_lock_async(holder, 100, 0, 30000)), 1);
  java_peer_send(fx->java, "j0 lock fair i-fmix -1");
  await_llen(fx, q, 1);
  relock_future_t *c_wait = relock_lock_lock_async(waiter, 1, 20000, 30000);
  await_llen(fx, q, 2);
  java_peer_send(fx->java, "j1 trylock fair i-fmix 10000 -1");
  await_llen(fx, q, 3);
  assert_int_equal(fx_value(relock_lock_unlock_async(holder, 100)), 1);
  assert_string_equal(java_peer_expect(fx->java, "j0", "lock", 10000, NULL), "ok");
  java_peer_send(fx->java, "j0 unlock fair i-fmix");
  assert_string_equal(java_peer_expect(fx->java, "j0", "unlock", 10000, NULL), "ok");
  c_hands_down_to_java(fx, waiter, c_wait, "j1", "i-fmix");

  assert_int_equal(fx_value(relock_lock_lock_async(holder, 100, 0, 30000)), 1);
  uint64_t t0 = relock__now_ns();
  c_wait = relock_lock_lock_async(waiter, 1, 20000, 30000);
  await_llen(fx, q, 1);
  usleep(1000 * 1000);
  java_peer_send(fx->java, "j2 trylock fair i-fmix 2000 -1");
  await_llen(fx, q, 2);
  assert_true(ms_between(relock__now_ns(), t0) < 1900); /* it joined before the C waiter's next try */
  while (ms_between(relock__now_ns(), t0) < 2500)
    usleep(10 * 1000);
  assert_int_equal(fx_value(relock_lock_unlock_async(holder, 100)), 1);
  c_hands_down_to_java(fx, waiter, c_wait, "j2", "i-fmix");

  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", q, NULL), 0);
  relock_lock_free(holder);
  relock_lock_free(waiter);
  relock_client_free(c2);
}

/* -- fenced tokens, and Redisson's forceUnlock --------------------------------------------*/

static void test_fenced_tokens_increase_across_c_and_java(void **state) {
  fx_t *fx = *state;
  relock_lock_t *l = relock_fenced_lock_new(fx->c, "i-tokens", NULL);
  int64_t last = 0;
  for (int i = 0; i < 4; i++) {
    java_peer_send(fx->java, "j1 lock fenced i-tokens -1");
    int64_t java = strtoll(java_peer_expect(fx->java, "j1", "lock", 10000, NULL), NULL, 10);
    java_peer_send(fx->java, "j1 unlock fenced i-tokens");
    java_peer_expect(fx->java, "j1", "unlock", 10000, NULL);
    int64_t c = fx_value(relock_lock_lock_async(l, 1, 10000, RELOCK_INFINITE));
    assert_int_equal(fx_value(relock_lock_unlock_async(l, 1)), 1);
    printf("# tokens: Java %lld, C %lld\n", (long long)java, (long long)c);
    assert_true(java > last);
    assert_true(c > java);
    last = c;
  }
  java_peer_send(fx->java, "j1 token fenced i-tokens");
  assert_int_equal(strtoll(java_peer_expect(fx->java, "j1", "token", 10000, NULL), NULL, 10), last);
  relock_lock_free(l);
}

typedef struct lost {
  pthread_mutex_t mu;
  int calls, reason;
  uint64_t at_ns;
} lost_t;

static void on_lost(relock_lock_t *l, uint64_t owner, int reason, const char *message, void *arg) {
  (void)l, (void)owner, (void)message;
  lost_t *lost = arg;
  pthread_mutex_lock(&lost->mu);
  lost->calls++;
  lost->reason = reason;
  lost->at_ns = relock__now_ns();
  pthread_mutex_unlock(&lost->mu);
}

static void test_redisson_force_unlock_is_a_loss_for_the_c_holder(void **state) {
  fx_t *fx = *state;
  relock_lock_t *l = relock_lock_new(fx->c, "i-force", NULL);
  lost_t lost = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0};
  relock_lock_on_lost(l, on_lost, &lost);
  assert_int_equal(fx_value(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE)), 1);
  java_peer_send(fx->java, "j1 held lock i-force");
  assert_string_equal(java_peer_expect(fx->java, "j1", "held", 10000, NULL), "false");
  java_peer_send(fx->java, "j1 locked lock i-force");
  assert_string_equal(java_peer_expect(fx->java, "j1", "locked", 10000, NULL), "true");
  java_peer_send(fx->java, "j1 forceunlock lock i-force");
  uint64_t forced;
  assert_string_equal(java_peer_expect(fx->java, "j1", "forceunlock", 10000, &forced), "true");
  /* the next renewal (every 500 ms with a 1.5 s watchdog) finds it gone */
  int calls = 0;
  for (int i = 0; i < 300 && calls == 0; i++) {
    usleep(10000);
    pthread_mutex_lock(&lost.mu);
    calls = lost.calls;
    pthread_mutex_unlock(&lost.mu);
  }
  assert_int_equal(calls, 1);
  assert_int_equal(lost.reason, RELOCK_ELOST);
  printf("# Redisson forceUnlock -> C lost callback: %.1f ms\n", ms_between(lost.at_ns, forced));
  assert_true(ms_between(lost.at_ns, forced) < (double)fx_slack_ms(500 + 200));
  relock_future_t *f = relock_lock_unlock_async(l, 1);
  assert_int_equal(relock_future_wait(f, 5000), RELOCK_ELOST); /* answered at once: known lost */
  relock_future_release(f);
  relock_lock_free(l);
}

/* -- the semaphore and the count-down latch ----------------------------------------*/

/* Both sides wait for permits the other releases; each wake-up is pub/sub:
 * Redisson's waiters hear only messages, ours re-check without one after a
 * second. */
static void test_semaphore_both_ways(void **state) {
  fx_t *fx = *state;
  relock_semaphore_t *s = relock_semaphore_new(fx->c, "sem", NULL);
  java_peer_send(fx->java, "j1 semset sem 0");
  assert_string_equal(java_peer_expect(fx->java, "j1", "semset", 10000, NULL), "true");
  assert_int_equal(fx_value(relock_semaphore_try_set_permits_async(s, 5)), 0); /* Java's count stands */
  /* C releases, Java was waiting for 2 */
  java_peer_send(fx->java, "j1 semacquire sem 2");
  assert_false(java_peer_has(fx->java, "j1", "semacquire", 300));
  assert_int_equal(fx_value(relock_semaphore_release_async(s, 2)), 2);
  uint64_t released = relock__now_ns(), acquired;
  assert_string_equal(java_peer_expect(fx->java, "j1", "semacquire", 10000, &acquired), "ok");
  within_handoff("C semaphore release(2) -> Java acquire(2)", ms_between(acquired, released), HANDOFF_MS);
  assert_int_equal(fx_value(relock_semaphore_available_async(s)), 0);
  /* Java releases, C was waiting for 2 */
  assert_int_equal(c_woken_by_java(fx, relock_semaphore_acquire_async(s, 2, 20000), "j1", "semrelease",
                                   "j1 semrelease sem 2", "Java semaphore release(2) -> C acquire(2)", HANDOFF_MS),
                   1);
  java_peer_send(fx->java, "j1 semavail sem");
  assert_string_equal(java_peer_expect(fx->java, "j1", "semavail", 10000, NULL), "0");
  assert_int_equal(fx_value(relock_semaphore_release_async(s, 3)), 3);
  java_peer_send(fx->java, "j1 semtry sem 4 0");
  assert_string_equal(java_peer_expect(fx->java, "j1", "semtry", 10000, NULL), "false");
  java_peer_send(fx->java, "j1 semtry sem 3 0");
  assert_string_equal(java_peer_expect(fx->java, "j1", "semtry", 10000, NULL), "true");
  relock_semaphore_free(s);
}

/* A C permit id taken from C's acquisition (the future's string). */
static void c_permit(relock_future_t *f, char id[RELOCK_PERMIT_ID_SIZE]) {
  assert_non_null(f);
  assert_int_equal(relock_future_wait(f, fx_slack_ms(20000)), 0);
  if (relock_future_value_type(f) != RELOCK_VALUE_STRING)
    fail_msg("no permit");
  snprintf(id, RELOCK_PERMIT_ID_SIZE, "%s", relock_future_string(f, NULL));
  relock_future_release(f);
}

/* Permits taken on one side are released, and expire, for the other: a
 * release wakes the other side's waiter by pub/sub, an expiry by the time
 * the try answered (Java's expiry scores come from its clock, ours from
 * the server's: the same machine's here). */
static void test_permit_semaphore_both_ways(void **state) {
  fx_t *fx = *state;
  relock_permit_semaphore_t *s = relock_permit_semaphore_new(fx->c, "ps", NULL);
  java_peer_send(fx->java, "j1 pesset ps 1");
  assert_string_equal(java_peer_expect(fx->java, "j1", "pesset", 10000, NULL), "true");
  assert_int_equal(fx_value(relock_permit_semaphore_try_set_permits_async(s, 5)), 0); /* Java's count stands */
  char c_id[RELOCK_PERMIT_ID_SIZE], java_id[64];
  c_permit(relock_permit_semaphore_acquire_async(s, 0, RELOCK_INFINITE), c_id);
  java_peer_send(fx->java, "j1 pestry ps 0 -1");
  assert_string_equal(java_peer_expect(fx->java, "j1", "pestry", 10000, NULL), "null");
  /* C releases, Java was waiting */
  java_peer_send(fx->java, "j1 pesacquire ps -1");
  assert_false(java_peer_has(fx->java, "j1", "pesacquire", 300));
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(s, c_id)), 1);
  uint64_t released = relock__now_ns(), acquired;
  snprintf(java_id, sizeof java_id, "%s", java_peer_expect(fx->java, "j1", "pesacquire", 10000, &acquired));
  assert_int_equal(strlen(java_id), RELOCK_PERMIT_ID_SIZE - 1);
  within_handoff("C permit release -> Java acquire", ms_between(acquired, released), HANDOFF_MS);
  /* Java releases, C was waiting */
  done_at_t got = {PTHREAD_MUTEX_INITIALIZER, 0};
  relock_future_t *wait = relock_permit_semaphore_acquire_async(s, 20000, RELOCK_INFINITE);
  relock_future_on_done(wait, record, &got);
  assert_int_equal(relock_future_wait(wait, 300), RELOCK_EPENDING);
  uint64_t java_ns;
  java_peer_send(fx->java, "j1 pesrelease ps %s", java_id);
  assert_string_equal(java_peer_expect(fx->java, "j1", "pesrelease", 10000, &java_ns), "true");
  c_permit(wait, c_id);
  within_handoff("Java permit release -> C acquire", ms_between(done_ns(&got), java_ns), HANDOFF_MS);
  /* C's permit, released by Java (ids belong to nobody) */
  java_peer_send(fx->java, "j1 pesrelease ps %s", c_id);
  assert_string_equal(java_peer_expect(fx->java, "j1", "pesrelease", 10000, NULL), "true");
  java_peer_send(fx->java, "j1 pesavail ps");
  assert_string_equal(java_peer_expect(fx->java, "j1", "pesavail", 10000, NULL), "1");
  /* a Java permit's lease runs out: C gets it without a release */
  java_peer_send(fx->java, "j1 pesacquire ps 300");
  snprintf(java_id, sizeof java_id, "%s", java_peer_expect(fx->java, "j1", "pesacquire", 10000, NULL));
  uint64_t t0 = relock__now_ns();
  c_permit(relock_permit_semaphore_acquire_async(s, 5000, 300), c_id);
  double took = (double)(relock__now_ns() - t0) / 1e6;
  printf("# Java permit (300 ms lease) expired -> C acquire: %.1f ms\n", took);
  assert_true(took >= 200 && took < fx_slack_ms(800));
  /* and a C permit's: Java gets it */
  t0 = relock__now_ns();
  java_peer_send(fx->java, "j1 pestry ps 5000 -1");
  const char *answer = java_peer_expect(fx->java, "j1", "pestry", 10000, NULL);
  took = (double)(relock__now_ns() - t0) / 1e6;
  printf("# C permit (300 ms lease) expired -> Java acquire: %.1f ms\n", took);
  assert_int_equal(strlen(answer), RELOCK_PERMIT_ID_SIZE - 1);
  assert_true(took >= 100 && took < fx_slack_ms(800));
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(s, c_id)), 0); /* expired */
  java_peer_send(fx->java, "j1 pesrelease ps %s", java_id);
  assert_string_equal(java_peer_expect(fx->java, "j1", "pesrelease", 10000, NULL), "false"); /* expired */
  relock_permit_semaphore_free(s);
}

/* -- watched permits ----------------------------------------------------------------*/

typedef struct permit_lost {
  pthread_mutex_t mu;
  int calls, reason;
  char id[RELOCK_PERMIT_ID_SIZE];
  uint64_t at_ns;
} permit_lost_t;

static void on_permit_lost(relock_permit_semaphore_t *s, const char *id, int reason, const char *message,
                           void *arg) {
  (void)s, (void)message;
  permit_lost_t *lost = arg;
  pthread_mutex_lock(&lost->mu);
  lost->calls++;
  lost->reason = reason;
  snprintf(lost->id, sizeof lost->id, "%s", id);
  lost->at_ns = relock__now_ns();
  pthread_mutex_unlock(&lost->mu);
}

static int permit_lost_calls(permit_lost_t *lost) {
  pthread_mutex_lock(&lost->mu);
  int calls = lost->calls;
  pthread_mutex_unlock(&lost->mu);
  return calls;
}

/* Over ms, every 250 ms: Java sees no permit free (availablePermits() 0,
 * tryAcquire without a wait gets none), and C still holds id (its validity
 * never runs out, no loss). With a 1.5 s watchdog, ms past the lease
 * means the renewals kept it. */
static void java_sees_c_permit_held(fx_t *fx, relock_permit_semaphore_t *s, const char *name, const char *id,
                                    permit_lost_t *lost, int64_t ms) {
  uint64_t t0 = relock__now_ns();
  int rounds = 0;
  while (fx_ms_since(t0) < (double)ms) {
    java_peer_send(fx->java, "j1 pesavail %s", name);
    assert_string_equal(java_peer_expect(fx->java, "j1", "pesavail", 10000, NULL), "0");
    java_peer_send(fx->java, "j1 pestry %s 0 -1", name);
    assert_string_equal(java_peer_expect(fx->java, "j1", "pestry", 10000, NULL), "null");
    int64_t v = relock_permit_semaphore_validity_ms(s, id);
    if (v <= 0)
      fail_msg("C's watched permit %s: validity %lld ms after %.0f ms", id, (long long)v, fx_ms_since(t0));
    assert_int_equal(permit_lost_calls(lost), 0);
    usleep(250 * 1000);
    rounds++;
  }
  printf("# Java saw C's watched permit held for %.0f ms (%d checks; watchdog 1500 ms)\n", fx_ms_since(t0), rounds);
}

/* A watched C permit (lease RELOCK_INFINITE: the watchdog's 1.5 s here,
 * renewed every 500 ms) next to Redisson: Java sees it taken for several
 * leases; Java's updateLeaseTime on it works, even with a lease shorter
 * than the watchdog's (the renewals keep it); Java's tryRelease of it
 * frees it, and the next renewal tells C it lost it (RELOCK_ELOST), whose
 * release then fails with RELOCK_ELOST. */
static void test_c_watched_permit_seen_from_redisson(void **state) {
  fx_t *fx = *state;
  relock_permit_semaphore_t *s = relock_permit_semaphore_new(fx->c, "pw", NULL);
  permit_lost_t lost = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", 0};
  assert_int_equal(relock_permit_semaphore_on_lost(s, on_permit_lost, &lost), 0);
  java_peer_send(fx->java, "j1 pesset pw 2");
  assert_string_equal(java_peer_expect(fx->java, "j1", "pesset", 10000, NULL), "true");
  char java_id[64], c_id[RELOCK_PERMIT_ID_SIZE];
  java_peer_send(fx->java, "j1 pesacquire pw 60000");
  snprintf(java_id, sizeof java_id, "%s", java_peer_expect(fx->java, "j1", "pesacquire", 10000, NULL));
  assert_int_equal(strlen(java_id), RELOCK_PERMIT_ID_SIZE - 1);
  c_permit(relock_permit_semaphore_acquire_async(s, 0, RELOCK_INFINITE), c_id); /* the last one */
  /* the id names this client: its first 16 hex digits are the client id's */
  char client_hex[40] = "";
  for (const char *p = relock_client_id(fx->c); *p != '\0' && strlen(client_hex) < 16; p++)
    if (*p != '-')
      strncat(client_hex, p, 1);
  assert_memory_equal(c_id, client_hex, 16);
  int64_t v = relock_permit_semaphore_validity_ms(s, c_id);
  printf("# watched permit %s: validity %lld ms\n", c_id, (long long)v);
  assert_true(v > 0 && v <= 1500);

  java_sees_c_permit_held(fx, s, "pw", c_id, &lost, 5000); /* over three leases */

  /* Redisson's updateLeaseTime on the C permit: a long lease, then one
   * shorter than the watchdog's, held past it */
  java_peer_send(fx->java, "j1 pesupdate pw %s 60000", c_id);
  assert_string_equal(java_peer_expect(fx->java, "j1", "pesupdate", 10000, NULL), "true");
  java_sees_c_permit_held(fx, s, "pw", c_id, &lost, 1600);
  java_peer_send(fx->java, "j1 pesupdate pw %s 1000", c_id);
  assert_string_equal(java_peer_expect(fx->java, "j1", "pesupdate", 10000, NULL), "true");
  java_sees_c_permit_held(fx, s, "pw", c_id, &lost, 2500);

  /* Redisson releases C's permit: C hears of it at its next renewal */
  uint64_t freed;
  java_peer_send(fx->java, "j1 pesrelease pw %s", c_id);
  assert_string_equal(java_peer_expect(fx->java, "j1", "pesrelease", 10000, &freed), "true");
  for (int i = 0; i < 300 && permit_lost_calls(&lost) == 0; i++)
    usleep(10000);
  assert_int_equal(permit_lost_calls(&lost), 1);
  assert_int_equal(lost.reason, RELOCK_ELOST);
  assert_string_equal(lost.id, c_id);
  printf("# Redisson tryRelease -> C permit lost callback: %.1f ms\n", ms_between(lost.at_ns, freed));
  assert_true(ms_between(lost.at_ns, freed) < (double)fx_slack_ms(500 + 200));
  assert_true(relock_permit_semaphore_validity_ms(s, c_id) <= 0);
  relock_future_t *f = relock_permit_semaphore_release_async(s, c_id);
  assert_int_equal(fx_error(f, NULL, 0), RELOCK_ELOST);
  /* the permit Java freed is free for Java; nothing else moved */
  java_peer_send(fx->java, "j1 pesavail pw");
  assert_string_equal(java_peer_expect(fx->java, "j1", "pesavail", 10000, NULL), "1");
  java_peer_send(fx->java, "j1 pesrelease pw %s", java_id);
  assert_string_equal(java_peer_expect(fx->java, "j1", "pesrelease", 10000, NULL), "true");
  assert_int_equal(fx_value(relock_permit_semaphore_available_async(s)), 2);
  assert_int_equal(permit_lost_calls(&lost), 1);
  relock_permit_semaphore_free(s);
}

/* A Redisson permit with a lease next to C's watched and fixed ones: C's
 * available and acquire count it, C takes the rest and no more; Java's
 * release wakes a C waiter for a watched permit within the bound. */
static void test_redisson_permit_seen_from_c(void **state) {
  fx_t *fx = *state;
  relock_permit_semaphore_t *s = relock_permit_semaphore_new(fx->c, "pw2", NULL);
  permit_lost_t lost = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", 0};
  assert_int_equal(relock_permit_semaphore_on_lost(s, on_permit_lost, &lost), 0);
  java_peer_send(fx->java, "j1 pesset pw2 3");
  assert_string_equal(java_peer_expect(fx->java, "j1", "pesset", 10000, NULL), "true");
  char java_id[64], watched[RELOCK_PERMIT_ID_SIZE], fixed[RELOCK_PERMIT_ID_SIZE], woken[RELOCK_PERMIT_ID_SIZE];
  java_peer_send(fx->java, "j1 pesacquire pw2 30000");
  snprintf(java_id, sizeof java_id, "%s", java_peer_expect(fx->java, "j1", "pesacquire", 10000, NULL));
  assert_int_equal(strlen(java_id), RELOCK_PERMIT_ID_SIZE - 1);
  assert_int_equal(fx_value(relock_permit_semaphore_available_async(s)), 2);
  c_permit(relock_permit_semaphore_acquire_async(s, 0, RELOCK_INFINITE), watched);
  c_permit(relock_permit_semaphore_acquire_async(s, 0, 30000), fixed);
  assert_int_equal(fx_value(relock_permit_semaphore_available_async(s)), 0);
  relock_future_t *none = relock_permit_semaphore_acquire_async(s, 0, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(none, fx_slack_ms(10000)), 0);
  assert_int_equal(relock_future_value_type(none), RELOCK_VALUE_NONE); /* none free */
  relock_future_release(none);
  java_peer_send(fx->java, "j1 pesavail pw2");
  assert_string_equal(java_peer_expect(fx->java, "j1", "pesavail", 10000, NULL), "0");

  /* Java releases, a C waiter for a watched permit has it */
  done_at_t got = {PTHREAD_MUTEX_INITIALIZER, 0};
  relock_future_t *wait = relock_permit_semaphore_acquire_async(s, 20000, RELOCK_INFINITE);
  relock_future_on_done(wait, record, &got);
  assert_int_equal(relock_future_wait(wait, 300), RELOCK_EPENDING);
  uint64_t java_ns;
  java_peer_send(fx->java, "j1 pesrelease pw2 %s", java_id);
  assert_string_equal(java_peer_expect(fx->java, "j1", "pesrelease", 10000, &java_ns), "true");
  c_permit(wait, woken);
  within_handoff("Java permit release -> C watched permit acquire", ms_between(done_ns(&got), java_ns), HANDOFF_MS);
  assert_true(relock_permit_semaphore_validity_ms(s, woken) > 0);
  /* past its first lease, the woken permit is still C's */
  usleep(2000 * 1000);
  assert_true(relock_permit_semaphore_validity_ms(s, woken) > 0);
  java_peer_send(fx->java, "j1 pestry pw2 0 -1");
  assert_string_equal(java_peer_expect(fx->java, "j1", "pestry", 10000, NULL), "null");
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(s, woken)), 1);
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(s, watched)), 1);
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(s, fixed)), 1);
  java_peer_send(fx->java, "j1 pesavail pw2");
  assert_string_equal(java_peer_expect(fx->java, "j1", "pesavail", 10000, NULL), "3");
  assert_int_equal(permit_lost_calls(&lost), 0);
  relock_permit_semaphore_free(s);
}

/* Each side's last count-down opens the latch for the other's awaiter. */
static void test_latch_both_ways(void **state) {
  fx_t *fx = *state;
  relock_latch_t *l = relock_latch_new(fx->c, "done", NULL);
  assert_int_equal(fx_value(relock_latch_try_set_count_async(l, 2)), 1);
  java_peer_send(fx->java, "j1 latchset done 7");
  assert_string_equal(java_peer_expect(fx->java, "j1", "latchset", 10000, NULL), "false");
  java_peer_send(fx->java, "j1 latchcount done");
  assert_string_equal(java_peer_expect(fx->java, "j1", "latchcount", 10000, NULL), "2");
  java_peer_send(fx->java, "j2 latchawait done 20000");
  assert_false(java_peer_has(fx->java, "j2", "latchawait", 300));
  assert_int_equal(fx_value(relock_latch_count_down_async(l)), 1);
  assert_false(java_peer_has(fx->java, "j2", "latchawait", 100));
  assert_int_equal(fx_value(relock_latch_count_down_async(l)), 0);
  uint64_t opened = relock__now_ns(), through;
  assert_string_equal(java_peer_expect(fx->java, "j2", "latchawait", 10000, &through), "true");
  within_handoff("C last count-down -> Java awaiter through", ms_between(through, opened), HANDOFF_MS);
  /* and the other way */
  java_peer_send(fx->java, "j1 latchset done 1");
  assert_string_equal(java_peer_expect(fx->java, "j1", "latchset", 10000, NULL), "true");
  assert_int_equal(fx_value(relock_latch_count_async(l)), 1);
  assert_int_equal(c_woken_by_java(fx, relock_latch_await_async(l, 20000), "j1", "latchdown", "j1 latchdown done",
                                   "Java last count-down -> C awaiter through", HANDOFF_MS),
                   1);
  relock_latch_free(l);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_lock_both_ways),
      T(test_c_waker_id_and_a_java_waiter),
      T(test_fair_lock_both_ways),
      T(test_fenced_lock_both_ways),
      T(test_spin_lock_both_ways),
      T(test_write_lock_both_ways),
      T(test_java_readers_and_c_writer),
      T(test_java_writer_and_c_readers),
      T(test_fair_queue_of_c_and_java_keeps_its_order),
      T(test_java_tryLock_behind_c_fair_waiters_keeps_its_place),
      T(test_fenced_tokens_increase_across_c_and_java),
      T(test_redisson_force_unlock_is_a_loss_for_the_c_holder),
      T(test_semaphore_both_ways),
      T(test_latch_both_ways),
      T(test_permit_semaphore_both_ways),
      T(test_c_watched_permit_seen_from_redisson),
      T(test_redisson_permit_seen_from_c),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, NULL, NULL);
}
