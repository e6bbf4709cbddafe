/* Integration tests of the client core against a real redis-server:
 * commands and replies, the handshake, timeouts, disconnects and reconnects,
 * NOSCRIPT, pipelining, closing. Network faults go through tests/support/proxy.c. */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "redis/call.h"
#include "support/client_fixture.h"
#include "future/promise.h"
#include "support/proxy.h"
#include "redis/scripts.h"

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
  fx->cfg = fx_options(fx->redis, 0);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fx_t *fx = *state;
  relock_client_free(fx->client);
  relock_options_free(fx->cfg);
  relock_test_redis_free(fx->redis);
  free(fx);
  return 0;
}

/* -- commands and replies ---------------------------------------------------*/

static void test_command_replies(void **state) {
  fx_t *fx = *state;
  fx->client = fx_client(fx->cfg);

  relock_future_t *f = FX_CMD(fx->client, "SET", "greeting", "hello");
  const relock_reply_t *r = fx_ok(f);
  assert_int_equal(r->type, RELOCK_REPLY_STATUS);
  assert_string_equal(r->str, "OK");
  relock_future_release(f);

  f = FX_CMD(fx->client, "GET", "greeting");
  r = fx_ok(f);
  assert_int_equal(r->type, RELOCK_REPLY_STRING);
  assert_int_equal(r->len, 5);
  assert_string_equal(r->str, "hello");
  relock_future_release(f);

  f = FX_CMD(fx->client, "GET", "missing");
  assert_int_equal(fx_ok(f)->type, RELOCK_REPLY_NIL);
  relock_future_release(f);

  f = FX_CMD(fx->client, "RPUSH", "list", "a", "b", "c");
  r = fx_ok(f);
  assert_int_equal(r->type, RELOCK_REPLY_INTEGER);
  assert_int_equal(r->integer, 3);
  relock_future_release(f);

  f = FX_CMD(fx->client, "LRANGE", "list", "0", "-1");
  r = fx_ok(f);
  assert_int_equal(r->type, RELOCK_REPLY_ARRAY);
  assert_int_equal(r->elements, 3);
  assert_string_equal(r->element[2]->str, "c");
  relock_future_release(f);

  /* binary-safe arguments */
  const char bin[] = {'x', '\0', 'y', '\r', '\n'};
  const char *argv[] = {"SET", "bin", bin};
  const size_t lens[] = {3, 3, sizeof bin};
  f = relock_client_command_async(fx->client, 3, argv, lens);
  assert_int_equal(relock_future_wait(f, 5000), 0);
  relock_future_release(f);
  f = FX_CMD(fx->client, "GET", "bin");
  r = fx_ok(f);
  assert_int_equal(r->len, sizeof bin);
  assert_memory_equal(r->str, bin, sizeof bin);
  relock_future_release(f);
}

static void test_server_error_is_carried(void **state) {
  fx_t *fx = *state;
  fx->client = fx_client(fx->cfg);
  relock_future_release(FX_CMD(fx->client, "SET", "s", "v"));
  relock_future_t *f = FX_CMD(fx->client, "HGET", "s", "field");
  assert_int_equal(relock_future_error(f), RELOCK_ESERVER);
  assert_non_null(strstr(relock_future_message(f), "WRONGTYPE"));
  assert_null(relock_future_reply(f));
  relock_future_release(f);

  f = FX_CMD(fx->client, "NOSUCHCOMMAND");
  assert_int_equal(relock_future_error(f), RELOCK_ESERVER);
  assert_non_null(strstr(relock_future_message(f), "unknown command"));
  relock_future_release(f);
}

static void test_printf_style_command(void **state) {
  fx_t *fx = *state;
  fx->client = fx_client(fx->cfg);
  const char value[] = {'a', '\0', 'b'};
  relock_future_t *f = relock_client_commandf_async(fx->client, "SET %s %b", "k", value, sizeof value);
  assert_int_equal(relock_future_wait(f, 5000), 0);
  relock_future_release(f);
  f = relock_client_commandf_async(fx->client, "STRLEN %s", "k");
  assert_int_equal(relock_future_wait(f, 5000), 0);
  assert_int_equal(fx_ok(f)->integer, 3);
  relock_future_release(f);
  FX_REFUSED(relock_client_command_async(NULL, 1, (const char *const[]){"PING"}, NULL), "client is NULL");
  FX_REFUSED(relock_client_command_async(fx->client, 0, (const char *const[]){"PING"}, NULL), "argc must be > 0");
}

/* -- handshake --------------------------------------------------------------*/

static void test_handshake_select_and_name(void **state) {
  fx_t *fx = *state;
  fx_set_int(fx->cfg, RELOCK_OPT_DB, 3);
  fx_set_str(fx->cfg, RELOCK_OPT_CLIENT_NAME, "relock-test");
  fx->client = fx_client(fx->cfg);
  relock_future_release(FX_CMD(fx->client, "SET", "in-db-3", "yes"));
  relock_future_t *f = FX_CMD(fx->client, "CLIENT", "GETNAME");
  assert_string_equal(fx_ok(f)->str, "relock-test");
  relock_future_release(f);
  /* db 0 (the raw helper's) does not have the key */
  assert_int_equal(fx_raw_int(fx->redis, "EXISTS", "in-db-3", NULL), 0);
  /* the connection's line of CLIENT LIST (CLIENT INFO is 6.2+) */
  f = FX_CMD(fx->client, "CLIENT", "ID");
  char id[40];
  snprintf(id, sizeof id, "id=%lld ", (long long)fx_ok(f)->integer);
  relock_future_release(f);
  f = FX_CMD(fx->client, "CLIENT", "LIST");
  const char *line = strstr(fx_ok(f)->str, id);
  assert_non_null(line);
  const char *end = strchr(line, '\n');
  char mine[1024];
  snprintf(mine, sizeof mine, "%.*s", end != NULL ? (int)(end - line) : (int)strlen(line), line);
  assert_non_null(strstr(mine, " db=3 "));
  relock_future_release(f);
}

static void test_handshake_password(void **state) {
  fx_t *fx = *state;
  char reply[256];
  assert_int_equal(relock_test_redis_cmd(fx->redis, reply, sizeof reply, "CONFIG", "SET", "requirepass",
                                         "s3cret", NULL), 0);
  fx_set_str(fx->cfg, RELOCK_OPT_PASSWORD, "s3cret");
  fx->client = fx_client(fx->cfg);
  relock_future_t *f = FX_CMD(fx->client, "PING");
  assert_string_equal(fx_ok(f)->str, "PONG");
  relock_future_release(f);
  relock_client_free(fx->client);

  /* a wrong password fails at once with a clear error that hides the secret */
  fx_set_str(fx->cfg, RELOCK_OPT_PASSWORD, "wrong-secret");
  fx->client = fx_client(fx->cfg);
  uint64_t t0 = relock__now_ns();
  f = relock_client_command_async(fx->client, 1, (const char *const[]){"PING"}, NULL);
  assert_int_equal(relock_future_wait(f, 5000), RELOCK_EAUTH);
  assert_true(fx_ms_since(t0) < fx_slack_ms(900)); /* before the command timeout */
  assert_non_null(strstr(relock_future_message(f), "AUTH failed"));
  assert_null(strstr(relock_future_message(f), "wrong-secret"));
  relock_future_release(f);
  relock_test_redis_cmd(fx->redis, NULL, 0, "AUTH", "s3cret", NULL); /* the helper re-auths itself */
}

static void test_handshake_acl_user(void **state) {
  fx_t *fx = *state;
  assert_int_equal(relock_test_redis_acl_user(fx->redis, "locker", "on", ">pw-of-locker", "~*", "+@all", NULL), 0);
  fx_set_str(fx->cfg, RELOCK_OPT_USERNAME, "locker");
  fx_set_str(fx->cfg, RELOCK_OPT_PASSWORD, "pw-of-locker");
  fx->client = fx_client(fx->cfg);
  relock_future_t *f = FX_CMD(fx->client, "ACL", "WHOAMI");
  assert_string_equal(fx_ok(f)->str, "locker");
  relock_future_release(f);
  relock_client_free(fx->client);

  fx_set_str(fx->cfg, RELOCK_OPT_PASSWORD, "not-it");
  fx->client = fx_client(fx->cfg);
  f = FX_CMD(fx->client, "PING");
  assert_int_equal(relock_future_error(f), RELOCK_EAUTH);
  assert_null(strstr(relock_future_message(f), "not-it"));
  relock_future_release(f);
}

/* -- failures to connect ----------------------------------------------------*/

static relock_future_t *get_call(relock_client_t *c, int retry_safe) {
  const char *argv[] = {"GET", "k"};
  const size_t lens[] = {3, 1};
  relock__call_spec_t spec = {.argc = 2, .argv = argv, .lens = lens, .retry_safe = retry_safe};
  relock_future_t *f = relock__call(&c->redis, &spec);
  assert_non_null(f);
  return f;
}

static int closed_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  bind(fd, (struct sockaddr *)&a, sizeof a);
  getsockname(fd, (struct sockaddr *)&a, &len);
  close(fd); /* nobody listens there now */
  return ntohs(a.sin_port);
}

/* The message names host:port and the system's text. */
static void assert_refused_message(const char *msg, int port) {
  char want[96];
  snprintf(want, sizeof want, "127.0.0.1:%d: %s", port, strerror(ECONNREFUSED));
  if (strstr(msg, want) == NULL)
    fail_msg("message \"%s\" lacks \"%s\"", msg, want);
}

static int never(void *arg) {
  (void)arg;
  return 0;
}

/* Refused before the client ever connected: known at once, so commands
 * fail at once - neither the command timeout nor the retries are waited
 * for. */
static void test_connection_refused_is_clear(void **state) {
  fx_t *fx = *state;
  int port = closed_port();
  fx_set_int(fx->cfg, RELOCK_OPT_PORT, port);
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, 3000);
  fx_set_int(fx->cfg, RELOCK_OPT_RETRY_ATTEMPTS, 3);
  fx->client = fx_client(fx->cfg);
  for (int i = 0; i < 3; i++) { /* a command, a retried call, a command during the back-off */
    uint64_t t0 = relock__now_ns();
    relock_future_t *f = i == 1 ? get_call(fx->client, 1)
                                : relock_client_command_async(fx->client, 1, (const char *const[]){"PING"}, NULL);
    assert_int_equal(relock_future_wait(f, 10000), RELOCK_ECONNREFUSED);
    double took = fx_ms_since(t0);
    if (took >= fx_slack_ms(200))
      fail_msg("attempt %d took %.0f ms", i, took);
    assert_refused_message(relock_future_message(f), port);
    relock_future_release(f);
    fx_run_until(fx->client->loop, never, NULL, 50); /* reconnecting meanwhile */
  }
}

/* A password given in a URL appears in no message: not in a refused URL's,
 * nor in those of a refused connection, a wrong password, a timeout, a
 * refused lock operation or subscription, nor in a refused configuration. */
#define SECRET "s3cretpw"

static void no_secret(const char *what, const char *msg) {
  if (msg == NULL || strstr(msg, SECRET) != NULL || strstr(msg, "s3cret") != NULL)
    fail_msg("%s: \"%s\" shows the password", what, msg ? msg : "(null)");
}

static void ignore_message(relock_subscription_t *sub, const char *payload, size_t len, void *arg) {
  (void)sub, (void)payload, (void)len, (void)arg;
}

static void secret_stays_out_of(relock_client_t *c, int want) {
  relock_future_t *f = relock_client_command_async(c, 1, (const char *const[]){"PING"}, NULL);
  assert_int_equal(relock_future_wait(f, 10000), want);
  no_secret("PING", relock_future_message(f));
  relock_future_release(f);
  relock_lock_t *l = relock_lock_new(c, "secret-lock", NULL);
  f = relock_lock_lock_async(l, 1, 300, RELOCK_INFINITE);
  assert_int_not_equal(relock_future_wait(f, 10000), RELOCK_EPENDING);
  no_secret("acquire", relock_future_message(f));
  relock_future_release(f);
  relock_subscription_t *sub = NULL;
  f = relock_client_subscribe_async(c, "secret-ch", 9, ignore_message, NULL, &sub);
  if (f != NULL) {
    relock_future_wait(f, 10000);
    no_secret("subscribe", relock_future_message(f));
    relock_future_release(f);
  }
  relock_subscription_free(sub);
  relock_lock_free(l);
}

static void test_password_in_url_never_in_messages(void **state) {
  fx_t *fx = *state;
  static const char *const malformed[] = {
      "redis://u:" SECRET "@127.0.0.1:BADPORT", "redis://u:" SECRET "@127.0.0.1:6379/BADDB",
      "redis://u:" SECRET "@127.0.0.1:99999",   "redis://:" SECRET "@ho$t:6379",
      "redis://:" SECRET "@[::1:6379",          "redis://u:" SECRET "@host:6379?db=1",
      "redis://u:" SECRET "/x@host",            "redis://" SECRET "@host",
      "rediss://u:" SECRET "@host:BADPORT",     "unix:///tmp/r.sock?password=" SECRET "&bad=1",
  };
  for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
    relock_error_t err;
    int rc = relock_options_set_url(fx->cfg, malformed[i], &err);
    /* a build without TLS refuses rediss:// before reading the rest */
    assert_int_equal(rc, strncmp(malformed[i], "rediss:", 7) == 0 && !relock_tls_available() ? RELOCK_ETLS
                                                                                           : RELOCK_EINVAL);
    no_secret(malformed[i], err.message);
  }

  char url[128];
  snprintf(url, sizeof url, "redis://u:" SECRET "@127.0.0.1:%d", closed_port());
  relock_options_t *o = fx_copy(fx->cfg);
  assert_int_equal(relock_options_set_url(o, url, NULL), 0);
  relock_client_t *c = fx_client(o);
  secret_stays_out_of(c, RELOCK_ECONNREFUSED);
  relock_client_free(c);

  /* a wrong password; then the right one, and a stalled server: timeouts
   * name host:port only */
  assert_int_equal(relock_test_redis_acl_user(fx->redis, "u", "on", ">" SECRET, "~*", "+@all", NULL), 0);
  snprintf(url, sizeof url, "redis://nobody:" SECRET "@127.0.0.1:%d", relock_test_redis_port(fx->redis));
  assert_int_equal(relock_options_set_url(o, url, NULL), 0);
  c = fx_client(o);
  secret_stays_out_of(c, RELOCK_EAUTH);
  relock_client_free(c);
  snprintf(url, sizeof url, "redis://u:" SECRET "@127.0.0.1:%d", relock_test_redis_port(fx->redis));
  assert_int_equal(relock_options_set_url(o, url, NULL), 0);
  fx_set_ms(o, RELOCK_OPT_COMMAND_TIMEOUT, 200);
  c = fx_client(o);
  relock_future_release(FX_CMD(c, "PING")); /* connected */
  assert_int_equal(relock_test_redis_pause(fx->redis), 0);
  secret_stays_out_of(c, RELOCK_ETIMEDOUT);
  assert_int_equal(relock_test_redis_resume(fx->redis), 0);
  relock_client_free(c);

  /* refused by validation */
  relock_error_t err;
  fx_set_ms(o, RELOCK_OPT_RECONNECT_MIN, 5000);
  fx_set_ms(o, RELOCK_OPT_RECONNECT_MAX, 10);
  assert_null(relock_client_new(fx_loop(), o, &err));
  no_secret("relock_client_new", err.message);
  relock_options_free(o);
}

/* The blocking API, on a threaded client with every default (retries,
 * back-off, timeouts): a refused connection fails within 200 ms too. */
static void test_blocking_calls_fail_fast_when_refused(void **state) {
  fx_t *fx = *state;
  int port = closed_port();
  relock_options_t *opts = relock_options_new(NULL);
  fx_set_int(opts, RELOCK_OPT_PORT, port);
  relock_error_t err;
  relock_client_t *c = relock_client_new(NULL, opts, &err);
  assert_non_null(c);
  relock_lock_t *l = relock_lock_new(c, "fail-fast", &err);
  assert_non_null(l);
  for (int i = 0; i < 3; i++) {
    uint64_t t0 = relock__now_ns();
    int acquired = -1, r;
    const char *msg;
    relock_future_t *f = NULL;
    if (i == 0) {
      r = relock_lock_lock(l, RELOCK_INFINITE);
      msg = relock_last_error_message();
    } else if (i == 1) {
      r = relock_lock_try_lock(l, 10000, RELOCK_INFINITE, &acquired);
      msg = relock_last_error_message();
    } else {
      f = relock_client_command_async(c, 1, (const char *const[]){"PING"}, NULL);
      r = relock_future_wait(f, 10000);
      msg = relock_future_message(f);
    }
    double took = fx_ms_since(t0);
    if (r != RELOCK_ECONNREFUSED || took >= fx_slack_ms(200))
      fail_msg("call %d: %s after %.0f ms: %s", i, relock_err_name(r), took, msg);
    assert_refused_message(msg, port);
    relock_future_release(f);
  }
  relock_lock_free(l);
  relock_client_free(c);
  relock_options_free(opts);
  (void)fx;
}

/* Refused, then the server starts: the next command connects at once, not
 * after the reconnect back-off. */
static void test_refused_then_server_starts(void **state) {
  fx_t *fx = *state;
  assert_int_equal(relock_test_redis_stop(fx->redis), 0);
  fx_set_ms(fx->cfg, RELOCK_OPT_RECONNECT_MAX, 10000);
  fx_set_ms(fx->cfg, RELOCK_OPT_RECONNECT_MIN, 5000);
  fx->client = fx_client(fx->cfg);
  relock_future_t *f = relock_client_command_async(fx->client, 1, (const char *const[]){"PING"}, NULL);
  assert_int_equal(relock_future_wait(f, 10000), RELOCK_ECONNREFUSED);
  relock_future_release(f);
  assert_int_equal(relock_test_redis_restart(fx->redis), 0);
  uint64_t t0 = relock__now_ns();
  f = FX_CMD(fx->client, "PING");
  assert_string_equal(fx_ok(f)->str, "PONG");
  assert_true(fx_ms_since(t0) < fx_slack_ms(1000));
  relock_future_release(f);
}

static int refused(void *arg) {
  relock__conn_t *c = arg;
  return c->state != RELOCK__CONN_READY && c->last_err == RELOCK_ECONNREFUSED;
}

/* Once connected, a refused reconnect is most likely a restart: commands
 * wait for the connection within their timeout, as before. */
static void test_refused_after_connecting_waits(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(5000));
  fx->client = fx_client(fx->cfg);
  relock_future_release(FX_CMD(fx->client, "PING"));
  assert_int_equal(relock_test_redis_stop(fx->redis), 0);
  assert_true(fx_run_until(fx->client->loop, refused, &fx->client->redis.cmd, 2000));
  relock_future_t *f = relock_client_command_async(fx->client, 3, (const char *const[]){"SET", "k", "v"}, NULL);
  assert_int_equal(relock_future_wait(f, 300), RELOCK_EPENDING);
  assert_int_equal(fx->client->redis.cmd.last_err, RELOCK_ECONNREFUSED); /* refused meanwhile */
  assert_int_equal(relock_test_redis_restart(fx->redis), 0);
  assert_int_equal(relock_future_wait(f, 10000), 0);
  relock_future_release(f);
}

static void test_commands_wait_for_the_connection(void **state) {
  fx_t *fx = *state;
  /* issued before the connection is up: queued, not failed */
  fx->client = fx_client(fx->cfg);
  relock_future_t *fs[50];
  for (int i = 0; i < 50; i++)
    fs[i] = relock_client_command_async(fx->client, 2, (const char *const[]){"INCR", "n"}, NULL);
  assert_int_equal(fx->client->redis.cmd.state != RELOCK__CONN_READY, 1);
  for (int i = 0; i < 50; i++) {
    assert_int_equal(relock_future_wait(fs[i], 5000), 0);
    assert_int_equal(fx_ok(fs[i])->integer, i + 1);
    relock_future_release(fs[i]);
  }
}

/* -- timeouts ---------------------------------------------------------------*/

static void test_timeout_under_debug_sleep(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, 200);
  fx->client = fx_client(fx->cfg);
  relock_future_release(FX_CMD(fx->client, "PING"));
  uint64_t t0 = relock__now_ns();
  relock_future_t *sleep = relock_client_command_async(fx->client, 3, (const char *const[]){"DEBUG", "SLEEP", "1"},
                                                       NULL);
  relock_future_t *get = relock_client_command_async(fx->client, 2, (const char *const[]){"GET", "x"}, NULL);
  assert_int_equal(relock_future_wait(sleep, 5000), RELOCK_ETIMEDOUT);
  assert_int_equal(relock_future_wait(get, 5000), RELOCK_ETIMEDOUT);
  double took = fx_ms_since(t0);
  assert_true(took >= 199.0);
  assert_true(took < fx_slack_ms(900)); /* well before the server wakes up */
  assert_non_null(strstr(relock_future_message(get), "no reply"));
  relock_future_release(sleep);
  relock_future_release(get);
  /* once the server wakes (the raw helper's PING blocks until then), the late
   * replies are dropped and the connection carries on */
  assert_int_equal(relock_test_redis_cmd(fx->redis, NULL, 0, "PING", NULL), 0);
  relock_future_t *f = FX_CMD(fx->client, "PING");
  assert_string_equal(fx_ok(f)->str, "PONG");
  relock_future_release(f);
}

static void test_timeout_under_sigstop(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, 200);
  fx->client = fx_client(fx->cfg);
  relock_future_release(FX_CMD(fx->client, "PING"));
  assert_int_equal(relock_test_redis_pause(fx->redis), 0);
  uint64_t t0 = relock__now_ns();
  relock_future_t *f = FX_CMD(fx->client, "PING");
  assert_int_equal(relock_future_error(f), RELOCK_ETIMEDOUT);
  assert_true(fx_ms_since(t0) >= 199.0);
  relock_future_release(f);
  assert_int_equal(relock_test_redis_resume(fx->redis), 0);
  f = FX_CMD(fx->client, "PING");
  assert_string_equal(fx_ok(f)->str, "PONG");
  relock_future_release(f);
}

/* -- disconnects ------------------------------------------------------------*/

typedef struct {
  int calls;
  int succeeded;
  int lost;
  int other;
} tally_t;

static void tally(relock_future_t *f, void *arg) {
  tally_t *t = arg;
  t->calls++;
  int err = relock_future_error(f);
  if (err == 0)
    t->succeeded++;
  else if (err == RELOCK_ECONNLOST)
    t->lost++;
  else
    t->other++;
}

static int all_called(void *arg) {
  tally_t *t = arg;
  return t->calls == 1000;
}

static int conn_ready(void *arg) {
  relock_client_t *c = arg;
  return c->redis.cmd.state == RELOCK__CONN_READY;
}

/* 1,000 INCRs in flight when fault() strikes: each completes exactly once,
 * and afterwards the client is connected again and works. */
static void in_flight_fault(fx_t *fx, void (*fault)(fx_t *fx)) {
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(3000));
  fx->client = fx_client(fx->cfg);
  relock_future_release(FX_CMD(fx->client, "PING"));
  uint64_t connects = fx->client->redis.cmd.connects;
  tally_t t = {0};
  for (int i = 0; i < 1000; i++) {
    relock_future_t *f = relock_client_command_async(fx->client, 2, (const char *const[]){"INCR", "n"}, NULL);
    relock_future_on_done(f, tally, &t);
    relock_future_release(f);
    if (i == 300)
      ev_run(fx->client->loop, EVRUN_NOWAIT); /* some on the wire, some queued in hiredis */
  }
  fault(fx);
  assert_true(fx_run_until(fx->client->loop, all_called, &t, 10000));
  assert_int_equal(t.calls, 1000);
  assert_int_equal(t.succeeded + t.lost, 1000);
  assert_int_equal(t.other, 0);
  assert_true(t.lost > 0);
  assert_true(fx_run_until(fx->client->loop, conn_ready, fx->client, 5000));
  assert_true(fx->client->redis.cmd.connects > connects);
  relock_future_t *f = FX_CMD(fx->client, "PING");
  assert_string_equal(fx_ok(f)->str, "PONG");
  relock_future_release(f);
  /* the callbacks ran exactly once: no more arrive later */
  ev_run(fx->client->loop, EVRUN_NOWAIT);
  assert_int_equal(t.calls, 1000);
}

static void kill_clients(fx_t *fx) {
  char reply[64];
  assert_int_equal(relock_test_redis_cmd(fx->redis, reply, sizeof reply, "CLIENT", "KILL", "TYPE", "normal", NULL),
                   0);
}

static void restart_server(fx_t *fx) { assert_int_equal(relock_test_redis_restart(fx->redis), 0); }

static void test_client_kill_with_commands_in_flight(void **state) { in_flight_fault(*state, kill_clients); }

static void test_restart_with_commands_in_flight(void **state) { in_flight_fault(*state, restart_server); }

/* fx's client, connected, with SIGPIPE's default action (the process dies
 * of one let through; *old restores the program's) and a dead socket kept
 * around rather than replaced at once. */
static void client_with_default_sigpipe(fx_t *fx, struct sigaction *old) {
  struct sigaction dfl = {.sa_handler = SIG_DFL};
  sigaction(SIGPIPE, &dfl, old);
  fx_set_ms(fx->cfg, RELOCK_OPT_RECONNECT_MIN, 2000);
  fx_set_ms(fx->cfg, RELOCK_OPT_RECONNECT_MAX, 2000);
  fx->client = fx_client(fx->cfg);
  relock_future_release(FX_CMD(fx->client, "PING"));
}

static void test_sigpipe_does_not_kill(void **state) {
  fx_t *fx = *state;
  struct sigaction old;
  client_with_default_sigpipe(fx, &old);
  assert_int_equal(relock_test_redis_kill9(fx->redis), 0);
  /* big writes into a socket whose peer is gone: EPIPE, which raises SIGPIPE */
  char *big = malloc(1 << 20);
  memset(big, 'x', 1 << 20);
  for (int i = 0; i < 5; i++) {
    const char *argv[] = {"SET", "big", big};
    const size_t lens[] = {3, 3, 1 << 20};
    relock_future_t *f = relock_client_command_async(fx->client, 3, argv, lens);
    relock_future_wait(f, 2000);
    assert_int_not_equal(relock_future_error(f), 0);
    relock_future_release(f);
  }
  free(big);
  sigaction(SIGPIPE, &old, NULL);
  sigset_t pending;
  sigpending(&pending);
  assert_false(sigismember(&pending, SIGPIPE)); /* consumed, not left behind */
}

/* The socket under the client's command connection. */
static redisContext *cmd_context(relock_client_t *c) { return &c->redis.cmd.ac->c; }

/* A PING over a connection whose own side was shut for writing, the server
 * paused so that no hang-up from it is read first: the client's send fails
 * with EPIPE, and so does hiredis's write after it, which raises SIGPIPE.
 * The command fails and the client reconnects. */
static void ping_after_shutdown(fx_t *fx) {
  relock_future_release(FX_CMD(fx->client, "PING"));
  assert_int_equal(relock_test_redis_pause(fx->redis), 0);
  assert_int_equal(shutdown(cmd_context(fx->client)->fd, SHUT_WR), 0);
  relock_future_t *f = FX_CMD(fx->client, "PING");
  assert_int_equal(relock_future_error(f), RELOCK_ECONNLOST);
  print_message("# %s\n", relock_future_message(f));
  relock_future_release(f);
  assert_int_equal(relock_test_redis_resume(fx->redis), 0);
  assert_true(fx_run_until(fx->client->loop, conn_ready, fx->client, fx_slack_ms(3000)));
  f = FX_CMD(fx->client, "PING");
  assert_string_equal(fx_ok(f)->str, "PONG");
  relock_future_release(f);
}

static void test_write_to_a_shut_socket_does_not_kill(void **state) {
  fx_t *fx = *state;
  struct sigaction dfl = {.sa_handler = SIG_DFL}, old;
  sigaction(SIGPIPE, &dfl, &old); /* a SIGPIPE let through ends the test */
  fx->client = fx_client(fx->cfg);
  ping_after_shutdown(fx);
  sigaction(SIGPIPE, &old, NULL);
  sigset_t pending;
  sigpending(&pending);
  assert_false(sigismember(&pending, SIGPIPE)); /* consumed, not left behind */
}

/* A program that blocks SIGPIPE and has one pending of its own keeps it. */
static void test_a_pending_sigpipe_is_kept(void **state) {
  fx_t *fx = *state;
  struct sigaction dfl = {.sa_handler = SIG_DFL}, old;
  sigaction(SIGPIPE, &dfl, &old);
  sigset_t pipe_set, old_set, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  assert_int_equal(pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set), 0);
  assert_int_equal(pthread_kill(pthread_self(), SIGPIPE), 0);
  fx->client = fx_client(fx->cfg);
  ping_after_shutdown(fx);
  sigpending(&pending);
  assert_true(sigismember(&pending, SIGPIPE));
  static const struct timespec zero = {0, 0};
  assert_int_equal(sigtimedwait(&pipe_set, NULL, &zero), SIGPIPE);
  pthread_sigmask(SIG_SETMASK, &old_set, NULL);
  sigaction(SIGPIPE, &old, NULL);
}

typedef struct {
  redisContext *ctx;
  size_t full;
} sending_t;

/* Part of the command is on its way and the rest waits in hiredis's output
 * buffer: the socket took what it could. */
static int sending(void *arg) {
  sending_t *s = arg;
  size_t left = sdslen(s->ctx->obuf);
  return left > 0 && left < s->full;
}

/* The server goes while a command too big for the socket's buffers is
 * being sent: the next send meets the reset, the process lives on. */
static void test_peer_gone_while_sending_does_not_kill(void **state) {
  fx_t *fx = *state;
  struct sigaction old;
  client_with_default_sigpipe(fx, &old);
  assert_int_equal(relock_test_redis_pause(fx->redis), 0); /* it reads nothing more */
  enum { BIG = 32 << 20 };
  char *big = malloc(BIG);
  assert_non_null(big);
  memset(big, 'x', BIG);
  const char *argv[] = {"SET", "big", big};
  const size_t lens[] = {3, 3, BIG};
  relock_future_t *f = relock_client_command_async(fx->client, 3, argv, lens);
  sending_t s = {cmd_context(fx->client), BIG};
  assert_true(fx_run_until(fx->client->loop, sending, &s, fx_slack_ms(5000)));
  assert_int_equal(relock_test_redis_kill9(fx->redis), 0);
  assert_int_equal(relock_future_wait(f, fx_slack_ms(5000)), RELOCK_ECONNLOST);
  print_message("# %s\n", relock_future_message(f));
  relock_future_release(f);
  free(big);
  sigaction(SIGPIPE, &old, NULL);
  sigset_t pending;
  sigpending(&pending);
  assert_false(sigismember(&pending, SIGPIPE));
}

/* -- network faults through the proxy ---------------------------------------*/

static void test_network_cut(void **state) {
  fx_t *fx = *state;
  relock_test_proxy_t *proxy = relock_test_proxy_start(relock_test_redis_host(fx->redis),
                                                       relock_test_redis_port(fx->redis));
  assert_non_null(proxy);
  fx_set_int(fx->cfg, RELOCK_OPT_PORT, relock_test_proxy_port(proxy));
  fx->client = fx_client(fx->cfg);
  relock_future_release(FX_CMD(fx->client, "PING"));
  relock_future_t *f = relock_client_command_async(fx->client, 3, (const char *const[]){"DEBUG", "SLEEP", "0.2"},
                                                   NULL);
  ev_run(fx->client->loop, EVRUN_NOWAIT);
  relock_test_proxy_cut(proxy);
  assert_int_equal(relock_future_wait(f, 5000), RELOCK_ECONNLOST);
  relock_future_release(f);
  f = FX_CMD(fx->client, "PING"); /* reconnects through the proxy */
  assert_string_equal(fx_ok(f)->str, "PONG");
  relock_future_release(f);
  relock_client_free(fx->client);
  fx->client = NULL;
  relock_test_proxy_stop(proxy);
}

static void test_network_stall(void **state) {
  fx_t *fx = *state;
  relock_test_proxy_t *proxy = relock_test_proxy_start(relock_test_redis_host(fx->redis),
                                                       relock_test_redis_port(fx->redis));
  assert_non_null(proxy);
  fx_set_int(fx->cfg, RELOCK_OPT_PORT, relock_test_proxy_port(proxy));
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, 200);
  fx->client = fx_client(fx->cfg);
  relock_future_release(FX_CMD(fx->client, "PING"));
  relock_test_proxy_stall(proxy, 1);
  uint64_t t0 = relock__now_ns();
  relock_future_t *f = FX_CMD(fx->client, "PING");
  assert_int_equal(relock_future_error(f), RELOCK_ETIMEDOUT);
  assert_true(fx_ms_since(t0) >= 199.0);
  relock_future_release(f);
  relock_test_proxy_stall(proxy, 0);
  f = FX_CMD(fx->client, "PING");
  assert_string_equal(fx_ok(f)->str, "PONG");
  relock_future_release(f);
  relock_client_free(fx->client);
  fx->client = NULL;
  relock_test_proxy_stop(proxy);
}

static void test_connect_timeout(void **state) {
  fx_t *fx = *state;
  relock_test_proxy_t *proxy = relock_test_proxy_start(relock_test_redis_host(fx->redis),
                                                       relock_test_redis_port(fx->redis));
  assert_non_null(proxy);
  relock_test_proxy_stall(proxy, 1); /* the TCP connect succeeds, the handshake never answers */
  fx_set_int(fx->cfg, RELOCK_OPT_PORT, relock_test_proxy_port(proxy));
  fx_set_str(fx->cfg, RELOCK_OPT_CLIENT_NAME, "needs-a-handshake");
  fx_set_ms(fx->cfg, RELOCK_OPT_CONNECT_TIMEOUT, 150);
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, 600);
  fx->client = fx_client(fx->cfg);
  relock_future_t *f = relock_client_command_async(fx->client, 1, (const char *const[]){"PING"}, NULL);
  assert_int_equal(relock_future_wait(f, 5000), RELOCK_ETIMEDOUT);
  assert_non_null(strstr(relock_future_message(f), "no connection"));
  relock_future_release(f);
  relock_client_free(fx->client);
  fx->client = NULL;
  relock_test_proxy_stop(proxy);
}

/* -- scripts ----------------------------------------------------------------*/

static relock_future_t *renew_script(relock_client_t *c) {
  relock_future_t *f = relock__future_new(c->exec);
  const char *argv[] = {"no-such-lock", "30000", "-", "nobody:1"};
  const size_t lens[] = {12, 5, 1, 8};
  relock__request_t *req =
      relock__request_script(relock_future_retain(f), &relock__scripts[RELOCK__SCRIPT_LOCK_RENEW], 1, 4, argv, lens);
  assert_non_null(req);
  relock__conn_send(&c->redis.cmd, req, 5000);
  assert_int_equal(relock_future_wait(f, 5000), 0);
  return f;
}

static void test_noscript_is_transparent(void **state) {
  fx_t *fx = *state;
  fx->client = fx_client(fx->cfg);
  const relock__script_t *s = &relock__scripts[RELOCK__SCRIPT_LOCK_RENEW];
  relock_future_t *f = renew_script(fx->client); /* first run: NOSCRIPT, then EVAL */
  const relock_reply_t *r = fx_ok(f);
  assert_int_equal(r->type, RELOCK_REPLY_ARRAY);
  assert_int_equal(r->elements, 1);
  assert_int_equal(r->element[0]->integer, 0);
  relock_future_release(f);

  /* the script is cached under the SHA we embedded */
  char reply[128];
  assert_int_equal(relock_test_redis_cmd(fx->redis, reply, sizeof reply, "SCRIPT", "EXISTS", s->sha, NULL), 0);
  assert_string_equal(reply, "*1\r\n:1\r\n");
  long long evalsha_before = 0;
  f = FX_CMD(fx->client, "INFO", "commandstats");
  const char *stats = strstr(fx_ok(f)->str, "cmdstat_evalsha:calls=");
  assert_non_null(stats);
  evalsha_before = atoll(stats + strlen("cmdstat_evalsha:calls="));
  relock_future_release(f);

  relock_future_release(renew_script(fx->client)); /* plain EVALSHA now */
  assert_int_equal(relock_test_redis_cmd(fx->redis, reply, sizeof reply, "SCRIPT", "FLUSH", NULL), 0);
  relock_future_release(renew_script(fx->client)); /* NOSCRIPT again: loaded again */
  assert_int_equal(relock_test_redis_cmd(fx->redis, reply, sizeof reply, "SCRIPT", "EXISTS", s->sha, NULL), 0);
  assert_string_equal(reply, "*1\r\n:1\r\n");
  f = FX_CMD(fx->client, "INFO", "commandstats");
  stats = strstr(fx_ok(f)->str, "cmdstat_evalsha:calls=");
  assert_int_equal(atoll(stats + strlen("cmdstat_evalsha:calls=")), evalsha_before + 2);
  relock_future_release(f);
}

/* -- pipelining -------------------------------------------------------------*/

typedef struct {
  long long expect;
  int out_of_order;
  int done;
} order_t;

static void check_order(relock_future_t *f, void *arg) {
  order_t *o = arg;
  const relock_reply_t *r = relock_future_reply(f);
  if (r == NULL || r->integer != ++o->expect)
    o->out_of_order++;
  o->done++;
}

static int order_done(void *arg) { return ((order_t *)arg)->done == 10000; }

static void test_pipelining_keeps_order(void **state) {
  fx_t *fx = *state;
  fx->client = fx_client(fx->cfg);
  order_t o = {0, 0, 0};
  for (int i = 0; i < 10000; i++) {
    relock_future_t *f = relock_client_command_async(fx->client, 2, (const char *const[]){"INCR", "seq"}, NULL);
    relock_future_on_done(f, check_order, &o);
    relock_future_release(f);
  }
  assert_true(fx_run_until(fx->client->loop, order_done, &o, 20000));
  assert_int_equal(o.out_of_order, 0);
  assert_int_equal(o.expect, 10000);
}

/* -- retries of calls that are safe to repeat --------------------------------*/

typedef struct {
  ev_timer timer;
  relock_test_redis_t *redis;
} resumer_t;

static void resume_server(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  resumer_t *r = w->data;
  relock_test_redis_resume(r->redis);
}

/* The key is written by the raw helper, and the client's connection is
 * waited for, not made ready by a command of its own: with a command
 * timeout of 100 ms such a command can time out under load ("not sent:
 * still connecting"), and then GET found no key (a nil reply, whose NULL
 * str crashed assert_string_equal). */
static void retry_through_a_stall(fx_t *fx, int retry_safe) {
  assert_int_equal(relock_test_redis_cmd(fx->redis, NULL, 0, "SET", "k", "v", NULL), 0);
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, 100);
  fx_set_int(fx->cfg, RELOCK_OPT_RETRY_ATTEMPTS, 4);
  fx_set_ms(fx->cfg, RELOCK_OPT_RETRY_INTERVAL, 50);
  fx->client = fx_client(fx->cfg);
  assert_true(fx_run_until(fx->client->loop, conn_ready, fx->client, 5000));
  assert_int_equal(relock_test_redis_pause(fx->redis), 0);
  resumer_t r = {.redis = fx->redis};
  ev_timer_init(&r.timer, resume_server, 0.2, 0.0); /* after the first attempt timed out */
  r.timer.data = &r;
  ev_timer_start(fx->client->loop, &r.timer);
  relock_future_t *f = get_call(fx->client, retry_safe);
  int err = relock_future_wait(f, 5000);
  ev_timer_stop(fx->client->loop, &r.timer);
  relock_test_redis_resume(fx->redis);
  if (retry_safe) {
    assert_int_equal(err, 0);
    const relock_reply_t *reply = fx_ok(f);
    assert_int_equal(reply->type, RELOCK_REPLY_STRING);
    assert_string_equal(reply->str, "v");
  } else {
    assert_int_equal(err, RELOCK_ETIMEDOUT); /* never sent twice */
  }
  relock_future_release(f);
}

static void test_safe_call_is_retried(void **state) { retry_through_a_stall(*state, 1); }

static void test_unsafe_call_is_not_retried(void **state) { retry_through_a_stall(*state, 0); }

static void test_retries_run_out(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, 50);
  fx_set_int(fx->cfg, RELOCK_OPT_RETRY_ATTEMPTS, 2);
  fx_set_ms(fx->cfg, RELOCK_OPT_RETRY_INTERVAL, 20);
  fx->client = fx_client(fx->cfg);
  relock_future_release(FX_CMD(fx->client, "PING"));
  assert_int_equal(relock_test_redis_pause(fx->redis), 0);
  uint64_t t0 = relock__now_ns();
  relock_future_t *f = get_call(fx->client, 1);
  assert_int_equal(relock_future_wait(f, 5000), RELOCK_ETIMEDOUT);
  assert_true(fx_ms_since(t0) >= 3 * 50 + 2 * 10 - 1); /* three attempts, two back-offs */
  relock_future_release(f);
  relock_test_redis_resume(fx->redis);
}

static void test_cancel_between_retries(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, 30);
  fx_set_int(fx->cfg, RELOCK_OPT_RETRY_ATTEMPTS, 100);
  fx_set_ms(fx->cfg, RELOCK_OPT_RETRY_INTERVAL, 1000);
  fx->client = fx_client(fx->cfg);
  relock_future_release(FX_CMD(fx->client, "PING"));
  assert_int_equal(relock_test_redis_pause(fx->redis), 0);
  relock_future_t *f = get_call(fx->client, 1);
  assert_int_equal(relock_future_wait(f, 200), RELOCK_EPENDING); /* now backing off */
  assert_int_equal(relock_future_cancel(f), 1);
  assert_int_equal(relock_future_error(f), RELOCK_ECANCELED);
  relock_future_release(f);
  /* and during an attempt */
  f = get_call(fx->client, 1);
  assert_int_equal(relock_future_cancel(f), 1);
  relock_future_release(f);
  relock_test_redis_resume(fx->redis);
}

/* -- closing ----------------------------------------------------------------*/

static void count_close(relock_client_t *c, void *arg) {
  (void)c;
  (*(int *)arg)++;
}

static int positive(void *arg) { return *(int *)arg > 0; }

static void test_close_while_connecting(void **state) {
  fx_t *fx = *state;
  fx->client = fx_client(fx->cfg);
  int closed = 0;
  relock_future_t *f = relock_client_command_async(fx->client, 1, (const char *const[]){"PING"}, NULL);
  assert_int_equal(relock_client_close(fx->client, count_close, &closed), 0);
  assert_int_equal(closed, 0); /* never from inside close */
  assert_int_equal(relock_future_error(f), RELOCK_ECLOSED);
  assert_int_equal(relock_client_close(fx->client, count_close, &closed), RELOCK_ECLOSED);
  assert_true(fx_run_until(fx->client->loop, positive, &closed, 2000));
  assert_int_equal(closed, 1);
  relock_future_release(f);
  f = relock_client_command_async(fx->client, 1, (const char *const[]){"PING"}, NULL);
  assert_int_equal(relock_future_error(f), RELOCK_ECLOSED);
  relock_future_release(f);
}

static void test_close_with_commands_pending(void **state) {
  fx_t *fx = *state;
  fx->client = fx_client(fx->cfg);
  relock_future_release(FX_CMD(fx->client, "PING"));
  tally_t t = {0};
  for (int i = 0; i < 100; i++) {
    relock_future_t *f = relock_client_command_async(fx->client, 3, (const char *const[]){"DEBUG", "SLEEP", "0"},
                                                     NULL);
    relock_future_on_done(f, tally, &t);
    relock_future_release(f);
  }
  ev_run(fx->client->loop, EVRUN_NOWAIT);
  int closed = 0;
  relock_client_close(fx->client, count_close, &closed);
  assert_int_equal(t.calls, 100); /* everything completed, at once */
  assert_int_equal(t.succeeded + t.other, 100);
  assert_true(fx_run_until(fx->client->loop, positive, &closed, 2000));
}

typedef struct {
  relock_client_t *client;
  int closed;
  int rc;
} closer_t;

static void close_from_callback(relock_future_t *f, void *arg) {
  (void)f;
  closer_t *c = arg;
  c->rc = relock_client_close(c->client, count_close, &c->closed);
}

static void test_close_from_inside_a_callback(void **state) {
  fx_t *fx = *state;
  fx->client = fx_client(fx->cfg);
  closer_t closer = {fx->client, 0, -99};
  relock_future_t *first = relock_client_command_async(fx->client, 1, (const char *const[]){"PING"}, NULL);
  relock_future_t *second = relock_client_command_async(fx->client, 1, (const char *const[]){"PING"}, NULL);
  relock_future_on_done(first, close_from_callback, &closer);
  assert_int_equal(relock_future_wait(second, 5000), RELOCK_ECLOSED);
  assert_int_equal(closer.rc, 0);
  assert_int_equal(relock_future_error(first), 0);
  assert_true(fx_run_until(fx->client->loop, positive, &closer.closed, 2000));
  relock_future_release(first);
  relock_future_release(second);
}

static void free_in_close_cb(relock_client_t *c, void *arg) {
  (*(int *)arg)++;
  relock_client_free(c);
}

static void test_free_from_close_callback(void **state) {
  fx_t *fx = *state;
  struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
  relock_error_t err;
  relock_client_t *c = relock_client_new(loop, fx->cfg, &err); /* on the caller's loop */
  assert_non_null(c);
  assert_ptr_equal(relock_client_loop(c), loop);
  relock_future_t *f = relock_client_command_async(c, 1, (const char *const[]){"PING"}, NULL);
  assert_int_equal(relock_future_wait(f, 5000), 0);
  relock_future_release(f);
  int closed = 0;
  relock_client_close(c, free_in_close_cb, &closed);
  ev_run(loop, 0); /* returns when nothing is left: the client is gone */
  assert_int_equal(closed, 1);
  ev_loop_destroy(loop);
}

/* A command sent from the failure callback of one in flight when the
 * server drops the connection: hiredis fails its callbacks while the
 * context takes no new command, so this one fails at once - and must be
 * counted out of the waiting ones once. It was counted out twice (the
 * count wrapped below zero): afterwards a lone command waited unsent for
 * its timeout, and a close waited for ever for the waiting ones to drain
 * (the truth checker's worker that did not wind down). */
typedef struct {
  relock_client_t *client;
  relock_future_t *sent;
} resender_t;

static void send_on_failure(relock_future_t *f, void *arg) {
  resender_t *r = arg;
  if (relock_future_error(f) != 0 && r->sent == NULL)
    r->sent = relock_client_command_async(r->client, 1, (const char *const[]){"PING"}, NULL);
}

static int reconnected(void *arg) {
  relock_client_t *c = arg;
  return c->redis.cmd.state == RELOCK__CONN_READY && c->redis.cmd.connects >= 2;
}

static void test_command_sent_while_the_connection_drops(void **state) {
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(3000));
  /* not the fixture's: a failure here would leave teardown's free waiting
   * for ever for the close; the client is freed here, once it closed */
  relock_client_t *c = fx_client(fx->cfg);
  relock_future_release(FX_CMD(c, "PING"));
  assert_int_equal(c->redis.cmd.connects, 1);
  resender_t r = {c, NULL};
  relock_future_t *f = relock_client_command_async(c, 3, (const char *const[]){"BLPOP", "nothing", "0"}, NULL);
  relock_future_on_done(f, send_on_failure, &r);
  fx_run_for(c->loop, 100); /* on the wire, blocked in the server */
  kill_clients(fx);
  assert_int_equal(relock_future_wait(f, 2000), RELOCK_ECONNLOST);
  assert_non_null(r.sent); /* sent from inside hiredis's teardown */
  assert_int_not_equal(relock_future_wait(r.sent, 5000), RELOCK_ETIMEDOUT);
  relock_future_release(r.sent);
  relock_future_release(f);
  assert_true(fx_run_until(c->loop, reconnected, c, 5000));
  assert_int_equal(c->redis.cmd.nwaiting, 0);
  /* a lone command goes at once, not at its timeout */
  uint64_t t0 = relock__now_ns();
  f = FX_CMD(c, "PING");
  assert_string_equal(fx_ok(f)->str, "PONG");
  assert_true(fx_ms_since(t0) < 1500.0);
  relock_future_release(f);
  /* and a close ends */
  int closed = 0;
  assert_int_equal(relock_client_close(c, count_close, &closed), 0);
  assert_true(fx_run_until(c->loop, positive, &closed, 2000));
  relock_client_free(c);
}

static void test_client_id_and_config_errors(void **state) {
  fx_t *fx = *state;
  fx->client = fx_client(fx->cfg);
  const char *id = relock_client_id(fx->client);
  assert_int_equal(strlen(id), 36);
  assert_int_equal(id[14], '4');
  relock_client_t *other = fx_client(fx->cfg);
  assert_string_not_equal(relock_client_id(other), id);
  relock_client_free(other);

  /* A bad value is refused when it is set; a bad combination by
   * relock_client_new. */
  relock_error_t err;
  relock_options_t *bad = fx_copy(fx->cfg);
  assert_int_equal(relock_options_set_ms(bad, RELOCK_OPT_COMMAND_TIMEOUT, 0, &err), RELOCK_EINVAL);
  assert_int_equal(err.code, RELOCK_EINVAL);
  assert_true(strlen(err.message) > 0);
  assert_int_equal(relock_options_set_string(bad, RELOCK_OPT_CLIENT_ID, "has:colon", NULL), RELOCK_EINVAL);
  fx_set_str(bad, RELOCK_OPT_USERNAME, "user-without-password");
  assert_null(relock_client_new(NULL, bad, &err));
  assert_int_equal(err.code, RELOCK_EINVAL);
  assert_non_null(strstr(err.message, "username without password"));
  assert_null(relock_client_new(NULL, bad, NULL));
  relock_options_free(bad);

  /* No options: every default (it connects in the background, or not). */
  relock_client_t *dflt = relock_client_new(NULL, NULL, &err);
  assert_non_null(dflt);
  assert_int_equal(err.code, 0);
  relock_client_free(dflt);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_command_replies),
      T(test_server_error_is_carried),
      T(test_printf_style_command),
      T(test_handshake_select_and_name),
      T(test_handshake_password),
      T(test_handshake_acl_user),
      T(test_connection_refused_is_clear),
      T(test_password_in_url_never_in_messages),
      T(test_blocking_calls_fail_fast_when_refused),
      T(test_refused_then_server_starts),
      T(test_refused_after_connecting_waits),
      T(test_commands_wait_for_the_connection),
      T(test_timeout_under_debug_sleep),
      T(test_timeout_under_sigstop),
      T(test_client_kill_with_commands_in_flight),
      T(test_restart_with_commands_in_flight),
      T(test_sigpipe_does_not_kill),
      T(test_write_to_a_shut_socket_does_not_kill),
      T(test_a_pending_sigpipe_is_kept),
      T(test_peer_gone_while_sending_does_not_kill),
      T(test_network_cut),
      T(test_network_stall),
      T(test_connect_timeout),
      T(test_noscript_is_transparent),
      T(test_pipelining_keeps_order),
      T(test_safe_call_is_retried),
      T(test_unsafe_call_is_not_retried),
      T(test_retries_run_out),
      T(test_cancel_between_retries),
      T(test_close_while_connecting),
      T(test_close_with_commands_pending),
      T(test_close_from_inside_a_callback),
      T(test_free_from_close_callback),
      T(test_command_sent_while_the_connection_drops),
      T(test_client_id_and_config_errors),
  };
#undef T
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found: install the Debian package redis-server");
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("client", tests, NULL, NULL);
}
