/* Permits that die with their holder: a permit-expirable semaphore's
 * permit taken without a fixed lease is watched - its lease is the
 * watchdog's, renewed while it is held, so a holder that dies gives it
 * back within that lease; a permit with a lease (watched or fixed) found
 * gone is lost, as a lock hold is (callback, validity, release). Against a
 * real redis-server; a dead holder is a real process, SIGKILLed. */
#include <config.h>

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <relock/permit_semaphore.h>

#include "support/client_fixture.h"

typedef fx_pair_t fx_t;

#define WATCHDOG_MS 600

static int setup(void **state) {
  if (fx_pair_server_setup(state) != 0)
    return -1;
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, WATCHDOG_MS);
  fx_pair_clients(fx);
  return 0;
}

static relock_permit_semaphore_t *sem_of(relock_client_t *c, const char *name, int64_t permits) {
  relock_permit_semaphore_t *s = relock_permit_semaphore_new(c, name, NULL);
  assert_non_null(s);
  if (permits >= 0)
    assert_int_equal(fx_value(relock_permit_semaphore_try_set_permits_async(s, permits)), 1);
  return s;
}

/* Takes a permit that must be free; its id into id. */
static void take(relock_permit_semaphore_t *s, int64_t lease_ms, char id[RELOCK_PERMIT_ID_SIZE]) {
  int r = relock_permit_semaphore_acquire(s, 0, lease_ms, id);
  if (r != 0 || id[0] == '\0')
    fail_msg("no permit: %s (%s)", relock_last_error_message(), relock_err_name(r));
}

/* A try that must find no permit. */
static void none_free(relock_permit_semaphore_t *s) {
  relock_future_t *f = relock_permit_semaphore_acquire_async(s, 0, RELOCK_INFINITE);
  assert_int_equal(relock_future_wait(f, fx_slack_ms(10000)), 0);
  assert_int_equal(relock_future_value_type(f), RELOCK_VALUE_NONE);
  relock_future_release(f);
}

/* The permit as the zset keeps it: the 16 bytes of its hex digits. */
static void member_of(const char *id, char member[16]) {
  for (int i = 0; i < 16; i++) {
    unsigned byte;
    sscanf(id + 2 * i, "%2x", &byte);
    member[i] = (char)byte;
  }
}

/* A ZSCORE / ZREM of permit id in "{name}:timeout", raw. */
static long long permit_cmd(relock_test_redis_t *r, const char *cmd, const char *name, const char *id) {
  char key[128], member[16], buf[128];
  snprintf(key, sizeof key, "{%s}:timeout", name);
  member_of(id, member);
  const char *argv[] = {cmd, key, member};
  const size_t lens[] = {strlen(cmd), strlen(key), 16};
  assert_int_equal(relock_test_redis_cmdv(r, buf, sizeof buf, 3, argv, lens), 0);
  if (buf[0] == ':')
    return atoll(buf + 1);
  if (buf[0] != '$' || buf[1] == '-')
    return -1;
  return atoll(strchr(buf, '\n') + 1);
}

static long long server_ms(relock_test_redis_t *r) {
  char buf[128];
  assert_int_equal(relock_test_redis_cmd(r, buf, sizeof buf, "TIME", NULL), 0);
  const char *p = strchr(strchr(buf, '\n') + 1, '\n') + 1;
  long long sec = atoll(p);
  p = strchr(strchr(p, '\n') + 1, '\n') + 1;
  return sec * 1000 + atoll(p) / 1000;
}

typedef struct told {
  int n;
  int reason;
  char id[RELOCK_PERMIT_ID_SIZE];
  char message[512];
} told_t;

static void on_lost(relock_permit_semaphore_t *s, const char *id, int reason, const char *message, void *arg) {
  (void)s;
  told_t *t = arg;
  t->n++;
  t->reason = reason;
  snprintf(t->id, sizeof t->id, "%s", id);
  snprintf(t->message, sizeof t->message, "%s", message);
}

static int was_told(void *arg) { return ((told_t *)arg)->n > 0; }

/* A watched permit outlives its first lease many times over: renewed
 * (its expiry moves on with the server's clock) while held, so no other
 * client can take it; released, it is free, and its renewal stops. The
 * id starts with the client's id's first 16 hex digits. */
static void test_renewed_while_held(void **state) {
  fx_t *fx = *state;
  relock_permit_semaphore_t *s = sem_of(fx->a, "jobs", 1), *other = sem_of(fx->b, "jobs", -1);
  char id[RELOCK_PERMIT_ID_SIZE], client_id[65], hex[17];
  take(s, RELOCK_INFINITE, id);
  long long t0 = server_ms(fx->redis), first = permit_cmd(fx->redis, "ZSCORE", "jobs", id);
  assert_true(first >= t0 - 50 && first <= t0 + WATCHDOG_MS);
  snprintf(client_id, sizeof client_id, "%s", relock_client_id(fx->a));
  int n = 0;
  for (const char *p = client_id; *p != '\0' && n < 16; p++)
    if (*p != '-')
      hex[n++] = *p;
  hex[n] = '\0';
  assert_memory_equal(id, hex, 16);
  fx_run_for(fx_loop(), 4 * WATCHDOG_MS);
  long long now = server_ms(fx->redis), later = permit_cmd(fx->redis, "ZSCORE", "jobs", id);
  if (later <= now)
    fail_msg("after %d ms (4 leases) the permit expires at %lld, the server's clock is at %lld", 4 * WATCHDOG_MS,
             later, now);
  assert_true(later > first);
  assert_true(relock_permit_semaphore_validity_ms(s, id) > 0);
  none_free(other);
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(s, id)), 1);
  assert_int_equal(permit_cmd(fx->redis, "ZSCORE", "jobs", id), -1);
  assert_int_equal(relock_permit_semaphore_validity_ms(s, id), RELOCK_ENOTOWNER);
  char next[RELOCK_PERMIT_ID_SIZE];
  take(other, RELOCK_INFINITE, next);
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(other, next)), 1);
  relock_permit_semaphore_free(s);
  relock_permit_semaphore_free(other);
}

/* A permit with a lease taken away - by another client's release of its
 * id (as Java's tryRelease does), or by a ZREM - is lost: the holder is
 * told within a watchdog cycle, its validity is RELOCK_ELOST, and its
 * release fails with RELOCK_ELOST. For a watched permit and a fixed one. */
static void test_taken_away_is_lost(void **state) {
  fx_t *fx = *state;
  relock_permit_semaphore_t *s = sem_of(fx->a, "jobs", 2), *other = sem_of(fx->b, "jobs", -1);
  const int64_t leases[] = {RELOCK_INFINITE, 60000};
  for (int k = 0; k < 2; k++) {
    told_t told = {0};
    assert_int_equal(relock_permit_semaphore_on_lost(s, on_lost, &told), 0);
    char id[RELOCK_PERMIT_ID_SIZE];
    take(s, leases[k], id);
    int64_t valid = relock_permit_semaphore_validity_ms(s, id);
    assert_true(valid > 0 && valid <= (k == 0 ? WATCHDOG_MS : 60000));
    if (k == 0)
      assert_int_equal(fx_value(relock_permit_semaphore_release_async(other, id)), 1); /* not b's: released all the same */
    else
      assert_int_equal(permit_cmd(fx->redis, "ZREM", "jobs", id), 1);
    if (!fx_run_until(fx_loop(), was_told, &told, WATCHDOG_MS))
      fail_msg("lease %lld: the holder was not told of its permit's loss within %lld ms", (long long)leases[k],
               (long long)fx_slack_ms(WATCHDOG_MS));
    assert_int_equal(told.n, 1);
    assert_int_equal(told.reason, RELOCK_ELOST);
    assert_string_equal(told.id, id);
    assert_non_null(strstr(told.message, "jobs"));
    assert_non_null(strstr(told.message, id));
    assert_int_equal(relock_permit_semaphore_validity_ms(s, id), RELOCK_ELOST);
    char msg[256];
    assert_int_equal(fx_error(relock_permit_semaphore_release_async(s, id), msg, sizeof msg), RELOCK_ELOST);
    assert_non_null(strstr(msg, id));
  }
  assert_int_equal(relock_permit_semaphore_on_lost(s, NULL, NULL), 0);
  relock_permit_semaphore_free(s);
  relock_permit_semaphore_free(other);
}

/* The watchdog renews a permit only while it is there and unexpired: one
 * whose expiry a foreign client moved into the past (Redisson's
 * updateLeaseTime with a tiny lease) is not brought back - it belongs to
 * the pool - and its holder is told. */
static void test_expired_is_not_revived(void **state) {
  fx_t *fx = *state;
  relock_permit_semaphore_t *s = sem_of(fx->a, "jobs", 1), *other = sem_of(fx->b, "jobs", -1);
  told_t told = {0};
  assert_int_equal(relock_permit_semaphore_on_lost(s, on_lost, &told), 0);
  char id[RELOCK_PERMIT_ID_SIZE], key[] = "{jobs}:timeout", member[16], buf[64];
  take(s, RELOCK_INFINITE, id);
  member_of(id, member);
  const char *argv[] = {"ZADD", key, "1", member};
  const size_t lens[] = {4, strlen(key), 1, 16};
  assert_int_equal(relock_test_redis_cmdv(fx->redis, buf, sizeof buf, 4, argv, lens), 0);
  if (!fx_run_until(fx_loop(), was_told, &told, WATCHDOG_MS))
    fail_msg("the holder of an expired permit was not told within %lld ms", (long long)fx_slack_ms(WATCHDOG_MS));
  assert_int_equal(told.reason, RELOCK_ELOST);
  assert_int_equal(permit_cmd(fx->redis, "ZSCORE", "jobs", id), 1); /* still expired, not renewed */
  char next[RELOCK_PERMIT_ID_SIZE];
  take(other, RELOCK_INFINITE, next); /* the expired one went back to the pool */
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(other, next)), 1);
  relock_permit_semaphore_free(s);
  relock_permit_semaphore_free(other);
}

/* A holder that dies (SIGKILL: no release, no close) gives its watched
 * permit back within the watchdog lease; until then nobody else has it.
 * A permit without a lease is kept for good, as Redisson's. */
static void test_dead_holder_gives_back(void **state) {
  fx_t *fx = *state;
  relock_permit_semaphore_t *s = sem_of(fx->a, "jobs", 1);
  for (int watched = 1; watched >= 0; watched--) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* the holder: a client of its own, threaded */
      close(fds[0]);
      alarm(60); /* gone even if the test fails before it kills this */
      relock_client_t *c = relock_client_new(NULL, fx->cfg, NULL);
      relock_permit_semaphore_t *mine = c != NULL ? relock_permit_semaphore_new(c, "jobs", NULL) : NULL;
      char id[RELOCK_PERMIT_ID_SIZE] = "";
      if (mine != NULL)
        relock_permit_semaphore_acquire(mine, 0, watched ? RELOCK_INFINITE : RELOCK_PERMIT_NO_LEASE, id);
      ssize_t w = write(fds[1], id, sizeof id);
      (void)w;
      for (;;)
        pause(); /* renewing, until killed */
    }
    close(fds[1]);
    char id[RELOCK_PERMIT_ID_SIZE];
    assert_int_equal(read(fds[0], id, sizeof id), (ssize_t)sizeof id);
    close(fds[0]);
    assert_true(id[0] != '\0');
    fx_run_for(fx_loop(), 2 * WATCHDOG_MS); /* past its first lease: renewed */
    none_free(s);
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    uint64_t t0 = relock__now_ns();
    char next[RELOCK_PERMIT_ID_SIZE];
    int r = relock_permit_semaphore_acquire(s, watched ? fx_slack_ms(3 * WATCHDOG_MS) : 2 * WATCHDOG_MS,
                                            RELOCK_INFINITE, next);
    assert_int_equal(r, 0);
    double took = fx_ms_since(t0);
    printf("# %s permit of a SIGKILLed holder: %s after %.0f ms (watchdog lease %d ms)\n",
           watched ? "watched" : "lease-less", next[0] != '\0' ? "free" : "still taken", took, WATCHDOG_MS);
    if (!watched) {
      assert_string_equal(next, ""); /* kept for good */
      assert_int_equal(permit_cmd(fx->redis, "ZREM", "jobs", id), 1);
      assert_int_equal(fx_raw_int(fx->redis, "INCR", "jobs", NULL), 1); /* what an operator does */
      continue;
    }
    assert_true(next[0] != '\0');
    assert_true(took <= (double)fx_slack_ms(WATCHDOG_MS + 200));
    assert_int_equal(permit_cmd(fx->redis, "ZSCORE", "jobs", id), -1);
    assert_int_equal(fx_value(relock_permit_semaphore_release_async(s, next)), 1);
  }
  relock_permit_semaphore_free(s);
}

/* Bad ids and NULLs get an error, never a crash. */
static void test_invalid_arguments(void **state) {
  fx_t *fx = *state;
  relock_permit_semaphore_t *s = sem_of(fx->a, "jobs", 1);
  assert_int_equal(relock_permit_semaphore_on_lost(NULL, on_lost, NULL), RELOCK_EINVAL);
  assert_int_equal(relock_permit_semaphore_validity_ms(NULL, "0123456789abcdef0123456789abcdef"), RELOCK_EINVAL);
  assert_int_equal(relock_permit_semaphore_validity_ms(s, NULL), RELOCK_EINVAL);
  assert_int_equal(relock_permit_semaphore_validity_ms(s, "xyz"), RELOCK_EINVAL);
  assert_int_equal(relock_permit_semaphore_validity_ms(s, "0123456789abcdef0123456789abcdef"), RELOCK_ENOTOWNER);
  assert_int_equal(fx_error(relock_permit_semaphore_validate_async(NULL, "0"), NULL, 0), RELOCK_EINVAL);
  assert_int_equal(fx_error(relock_permit_semaphore_validate_async(s, "0123"), NULL, 0), RELOCK_EINVAL);
  assert_int_equal(fx_error(relock_permit_semaphore_validate_async(s, "0123456789abcdef0123456789abcdef"), NULL, 0),
                   RELOCK_ENOTOWNER);
  assert_int_equal(fx_error(relock_permit_semaphore_acquire_async(s, 0, -3), NULL, 0), RELOCK_EINVAL);
  char id[RELOCK_PERMIT_ID_SIZE];
  take(s, RELOCK_INFINITE, id);
  assert_int_equal(fx_value(relock_permit_semaphore_validate_async(s, id)), 1);
  assert_int_equal(fx_value(relock_permit_semaphore_release_async(s, id)), 1);
  relock_permit_semaphore_free(s);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, fx_pair_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_renewed_while_held),
      T(test_taken_away_is_lost),
      T(test_expired_is_not_revived),
      T(test_dead_holder_gives_back),
      T(test_invalid_arguments),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, NULL, NULL);
}
