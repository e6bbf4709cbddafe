/* One name, one kind of object: a lock tried on a name that holds another
 * kind (a read-write lock's hash, with its "mode" field, or a plain lock's
 * hash without one, or a Redis value of another type) is refused with
 * RELOCK_EWRONGKIND and a message in the user's words, and leaves nothing
 * behind; kinds that share Redisson's RLock layout (lock, fair, fenced,
 * spin) keep Redisson's semantics among themselves. And every error a
 * script can raise reads as a sentence: no script location, no SHA, no
 * tag. Generated: every pair (kind held, kind tried) x (same owner,
 * another owner). */
#include <config.h>

#include <ctype.h>
#include <string.h>

#include "support/client_fixture.h"

typedef fx_pair_t fx_t;

typedef relock_lock_t *(*lock_new_fn)(relock_client_t *, const char *, relock_error_t *);

typedef enum { PLAIN, RW } family_t;

static const struct {
  const char *what;
  lock_new_fn make;
  family_t family;
} kinds[] = {
    {"lock", relock_lock_new, PLAIN},           {"fair lock", relock_fair_lock_new, PLAIN},
    {"fenced lock", relock_fenced_lock_new, PLAIN}, {"spin lock", relock_spin_lock_new, PLAIN},
    {"read lock", relock_read_lock_new, RW},    {"write lock", relock_write_lock_new, RW},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

static relock_lock_t *make(size_t k, relock_client_t *c, const char *name) {
  relock_error_t err;
  relock_lock_t *l = kinds[k].make(c, name, &err);
  if (l == NULL)
    fail_msg("%s: %s", kinds[k].what, err.message);
  return l;
}

/* A message in the user's words: no "script:" or "@user_script" (where a
 * script failed), no SHA (40 hex digits), no all-caps tag in front
 * ("RELOCK_UPGRADE ", "WRONGTYPE ", "ERR "). */
static void assert_plain_words(const char *msg, const char *context) {
  if (strstr(msg, "script:") != NULL || strstr(msg, "@user_script") != NULL)
    fail_msg("%s: the message names the script: \"%s\"", context, msg);
  size_t hex = 0;
  for (const char *p = msg; *p != '\0'; p++) {
    hex = isxdigit((unsigned char)*p) ? hex + 1 : 0;
    if (hex >= 40)
      fail_msg("%s: the message holds a SHA: \"%s\"", context, msg);
  }
  size_t caps = 0;
  while (isupper((unsigned char)msg[caps]) || msg[caps] == '_')
    caps++;
  if (caps >= 2 && (msg[caps] == ' ' || msg[caps] == '\0'))
    fail_msg("%s: the message starts with a tag: \"%s\"", context, msg);
  if (msg[0] == '\0')
    fail_msg("%s: an empty message", context);
}

/* What trying kind t on a name held by kind h must give, by Redisson's
 * semantics within a layout: 1 acquired, 0 not acquired, or an error. */
static int expected(size_t h, size_t t, int same_owner) {
  if (kinds[h].family != kinds[t].family)
    return RELOCK_EWRONGKIND;
  if (kinds[h].family == PLAIN)
    return same_owner; /* re-entry, or held by another */
  int h_write = strcmp(kinds[h].what, "write lock") == 0, t_write = strcmp(kinds[t].what, "write lock") == 0;
  if (!h_write && !t_write)
    return 1; /* readers share */
  if (!h_write && t_write)
    return same_owner ? RELOCK_EUPGRADE : 0;
  return same_owner; /* a writer re-enters or reads (downgrade); another waits */
}

static void test_every_pair_of_kinds(void **state) {
  fx_t *fx = *state;
  char msg[512], context[160];
  int wrong = 0; /* every pair is tried, each wrong one printed */
  for (size_t h = 0; h < NKINDS; h++)
    for (size_t t = 0; t < NKINDS; t++)
      for (int same = 0; same <= 1; same++) {
        snprintf(context, sizeof context, "%s held, %s tried by %s", kinds[h].what, kinds[t].what,
                 same ? "the same owner" : "another owner");
        relock_test_redis_cmd(fx->redis, NULL, 0, "FLUSHALL", NULL);
        relock_lock_t *held = make(h, fx->a, "n");
        relock_lock_t *tried = make(t, same ? fx->a : fx->b, "n");
        uint64_t owner = same ? 1 : 2;
        if (fx_value(relock_lock_lock_async(held, 1, 0, 30000)) <= 0)
          fail_msg("%s: the first hold was not taken", context);
        long long fields = fx_raw_int(fx->redis, "HLEN", "n", NULL);
        relock_future_t *f = relock_lock_lock_async(tried, owner, 0, 30000);
        int r = relock_future_wait(f, fx_slack_ms(10000));
        int got = r != 0 ? r : (relock_future_value_type(f) == RELOCK_VALUE_BOOL ? relock_future_bool(f)
                                                                                 : relock_future_int(f) > 0);
        snprintf(msg, sizeof msg, "%s", relock_future_message(f));
        relock_future_release(f);
        int want = expected(h, t, same);
        if (got != want) {
          print_message("%s: got %d (%s: %s), want %d (%s)\n", context, got, relock_err_name(got), msg, want,
                        relock_err_name(want));
          wrong++;
        } else if (got < 0) {
          assert_plain_words(msg, context);
          if (got == RELOCK_EWRONGKIND && (strstr(msg, "'n'") == NULL || strstr(msg, kinds[t].what) == NULL))
            fail_msg("%s: the refusal names neither the name nor the kind tried: \"%s\"", context, msg);
          if (fx_raw_int(fx->redis, "HLEN", "n", NULL) != fields)
            fail_msg("%s: the refusal changed the hash", context);
        }
        /* never a stale hold: releasing what was taken empties the name
         * (after a wrong answer the next pair starts afresh) */
        if (got == 1 && got == want)
          fx_value(relock_lock_unlock_async(tried, owner));
        if (got == want)
          fx_value(relock_lock_unlock_async(held, 1));
        if (got == want && fx_raw_int(fx->redis, "EXISTS", "n", NULL) != 0) {
          print_message("%s: a hold stayed after both released\n", context);
          wrong++;
        }
        relock_lock_free(tried);
        relock_lock_free(held);
      }
  assert_int_equal(wrong, 0);
}

/* A whole hash as a string, for comparing it before and after (fields
 * in the order Redis gives them: the same hash, untouched, answers the
 * same). */
static void hash_dump(fx_t *fx, const char *key, char *buf, size_t size) {
  if (relock_test_redis_cmd(fx->redis, buf, size, "HGETALL", key, NULL) != 0)
    fail_msg("HGETALL %s failed", key);
}

/* A release through a kind of the other family, by the owner that holds
 * the name: refused, the hash untouched (the lock's release would take a
 * reader's field of the same owner for its own; the read release would
 * take a lock's). Within a family, Redisson's semantics: released. */
static void test_every_pair_of_kinds_released(void **state) {
  fx_t *fx = *state;
  char msg[512], context[160], before[1024], after[1024];
  int wrong = 0;
  for (size_t h = 0; h < NKINDS; h++)
    for (size_t t = 0; t < NKINDS; t++) {
      if (kinds[h].family == kinds[t].family)
        continue;
      snprintf(context, sizeof context, "%s held, released as a %s by the same owner", kinds[h].what, kinds[t].what);
      relock_test_redis_cmd(fx->redis, NULL, 0, "FLUSHALL", NULL);
      relock_lock_t *held = make(h, fx->a, "n");
      relock_lock_t *other = make(t, fx->a, "n");
      if (fx_value(relock_lock_lock_async(held, 1, 0, 30000)) <= 0)
        fail_msg("%s: the first hold was not taken", context);
      hash_dump(fx, "n", before, sizeof before);
      int r = fx_error(relock_lock_unlock_async(other, 1), msg, sizeof msg);
      hash_dump(fx, "n", after, sizeof after);
      if (r != RELOCK_EWRONGKIND || strcmp(before, after) != 0) {
        print_message("%s: got %s (%s), the hash %s\n", context, relock_err_name(r), msg,
                      strcmp(before, after) == 0 ? "untouched" : "changed");
        wrong++;
      } else {
        assert_plain_words(msg, context);
        fx_value(relock_lock_unlock_async(held, 1)); /* the holder's own release still works */
        if (fx_raw_int(fx->redis, "EXISTS", "n", NULL) != 0) {
          print_message("%s: a hold stayed after the holder released\n", context);
          wrong++;
        }
      }
      relock_lock_free(other);
      relock_lock_free(held);
    }
  assert_int_equal(wrong, 0);
}

/* A Redis value of another type under a lock's name: each kind refuses
 * with RELOCK_EWRONGKIND, naming the name and the type, in plain words. */
static void test_a_value_of_another_type_is_refused_in_plain_words(void **state) {
  fx_t *fx = *state;
  static const struct {
    const char *type;
    const char *argv[4];
    int argc;
  } values[] = {
      {"string", {"SET", "v", "x"}, 3},
      {"list", {"RPUSH", "v", "x"}, 3},
      {"zset", {"ZADD", "v", "1", "x"}, 4},
  };
  char msg[512], context[160];
  for (size_t k = 0; k < NKINDS; k++)
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
      relock_test_redis_cmd(fx->redis, NULL, 0, "FLUSHALL", NULL);
      relock_test_redis_cmdv(fx->redis, NULL, 0, values[i].argc, values[i].argv, NULL);
      relock_lock_t *l = make(k, fx->a, "v");
      snprintf(context, sizeof context, "%s on a %s: acquire", kinds[k].what, values[i].type);
      assert_int_equal(fx_error(relock_lock_lock_async(l, 1, 0, 30000), msg, sizeof msg), RELOCK_EWRONGKIND);
      assert_plain_words(msg, context);
      if (strstr(msg, "'v'") == NULL || strstr(msg, values[i].type) == NULL)
        fail_msg("%s: names neither the name nor the type: \"%s\"", context, msg);
      snprintf(context, sizeof context, "%s on a %s: release", kinds[k].what, values[i].type);
      assert_int_equal(fx_error(relock_lock_unlock_async(l, 1), msg, sizeof msg), RELOCK_EWRONGKIND);
      assert_plain_words(msg, context);
      snprintf(context, sizeof context, "%s on a %s: hold count", kinds[k].what, values[i].type);
      assert_int_equal(fx_error(relock_lock_hold_count_async(l, 1), msg, sizeof msg), RELOCK_EWRONGKIND);
      assert_plain_words(msg, context);
      relock_lock_free(l);
    }
}

/* An operation on a key of another type: it may succeed where it reads
 * nothing of the key's value, but a failure is RELOCK_EWRONGKIND in plain
 * words; must_fail: it has to read the key. */
static void another_type(relock_future_t *f, int must_fail, const char *context) {
  char msg[512];
  int r = fx_error(f, msg, sizeof msg);
  if (r == 0 && must_fail)
    fail_msg("%s: succeeded on a key of another type", context);
  if (r != 0 && r != RELOCK_EWRONGKIND)
    fail_msg("%s: %s (%s), not RELOCK_EWRONGKIND", context, relock_err_name(r), msg);
  if (r != 0)
    assert_plain_words(msg, context);
}

/* Every operation of the synchronizers and the fenced lock's token on a
 * key of another type (a list: no synchronizer keeps one): their scripts
 * and commands meet WRONGTYPE; the error says so in plain words (a
 * try_set finds a key there and sets nothing: no error needed). */
static void test_synchronizers_on_another_type_say_so_in_plain_words(void **state) {
  fx_t *fx = *state;
  relock_test_redis_cmd(fx->redis, NULL, 0, "RPUSH", "L", "x", NULL);
  relock_test_redis_cmd(fx->redis, NULL, 0, "RPUSH", "{L}:timeout", "x", NULL);
  relock_test_redis_cmd(fx->redis, NULL, 0, "RPUSH", "redisson_lock_token:{L}", "x", NULL);
  relock_semaphore_t *s = relock_semaphore_new(fx->a, "L", NULL);
  relock_permit_semaphore_t *p = relock_permit_semaphore_new(fx->a, "L", NULL);
  relock_latch_t *l = relock_latch_new(fx->a, "L", NULL);
  relock_lock_t *t = relock_fenced_lock_new(fx->a, "L", NULL);
  assert_non_null(s);
  assert_non_null(p);
  assert_non_null(l);
  assert_non_null(t);
  another_type(relock_semaphore_acquire_async(s, 1, 0), 1, "semaphore acquire");
  another_type(relock_semaphore_release_async(s, 1), 1, "semaphore release");
  another_type(relock_semaphore_try_set_permits_async(s, 5), 0, "semaphore try_set_permits");
  another_type(relock_semaphore_add_permits_async(s, 1), 1, "semaphore add_permits");
  another_type(relock_semaphore_drain_permits_async(s), 1, "semaphore drain_permits");
  another_type(relock_semaphore_available_async(s), 1, "semaphore available");
  another_type(relock_permit_semaphore_acquire_async(p, 0, 1000), 1, "permit semaphore acquire");
  another_type(relock_permit_semaphore_release_async(p, "0123456789abcdef0123456789abcdef"), 1,
               "permit semaphore release");
  another_type(relock_permit_semaphore_try_set_permits_async(p, 5), 0, "permit semaphore try_set_permits");
  another_type(relock_permit_semaphore_add_permits_async(p, 1), 1, "permit semaphore add_permits");
  another_type(relock_permit_semaphore_available_async(p), 1, "permit semaphore available");
  another_type(relock_latch_try_set_count_async(l, 3), 0, "latch try_set_count");
  another_type(relock_latch_count_down_async(l), 1, "latch count_down");
  another_type(relock_latch_count_async(l), 1, "latch count");
  another_type(relock_latch_await_async(l, 0), 1, "latch await");
  another_type(relock_fenced_lock_token_async(t), 1, "fenced lock token");
  /* a count that is not a number: Redis's "ERR value is not an integer",
   * from inside the script, without the script's location or the tag */
  relock_test_redis_cmd(fx->redis, NULL, 0, "SET", "c", "not a number", NULL);
  relock_latch_t *c = relock_latch_new(fx->a, "c", NULL);
  char msg[512];
  assert_int_equal(fx_error(relock_latch_count_down_async(c), msg, sizeof msg), RELOCK_ESERVER);
  assert_plain_words(msg, "latch count down on a non-number");
  relock_latch_free(c);
  relock_lock_free(t);
  relock_latch_free(l);
  relock_permit_semaphore_free(p);
  relock_semaphore_free(s);
}

/* RELOCK_EUPGRADE: the message says what happened, without its tag. */
static void test_an_upgrade_is_refused_in_plain_words(void **state) {
  fx_t *fx = *state;
  relock_lock_t *r = make(4, fx->a, "u"), *w = make(5, fx->a, "u");
  assert_int_equal(fx_value(relock_lock_lock_async(r, 1, 0, 30000)), 1);
  char msg[512];
  assert_int_equal(fx_error(relock_lock_lock_async(w, 1, 0, 30000), msg, sizeof msg), RELOCK_EUPGRADE);
  assert_plain_words(msg, "upgrade");
  assert_non_null(strstr(msg, "'u'"));
  assert_non_null(strstr(msg, "cannot be upgraded"));
  relock_lock_free(w);
  relock_lock_free(r);
}

#define T(name) cmocka_unit_test_setup_teardown(name, fx_pair_setup, fx_pair_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_every_pair_of_kinds),
      T(test_every_pair_of_kinds_released),
      T(test_a_value_of_another_type_is_refused_in_plain_words),
      T(test_synchronizers_on_another_type_say_so_in_plain_words),
      T(test_an_upgrade_is_refused_in_plain_words),
  };
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found: install the Debian package redis-server");
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, NULL, NULL);
}
