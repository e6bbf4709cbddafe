/* Integration tests of the lock's Redisson wire compatibility, both ways,
 * against a real redis-server (Redisson's layout: docs/ARCHITECTURE.md,
 * "Where Redisson's format is defined").
 *
 * The "Redisson process" is played by the raw command helper
 * (relock_test_redis_cmd: a fresh connection per command, nothing of the
 * library under test), doing what Redisson does: HSET/PEXPIRE a hash, DEL
 * and PUBLISH "0", and running Redisson's own tryLock and unlock scripts.
 * A second relock client ("peer") listens on the unlock channels and looks
 * at keys through the generic command API.
 *
 * Checked: the key layout (a hash, field "<client-id>:<owner>" -> hold
 * count, the lease as PTTL), the unlock channel and its message, waiting for
 * a lock held by another process and waking on its unlock message, the other
 * process seeing relock's holds, not-owner and lost releases, force release,
 * queries, a key of the wrong type, and the unlock / acquire latches. */
#include <config.h>

#include <ctype.h>
#include <string.h>

#include "support/client_fixture.h"
#include "objects/keys.h"
#include "objects/wait_queue.h"

/* The other process: another client id, thread 7. */
#define OTHER_UUID "5f0c7e2a-9b1d-4c3e-8a7f-0123456789ab"
#define OTHER_FIELD OTHER_UUID ":7"

/* Redisson's RedissonLock.tryLockInnerAsync script (3.x), as it sends it:
 * KEYS[1] name; ARGV[1] lease, ARGV[2] field. nil = acquired, else PTTL. */
static const char REDISSON_TRY_LOCK[] =
    "if ((redis.call('exists', KEYS[1]) == 0) "
    "or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; "
    "end; "
    "return redis.call('pttl', KEYS[1]);";

/* Redisson's RedissonLock.unlockInnerAsync script (3.x, with the unlock
 * latch): KEYS[1] name, KEYS[2] channel, KEYS[3] unlock latch; ARGV[1] the
 * unlock message, ARGV[2] lease, ARGV[3] field, ARGV[4] publish command,
 * ARGV[5] latch timeout. nil = not the owner, 0 = still held, 1 = freed. */
static const char REDISSON_UNLOCK[] =
    "local val = redis.call('get', KEYS[3]); "
    "if val ~= false then return tonumber(val); end; "
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then "
    "redis.call('pexpire', KEYS[1], ARGV[2]); "
    "redis.call('set', KEYS[3], 0, 'px', ARGV[5]); "
    "return 0; "
    "else "
    "redis.call('del', KEYS[1]); "
    "redis.call(ARGV[4], KEYS[2], ARGV[1]); "
    "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); "
    "return 1; "
    "end;";

/* a: the relock process under test; b: the peer, a second relock client
 * that listens and looks at keys. */
typedef fx_pair_t fx_t;

/* Replaces the client under test with one whose watchdog timeout is ms. */
static void use_watchdog(fx_t *fx, int64_t ms) {
  relock_client_free(fx->a);
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, ms);
  fx->a = fx_client(fx->cfg);
}

static relock_lock_t *new_lock(fx_t *fx, const char *name) {
  relock_error_t err = {-1, ""};
  relock_lock_t *lock = relock_lock_new(fx->a, name, &err);
  assert_non_null(lock);
  assert_int_equal(err.code, 0);
  assert_string_equal(relock_lock_name(lock), name);
  return lock;
}

static void field_of(relock_lock_t *lock, uint64_t owner, char *buf, size_t size) {
  size_t need = relock_lock_field(lock, owner, buf, size);
  assert_true(need <= size);
}

/* -- the other process: raw commands --------------------------------------*/

/* Sends one command on a fresh connection; the raw RESP reply into buf. */
static void raw_v(fx_t *fx, char *buf, size_t size, const char *arg0, ...) {
  const char *argv[16];
  int argc = 0;
  va_list ap;
  va_start(ap, arg0);
  for (const char *a = arg0; a != NULL && argc < 16; a = va_arg(ap, const char *))
    argv[argc++] = a;
  va_end(ap);
  int rc = relock_test_redis_cmdv(fx->redis, buf, size, argc, argv, NULL);
  if (rc != 0)
    fail_msg("raw %s: rc %d", arg0, rc);
}

#define RAW(fx, buf, ...) raw_v((fx), (buf), sizeof(buf), __VA_ARGS__, (const char *)NULL)
#define RAW_INT(fx, ...) fx_raw_int((fx)->redis, __VA_ARGS__, (const char *)NULL)

/* Redisson holds name: its field, count 1, lease ms (0: no expiry). */
static void redisson_holds(fx_t *fx, const char *name, int lease_ms) {
  assert_int_equal(RAW_INT(fx, "HSET", name, OTHER_FIELD, "1"), 1);
  if (lease_ms > 0) {
    char ms[24];
    snprintf(ms, sizeof ms, "%d", lease_ms);
    assert_int_equal(RAW_INT(fx, "PEXPIRE", name, ms), 1);
  }
}

static void channel_of(const char *name, char *buf, size_t size) {
  if (strchr(name, '{') != NULL)
    snprintf(buf, size, "redisson_lock__channel:%s", name);
  else
    snprintf(buf, size, "redisson_lock__channel:{%s}", name);
}

static long long numsub(fx_t *fx, const char *channel) {
  char buf[512];
  RAW(fx, buf, "PUBSUB", "NUMSUB", channel);
  const char *last = strrchr(buf, ':'); /* *2 $n channel :count */
  assert_non_null(last);
  return atoll(last + 1);
}

/* The hash is exactly { field: count }, seen by the peer client. */
static void hash_is(fx_t *fx, const char *name, const char *field, const char *count) {
  relock_future_t *f = FX_CMD(fx->b, "HGETALL", name);
  const relock_reply_t *r = fx_ok(f);
  assert_int_equal(r->type, RELOCK_REPLY_ARRAY);
  assert_int_equal(r->elements, 2);
  assert_int_equal(r->element[0]->type, RELOCK_REPLY_STRING);
  assert_string_equal(r->element[0]->str, field);
  assert_int_equal(r->element[1]->type, RELOCK_REPLY_STRING);
  assert_string_equal(r->element[1]->str, count);
  relock_future_release(f);
}

/* -- futures ----------------------------------------------------------------*/

static relock_future_t *done(relock_future_t *f) {
  assert_non_null(f);
  int r = relock_future_wait(f, fx_slack_ms(10000));
  assert_int_not_equal(r, RELOCK_EPENDING);
  return f;
}

/* The boolean of a future that must succeed with one; releases it. */
static int bool_of(relock_future_t *f) {
  done(f);
  if (relock_future_error(f) != 0)
    fail_msg("failed: %s (%s)", relock_future_message(f), relock_err_name(relock_future_error(f)));
  assert_int_equal(relock_future_value_type(f), RELOCK_VALUE_BOOL);
  int v = relock_future_bool(f);
  relock_future_release(f);
  return v;
}

static int64_t int_of(relock_future_t *f) {
  done(f);
  if (relock_future_error(f) != 0)
    fail_msg("failed: %s (%s)", relock_future_message(f), relock_err_name(relock_future_error(f)));
  assert_int_equal(relock_future_value_type(f), RELOCK_VALUE_INT);
  int64_t v = relock_future_int(f);
  relock_future_release(f);
  return v;
}

/* The error of a future that must fail; its message into msg. Releases it. */
static int error_of(relock_future_t *f, char *msg, size_t size) {
  done(f);
  int err = relock_future_error(f);
  if (err == 0)
    fail_msg("succeeded, expected a failure");
  snprintf(msg, size, "%s", relock_future_message(f));
  relock_future_release(f);
  return err;
}

static int acquire(relock_lock_t *lock, uint64_t owner, int64_t wait_ms, int64_t lease_ms) {
  return bool_of(relock_lock_lock_async(lock, owner, wait_ms, lease_ms));
}

static int release(relock_lock_t *lock, uint64_t owner) { return bool_of(relock_lock_unlock_async(lock, owner)); }

/* -- listening on unlock channels (the peer client) -------------------------*/

typedef struct {
  int unlocks; /* "0" */
  int others;  /* anything but "0" and markers */
  int gaps;
  int marker;  /* the last marker seen */
  char other[64];
} inbox_t;

static void on_msg(relock_subscription_t *sub, const char *payload, size_t len, void *arg) {
  (void)sub;
  inbox_t *in = arg;
  if (payload == NULL)
    in->gaps++;
  else if (len == 1 && payload[0] == '0')
    in->unlocks++;
  else if (len > 7 && memcmp(payload, "marker:", 7) == 0)
    in->marker = atoi(payload + 7);
  else {
    in->others++;
    snprintf(in->other, sizeof in->other, "%.*s", (int)len, payload);
  }
}

static relock_subscription_t *listen(fx_t *fx, const char *channel, inbox_t *in) {
  relock_subscription_t *sub = NULL;
  relock_future_t *f = relock_client_subscribe_async(fx->b, channel, strlen(channel), on_msg, in, &sub);
  assert_non_null(f);
  assert_non_null(sub);
  assert_int_equal(relock_future_wait(f, fx_slack_ms(5000)), 0);
  relock_future_release(f);
  return sub;
}

typedef struct {
  inbox_t *in;
  int marker;
  int unlocks;
} want_t;

static int marker_seen(void *arg) {
  want_t *w = arg;
  return w->in->marker >= w->marker;
}

static int unlocks_seen(void *arg) {
  want_t *w = arg;
  return w->in->unlocks >= w->unlocks;
}

/* Publishes a marker after whatever was published on channel so far and
 * waits for it: every earlier message has then been delivered (Redis keeps
 * a subscriber's messages in order). */
static void settle(fx_t *fx, const char *channel, inbox_t *in) {
  static int seq;
  char msg[32];
  snprintf(msg, sizeof msg, "marker:%d", ++seq);
  assert_true(RAW_INT(fx, "PUBLISH", channel, msg) >= 1);
  want_t w = {in, seq, 0};
  assert_true(fx_run_until(relock_client_loop(fx->b), marker_seen, &w, 3000));
}

static void wait_unlocks(fx_t *fx, inbox_t *in, int n) {
  want_t w = {in, 0, n};
  assert_true(fx_run_until(relock_client_loop(fx->b), unlocks_seen, &w, 3000));
}

/* -- conditions on the client's loop ----------------------------------------*/

typedef struct {
  fx_t *fx;
  const char *channel;
  long long n;
} numsub_t;

static int numsub_is(void *arg) {
  numsub_t *w = arg;
  return numsub(w->fx, w->channel) == w->n;
}

/* Runs the client's loop until n connections subscribe channel. */
static void wait_numsub(fx_t *fx, const char *channel, long long n) {
  numsub_t w = {fx, channel, n};
  assert_true(fx_run_until(relock_client_loop(fx->a), numsub_is, &w, 3000));
}

typedef struct {
  int calls;
  int reason;
  uint64_t owner;
  relock_lock_t *lock;
  char message[512];
} lost_t;

static void on_lost(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg) {
  lost_t *l = arg;
  l->calls++;
  l->lock = lock;
  l->owner = owner;
  l->reason = reason;
  snprintf(l->message, sizeof l->message, "%s", message);
}

static int lost_called(void *arg) { return ((lost_t *)arg)->calls > 0; }

typedef struct {
  uint64_t t0;
  double ms;
} elapsed_t;

static int ms_passed(void *arg) {
  elapsed_t *e = arg;
  return fx_ms_since(e->t0) >= e->ms;
}

static int is_uuid_v4(const char *s) {
  if (strlen(s) != 36)
    return 0;
  for (int i = 0; i < 36; i++) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-')
        return 0;
    } else if (!isxdigit((unsigned char)s[i])) {
      return 0;
    }
  }
  return s[14] == '4' && strchr("89abAB", s[19]) != NULL;
}

/* -- layout -----------------------------------------------------------------*/

static void test_layout_after_acquire(void **state) {
  fx_t *fx = *state;
  const char *name = "compat:layout";
  const char *id = relock_client_id(fx->a);
  assert_true(is_uuid_v4(id));
  relock_lock_t *lock = new_lock(fx, name);

  /* The owner in decimal, unsigned: this one is above INT64_MAX. */
  const uint64_t owner = 12345678901234567890ull;
  char field[128], got[128], small[8];
  snprintf(field, sizeof field, "%s:12345678901234567890", id);
  assert_int_equal(relock_lock_field(lock, owner, got, sizeof got), strlen(field) + 1);
  assert_string_equal(got, field);
  assert_int_equal(relock_lock_field(lock, owner, NULL, 0), strlen(field) + 1);
  assert_int_equal(relock_lock_field(lock, owner, small, sizeof small), strlen(field) + 1);
  assert_int_equal(strlen(small), sizeof small - 1); /* truncated, terminated */
  assert_memory_equal(small, field, sizeof small - 1);

  assert_true(acquire(lock, owner, 0, 5000));
  char buf[256];
  RAW(fx, buf, "TYPE", name);
  assert_string_equal(buf, "+hash\r\n");
  assert_int_equal(RAW_INT(fx, "HLEN", name), 1);
  RAW(fx, buf, "HGET", name, field);
  assert_string_equal(buf, "$1\r\n1\r\n");
  hash_is(fx, name, field, "1");
  long long pttl = RAW_INT(fx, "PTTL", name);
  assert_true(pttl > 4000 && pttl <= 5000);

  /* Reentrant: the same field counts 2, and the lease starts again. */
  assert_true(acquire(lock, owner, 0, 5000));
  hash_is(fx, name, field, "2");
  pttl = RAW_INT(fx, "PTTL", name);
  assert_true(pttl > 4000 && pttl <= 5000);

  assert_false(release(lock, owner)); /* one hold remains */
  hash_is(fx, name, field, "1");
  pttl = RAW_INT(fx, "PTTL", name);
  assert_true(pttl > 4000 && pttl <= 5000); /* a partial release keeps the lease */
  assert_true(release(lock, owner));
  assert_int_equal(RAW_INT(fx, "EXISTS", name), 0);
  relock_lock_free(lock);
}

static void test_layout_with_configured_client_id(void **state) {
  fx_t *fx = *state;
  relock_client_free(fx->a);
  fx_set_str(fx->cfg, RELOCK_OPT_CLIENT_ID, "0f8fad5b-d9cb-469f-a165-70867728950e");
  fx->a = fx_client(fx->cfg);
  fx_set_str(fx->cfg, RELOCK_OPT_CLIENT_ID, NULL);
  assert_string_equal(relock_client_id(fx->a), "0f8fad5b-d9cb-469f-a165-70867728950e");
  relock_lock_t *lock = new_lock(fx, "compat:id");
  assert_true(acquire(lock, 1, 0, 5000));
  hash_is(fx, "compat:id", "0f8fad5b-d9cb-469f-a165-70867728950e:1", "1");
  assert_true(release(lock, 1));
  relock_lock_free(lock);
}

static void test_watchdog_lease_and_renewal(void **state) {
  fx_t *fx = *state;
  use_watchdog(fx, 600);
  const char *name = "compat:watchdog";
  relock_lock_t *lock = new_lock(fx, name);
  lost_t lost = {0};
  relock_lock_on_lost(lock, on_lost, &lost);
  char field[128];
  field_of(lock, 3, field, sizeof field);

  assert_true(acquire(lock, 3, 0, RELOCK_INFINITE));
  long long pttl = RAW_INT(fx, "PTTL", name);
  assert_true(pttl > 300 && pttl <= 600); /* the watchdog timeout is the lease */
  hash_is(fx, name, field, "1");

  /* Held well past the first lease: renewed every third of it. */
  elapsed_t e = {relock__now_ns(), 1000};
  assert_true(fx_run_until(relock_client_loop(fx->a), ms_passed, &e, 2000));
  assert_true(fx->a->renewal.renewed >= 2);
  assert_int_equal(RAW_INT(fx, "EXISTS", name), 1);
  pttl = RAW_INT(fx, "PTTL", name);
  assert_true(pttl > 0 && pttl <= 600);
  hash_is(fx, name, field, "1"); /* renewal does not count holds */
  assert_int_equal(lost.calls, 0);

  /* Reentrant: a partial release keeps the watchdog lease. */
  assert_true(acquire(lock, 3, 0, RELOCK_INFINITE));
  hash_is(fx, name, field, "2");
  assert_false(release(lock, 3));
  hash_is(fx, name, field, "1");
  pttl = RAW_INT(fx, "PTTL", name);
  assert_true(pttl > 300 && pttl <= 600);
  int64_t ttl = int_of(relock_lock_remaining_ttl_async(lock));
  assert_true(ttl > 0 && ttl <= 600);

  assert_true(release(lock, 3));
  assert_int_equal(RAW_INT(fx, "EXISTS", name), 0);
  assert_int_equal(fx->a->ledger.nrenewing, 0);
  assert_int_equal(lost.calls, 0);
  relock_lock_free(lock);
}

/* -- the unlock channel -----------------------------------------------------*/

static void test_unlock_published_only_when_freed(void **state) {
  fx_t *fx = *state;
  const char *name = "compat:publish";
  const char *channel = "redisson_lock__channel:{compat:publish}";
  inbox_t in = {0};
  relock_subscription_t *sub = listen(fx, channel, &in);
  relock_lock_t *lock = new_lock(fx, name);

  assert_true(acquire(lock, 1, 0, 5000));
  assert_true(acquire(lock, 1, 0, 5000));
  assert_false(release(lock, 1)); /* partial: nothing published */
  settle(fx, channel, &in);
  assert_int_equal(in.unlocks, 0);

  assert_true(release(lock, 1)); /* the last hold */
  wait_unlocks(fx, &in, 1);
  settle(fx, channel, &in);
  assert_int_equal(in.unlocks, 1);
  assert_int_equal(in.others, 0);
  assert_int_equal(RAW_INT(fx, "EXISTS", name), 0);

  /* A watchdog hold publishes the same way. */
  assert_true(acquire(lock, 2, 0, RELOCK_INFINITE));
  assert_true(release(lock, 2));
  wait_unlocks(fx, &in, 2);
  settle(fx, channel, &in);
  assert_int_equal(in.unlocks, 2);
  assert_int_equal(in.others, 0);
  assert_int_equal(in.gaps, 0);
  relock_subscription_free(sub);
  relock_lock_free(lock);
}

static void test_channel_of_tagged_name(void **state) {
  fx_t *fx = *state;
  const char *name = "a{tag}b";
  const char *right = "redisson_lock__channel:a{tag}b";
  const char *wrong = "redisson_lock__channel:{a{tag}b}";
  inbox_t in_right = {0}, in_wrong = {0};
  relock_subscription_t *s1 = listen(fx, right, &in_right);
  relock_subscription_t *s2 = listen(fx, wrong, &in_wrong);
  relock_lock_t *lock = new_lock(fx, name);

  assert_true(acquire(lock, 1, 0, 5000));
  char buf[64];
  RAW(fx, buf, "TYPE", name); /* the key is the name as given */
  assert_string_equal(buf, "+hash\r\n");
  assert_true(release(lock, 1));
  wait_unlocks(fx, &in_right, 1);
  settle(fx, right, &in_right);
  settle(fx, wrong, &in_wrong);
  assert_int_equal(in_right.unlocks, 1);
  assert_int_equal(in_wrong.unlocks, 0);

  /* A waiter subscribes the same channel. */
  redisson_holds(fx, name, 5000);
  relock_future_t *f = relock_lock_lock_async(lock, 1, fx_slack_ms(3000), 5000);
  assert_non_null(f);
  wait_numsub(fx, right, 2); /* the peer and the waiter */
  assert_int_equal(numsub(fx, wrong), 1);
  assert_int_equal(RAW_INT(fx, "DEL", name), 1);
  assert_true(RAW_INT(fx, "PUBLISH", right, "0") >= 2);
  assert_true(bool_of(f));
  assert_true(release(lock, 1));
  relock_subscription_free(s1);
  relock_subscription_free(s2);
  relock_lock_free(lock);
}

/* -- Redisson holds, relock waits --------------------------------------------*/

static void test_redisson_holder_blocks_try_lock(void **state) {
  fx_t *fx = *state;
  const char *name = "compat:java-holds";
  redisson_holds(fx, name, 5000);
  relock_lock_t *lock = new_lock(fx, name);

  /* tryLock(): not acquired is an answer, not an error. Owner 7 like the
   * Java thread: only the client id tells them apart. */
  relock_future_t *f = done(relock_lock_lock_async(lock, 7, 0, 5000));
  assert_int_equal(relock_future_error(f), 0);
  assert_int_equal(relock_future_value_type(f), RELOCK_VALUE_BOOL);
  assert_false(relock_future_bool(f));
  relock_future_release(f);
  assert_false(acquire(lock, 7, 0, RELOCK_INFINITE));
  hash_is(fx, name, OTHER_FIELD, "1"); /* untouched */
  long long pttl = RAW_INT(fx, "PTTL", name);
  assert_true(pttl > 3000 && pttl <= 5000);
  relock_lock_free(lock);
}

static void test_redisson_release_wakes_relock_waiter(void **state) {
  fx_t *fx = *state;
  const char *name = "compat:java-releases";
  char channel[128], field[128];
  channel_of(name, channel, sizeof channel);
  redisson_holds(fx, name, 5000);
  relock_lock_t *lock = new_lock(fx, name);
  field_of(lock, 7, field, sizeof field);

  relock_future_t *f = relock_lock_lock_async(lock, 7, 3000, RELOCK_INFINITE);
  assert_non_null(f);
  wait_numsub(fx, channel, 1); /* the waiter listens */
  assert_int_equal(relock_future_state(f), RELOCK_FUTURE_PENDING);

  /* Redisson's unlock: DEL, then PUBLISH 0. */
  uint64_t t0 = relock__now_ns();
  assert_int_equal(RAW_INT(fx, "DEL", name), 1);
  assert_int_equal(RAW_INT(fx, "PUBLISH", channel, "0"), 1);
  assert_int_equal(relock_future_wait(f, fx_slack_ms(5000)), 0);
  double ms = fx_ms_since(t0);
  assert_true(ms < 1000); /* woken by the message, not by the 5 s PTTL or the 3 s wait */
  assert_int_equal(relock_future_value_type(f), RELOCK_VALUE_BOOL);
  assert_true(relock_future_bool(f));
  relock_future_release(f);

  hash_is(fx, name, field, "1");
  long long pttl = RAW_INT(fx, "PTTL", name);
  assert_true(pttl > 29000 && pttl <= 30000); /* the default watchdog lease */
  wait_numsub(fx, channel, 0); /* the last waiter gone: unsubscribed */
  assert_true(release(lock, 7));
  relock_lock_free(lock);
}

static void test_wait_bounded_by_holder_ttl(void **state) {
  fx_t *fx = *state;
  const char *name = "compat:java-expires";
  redisson_holds(fx, name, 400); /* the Java process dies: nobody publishes */
  relock_lock_t *lock = new_lock(fx, name);
  uint64_t t0 = relock__now_ns();
  assert_true(acquire(lock, 1, fx_slack_ms(5000), 5000));
  double ms = fx_ms_since(t0);
  assert_true(ms >= 300 && ms < 1500); /* retried when the PTTL ran out */
  char field[128];
  field_of(lock, 1, field, sizeof field);
  hash_is(fx, name, field, "1");
  assert_true(release(lock, 1));
  relock_lock_free(lock);
}

static void test_wait_times_out_on_redisson_holder(void **state) {
  fx_t *fx = *state;
  const char *name = "compat:java-keeps";
  char channel[128];
  channel_of(name, channel, sizeof channel);
  redisson_holds(fx, name, 5000);
  relock_lock_t *lock = new_lock(fx, name);
  uint64_t t0 = relock__now_ns();
  assert_false(acquire(lock, 1, 300, 5000));
  double ms = fx_ms_since(t0);
  assert_true(ms >= 300 && ms < 2000); /* never early; not the holder's 5 s */
  hash_is(fx, name, OTHER_FIELD, "1");
  wait_numsub(fx, channel, 0);
  relock_lock_free(lock);
}

static void test_cancelled_waiter_leaves_redisson_lock_alone(void **state) {
  fx_t *fx = *state;
  const char *name = "compat:cancel";
  char channel[128];
  channel_of(name, channel, sizeof channel);
  redisson_holds(fx, name, 5000);
  relock_lock_t *lock = new_lock(fx, name);
  relock_future_t *f = relock_lock_lock_async(lock, 1, RELOCK_INFINITE, RELOCK_INFINITE);
  assert_non_null(f);
  wait_numsub(fx, channel, 1);
  /* Redis wrote the confirmation before answering NUMSUB: one round trip
   * later the client has read it too. */
  relock_future_release(FX_CMD(fx->a, "PING"));
  assert_int_equal(relock_future_state(f), RELOCK_FUTURE_PENDING);
  assert_int_equal(relock_future_cancel(f), 1);
  assert_int_equal(relock_future_state(f), RELOCK_FUTURE_CANCELLED);
  relock_future_release(f);
  wait_numsub(fx, channel, 0);
  assert_int_equal(RAW_INT(fx, "DEL", name), 1);
  assert_int_equal(RAW_INT(fx, "PUBLISH", channel, "0"), 0);
  relock_future_release(FX_CMD(fx->a, "PING"));
  assert_int_equal(RAW_INT(fx, "EXISTS", name), 0); /* nobody took it */
  relock_lock_free(lock);
}

static int waiting_in_queue(void *arg) { return relock__waitq_count(((fx_t *)arg)->a) == 1; }

/* The waiter leaves while its subscription to the unlock channel is still
 * unconfirmed (the subscriber connection is still opening). */
static void test_cancel_before_subscription_confirmed(void **state) {
  fx_t *fx = *state;
  const char *name = "compat:cancel-early";
  char channel[128];
  channel_of(name, channel, sizeof channel);
  redisson_holds(fx, name, 5000);
  relock_lock_t *lock = new_lock(fx, name);
  relock_future_t *f = relock_lock_lock_async(lock, 1, RELOCK_INFINITE, 5000);
  assert_non_null(f);
  /* The first try answered "held": the waiter joined its queue. */
  assert_true(fx_run_until(relock_client_loop(fx->a), waiting_in_queue, fx, 3000));
  assert_int_equal(relock_future_state(f), RELOCK_FUTURE_PENDING);
  assert_int_equal(relock_future_cancel(f), 1);
  assert_int_equal(relock_future_state(f), RELOCK_FUTURE_CANCELLED);
  relock_future_release(f);
  assert_int_equal(relock__waitq_count(fx->a), 0);
  relock_future_release(FX_CMD(fx->a, "PING"));
  wait_numsub(fx, channel, 0);
  hash_is(fx, name, OTHER_FIELD, "1"); /* untouched */
  relock_lock_free(lock);
}

/* -- relock holds, Redisson looks --------------------------------------------*/

static void test_redisson_sees_relock_holder(void **state) {
  fx_t *fx = *state;
  const char *name = "compat:c-holds";
  char channel[128], field[128], buf[256];
  channel_of(name, channel, sizeof channel);
  inbox_t in = {0};
  relock_subscription_t *sub = listen(fx, channel, &in);
  relock_lock_t *lock = new_lock(fx, name);
  field_of(lock, 7, field, sizeof field);
  assert_true(acquire(lock, 7, 0, RELOCK_INFINITE));

  /* What Redisson's tryLock checks: held, not by it, with a lease. */
  assert_int_equal(RAW_INT(fx, "EXISTS", name), 1);
  assert_int_equal(RAW_INT(fx, "HEXISTS", name, OTHER_FIELD), 0);
  long long pttl = RAW_INT(fx, "PTTL", name);
  assert_true(pttl > 0 && pttl <= 30000);
  /* And its script itself: the PTTL to wait for, nothing changed. */
  long long answer = RAW_INT(fx, "EVAL", REDISSON_TRY_LOCK, "1", name, "30000", OTHER_FIELD);
  assert_true(answer > 0 && answer <= 30000);
  hash_is(fx, name, field, "1");

  assert_true(release(lock, 7));
  assert_int_equal(RAW_INT(fx, "EXISTS", name), 0);
  wait_unlocks(fx, &in, 1);
  settle(fx, channel, &in);
  assert_int_equal(in.unlocks, 1);
  assert_int_equal(in.others, 0);

  /* Free now, for Redisson too. */
  RAW(fx, buf, "EVAL", REDISSON_TRY_LOCK, "1", name, "30000", OTHER_FIELD);
  assert_string_equal(buf, "$-1\r\n");
  hash_is(fx, name, OTHER_FIELD, "1");
  relock_subscription_free(sub);
  relock_lock_free(lock);
}

/* Redisson's own scripts against relock's, both ways. */
static void test_redisson_scripts_interoperate(void **state) {
  fx_t *fx = *state;
  const char *name = "compat:scripts";
  char channel[128], field[128], buf[256];
  channel_of(name, channel, sizeof channel);
  relock_lock_t *lock = new_lock(fx, name);
  field_of(lock, 7, field, sizeof field);

  /* Redisson locks (reentrantly), relock waits. */
  RAW(fx, buf, "EVAL", REDISSON_TRY_LOCK, "1", name, "5000", OTHER_FIELD);
  assert_string_equal(buf, "$-1\r\n");
  RAW(fx, buf, "EVAL", REDISSON_TRY_LOCK, "1", name, "5000", OTHER_FIELD);
  assert_string_equal(buf, "$-1\r\n");
  hash_is(fx, name, OTHER_FIELD, "2");
  relock_future_t *f = relock_lock_lock_async(lock, 7, fx_slack_ms(4000), 5000);
  assert_non_null(f);
  wait_numsub(fx, channel, 1);

  /* Redisson unlocks once (still held: no message), then again. */
  assert_int_equal(RAW_INT(fx, "EVAL", REDISSON_UNLOCK, "3", name, channel,
                           "redisson_unlock_latch:{compat:scripts}:00000000000000000000000000000001", "0", "5000",
                           OTHER_FIELD, "PUBLISH", "3000"),
                   0);
  assert_int_equal(relock_future_wait(f, 100), RELOCK_EPENDING);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(RAW_INT(fx, "EVAL", REDISSON_UNLOCK, "3", name, channel,
                           "redisson_unlock_latch:{compat:scripts}:00000000000000000000000000000002", "0", "5000",
                           OTHER_FIELD, "PUBLISH", "3000"),
                   1);
  assert_int_equal(relock_future_wait(f, fx_slack_ms(5000)), 0);
  assert_true(fx_ms_since(t0) < 1000);
  assert_true(relock_future_bool(f));
  relock_future_release(f);
  hash_is(fx, name, field, "1");

  /* Redisson's unlock by its own field: not the owner (nil), relock keeps it. */
  RAW(fx, buf, "EVAL", REDISSON_UNLOCK, "3", name, channel,
      "redisson_unlock_latch:{compat:scripts}:00000000000000000000000000000003", "0", "5000", OTHER_FIELD, "PUBLISH",
      "3000");
  assert_string_equal(buf, "$-1\r\n");
  hash_is(fx, name, field, "1");

  /* Redisson's unlock with relock's field releases a relock hold (the field
   * is the whole identity), and publishes as relock would. */
  assert_true(acquire(lock, 7, 0, 5000));
  hash_is(fx, name, field, "2");
  assert_int_equal(RAW_INT(fx, "EVAL", REDISSON_UNLOCK, "3", name, channel,
                           "redisson_unlock_latch:{compat:scripts}:00000000000000000000000000000004", "0", "5000",
                           field, "PUBLISH", "3000"),
                   0);
  hash_is(fx, name, field, "1");
  assert_true(release(lock, 7));
  assert_int_equal(RAW_INT(fx, "EXISTS", name), 0);
  relock_lock_free(lock);
}

/* -- release errors ------------------------------------------------------*/

static void test_release_by_non_owner(void **state) {
  fx_t *fx = *state;
  const char *name = "compat:notowner";
  char f1[128], f2[128], msg[512];
  relock_lock_t *lock = new_lock(fx, name);
  field_of(lock, 1, f1, sizeof f1);
  field_of(lock, 2, f2, sizeof f2);

  /* Never held at all. */
  assert_int_equal(error_of(relock_lock_unlock_async(lock, 2), msg, sizeof msg), RELOCK_ENOTOWNER);
  assert_non_null(strstr(msg, name));
  assert_non_null(strstr(msg, f2));

  /* Held by another owner of this client. */
  assert_true(acquire(lock, 1, 0, 5000));
  assert_int_equal(error_of(relock_lock_unlock_async(lock, 2), msg, sizeof msg), RELOCK_ENOTOWNER);
  assert_non_null(strstr(msg, name));
  assert_non_null(strstr(msg, f2));
  hash_is(fx, name, f1, "1");
  assert_true(release(lock, 1));

  /* Held by the Java process. */
  char f7[128];
  field_of(lock, 7, f7, sizeof f7);
  redisson_holds(fx, name, 5000);
  assert_int_equal(error_of(relock_lock_unlock_async(lock, 7), msg, sizeof msg), RELOCK_ENOTOWNER);
  assert_non_null(strstr(msg, name));
  assert_non_null(strstr(msg, f7));
  hash_is(fx, name, OTHER_FIELD, "1");
  relock_lock_free(lock);
}

static void test_release_of_deleted_watchdog_lock_is_lost(void **state) {
  fx_t *fx = *state; /* default watchdog (30 s): no renewal runs first */
  const char *name = "compat:deleted";
  char field[128], msg[512];
  relock_lock_t *lock = new_lock(fx, name);
  lost_t lost = {0};
  relock_lock_on_lost(lock, on_lost, &lost);
  field_of(lock, 3, field, sizeof field);
  assert_true(acquire(lock, 3, 0, RELOCK_INFINITE));
  assert_int_equal(RAW_INT(fx, "DEL", name), 1);

  assert_int_equal(error_of(relock_lock_unlock_async(lock, 3), msg, sizeof msg), RELOCK_ELOST);
  assert_non_null(strstr(msg, name));
  assert_non_null(strstr(msg, field));
  assert_int_equal(lost.calls, 1);
  assert_int_equal(lost.reason, RELOCK_ELOST);
  assert_int_equal(lost.owner, 3);
  assert_ptr_equal(lost.lock, lock);
  assert_int_equal(fx->a->ledger.nrenewing, 0);
  assert_int_equal(RAW_INT(fx, "EXISTS", name), 0); /* the release did not recreate it */
  relock_lock_free(lock);
}

static void test_watchdog_finds_lock_taken_by_redisson(void **state) {
  fx_t *fx = *state;
  use_watchdog(fx, 600);
  const char *name = "compat:stolen";
  char field[128], msg[512];
  relock_lock_t *lock = new_lock(fx, name);
  lost_t lost = {0};
  relock_lock_on_lost(lock, on_lost, &lost);
  field_of(lock, 3, field, sizeof field);
  assert_true(acquire(lock, 3, 0, RELOCK_INFINITE));

  /* Deleted by hand, and the Java process takes it. */
  assert_int_equal(RAW_INT(fx, "DEL", name), 1);
  redisson_holds(fx, name, 5000);
  assert_true(fx_run_until(relock_client_loop(fx->a), lost_called, &lost, 3000));
  assert_int_equal(lost.calls, 1);
  assert_int_equal(lost.reason, RELOCK_ELOST);
  assert_int_equal(lost.owner, 3);
  assert_non_null(strstr(lost.message, name));
  assert_non_null(strstr(lost.message, field));

  assert_int_equal(error_of(relock_lock_unlock_async(lock, 3), msg, sizeof msg), RELOCK_ELOST);
  assert_non_null(strstr(msg, name));
  assert_non_null(strstr(msg, field));
  assert_int_equal(lost.calls, 1);
  /* The renewal never touched the Java hold: its own lease, not 600 ms. */
  hash_is(fx, name, OTHER_FIELD, "1");
  long long pttl = RAW_INT(fx, "PTTL", name);
  assert_true(pttl > 600 && pttl <= 5000);
  relock_lock_free(lock);
}

/* -- force release ------------------------------------------------------------*/

static void test_force_release(void **state) {
  fx_t *fx = *state;
  const char *name = "compat:force";
  char channel[128];
  channel_of(name, channel, sizeof channel);
  inbox_t in = {0};
  relock_subscription_t *sub = listen(fx, channel, &in);
  relock_lock_t *lock = new_lock(fx, name);

  redisson_holds(fx, name, 5000);
  assert_true(bool_of(relock_lock_force_unlock_async(lock)));
  assert_int_equal(RAW_INT(fx, "EXISTS", name), 0);
  wait_unlocks(fx, &in, 1);
  settle(fx, channel, &in);
  assert_int_equal(in.unlocks, 1);

  assert_false(bool_of(relock_lock_force_unlock_async(lock))); /* free: nothing to do */
  settle(fx, channel, &in);
  assert_int_equal(in.unlocks, 1);
  assert_int_equal(in.others, 0);
  relock_subscription_free(sub);
  relock_lock_free(lock);
}

/* -- queries ------------------------------------------------------------------*/

static void test_queries(void **state) {
  fx_t *fx = *state;
  const char *name = "compat:query";
  relock_lock_t *lock = new_lock(fx, name);

  /* Free. */
  assert_false(bool_of(relock_lock_is_locked_async(lock)));
  assert_false(bool_of(relock_lock_is_held_by_thread_async(lock, 7)));
  assert_int_equal(int_of(relock_lock_hold_count_async(lock, 7)), 0);
  assert_int_equal(int_of(relock_lock_remaining_ttl_async(lock)), -2);

  /* Held by the Java process (thread 7, like our owner 7). */
  redisson_holds(fx, name, 5000);
  assert_true(bool_of(relock_lock_is_locked_async(lock)));
  assert_false(bool_of(relock_lock_is_held_by_thread_async(lock, 7)));
  assert_int_equal(int_of(relock_lock_hold_count_async(lock, 7)), 0);
  int64_t ttl = int_of(relock_lock_remaining_ttl_async(lock));
  assert_true(ttl > 4000 && ttl <= 5000);
  assert_int_equal(RAW_INT(fx, "PERSIST", name), 1);
  assert_int_equal(int_of(relock_lock_remaining_ttl_async(lock)), -1);
  assert_int_equal(RAW_INT(fx, "DEL", name), 1);

  /* Our own reentrant hold. */
  assert_true(acquire(lock, 9, 0, 5000));
  assert_true(acquire(lock, 9, 0, 5000));
  assert_true(bool_of(relock_lock_is_locked_async(lock)));
  assert_true(bool_of(relock_lock_is_held_by_thread_async(lock, 9)));
  assert_false(bool_of(relock_lock_is_held_by_thread_async(lock, 10)));
  assert_int_equal(int_of(relock_lock_hold_count_async(lock, 9)), 2);
  assert_int_equal(int_of(relock_lock_hold_count_async(lock, 10)), 0);
  ttl = int_of(relock_lock_remaining_ttl_async(lock));
  assert_true(ttl > 4000 && ttl <= 5000);
  assert_false(release(lock, 9));
  assert_int_equal(int_of(relock_lock_hold_count_async(lock, 9)), 1);
  assert_true(release(lock, 9));
  assert_false(bool_of(relock_lock_is_locked_async(lock)));
  relock_lock_free(lock);
}

/* -- wrong type ---------------------------------------------------------------*/

static void test_wrong_type(void **state) {
  fx_t *fx = *state;
  const char *name = "compat:string";
  char buf[64], msg[512];
  RAW(fx, buf, "SET", name, "x");
  assert_string_equal(buf, "+OK\r\n");
  relock_lock_t *lock = new_lock(fx, name);

  assert_int_equal(error_of(relock_lock_lock_async(lock, 1, 0, 5000), msg, sizeof msg), RELOCK_EWRONGKIND);
  assert_non_null(strstr(msg, "'compat:string' holds a Redis string, not a lock"));
  assert_int_equal(error_of(relock_lock_lock_async(lock, 1, 1000, RELOCK_INFINITE), msg, sizeof msg),
                   RELOCK_EWRONGKIND);
  assert_non_null(strstr(msg, "'compat:string' holds a Redis string, not a lock"));
  assert_int_equal(error_of(relock_lock_unlock_async(lock, 1), msg, sizeof msg), RELOCK_EWRONGKIND);
  assert_non_null(strstr(msg, "'compat:string' holds a Redis string, not a lock")); /* lua/shared/kind.lua */
  assert_int_equal(error_of(relock_lock_hold_count_async(lock, 1), msg, sizeof msg), RELOCK_EWRONGKIND);
  assert_non_null(strstr(msg, "another type"));
  RAW(fx, buf, "GET", name); /* untouched */
  assert_string_equal(buf, "$1\r\nx\r\n");
  assert_int_equal(fx->a->ledger.nrenewing, 0);
  relock_lock_free(lock);
}

/* -- latches ------------------------------------------------------------------*/

/* Keys matching pattern (via the peer), into keys[]; returns how many. */
static size_t keys_matching(fx_t *fx, const char *pattern, char keys[][160], size_t max) {
  relock_future_t *f = FX_CMD(fx->b, "KEYS", pattern);
  const relock_reply_t *r = fx_ok(f);
  assert_int_equal(r->type, RELOCK_REPLY_ARRAY);
  size_t n = r->elements;
  for (size_t i = 0; i < n && i < max; i++)
    snprintf(keys[i], 160, "%s", r->element[i]->str);
  relock_future_release(f);
  return n;
}

/* key is prefix followed by 32 lowercase hex digits. */
static void assert_latch_name(const char *key, const char *prefix) {
  size_t plen = strlen(prefix);
  if (strncmp(key, prefix, plen) != 0)
    fail_msg("latch %s does not start with %s", key, prefix);
  const char *id = key + plen;
  if (strlen(id) != 32 || strspn(id, "0123456789abcdef") != 32)
    fail_msg("latch %s: request id is not 32 hex digits", key);
}

static void assert_latch(fx_t *fx, const char *key, const char *prefix, const char *value) {
  char buf[64], want[64];
  assert_latch_name(key, prefix);
  snprintf(want, sizeof want, "$%zu\r\n%s\r\n", strlen(value), value);
  RAW(fx, buf, "GET", key);
  assert_string_equal(buf, want);
  long long pttl = RAW_INT(fx, "PTTL", key);
  int64_t most = relock__latch_ttl_ms(&fx->a->settings);
  if (strcmp(value, "a") == 0 && most < fx->a->settings.opt.watchdog_timeout_ms)
    most = fx->a->settings.opt.watchdog_timeout_ms; /* an acquisition's: at least its hold's TTL */
  assert_true(pttl > 0 && pttl <= most);
}

/* The value of key (a latch), or "" when it is gone. */
static void latch_value(fx_t *fx, const char *key, char *out, size_t size) {
  char buf[64];
  RAW(fx, buf, "GET", key);
  const char *nl = strstr(buf, "\r\n");
  snprintf(out, size, "%.*s", buf[0] == '$' && buf[1] != '-' && nl != NULL ? (int)strcspn(nl + 2, "\r") : 0,
           nl != NULL ? nl + 2 : "");
}

/* An acquisition's latch is the unlock latch of its hold's next release,
 * which takes it over (its "a" becomes the release's answer): a pair writes
 * one key, as Redisson's does. A re-entry's latch is the one passed on; the
 * earlier acquisition's stays "a" until it expires, and the release after
 * the first gets a fresh request id. */
static void test_unlock_latch(void **state) {
  fx_t *fx = *state;
  const char *name = "compat:latch";
  char keys[8][160], v[16];
  fx_keyevents_t set = {0};
  relock_subscription_t *sub = fx_keyevents(fx->b, fx->redis, "set", &set);
  relock_lock_t *lock = new_lock(fx, name);
  assert_true(acquire(lock, 1, 0, 5000));
  assert_true(acquire(lock, 1, 0, 5000));
  assert_true(fx_keyevents_wait(fx->b, &set, 2));
  assert_int_equal(keys_matching(fx, "redisson_unlock_latch:*", keys, 8), 2);
  assert_latch(fx, set.keys[0], "redisson_unlock_latch:{compat:latch}:", "a");
  assert_latch(fx, set.keys[1], "redisson_unlock_latch:{compat:latch}:", "a");
  assert_string_not_equal(set.keys[0], set.keys[1]);

  assert_false(release(lock, 1));
  assert_true(fx_keyevents_wait(fx->b, &set, 3));
  assert_string_equal(set.keys[2], set.keys[1]); /* the re-entry's latch, taken over */
  assert_latch(fx, set.keys[1], "redisson_unlock_latch:{compat:latch}:", "0"); /* still held */
  latch_value(fx, set.keys[0], v, sizeof v);
  assert_string_equal(v, "a");

  assert_true(release(lock, 1));
  assert_true(fx_keyevents_wait(fx->b, &set, 4));
  assert_string_not_equal(set.keys[3], set.keys[0]); /* a fresh request id */
  assert_string_not_equal(set.keys[3], set.keys[1]);
  assert_latch(fx, set.keys[3], "redisson_unlock_latch:{compat:latch}:", "1"); /* freed */
  assert_int_equal(keys_matching(fx, "redisson_unlock_latch:*", keys, 8), 3);
  relock_subscription_free(sub);
  relock_lock_free(lock);
}

static void test_unlock_latch_of_tagged_name(void **state) {
  fx_t *fx = *state;
  char keys[8][160];
  fx_keyevents_t set = {0};
  relock_subscription_t *sub = fx_keyevents(fx->b, fx->redis, "set", &set);
  relock_lock_t *lock = new_lock(fx, "x{t}y");
  assert_true(acquire(lock, 1, 0, 5000));
  assert_true(release(lock, 1));
  assert_int_equal(keys_matching(fx, "redisson_unlock_latch:*", keys, 8), 1);
  assert_latch(fx, keys[0], "redisson_unlock_latch:x{t}y:", "1");
  /* the acquisition's latch, taken over by the release */
  assert_true(fx_keyevents_wait(fx->b, &set, 2));
  assert_string_equal(set.keys[0], keys[0]);
  assert_string_equal(set.keys[1], keys[0]);
  relock_subscription_free(sub);
  relock_lock_free(lock);
}

/* The acquisition's latch is written with the hold and never deleted on
 * its own: the release takes it over, so an uncontended pair costs Redis
 * one key (which expires with the release's answer) and no DEL. */
static void test_acquire_latch(void **state) {
  fx_t *fx = *state;
  const char *name = "compat:alatch";
  char keys[8][160], v[16];
  fx_keyevents_t set = {0}, del = {0};
  relock_subscription_t *s1 = fx_keyevents(fx->b, fx->redis, "set", &set);
  relock_subscription_t *s2 = fx_keyevents(fx->b, fx->redis, "del", &del);
  relock_lock_t *lock = new_lock(fx, name);

  /* A try that does not acquire writes no latch. */
  redisson_holds(fx, name, 5000);
  assert_false(acquire(lock, 1, 0, 5000));
  assert_int_equal(RAW_INT(fx, "DEL", name), 1);
  assert_true(fx_keyevents_wait(fx->b, &del, 1)); /* that DEL, heard */
  assert_int_equal(set.n, 0);

  assert_true(acquire(lock, 1, 0, 5000));
  relock_future_release(FX_CMD(fx->a, "PING")); /* after anything the acquisition sent, on the same connection */
  assert_true(fx_keyevents_wait(fx->b, &set, 1));
  assert_latch(fx, set.keys[0], "redisson_unlock_latch:{compat:alatch}:", "a");

  assert_true(acquire(lock, 1, 0, 5000)); /* reentrant: its own request id */
  relock_future_release(FX_CMD(fx->a, "PING"));
  assert_true(fx_keyevents_wait(fx->b, &set, 2));
  assert_latch(fx, set.keys[1], "redisson_unlock_latch:{compat:alatch}:", "a");
  assert_string_not_equal(set.keys[1], set.keys[0]);
  assert_int_equal(keys_matching(fx, "relock_lock_latch:*", keys, 8), 0); /* no key of another name */
  assert_int_equal(keys_matching(fx, "redisson_unlock_latch:*", keys, 8), 2);
  char field[128];
  field_of(lock, 1, field, sizeof field);
  hash_is(fx, name, field, "2"); /* the latch is not the hold */
  assert_false(release(lock, 1));
  assert_true(release(lock, 1));
  /* the lock's own DEL when freed is the only one: no latch was deleted */
  assert_true(fx_keyevents_wait(fx->b, &del, 2));
  assert_string_equal(del.keys[1], name);
  /* keyspace events come in the order Redis ran the commands: once a SET
   * made after the releases is heard, every DEL they made has been too */
  assert_int_equal(RAW_INT(fx, "DEL", "compat:marker"), 0);
  relock_future_release(FX_CMD(fx->a, "SET", "compat:marker", "1"));
  assert_true(fx_keyevents_wait(fx->b, &set, 5));
  assert_string_equal(set.keys[4], "compat:marker");
  assert_int_equal(del.n, 2);
  latch_value(fx, set.keys[0], v, sizeof v);
  assert_string_equal(v, "a"); /* the outer acquisition's, left to expire */
  relock_subscription_free(s1);
  relock_subscription_free(s2);
  relock_lock_free(lock);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_pair_setup, fx_pair_teardown)
  const struct CMUnitTest tests[] = {
      T(test_layout_after_acquire),
      T(test_layout_with_configured_client_id),
      T(test_watchdog_lease_and_renewal),
      T(test_unlock_published_only_when_freed),
      T(test_channel_of_tagged_name),
      T(test_redisson_holder_blocks_try_lock),
      T(test_redisson_release_wakes_relock_waiter),
      T(test_wait_bounded_by_holder_ttl),
      T(test_wait_times_out_on_redisson_holder),
      T(test_cancelled_waiter_leaves_redisson_lock_alone),
      T(test_cancel_before_subscription_confirmed),
      T(test_redisson_sees_relock_holder),
      T(test_redisson_scripts_interoperate),
      T(test_release_by_non_owner),
      T(test_release_of_deleted_watchdog_lock_is_lost),
      T(test_watchdog_finds_lock_taken_by_redisson),
      T(test_force_release),
      T(test_queries),
      T(test_wrong_type),
      T(test_unlock_latch),
      T(test_unlock_latch_of_tagged_name),
      T(test_acquire_latch),
  };
#undef T
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found: install the Debian package redis-server");
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("lock_compat", tests, NULL, NULL);
}
