/* relock under a least-privileged Redis ACL user: the rules of docs/ACL.md
 * (read from that file, so the page and the tests cannot drift apart) are
 * enough for every lock operation (and, with the semaphore add-on, every
 * semaphore operation), and each of them is needed: without it something
 * fails with RELOCK_ENOPERM and the server's text, at once, never by
 * hanging. On a server before Redis 6.2, which has no channel permissions,
 * the page's lines for it (section "Redis 6.0": the same without the `&`
 * rules) are the ones used and checked. */
#include <config.h>

#include <stdio.h>
#include <string.h>

#include "support/client_fixture.h"

#define ACL_DOC RELOCK_TOP_SRCDIR "/docs/ACL.md"
#define MAX_RULES 64

typedef struct {
  char line[2048];
  const char *rule[MAX_RULES];
  int n;
} rules_t;

static rules_t base_rules, addon_rules, wakeup_rules, semaphore_rules; /* from ACL_DOC */
static rules_t base_rules_60, semaphore_rules_60; /* the same for Redis before 6.2: no '&' rules */

/* Splits the words of an "ACL SETUSER relock ..." line after the user name. */
static void split(const char *line, rules_t *r) {
  snprintf(r->line, sizeof r->line, "%s", line);
  r->line[strcspn(r->line, "\r\n")] = '\0';
  r->n = 0;
  int word = 0;
  for (char *t = strtok(r->line, " "); t != NULL && r->n < MAX_RULES; t = strtok(NULL, " "))
    if (word++ >= 3)
      r->rule[r->n++] = t;
}

/* The rule set an add-on line belongs to: the one its section ("### ..."
 * heading above it) is about, NULL for a section this file knows nothing
 * of. */
static rules_t *addon_of(const char *heading) {
  if (strstr(heading, "wake-up") != NULL)
    return &wakeup_rules;
  if (strstr(heading, "semaphore") != NULL)
    return &semaphore_rules;
  if (strstr(heading, "relock status") != NULL)
    return &addon_rules;
  return NULL;
}

/* Whether the rules of b are those of a without its channel ('&') rules,
 * in a's order. */
static int without_channels(const rules_t *a, const rules_t *b) {
  int j = 0;
  for (int i = 0; i < a->n; i++) {
    if (a->rule[i][0] == '&')
      continue;
    if (j >= b->n || strcmp(a->rule[i], b->rule[j]) != 0)
      return 0;
    j++;
  }
  return j == b->n;
}

/* The lines of the section for Redis before 6.2 ("### Redis 6.0"). */
static int load_rules_60(const char *line) {
  rules_t *r = strncmp(line, "ACL SETUSER relock reset ", 25) == 0 ? &base_rules_60
               : strncmp(line, "ACL SETUSER relock +", 20) == 0   ? &semaphore_rules_60
                                                                   : NULL;
  if (r == NULL)
    return 0;
  if (r->n > 0) {
    fprintf(stderr, "%s: a third ACL SETUSER line under \"### Redis 6.0\"\n", ACL_DOC);
    return -1;
  }
  split(line, r);
  return 0;
}

/* Each add-on line goes to its section's set; a line under an unknown
 * heading, or two in one set, is an error (the page changed: this file
 * must learn it), not a guess. The lines for Redis 6.0 must be the others
 * without their '&' rules, as the page says. */
static int load_rules(void) {
  FILE *f = fopen(ACL_DOC, "r");
  if (f == NULL)
    return -1;
  char line[2048], heading[256] = "";
  int bad = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "### ", 4) == 0 || strncmp(line, "## ", 3) == 0) {
      snprintf(heading, sizeof heading, "%.200s", line);
    } else if (strncmp(heading, "### Redis 6.0", 13) == 0) {
      bad |= load_rules_60(line) != 0;
    } else if (strncmp(line, "ACL SETUSER relock reset ", 25) == 0) {
      bad |= base_rules.n > 0;
      split(line, &base_rules);
    } else if (strncmp(line, "ACL SETUSER relock +", 20) == 0) {
      rules_t *r = addon_of(heading);
      if (r == NULL || r->n > 0) {
        fprintf(stderr, "%s: an add-on line under \"%.*s\" that test_acl.c does not know\n", ACL_DOC,
                (int)strcspn(heading, "\n"), heading);
        bad = 1;
        continue;
      }
      split(line, r);
    }
  }
  fclose(f);
  if (!without_channels(&base_rules, &base_rules_60) || !without_channels(&semaphore_rules, &semaphore_rules_60)) {
    fprintf(stderr, "%s: the lines for Redis 6.0 are not the others without their '&' rules\n", ACL_DOC);
    bad = 1;
  }
  return !bad && base_rules.n > 0 && addon_rules.n > 0 && wakeup_rules.n > 0 && semaphore_rules.n > 0 ? 0 : -1;
}

typedef struct {
  relock_test_redis_t *redis;
  relock_options_t *cfg;
  relock_client_t *a, *b;
  int lost;                /* holds reported lost */
  uint64_t lost_owner;     /* the owner of the last one */
  int lost_reason;         /* and its reason */
  int waits;               /* tries that found the lock held (relock_lock_on_wait) */
} fx_t;

static int setup(void **state) {
  fx_t *fx = calloc(1, sizeof(*fx));
  if ((fx->redis = relock_test_redis_start(NULL)) == NULL)
    return -1;
  fx->cfg = fx_options(fx->redis, 1);
  fx_set_str(fx->cfg, RELOCK_OPT_USERNAME, "relock");
  fx_set_str(fx->cfg, RELOCK_OPT_PASSWORD, "pw");
  /* both optional rules in use: SELECT and CLIENT SETNAME are sent */
  fx_set_str(fx->cfg, RELOCK_OPT_CLIENT_NAME, "acl-test");
  fx_set_int(fx->cfg, RELOCK_OPT_DB, 1);
  fx_set_int(fx->cfg, RELOCK_OPT_RETRY_ATTEMPTS, 0);
  *state = fx;
  return 0;
}

static void close_clients(fx_t *fx) {
  relock_client_free(fx->a);
  relock_client_free(fx->b);
  fx->a = fx->b = NULL;
}

static int teardown(void **state) {
  fx_t *fx = *state;
  close_clients(fx);
  relock_test_redis_free(fx->redis);
  relock_options_free(fx->cfg);
  free(fx);
  return 0;
}

/* Sends an admin command (the default user) that must answer +OK. */
static void admin_ok(fx_t *fx, int argc, const char *const *argv) {
  char reply[512];
  assert_int_equal(relock_test_redis_cmdv(fx->redis, reply, sizeof reply, argc, argv, NULL), 0);
  if (strncmp(reply, "+OK", 3) != 0)
    fail_msg("%s %s: %s", argv[0], argc > 1 ? argv[1] : "", reply);
}

/* Whether the server has channel permissions ('&' rules: Redis 6.2+). */
static int has_channel_rules(const fx_t *fx) { return relock_test_redis_version(fx->redis) >= 60200; }

/* The documented rules for this server: docs/ACL.md's section "Redis 6.0"
 * before 6.2. */
static const rules_t *base_of(const fx_t *fx) { return has_channel_rules(fx) ? &base_rules : &base_rules_60; }
static const rules_t *semaphore_of(const fx_t *fx) {
  return has_channel_rules(fx) ? &semaphore_rules : &semaphore_rules_60;
}

/* The add-ons make_user may add to the base rules. */
enum { ADD_STATUS = 1, ADD_WAKEUP = 2, ADD_SEMAPHORE = 4 };

static void add_rules(const rules_t *r, const char *omit, const char **argv, int *argc) {
  for (int i = 0; i < r->n; i++)
    if (omit == NULL || strcmp(r->rule[i], omit) != 0)
      argv[(*argc)++] = r->rule[i][0] == '>' ? ">pw" : r->rule[i];
}

/* (Re)makes the user "relock" from the documented rules, without the rule
 * omit (NULL: all of them), with the add-ons asked for (ADD_*; 1: those of
 * status/list and the wake-up). */
static void make_user(fx_t *fx, const char *omit, int addons) {
  if (addons == 1)
    addons = ADD_STATUS | ADD_WAKEUP;
  const char *argv[3 + 4 * MAX_RULES] = {"ACL", "SETUSER", "relock"};
  int argc = 3;
  add_rules(base_of(fx), omit, argv, &argc);
  if (addons & ADD_STATUS)
    add_rules(&addon_rules, NULL, argv, &argc);
  if (addons & ADD_WAKEUP)
    add_rules(&wakeup_rules, NULL, argv, &argc);
  if (addons & ADD_SEMAPHORE)
    add_rules(semaphore_of(fx), omit, argv, &argc);
  admin_ok(fx, argc, argv);
  /* a fresh script cache: EVAL (the NOSCRIPT fallback) is exercised too */
  const char *flush[] = {"SCRIPT", "FLUSH"};
  admin_ok(fx, 2, flush);
}

static void on_lost(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg) {
  (void)lock;
  fx_t *fx = arg;
  print_message("# %s\n", message);
  fx->lost++;
  fx->lost_owner = owner;
  fx->lost_reason = reason;
}

static void on_wait(relock_lock_t *lock, uint64_t owner, int64_t ttl_ms, void *arg) {
  (void)lock, (void)owner, (void)ttl_ms;
  ((fx_t *)arg)->waits++;
}

static void clients(fx_t *fx, int64_t watchdog_ms) {
  relock_options_t *o = fx_copy(fx->cfg);
  if (watchdog_ms > 0)
    fx_set_ms(o, RELOCK_OPT_WATCHDOG_TIMEOUT, watchdog_ms);
  fx->a = fx_client(o);
  fx->b = fx_client(o);
  relock_options_free(o);
}

static relock_lock_t *lock_of(fx_t *fx, relock_client_t *c, const char *name) {
  relock_lock_t *l = relock_lock_new(c, name, NULL);
  assert_non_null(l);
  relock_lock_on_lost(l, on_lost, fx);
  relock_lock_on_wait(l, on_wait, fx);
  return l;
}

/* Waits for f; 0 and its value in *v, or its error with its message. */
static int outcome(relock_future_t *f, int64_t *v, char *msg, size_t size) {
  assert_non_null(f);
  int r = relock_future_wait(f, fx_slack_ms(10000));
  assert_int_not_equal(r, RELOCK_EPENDING);
  if (r == 0 && v != NULL)
    *v = relock_future_value_type(f) == RELOCK_VALUE_BOOL ? relock_future_bool(f) : relock_future_int(f);
  if (msg != NULL)
    snprintf(msg, size, "%s", r != 0 ? relock_future_message(f) : "");
  relock_future_release(f);
  return r;
}

static int64_t value_of(relock_future_t *f) {
  int64_t v = 0;
  char msg[512];
  int r = outcome(f, &v, msg, sizeof msg);
  if (r != 0)
    fail_msg("operation failed: %s (%s)", msg, relock_err_name(r));
  return v;
}

/* f fails with RELOCK_ENOPERM and a message holding phrase; returns at
 * once (well within any wait it was given). */
static void refused(relock_future_t *f, const char *phrase) {
  char msg[512];
  uint64_t t0 = relock__now_ns();
  int r = outcome(f, NULL, msg, sizeof msg);
  if (r != RELOCK_ENOPERM || strstr(msg, phrase) == NULL)
    fail_msg("expected RELOCK_ENOPERM with \"%s\", got %s: %s", phrase, relock_err_name(r), msg);
  assert_true(fx_ms_since(t0) < fx_slack_ms(2000));
}

/* The server's words for a refusal: Redis 6.0 and 7.0 say one thing,
 * Redis 7.2 and later and Valkey (7.2's descendant) another. The test
 * checks each server's own words, not a phrase both happen to share. */
static const char *words(const fx_t *fx, const char *redis_7_0, const char *redis_7_2) {
  return relock_test_redis_version(fx->redis) < 70200 ? redis_7_0 : redis_7_2;
}

static long long raw_exists(fx_t *fx, const char *key) {
  char buf[64];
  const char *select_exists[] = {"EVAL", "redis.call('select', 1) return redis.call('exists', KEYS[1])", "1", key};
  assert_int_equal(relock_test_redis_cmdv(fx->redis, buf, sizeof buf, 4, select_exists, NULL), 0);
  return buf[0] == ':' ? atoll(buf + 1) : -1;
}

typedef struct {
  fx_t *fx;
  int n;
} count_t;

static int waits_reach(void *arg) {
  count_t *c = arg;
  return c->fx->waits >= c->n;
}

static int losses_reach(void *arg) {
  count_t *c = arg;
  return c->fx->lost >= c->n;
}

/* An acquisition f through a fresh lock object, started on a held lock,
 * is waiting on the lock's channel: its first try found the lock held, it
 * subscribed, and its try after the subscription found it held too (that
 * one registers the waiter, with the wake-up add-on: lock_acquire.c, step
 * 2) - two wait callbacks - and it is still pending. Waited for, up to a
 * bound stretched for the tool: a fixed span of real time (300 ms) is not
 * always enough for a client under valgrind on a loaded machine. */
static void waiting(fx_t *fx, relock_future_t *f) {
  count_t c = {fx, fx->waits + 2};
  assert_true(fx_run_until(fx_loop(), waits_reach, &c, 2000));
  assert_int_equal(relock_future_state(f), RELOCK_FUTURE_PENDING);
}

#define ACQUIRE(l, owner, wait, lease) value_of(relock_lock_lock_async((l), (owner), (wait), (lease)))
#define RELEASE(l, owner) value_of(relock_lock_unlock_async((l), (owner)))

/* -- the documented rules suffice ---------------------------------------------*/

static void test_documented_rules_suffice(void **state) {
  fx_t *fx = *state;
  make_user(fx, NULL, 0);
  /* A short lease, renewed every third of it, stretched for the tool: an
   * answer that comes back after the lease (less the drift margin) is
   * given back, not reported acquired, and the first try of a client under
   * valgrind on a loaded machine has taken 345 ms. */
  int64_t watchdog_ms = 300 * relock_test_slowdown();
  clients(fx, watchdog_ms);
  relock_lock_t *la = lock_of(fx, fx->a, "app:res"), *lb = lock_of(fx, fx->b, "app:res");

  assert_int_equal(ACQUIRE(la, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(ACQUIRE(la, 1, 0, RELOCK_INFINITE), 1); /* reentrant */
  assert_int_equal(value_of(relock_lock_is_locked_async(la)), 1);
  assert_int_equal(value_of(relock_lock_is_held_by_thread_async(la, 1)), 1);
  assert_int_equal(value_of(relock_lock_hold_count_async(la, 1)), 2);
  /* renewal: held three times its lease (a span computed from the
   * stretched lease: not stretched again) */
  fx_run_for(fx_loop(), 3 * watchdog_ms);
  assert_true(value_of(relock_lock_remaining_ttl_async(la)) > 0);
  assert_int_equal(value_of(relock_lock_validate_async(la, 1)), 1);
  assert_int_equal(fx->lost, 0);

  /* waiting: b subscribes, and gets the lock on a's release */
  relock_future_t *wait = relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE);
  waiting(fx, wait);
  assert_int_equal(relock_future_wait(wait, 300), RELOCK_EPENDING); /* and stays so while held */
  assert_int_equal(RELEASE(la, 1), 0);
  assert_int_equal(RELEASE(la, 1), 1);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(value_of(wait), 1);
  assert_true(fx_ms_since(t0) < fx_slack_ms(1000));

  /* force release (and its wake-up of a waiter), and a fixed lease */
  wait = relock_lock_lock_async(la, 1, 20000, 10000);
  waiting(fx, wait);
  assert_int_equal(value_of(relock_lock_force_unlock_async(lb)), 1);
  /* The force release took b's own watchdog hold (owner 2) away: the
   * watchdog's next renewal, within a cycle (a third of the lease), finds
   * its field gone and reports it lost (lock.h, docs/SAFETY.md: every
   * loss, force release included, is told within a cycle). Waited for, up
   * to a bound stretched for the tool - not assumed to come after the
   * checks below, which under valgrind on a loaded machine can take longer
   * than a cycle. */
  count_t one = {fx, 1};
  assert_true(fx_run_until(fx_loop(), losses_reach, &one, 1000));
  assert_int_equal(fx->lost, 1);
  assert_int_equal(fx->lost_owner, 2);
  assert_int_equal(fx->lost_reason, RELOCK_ELOST);
  assert_int_equal(value_of(wait), 1);
  assert_int_equal(value_of(relock_lock_validate_async(la, 1)), 1); /* HEXISTS */
  assert_int_equal(RELEASE(la, 1), 1);
  assert_int_equal(value_of(relock_lock_is_locked_async(la)), 0);
  assert_int_equal(fx->lost, 1); /* that one alone: a's holds were never lost */
  /* the subscriber connection was never refused anything */
  assert_int_equal(fx->b->redis.pubsub.conn.connects, 1);
  assert_int_equal(fx->a->redis.pubsub.conn.connects, 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

/* -- the wake-up add-on ----------------------------------------------------------*/

static long long waiters_registered(fx_t *fx) {
  char buf[64];
  const char *zcard[] = {"EVAL", "redis.call('select', 1) return redis.call('zcard', KEYS[1])", "1",
                         "relock_lock_latch:{app:res}:waiters"};
  assert_int_equal(relock_test_redis_cmdv(fx->redis, buf, sizeof buf, 4, zcard, NULL), 0);
  return buf[0] == ':' ? atoll(buf + 1) : -1;
}

/* With the add-on a waiting process registers (so that an unlock wakes it
 * alone); without it the scripts skip that, and waiting works as before. */
static void wait_with_or_without_the_wakeup_addon(fx_t *fx, int addons, long long registered) {
  make_user(fx, NULL, addons);
  clients(fx, 0);
  relock_lock_t *la = lock_of(fx, fx->a, "app:res"), *lb = lock_of(fx, fx->b, "app:res");
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1);
  relock_future_t *wait = relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE);
  waiting(fx, wait); /* its try that registers it is done */
  assert_int_equal(waiters_registered(fx), registered);
  assert_int_equal(RELEASE(la, 1), 1);
  assert_int_equal(value_of(wait), 1);
  assert_int_equal(waiters_registered(fx), 0); /* it took the lock: unregistered */
  assert_int_equal(RELEASE(lb, 2), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

static void test_wakeup_addon(void **state) {
  fx_t *fx = *state;
  wait_with_or_without_the_wakeup_addon(fx, 0, 0);
  relock_client_free(fx->a);
  relock_client_free(fx->b);
  fx->a = fx->b = NULL;
  wait_with_or_without_the_wakeup_addon(fx, 1, 1);
}

/* -- one rule missing -----------------------------------------------------------*/

static void test_without_evalsha(void **state) {
  fx_t *fx = *state;
  make_user(fx, "+evalsha", 0);
  clients(fx, 0);
  relock_lock_t *la = lock_of(fx, fx->a, "app:res");
  refused(relock_lock_lock_async(la, 1, 0, RELOCK_INFINITE), "NOPERM");
  refused(relock_lock_force_unlock_async(la), "'evalsha'");
  assert_int_equal(raw_exists(fx, "app:res"), 0);
  relock_lock_free(la);
}

static void test_without_eval(void **state) {
  fx_t *fx = *state;
  make_user(fx, "+eval", 0); /* and the cache flushed: NOSCRIPT, then EVAL */
  clients(fx, 0);
  relock_lock_t *la = lock_of(fx, fx->a, "app:res");
  refused(relock_lock_lock_async(la, 1, 5000, RELOCK_INFINITE),
          words(fx, "NOPERM this user has no permissions to run the 'eval'",
                "NOPERM User relock has no permissions to run the 'eval'"));
  relock_lock_free(la);
}

static void test_key_outside_the_pattern(void **state) {
  fx_t *fx = *state;
  make_user(fx, NULL, 0);
  clients(fx, 0);
  relock_lock_t *lx = lock_of(fx, fx->a, "other:res");
  refused(relock_lock_lock_async(lx, 1, 5000, RELOCK_INFINITE), "NOPERM");
  refused(relock_lock_is_locked_async(lx), "NOPERM");
  refused(relock_lock_force_unlock_async(lx), "NOPERM");
  relock_lock_free(lx);
}

/* A waiter whose SUBSCRIBE is refused fails with the server's word, long
 * before its wait would end; the lock itself still works. */
static void waiter_refused(fx_t *fx, const char *omit) {
  make_user(fx, omit, 0);
  clients(fx, 0);
  relock_lock_t *la = lock_of(fx, fx->a, "app:res"), *lb = lock_of(fx, fx->b, "app:res");
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1); /* free: no subscription needed */
  refused(relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE), "NOPERM");
  refused(relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE), "NOPERM"); /* again, no stale state */
  assert_int_equal(value_of(relock_lock_is_held_by_thread_async(lb, 2)), 0);
  assert_int_equal(ACQUIRE(lb, 2, 0, 10000), 0); /* a try needs no channel */
  relock_lock_free(la);
  relock_lock_free(lb);
}

static void test_without_subscribe(void **state) {
  fx_t *fx = *state;
  waiter_refused(fx, "+subscribe");
  relock_lock_t *la = lock_of(fx, fx->a, "app:res");
  assert_int_equal(RELEASE(la, 1), 1);
  relock_lock_free(la);
}

/* Before 6.2 there is no channel rule to leave out: the server refuses
 * one, and the documented user (without it) may wait on, and publish to,
 * any channel - one outside the patterns its lines would name. */
static void any_channel_before_6_2(fx_t *fx) {
  char reply[256];
  assert_int_equal(relock_test_redis_cmd(fx->redis, reply, sizeof reply, "ACL", "SETUSER", "relock",
                                         "&redisson_lock__channel:{app:*", NULL), 0);
  if (strstr(reply, "Syntax error") == NULL)
    fail_msg("a server before 6.2 took a channel rule: %s", reply);
  make_user(fx, NULL, 0);
  clients(fx, 0);
  relock_lock_t *la = lock_of(fx, fx->a, "app:res"), *lb = lock_of(fx, fx->b, "app:res");
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1);
  relock_future_t *wait = relock_lock_lock_async(lb, 2, 20000, RELOCK_INFINITE);
  waiting(fx, wait);
  assert_int_equal(RELEASE(la, 1), 1); /* its PUBLISH allowed */
  uint64_t t0 = relock__now_ns();
  assert_int_equal(value_of(wait), 1);
  assert_true(fx_ms_since(t0) < fx_slack_ms(1000)); /* woken, not found free at a later try */
  assert_int_equal(RELEASE(lb, 2), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

static void test_without_the_channel_pattern(void **state) {
  fx_t *fx = *state;
  if (!has_channel_rules(fx)) {
    any_channel_before_6_2(fx);
    return;
  }
  waiter_refused(fx, "&redisson_lock__channel:{app:*");
  /* PUBLISH from the release script is refused too, after the DEL */
  relock_lock_t *la = lock_of(fx, fx->a, "app:res");
  refused(relock_lock_unlock_async(la, 1),
          words(fx, "can't publish", "ACL failure in script: No permissions to access a channel"));
  assert_int_equal(raw_exists(fx, "app:res"), 0);
  relock_lock_free(la);
}

/* Redis checks a script's commands too; one refused half-way keeps what
 * ran before it (docs/ACL.md): here the lock is deleted, the wake-up not
 * published. */
static void test_without_publish(void **state) {
  fx_t *fx = *state;
  make_user(fx, "+publish", 0);
  clients(fx, 0);
  relock_lock_t *la = lock_of(fx, fx->a, "app:res");
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1);
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1);
  assert_int_equal(RELEASE(la, 1), 0); /* holds remain: no PUBLISH */
  refused(relock_lock_unlock_async(la, 1),
          words(fx, "Redis refused one of relock's commands: The user executing the script can't run this command",
                "Redis refused one of relock's commands: ACL failure in script: User relock has no permissions to "
                "run the 'publish' command"));
  assert_int_equal(raw_exists(fx, "app:res"), 0);
  relock_lock_free(la);
}

/* The channel's name is among the keys of the scripts that publish on it:
 * without its key pattern they are refused before running. */
static void test_without_the_channel_key_pattern(void **state) {
  fx_t *fx = *state;
  make_user(fx, "~redisson_lock__channel:{app:*", 0);
  clients(fx, 0);
  relock_lock_t *la = lock_of(fx, fx->a, "app:res");
  assert_int_equal(ACQUIRE(la, 1, 0, 10000), 1);
  refused(relock_lock_unlock_async(la, 1),
          words(fx, "NOPERM this user has no permissions to access one of the keys",
                "NOPERM No permissions to access a key"));
  assert_int_equal(raw_exists(fx, "app:res"), 1);
  relock_lock_free(la);
}

/* -- every rule is needed -----------------------------------------------------
 * Every lock operation once; returns how many failed with RELOCK_ENOPERM
 * (or could not connect for it), and in *reconnects how often a subscriber
 * connection had to be made again (a refused PING or UNSUBSCRIBE drops it
 * without failing anything). */
static int enoperm(relock_future_t *f, int *other) {
  int r = outcome(f, NULL, NULL, 0);
  if (r != 0 && r != RELOCK_ENOPERM)
    ++*other;
  return r == RELOCK_ENOPERM;
}

static int every_operation(fx_t *fx, uint64_t *reconnects, int *other) {
  relock_options_t *o = fx_copy(fx->cfg);
  fx_set_ms(o, RELOCK_OPT_PING_INTERVAL, 50);
  relock_client_t *a = fx_client(o), *b = fx_client(o);
  relock_options_free(o);
  relock_lock_t *la = lock_of(fx, a, "app:res"), *lb = lock_of(fx, b, "app:res");
  int n = enoperm(relock_lock_lock_async(la, 1, 0, 10000), other);
  relock_future_t *wait = relock_lock_lock_async(lb, 2, 2000, 10000);
  /* These spans are the library's own timers, which run in real time under
   * valgrind too; only the requests after them are slower: twice, not the
   * tenfold of fx_run_until (16 s a rule, 7 minutes in all). */
  int stretch = relock_test_under_valgrind() ? 2 : 1;
  fx_run_for(fx_loop(), 300 * stretch); /* subscribed, and idle: PING */
  n += enoperm(relock_lock_unlock_async(la, 1), other);
  n += enoperm(wait, other); /* the waiter's acquisition */
  fx_run_for(fx_loop(), 1300 * stretch); /* unsubscribed (after the empty wait queue's 1 s linger) */
  n += enoperm(relock_lock_is_locked_async(la), other);
  n += enoperm(relock_lock_is_held_by_thread_async(lb, 2), other);
  n += enoperm(relock_lock_hold_count_async(lb, 2), other);
  n += enoperm(relock_lock_remaining_ttl_async(lb), other);
  n += enoperm(relock_lock_validate_async(lb, 2), other);
  n += enoperm(relock_lock_force_unlock_async(lb), other);
  *reconnects = a->redis.pubsub.conn.connects + b->redis.pubsub.conn.connects;
  relock_lock_free(la);
  relock_lock_free(lb);
  relock_client_free(a);
  relock_client_free(b);
  const char *flushall[] = {"FLUSHALL"};
  admin_ok(fx, 1, flushall);
  return n;
}

static void test_every_rule_is_needed(void **state) {
  fx_t *fx = *state;
  uint64_t subscriber_connects;
  int other = 0;
  make_user(fx, NULL, 0);
  assert_int_equal(every_operation(fx, &subscriber_connects, &other), 0);
  assert_int_equal(other, 0);
  assert_int_equal(subscriber_connects, 1); /* b's; a never subscribed */
  const rules_t *base = base_of(fx);
  for (int i = 0; i < base->n; i++) {
    const char *rule = base->rule[i];
    if (rule[0] != '+' && rule[0] != '~' && rule[0] != '&')
      continue; /* reset, on, the password, -@all */
    make_user(fx, rule, 0);
    other = 0;
    int n = every_operation(fx, &subscriber_connects, &other);
    if (n == 0 && subscriber_connects == 1)
      fail_msg("without %s everything still works: the rule is not needed", rule);
    print_message("# without %s: %d operations refused, %d failed otherwise, %llu subscriber connections\n", rule,
                  n, other, (unsigned long long)subscriber_connects);
  }
}

/* -- the semaphore add-on ------------------------------------------------------
 * The permit-expirable semaphore (a watched permit: renewed by the
 * watchdog, lua/lock_renew.lua with role 'p') and the plain one, with the
 * base rules and the semaphore add-on alone. */

#define PS_NAME "app:ps"
#define PS_CHANNEL "redisson_sc:{" PS_NAME "}"
#define S_NAME "app:sem"
#define S_CHANNEL "redisson_sc:{" S_NAME "}"

static void on_permit_lost(relock_permit_semaphore_t *s, const char *id, int reason, const char *message,
                           void *arg) {
  (void)s, (void)id, (void)reason;
  print_message("# %s\n", message);
  ((fx_t *)arg)->lost++;
}

static relock_permit_semaphore_t *permit_sem_of(fx_t *fx, relock_client_t *c) {
  relock_permit_semaphore_t *s = relock_permit_semaphore_new(c, PS_NAME, NULL);
  assert_non_null(s);
  assert_int_equal(relock_permit_semaphore_on_lost(s, on_permit_lost, fx), 0);
  return s;
}

static relock_semaphore_t *sem_of(relock_client_t *c) {
  relock_semaphore_t *s = relock_semaphore_new(c, S_NAME, NULL);
  assert_non_null(s);
  return s;
}

/* A permit's acquisition: 0 and the permit's id in id ("" when none was
 * free within the wait), or its error (its message in msg). */
static int permit_outcome(relock_future_t *f, char id[RELOCK_PERMIT_ID_SIZE], char *msg, size_t size) {
  assert_non_null(f);
  int r = relock_future_wait(f, fx_slack_ms(10000));
  assert_int_not_equal(r, RELOCK_EPENDING);
  id[0] = '\0';
  if (r == 0 && relock_future_value_type(f) == RELOCK_VALUE_STRING)
    snprintf(id, RELOCK_PERMIT_ID_SIZE, "%s", relock_future_string(f, NULL));
  if (msg != NULL)
    snprintf(msg, size, "%s", r != 0 ? relock_future_message(f) : "");
  relock_future_release(f);
  return r;
}

static void take_permit(relock_future_t *f, char id[RELOCK_PERMIT_ID_SIZE]) {
  char msg[512];
  int r = permit_outcome(f, id, msg, sizeof msg);
  if (r != 0 || strlen(id) != 32)
    fail_msg("no permit: %s (%s)", msg, relock_err_name(r));
}

/* How many subscribers channel has (PUBSUB NUMSUB, as the admin). */
static long long subscribers(fx_t *fx, const char *channel) {
  char buf[256];
  const char *numsub[] = {"PUBSUB", "NUMSUB", channel};
  assert_int_equal(relock_test_redis_cmdv(fx->redis, buf, sizeof buf, 3, numsub, NULL), 0);
  const char *count = strrchr(buf, ':'); /* "*2 $n <channel> :<count>": the last colon */
  assert_non_null(count);
  return atoll(count + 1);
}

typedef struct {
  fx_t *fx;
  const char *channel;
  relock_future_t *f;
} sub_t;

/* The waiter f subscribed to the channel, or is done (refused). */
static int subscribed_or_done(void *arg) {
  sub_t *w = arg;
  return relock_future_is_done(w->f) || subscribers(w->fx, w->channel) > 0;
}

/* Runs the loop until the waiting acquisition f has subscribed to channel
 * (or is done); returns whether it is still pending. */
static int subscribed(fx_t *fx, const char *channel, relock_future_t *f) {
  sub_t w = {fx, channel, f};
  fx_run_until(fx_loop(), subscribed_or_done, &w, 2000);
  return relock_future_state(f) == RELOCK_FUTURE_PENDING;
}

static int give_backs_done(void *arg) {
  return __atomic_load_n(&((relock_client_t *)arg)->give_backs_owed, __ATOMIC_RELAXED) == 0;
}

/* A permit whose acquisition is answered past its lease - the server
 * paused (CLIENT PAUSE) for longer - is given back
 * (lua/permit_semaphore_undo.lua, its only caller that a test can make
 * happen at will). Returns the acquisition's outcome (RELOCK_ETIMEDOUT:
 * answered late, given back; 0: none was free) and in *give_back_failed
 * whether the give-back was refused (which is told to nobody: the client
 * counts it). */
static int late_permit(fx_t *fx, relock_client_t *c, relock_permit_semaphore_t *s, int *give_back_failed) {
  size_t failed = c->give_backs_failed;
  char pause[32], reply[64], id[RELOCK_PERMIT_ID_SIZE];
  snprintf(pause, sizeof pause, "%d", 300 * relock_test_slowdown());
  /* no mode argument (ALL, 6.2+): without one every client is paused */
  assert_int_equal(relock_test_redis_cmd(fx->redis, reply, sizeof reply, "CLIENT", "PAUSE", pause, NULL), 0);
  assert_string_equal(reply, "+OK\r\n");
  int r = permit_outcome(relock_permit_semaphore_acquire_async(s, 0, 100), id, NULL, 0);
  if (r == 0 && id[0] != '\0')
    fail_msg("a permit with a 100 ms lease answered in time through a %s ms pause", pause);
  assert_true(fx_run_until(fx_loop(), give_backs_done, c, 5000));
  *give_back_failed = c->give_backs_failed > failed;
  return r;
}

static void test_semaphore_addon_suffices(void **state) {
  fx_t *fx = *state;
  make_user(fx, NULL, ADD_SEMAPHORE);
  int64_t watchdog_ms = 300 * relock_test_slowdown(); /* as in test_documented_rules_suffice */
  clients(fx, watchdog_ms);
  relock_permit_semaphore_t *pa = permit_sem_of(fx, fx->a), *pb = permit_sem_of(fx, fx->b);
  char id[RELOCK_PERMIT_ID_SIZE], next[RELOCK_PERMIT_ID_SIZE];

  assert_int_equal(value_of(relock_permit_semaphore_try_set_permits_async(pa, 1)), 1);
  assert_int_equal(value_of(relock_permit_semaphore_available_async(pa)), 1);
  take_permit(relock_permit_semaphore_acquire_async(pa, 0, RELOCK_INFINITE), id); /* watched */
  assert_int_equal(value_of(relock_permit_semaphore_available_async(pa)), 0);
  /* renewed by the watchdog (every third of its lease) through two leases */
  fx_run_for(fx_loop(), 2 * watchdog_ms);
  assert_true(relock_permit_semaphore_validity_ms(pa, id) > 0);
  assert_int_equal(value_of(relock_permit_semaphore_validate_async(pa, id)), 1);
  assert_int_equal(fx->lost, 0);
  /* a waiter (its try finds none free: ZRANGE) subscribes; the release
   * (PUBLISH) wakes it */
  relock_future_t *wait = relock_permit_semaphore_acquire_async(pb, 20000, RELOCK_INFINITE);
  assert_true(subscribed(fx, PS_CHANNEL, wait));
  assert_int_equal(relock_future_wait(wait, 300), RELOCK_EPENDING); /* and stays so while taken */
  assert_int_equal(value_of(relock_permit_semaphore_release_async(pa, id)), 1);
  uint64_t t0 = relock__now_ns();
  take_permit(wait, next);
  assert_true(fx_ms_since(t0) < fx_slack_ms(1000));
  assert_int_equal(value_of(relock_permit_semaphore_release_async(pb, next)), 1);
  assert_int_equal(value_of(relock_permit_semaphore_try_set_permits_async(pa, 5)), 0); /* set already */
  assert_int_equal(value_of(relock_permit_semaphore_add_permits_async(pa, 2)), 3);
  assert_int_equal(value_of(relock_permit_semaphore_available_async(pa)), 3);
  assert_int_equal(fx->lost, 0);
  /* a permit answered past its lease is given back (INCR) */
  int give_back_failed;
  assert_int_equal(late_permit(fx, fx->a, pa, &give_back_failed), RELOCK_ETIMEDOUT);
  assert_int_equal(give_back_failed, 0);
  assert_int_equal(value_of(relock_permit_semaphore_available_async(pa)), 3);
  relock_permit_semaphore_free(pa);
  relock_permit_semaphore_free(pb);

  relock_semaphore_t *sa = sem_of(fx->a), *sb = sem_of(fx->b);
  assert_int_equal(value_of(relock_semaphore_try_set_permits_async(sa, 1)), 1);
  assert_int_equal(value_of(relock_semaphore_acquire_async(sa, 1, 0)), 1);
  assert_int_equal(value_of(relock_semaphore_available_async(sa)), 0);
  wait = relock_semaphore_acquire_async(sb, 1, 20000);
  assert_true(subscribed(fx, S_CHANNEL, wait));
  assert_int_equal(value_of(relock_semaphore_release_async(sa, 1)), 1); /* free afterwards: 1 */
  t0 = relock__now_ns();
  assert_int_equal(value_of(wait), 1);
  assert_true(fx_ms_since(t0) < fx_slack_ms(1000));
  assert_int_equal(value_of(relock_semaphore_release_async(sb, 1)), 1);
  assert_int_equal(value_of(relock_semaphore_add_permits_async(sa, 2)), 3);
  assert_int_equal(value_of(relock_semaphore_drain_permits_async(sa)), 3);
  assert_int_equal(value_of(relock_semaphore_available_async(sa)), 0);
  relock_semaphore_free(sa);
  relock_semaphore_free(sb);
  /* the subscriber connections were never refused anything */
  assert_int_equal(fx->b->redis.pubsub.conn.connects, 1);
}

/* -- every rule of the semaphore add-on is needed ---------------------------*/

/* Every semaphore operation once, as every_operation does for the locks;
 * returns how many were refused (RELOCK_ENOPERM). */
static int every_semaphore_operation(fx_t *fx, int *other) {
  relock_client_t *a = fx_client(fx->cfg), *b = fx_client(fx->cfg);
  int stretch = relock_test_under_valgrind() ? 2 : 1;
  char id[RELOCK_PERMIT_ID_SIZE], next[RELOCK_PERMIT_ID_SIZE];

  relock_permit_semaphore_t *pa = permit_sem_of(fx, a), *pb = permit_sem_of(fx, b);
  int n = enoperm(relock_permit_semaphore_try_set_permits_async(pa, 1), other);
  int r = permit_outcome(relock_permit_semaphore_acquire_async(pa, 0, RELOCK_INFINITE), id, NULL, 0);
  n += r == RELOCK_ENOPERM;
  *other += r != 0 && r != RELOCK_ENOPERM;
  relock_future_t *wait = relock_permit_semaphore_acquire_async(pb, 2000 * stretch, RELOCK_INFINITE);
  subscribed(fx, PS_CHANNEL, wait);
  if (id[0] != '\0')
    n += enoperm(relock_permit_semaphore_release_async(pa, id), other);
  r = permit_outcome(wait, next, NULL, 0);
  n += r == RELOCK_ENOPERM;
  *other += r != 0 && r != RELOCK_ENOPERM;
  if (next[0] != '\0')
    n += enoperm(relock_permit_semaphore_release_async(pb, next), other);
  n += enoperm(relock_permit_semaphore_available_async(pa), other);
  n += enoperm(relock_permit_semaphore_add_permits_async(pa, 1), other);
  int give_back_failed;
  r = late_permit(fx, a, pa, &give_back_failed);
  n += (r == RELOCK_ENOPERM) + give_back_failed;
  *other += r != 0 && r != RELOCK_ETIMEDOUT && r != RELOCK_ENOPERM;
  relock_permit_semaphore_free(pa);
  relock_permit_semaphore_free(pb);

  relock_semaphore_t *sa = sem_of(a), *sb = sem_of(b);
  n += enoperm(relock_semaphore_try_set_permits_async(sa, 1), other);
  n += enoperm(relock_semaphore_acquire_async(sa, 1, 0), other);
  wait = relock_semaphore_acquire_async(sb, 1, 2000 * stretch);
  subscribed(fx, S_CHANNEL, wait);
  n += enoperm(relock_semaphore_release_async(sa, 1), other);
  n += enoperm(wait, other);
  n += enoperm(relock_semaphore_drain_permits_async(sa), other);
  n += enoperm(relock_semaphore_available_async(sa), other);
  relock_semaphore_free(sa);
  relock_semaphore_free(sb);

  relock_client_free(a);
  relock_client_free(b);
  const char *flushall[] = {"FLUSHALL"};
  admin_ok(fx, 1, flushall);
  return n;
}

static void test_every_semaphore_rule_is_needed(void **state) {
  fx_t *fx = *state;
  int other = 0;
  make_user(fx, NULL, ADD_SEMAPHORE);
  assert_int_equal(every_semaphore_operation(fx, &other), 0);
  assert_int_equal(other, 0);
  const rules_t *sem = semaphore_of(fx);
  for (int i = 0; i < sem->n; i++) {
    const char *rule = sem->rule[i];
    make_user(fx, rule, ADD_SEMAPHORE);
    other = 0;
    int n = every_semaphore_operation(fx, &other);
    if (n == 0)
      fail_msg("without %s every semaphore operation still works: the rule is not needed", rule);
    print_message("# without %s: %d semaphore operations refused, %d failed otherwise\n", rule, n, other);
  }
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_documented_rules_suffice),
      T(test_wakeup_addon),
      T(test_without_evalsha),
      T(test_without_eval),
      T(test_key_outside_the_pattern),
      T(test_without_subscribe),
      T(test_without_the_channel_pattern),
      T(test_without_publish),
      T(test_without_the_channel_key_pattern),
      T(test_every_rule_is_needed),
      T(test_semaphore_addon_suffices),
      T(test_every_semaphore_rule_is_needed),
  };
#undef T
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found: install the Debian package redis-server");
  if (load_rules() != 0)
    RELOCK_TEST_CANNOT_RUN("cannot read the ACL rules from " ACL_DOC);
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("acl", tests, NULL, NULL);
}
