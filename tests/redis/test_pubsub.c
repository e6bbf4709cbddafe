/* Integration tests of pub/sub against a real redis-server: confirmation,
 * shared subscriptions, ordering, resubscription with a gap notice after a
 * restart or CLIENT KILL, unsubscribing, closing. */
#include <config.h>

#include <string.h>

#include "support/client_fixture.h"

typedef struct {
  relock_test_redis_t *redis;
  relock_options_t *cfg;
  relock_client_t *client;
} fx_t;

static int setup(void **state) {
  fx_t *fx = calloc(1, sizeof(*fx));
  fx->redis = relock_test_redis_start(NULL);
  if (fx->redis == NULL)
    return -1;
  fx->cfg = fx_options(fx->redis, 1);
  fx->client = fx_client(fx->cfg);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fx_t *fx = *state;
  relock_client_free(fx->client);
  relock_test_redis_free(fx->redis);
  relock_options_free(fx->cfg);
  free(fx);
  return 0;
}

#define MAX_SEEN 2048

typedef struct {
  int messages;
  int gaps;
  char last[64];
  int seq[MAX_SEEN];
  relock_subscription_t *self;
  int free_self_after; /* > 0: frees its own subscription after that many */
} inbox_t;

static void on_msg(relock_subscription_t *sub, const char *payload, size_t len, void *arg) {
  inbox_t *in = arg;
  if (payload == NULL) {
    in->gaps++;
    return;
  }
  if (in->messages < MAX_SEEN)
    in->seq[in->messages] = atoi(payload);
  in->messages++;
  snprintf(in->last, sizeof in->last, "%.*s", (int)len, payload);
  if (in->free_self_after > 0 && in->messages == in->free_self_after) {
    relock_subscription_free(sub);
    in->self = NULL;
  }
}

static relock_subscription_t *subscribe(fx_t *fx, const char *channel, inbox_t *in) {
  relock_subscription_t *sub = NULL;
  relock_future_t *f = relock_client_subscribe_async(fx->client, channel, strlen(channel), on_msg, in, &sub);
  assert_non_null(f);
  assert_non_null(sub);
  assert_int_equal(relock_future_wait(f, 5000), 0);
  relock_future_release(f);
  in->self = sub;
  return sub;
}

static long long publish(fx_t *fx, const char *channel, const char *msg) {
  return fx_raw_int(fx->redis, "PUBLISH", channel, msg, NULL);
}

static long long numsub(fx_t *fx, const char *channel) {
  char buf[256];
  assert_int_equal(relock_test_redis_cmd(fx->redis, buf, sizeof buf, "PUBSUB", "NUMSUB", channel, NULL), 0);
  const char *last = strrchr(buf, ':'); /* *2 $n channel :count */
  assert_non_null(last);
  return atoll(last + 1);
}

typedef struct {
  inbox_t *in;
  int messages;
  int gaps;
} want_t;

static int got(void *arg) {
  want_t *w = arg;
  return w->in->messages >= w->messages && w->in->gaps >= w->gaps;
}

static void test_subscribe_and_receive(void **state) {
  fx_t *fx = *state;
  inbox_t in = {0};
  relock_subscription_t *sub = subscribe(fx, "news", &in);
  assert_int_equal(publish(fx, "news", "hello"), 1); /* confirmed means subscribed */
  want_t w = {&in, 1, 0};
  assert_true(fx_run_until(fx->client->loop, got, &w, 2000));
  assert_string_equal(in.last, "hello");
  relock_subscription_free(sub);
}

static void test_listeners_share_one_subscription(void **state) {
  fx_t *fx = *state;
  inbox_t a = {0}, b = {0}, c = {0};
  relock_subscription_t *sa = subscribe(fx, "shared", &a);
  relock_subscription_t *sb = subscribe(fx, "shared", &b);
  relock_subscription_t *sc = subscribe(fx, "other", &c);
  assert_int_equal(numsub(fx, "shared"), 1); /* one connection, one SUBSCRIBE */
  assert_int_equal(relock__pubsub_channels(&fx->client->redis.pubsub), 2);
  assert_int_equal(publish(fx, "shared", "1"), 1); /* one receiving connection */
  want_t wa = {&a, 1, 0}, wb = {&b, 1, 0};
  assert_true(fx_run_until(fx->client->loop, got, &wa, 2000));
  assert_true(fx_run_until(fx->client->loop, got, &wb, 2000));
  assert_int_equal(c.messages, 0);

  relock_subscription_free(sa); /* b still listens */
  publish(fx, "shared", "2");
  want_t wb2 = {&b, 2, 0};
  assert_true(fx_run_until(fx->client->loop, got, &wb2, 2000));
  assert_int_equal(a.messages, 1);

  relock_subscription_free(sb); /* the last one: UNSUBSCRIBE */
  relock_future_release(FX_CMD(fx->client, "PING")); /* let the loop send it */
  uint64_t t0 = relock__now_ns();
  while (numsub(fx, "shared") != 0 && fx_ms_since(t0) < 2000)
    ev_run(fx->client->loop, EVRUN_NOWAIT);
  assert_int_equal(numsub(fx, "shared"), 0);
  assert_int_equal(numsub(fx, "other"), 1);
  relock_subscription_free(sc);
}

static void test_messages_arrive_in_order(void **state) {
  fx_t *fx = *state;
  inbox_t in = {0};
  relock_subscription_t *sub = subscribe(fx, "seq", &in);
  char n[16];
  for (int i = 0; i < 1000; i++) {
    snprintf(n, sizeof n, "%d", i);
    publish(fx, "seq", n);
  }
  want_t w = {&in, 1000, 0};
  assert_true(fx_run_until(fx->client->loop, got, &w, 5000));
  for (int i = 0; i < 1000; i++)
    assert_int_equal(in.seq[i], i);
  relock_subscription_free(sub);
}

static void resubscribes_after(fx_t *fx, int restart) {
  inbox_t in = {0};
  relock_subscription_t *sub = subscribe(fx, "survivor", &in);
  uint64_t connects = fx->client->redis.pubsub.conn.connects;
  if (restart) {
    assert_int_equal(relock_test_redis_restart(fx->redis), 0);
  } else {
    char reply[64];
    assert_int_equal(relock_test_redis_cmd(fx->redis, reply, sizeof reply, "CLIENT", "KILL", "TYPE", "pubsub", NULL),
                     0);
    assert_string_equal(reply, ":1\r\n");
  }
  want_t gap = {&in, 0, 1};
  assert_true(fx_run_until(fx->client->loop, got, &gap, 5000)); /* told: messages may be lost */
  assert_int_equal(in.gaps, 1);
  assert_true(fx->client->redis.pubsub.conn.connects > connects);
  assert_int_equal(publish(fx, "survivor", "after"), 1); /* the gap notice comes after resubscribing */
  want_t w = {&in, 1, 1};
  assert_true(fx_run_until(fx->client->loop, got, &w, 2000));
  assert_string_equal(in.last, "after");
  relock_subscription_free(sub);
}

static void test_resubscribe_after_restart(void **state) { resubscribes_after(*state, 1); }

static void test_resubscribe_after_client_kill(void **state) { resubscribes_after(*state, 0); }

static void test_subscribe_while_down_then_recover(void **state) {
  fx_t *fx = *state;
  relock_client_free(fx->client);
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, 200);
  fx->client = fx_client(fx->cfg);
  assert_int_equal(relock_test_redis_stop(fx->redis), 0);
  inbox_t in = {0};
  relock_subscription_t *sub = NULL;
  relock_future_t *f = relock_client_subscribe_async(fx->client, "later", 5, on_msg, &in, &sub);
  int err = relock_future_wait(f, 5000);
  assert_true(err == RELOCK_ECONNREFUSED || err == RELOCK_ETIMEDOUT);
  assert_non_null(strstr(relock_future_message(f), "not confirmed"));
  relock_future_release(f);
  /* the subscription stays and is made once the server is back */
  assert_int_equal(relock_test_redis_restart(fx->redis), 0);
  uint64_t t0 = relock__now_ns();
  while (numsub(fx, "later") != 1 && fx_ms_since(t0) < fx_slack_ms(3000))
    ev_run(fx->client->loop, EVRUN_NOWAIT);
  assert_int_equal(publish(fx, "later", "now"), 1);
  want_t w = {&in, 1, 0};
  assert_true(fx_run_until(fx->client->loop, got, &w, 2000));
  assert_int_equal(in.gaps, 0); /* it was never confirmed: nothing was missed */
  relock_subscription_free(sub);
}

static void test_unsubscribe_inside_own_callback(void **state) {
  fx_t *fx = *state;
  inbox_t a = {0}, b = {0};
  a.free_self_after = 2;
  subscribe(fx, "ch", &a);
  relock_subscription_t *sb = subscribe(fx, "ch", &b);
  for (int i = 0; i < 4; i++)
    publish(fx, "ch", "m");
  want_t w = {&b, 4, 0};
  assert_true(fx_run_until(fx->client->loop, got, &w, 2000));
  assert_int_equal(a.messages, 2);
  assert_null(a.self);
  relock_subscription_free(sb);
}

static void test_unsubscribe_before_confirmation(void **state) {
  fx_t *fx = *state;
  inbox_t in = {0};
  relock_subscription_t *sub = NULL;
  relock_future_t *f = relock_client_subscribe_async(fx->client, "quick", 5, on_msg, &in, &sub);
  relock_subscription_free(sub);
  assert_int_equal(relock_future_state(f), RELOCK_FUTURE_CANCELLED);
  relock_future_release(f);
  /* the subscriber connection was still connecting: nothing was sent, and
   * nothing is left behind */
  assert_int_equal(relock__pubsub_channels(&fx->client->redis.pubsub), 0);
  relock_future_release(FX_CMD(fx->client, "PING"));
  assert_int_equal(numsub(fx, "quick"), 0);
  assert_int_equal(in.messages, 0);
}

static void test_resubscribe_while_unsubscribing(void **state) {
  fx_t *fx = *state;
  inbox_t in = {0};
  relock_subscription_t *first = subscribe(fx, "flip", &in);
  relock_subscription_free(first); /* UNSUBSCRIBE sent, not yet answered */
  relock_subscription_t *again = NULL;
  relock_future_t *f = relock_client_subscribe_async(fx->client, "flip", 4, on_msg, &in, &again);
  assert_false(relock_future_is_done(f)); /* confirmed only by a new SUBSCRIBE */
  assert_int_equal(relock_future_wait(f, 5000), 0);
  relock_future_release(f);
  assert_int_equal(numsub(fx, "flip"), 1);
  assert_int_equal(publish(fx, "flip", "x"), 1);
  want_t w = {&in, 1, 0};
  assert_true(fx_run_until(fx->client->loop, got, &w, 2000));
  relock_subscription_free(again);
}

static void test_many_channels(void **state) {
  fx_t *fx = *state;
  enum { N = 1000 };
  static inbox_t in[N];
  static relock_subscription_t *subs[N];
  relock_future_t **fs = calloc(N, sizeof(*fs));
  memset(in, 0, sizeof in);
  char name[32];
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "lock-%d", i);
    fs[i] = relock_client_subscribe_async(fx->client, name, strlen(name), on_msg, &in[i], &subs[i]);
  }
  relock_future_t *all = relock_future_all(fs, N, NULL);
  assert_int_equal(relock_future_wait(all, 10000), 0);
  relock_future_release(all);
  for (int i = 0; i < N; i++)
    relock_future_release(fs[i]);
  free(fs);
  assert_int_equal(relock__pubsub_channels(&fx->client->redis.pubsub), N);
  assert_int_equal(publish(fx, "lock-777", "x"), 1);
  want_t w = {&in[777], 1, 0};
  assert_true(fx_run_until(fx->client->loop, got, &w, 2000));
  for (int i = 0; i < N; i++)
    relock_subscription_free(subs[i]);
}

static void test_close_with_subscriptions(void **state) {
  fx_t *fx = *state;
  inbox_t in = {0};
  relock_subscription_t *confirmed = subscribe(fx, "a", &in);
  relock_subscription_t *pending = NULL;
  relock_future_t *f = relock_client_subscribe_async(fx->client, "b", 1, on_msg, &in, &pending);
  relock_client_free(fx->client); /* closes, waits, frees */
  fx->client = NULL;
  assert_int_equal(relock_future_error(f), RELOCK_ECLOSED);
  relock_future_release(f);
  relock_subscription_free(confirmed); /* after the client: still fine */
  relock_subscription_free(pending);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_subscribe_and_receive),
      T(test_listeners_share_one_subscription),
      T(test_messages_arrive_in_order),
      T(test_resubscribe_after_restart),
      T(test_resubscribe_after_client_kill),
      T(test_subscribe_while_down_then_recover),
      T(test_unsubscribe_inside_own_callback),
      T(test_unsubscribe_before_confirmation),
      T(test_resubscribe_while_unsubscribing),
      T(test_many_channels),
      T(test_close_with_subscriptions),
  };
#undef T
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found: install the Debian package redis-server");
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("pubsub", tests, NULL, NULL);
}
