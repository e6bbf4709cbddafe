/* TLS (rediss://) against a real redis-server with --tls-port, with
 * certificates made for the run by tests/support/tls.sh: locking and
 * waiting over TLS, mutual TLS, every refusal of the server's certificate
 * (unknown CA, another name, expired) as RELOCK_ETLS naming the reason,
 * plaintext and TLS mixed up, a restart, a write to a dead TLS socket.
 *
 * A build without TLS (hiredis 0.14) runs the other half: every way of
 * asking for TLS is refused with the "no TLS support" message. */
#include <config.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support/client_fixture.h"

#ifdef RELOCK_HAVE_TLS
#include <hiredis/hiredis.h> /* the command connection's socket, to break it */
#endif

#define NO_TLS "this build has no TLS support"

/* -- a build without TLS -------------------------------------------------------*/

static void expect_no_tls(int rc, const relock_error_t *err) {
  assert_int_equal(rc, RELOCK_ETLS);
  assert_int_equal(err->code, RELOCK_ETLS);
  if (strstr(err->message, NO_TLS) == NULL || strstr(err->message, "hiredis >= 1.0 with hiredis_ssl") == NULL)
    fail_msg("message \"%s\" does not say the build has no TLS", err->message);
}

static void test_no_tls_refused(void **state) {
  (void)state;
  relock_error_t err;
  relock_options_t *opts = relock_options_new(NULL);
  assert_int_equal(relock_tls_available(), 0);
  expect_no_tls(relock_options_set_url(opts, "rediss://:hunter2@127.0.0.1:6379", &err), &err);
  assert_null(strstr(err.message, "hunter2"));
  expect_no_tls(relock_options_set_int(opts, RELOCK_OPT_TLS, 1, &err), &err);
  expect_no_tls(relock_options_set(opts, RELOCK_OPT_TLS_CA_FILE, "/etc/ssl/ca.pem", &err), &err);
  expect_no_tls(relock_options_set_string(opts, RELOCK_OPT_TLS_CERT, "c.pem", &err), &err);
  expect_no_tls(relock_options_set_int(opts, RELOCK_OPT_TLS_INSECURE_SKIP_VERIFY, 1, &err), &err);
  /* "no TLS" itself is accepted: code that sets every option keeps working */
  assert_int_equal(relock_options_set_int(opts, RELOCK_OPT_TLS, 0, &err), 0);
  assert_int_equal(relock_options_set_string(opts, RELOCK_OPT_TLS_CA_FILE, NULL, &err), 0);
  assert_int_equal(relock_options_set_url(opts, "redis://127.0.0.1:6379", &err), 0);
  relock_options_free(opts);
}

#ifdef RELOCK_HAVE_TLS

static char certs[128]; /* made once by tls.sh */

static const char *cert(const char *name) {
  static char paths[8][192];
  static int next;
  char *p = paths[next++ % 8];
  snprintf(p, sizeof paths[0], "%s/%s", certs, name);
  return p;
}

/* A server whose port speaks TLS, with server.crt unless extra says else. */
static relock_test_redis_t *tls_server(const char *const *extra, int aof) {
  relock_test_redis_opts_t o = {.tls_dir = certs, .extra_args = extra, .aof = aof};
  relock_test_redis_t *r = relock_test_redis_start(&o);
  assert_non_null(r);
  return r;
}

/* Options for r over TLS, trusting ca (a file in certs). */
static relock_options_t *tls_options(const relock_test_redis_t *r, const char *ca) {
  relock_options_t *opts = fx_options(r, 0);
  char url[64];
  snprintf(url, sizeof url, "rediss://%s:%d", relock_test_redis_host(r), relock_test_redis_port(r));
  relock_error_t err;
  if (relock_options_set_url(opts, url, &err) != 0)
    fail_msg("%s: %s", url, err.message);
  if (ca != NULL)
    fx_set_str(opts, RELOCK_OPT_TLS_CA_FILE, cert(ca));
  fx_set_ms(opts, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(5000));
  fx_set_ms(opts, RELOCK_OPT_CONNECT_TIMEOUT, fx_slack_ms(3000));
  return opts;
}

static void expect_ok(relock_client_t *c) {
  relock_future_t *f = FX_CMD(c, "SET", "tls-key", "v");
  fx_ok(f);
  relock_future_release(f);
}

/* Whether msg contains one of the phrases in alternatives ("a|b"). */
static int names(const char *msg, const char *alternatives) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", alternatives);
  for (char *save = NULL, *p = strtok_r(buf, "|", &save); p != NULL; p = strtok_r(NULL, "|", &save))
    if (strstr(msg, p) != NULL)
      return 1;
  return 0;
}

/* A client on opts whose first command fails with code, its message naming
 * phrase (or one of "a|b"); returns the ms it took. */
static double expect_failure(const relock_options_t *opts, int code, const char *phrase) {
  relock_client_t *c = fx_client(opts);
  uint64_t t0 = relock__now_ns();
  relock_future_t *f = FX_CMD(c, "PING");
  double ms = fx_ms_since(t0);
  int err = relock_future_error(f);
  if (err != code || !names(relock_future_message(f), phrase))
    fail_msg("got %s \"%s\", wanted %s naming \"%s\"", relock_err_name(err), relock_future_message(f),
             relock_err_name(code), phrase);
  print_message("# %s: %s (%.0f ms)\n", relock_err_name(err), relock_future_message(f), ms);
  relock_future_release(f);
  relock_client_free(c);
  return ms;
}

static void expect_tls_failure(const relock_options_t *opts, const char *phrase) {
  double ms = expect_failure(opts, RELOCK_ETLS, phrase);
  assert_true(ms < (double)fx_slack_ms(1500)); /* fails fast: not the 3 s connect timeout */
}

static int64_t value_of(relock_future_t *f) {
  assert_non_null(f);
  int r = relock_future_wait(f, fx_slack_ms(10000));
  if (r != 0)
    fail_msg("operation failed: %s (%s)", relock_future_message(f), relock_err_name(r));
  int64_t v = relock_future_bool(f);
  relock_future_release(f);
  return v;
}

/* -- options -------------------------------------------------------------------*/

static void test_options(void **state) {
  (void)state;
  relock_error_t err;
  relock_options_t *opts = relock_options_new(NULL);
  int tls = -1;
  assert_int_equal(relock_tls_available(), 1);
  assert_int_equal(relock_options_set_url(opts, "rediss://cache.example:6380/1", &err), 0);
  assert_int_equal(relock_options_get_int(opts, RELOCK_OPT_TLS, &tls, NULL), 0);
  assert_int_equal(tls, 1);
  assert_int_equal(relock_options_set_url(opts, "redis://cache.example", &err), 0);
  assert_int_equal(relock_options_get_int(opts, RELOCK_OPT_TLS, &tls, NULL), 0);
  assert_int_equal(tls, 0);
  assert_int_equal(relock_options_set(opts, RELOCK_OPT_TLS, "2", &err), RELOCK_EINVAL);
  assert_int_equal(relock_options_set_string(opts, RELOCK_OPT_TLS_SERVER_NAME, "", &err), RELOCK_EINVAL);
  /* a certificate needs its key */
  assert_int_equal(relock_options_set_string(opts, RELOCK_OPT_TLS_CERT, "client.crt", &err), 0);
  assert_int_equal(relock_options_validate(opts, &err), RELOCK_EINVAL);
  assert_non_null(strstr(err.message, "tls-cert without tls-key"));
  assert_int_equal(relock_options_set_string(opts, RELOCK_OPT_TLS_CERT, NULL, &err), 0);
  /* no TLS over a unix socket */
  assert_int_equal(relock_options_set_int(opts, RELOCK_OPT_TLS, 1, &err), 0);
  assert_int_equal(relock_options_set_string(opts, RELOCK_OPT_UNIX_PATH, "/tmp/redis.sock", &err), 0);
  assert_int_equal(relock_options_validate(opts, &err), RELOCK_EINVAL);
  assert_non_null(strstr(err.message, "Unix socket"));
  /* files are loaded when the client is made */
  assert_int_equal(relock_options_set_string(opts, RELOCK_OPT_UNIX_PATH, NULL, &err), 0);
  assert_int_equal(relock_options_set_string(opts, RELOCK_OPT_TLS_CA_FILE, "/nonexistent/ca.crt", &err), 0);
  assert_null(relock_client_new(fx_loop(), opts, &err));
  assert_int_equal(err.code, RELOCK_ETLS);
  assert_non_null(strstr(err.message, "cannot load the CA file /nonexistent/ca.crt"));
  assert_int_equal(relock_options_set_string(opts, RELOCK_OPT_TLS_CA_FILE, cert("ca.crt"), &err), 0);
  assert_int_equal(relock_options_set_string(opts, RELOCK_OPT_TLS_CERT, cert("client.crt"), &err), 0);
  assert_int_equal(relock_options_set_string(opts, RELOCK_OPT_TLS_KEY, cert("server.key"), &err), 0);
  assert_null(relock_client_new(fx_loop(), opts, &err));
  assert_int_equal(err.code, RELOCK_ETLS);
  if (strstr(err.message, "the client key") == NULL)
    fail_msg("message \"%s\" does not name the client key", err.message);
  relock_options_free(opts);
}

/* -- working TLS ---------------------------------------------------------------*/

static void test_lock_unlock(void **state) {
  (void)state;
  relock_test_redis_t *r = tls_server(NULL, 0);
  relock_options_t *opts = tls_options(r, "ca.crt");
  relock_client_t *c = fx_client(opts);
  relock_lock_t *l = relock_lock_new(c, "tls-lock", NULL);
  assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE)), 1);
  assert_int_equal(fx_raw_int(r, "EXISTS", "tls-lock", NULL), 1);
  assert_int_equal(value_of(relock_lock_unlock_async(l, 1)), 1);
  assert_int_equal(fx_raw_int(r, "EXISTS", "tls-lock", NULL), 0);
  /* by name: SNI "localhost", checked against the certificate's DNS name */
  relock_options_t *named = fx_copy(opts);
  fx_set_str(named, RELOCK_OPT_HOST, "localhost");
  relock_client_t *c2 = fx_client(named);
  expect_ok(c2);
  relock_client_free(c2);
  relock_lock_free(l);
  relock_client_free(c);
  relock_options_free(named);
  relock_options_free(opts);
  relock_test_redis_free(r);
}

/* A client with its own loop thread, through the blocking API. */
static void test_threaded_client(void **state) {
  (void)state;
  relock_test_redis_t *r = tls_server(NULL, 0);
  relock_options_t *opts = tls_options(r, "ca.crt");
  relock_error_t err;
  relock_client_t *c = relock_client_new(NULL, opts, &err);
  if (c == NULL)
    fail_msg("relock_client_new: %s", err.message);
  relock_lock_t *l = relock_lock_new(c, "tls-threaded", NULL);
  assert_int_equal(relock_lock_lock(l, RELOCK_INFINITE), 0);
  assert_int_equal(fx_raw_int(r, "EXISTS", "tls-threaded", NULL), 1);
  assert_int_equal(relock_lock_unlock(l), 0);
  assert_int_equal(fx_raw_int(r, "EXISTS", "tls-threaded", NULL), 0);
  relock_lock_free(l);
  relock_client_free(c);
  relock_options_free(opts);
  relock_test_redis_free(r);
}

/* The second owner waits over the subscriber connection (TLS too) and is
 * woken by the first one's unlock, long before the 30 s lease would end. */
static void test_waiting(void **state) {
  (void)state;
  relock_test_redis_t *r = tls_server(NULL, 0);
  relock_options_t *opts = tls_options(r, "ca.crt");
  relock_client_t *a = fx_client(opts), *b = fx_client(opts);
  relock_lock_t *la = relock_lock_new(a, "tls-wait", NULL), *lb = relock_lock_new(b, "tls-wait", NULL);
  assert_int_equal(value_of(relock_lock_lock_async(la, 1, 0, RELOCK_INFINITE)), 1);
  relock_future_t *waiting = relock_lock_lock_async(lb, 2, fx_slack_ms(20000), RELOCK_INFINITE);
  /* b is subscribed once the server counts a subscriber on the channel */
  char reply[256];
  for (int i = 0; i < 200; i++) {
    ev_run(fx_loop(), EVRUN_NOWAIT);
    assert_int_equal(relock_test_redis_cmd(r, reply, sizeof reply, "PUBSUB", "NUMSUB",
                                           "redisson_lock__channel:{tls-wait}", NULL), 0);
    if (strstr(reply, ":1\r\n") != NULL)
      break;
    usleep(10000);
  }
  assert_non_null(strstr(reply, ":1\r\n"));
  assert_int_equal(relock_future_state(waiting), RELOCK_FUTURE_PENDING);
  uint64_t t0 = relock__now_ns();
  assert_int_equal(value_of(relock_lock_unlock_async(la, 1)), 1);
  assert_int_equal(value_of(waiting), 1);
  assert_true(fx_ms_since(t0) < (double)fx_slack_ms(2000));
  assert_int_equal(value_of(relock_lock_unlock_async(lb, 2)), 1);
  relock_lock_free(la);
  relock_lock_free(lb);
  relock_client_free(a);
  relock_client_free(b);
  relock_options_free(opts);
  relock_test_redis_free(r);
}

static void test_mutual_tls(void **state) {
  (void)state;
  const char *extra[] = {"--tls-auth-clients", "yes", NULL};
  relock_test_redis_t *r = tls_server(extra, 0);
  relock_options_t *opts = tls_options(r, "ca.crt");
  expect_tls_failure(opts, "certificate required");
  fx_set_str(opts, RELOCK_OPT_TLS_CERT, cert("client.crt"));
  fx_set_str(opts, RELOCK_OPT_TLS_KEY, cert("client.key"));
  relock_client_t *c = fx_client(opts);
  expect_ok(c);
  relock_client_free(c);
  relock_options_free(opts);
  relock_test_redis_free(r);
}

/* -- the server's certificate refused ------------------------------------------*/

static void test_unknown_ca(void **state) {
  (void)state;
  relock_test_redis_t *r = tls_server(NULL, 0);
  relock_options_t *opts = tls_options(r, "other-ca.crt");
  /* Redis sends its CA along when it has it: then the chain ends in a root
   * that is not trusted, else the issuer is not found at all. */
  static const char unknown_ca[] = "self-signed certificate in certificate chain|unable to get local issuer certificate";
  expect_tls_failure(opts, unknown_ca);
  /* nor is it in the system's store */
  fx_set_str(opts, RELOCK_OPT_TLS_CA_FILE, NULL);
  expect_tls_failure(opts, unknown_ca);
  /* a CA directory instead of the file: not hashed, so nothing found in it */
  relock_options_t *dir = tls_options(r, NULL);
  fx_set_str(dir, RELOCK_OPT_TLS_CA_DIR, certs);
  expect_tls_failure(dir, unknown_ca);
  relock_options_free(dir);
  relock_options_free(opts);
  relock_test_redis_free(r);
}

static void test_name_mismatch(void **state) {
  (void)state;
  char crt[192], key[192];
  snprintf(crt, sizeof crt, "%s", cert("other.crt"));
  snprintf(key, sizeof key, "%s", cert("other.key"));
  const char *extra[] = {"--tls-cert-file", crt, "--tls-key-file", key, NULL};
  relock_test_redis_t *r = tls_server(extra, 0);
  relock_options_t *opts = tls_options(r, "ca.crt");
  expect_tls_failure(opts, "IP address mismatch"); /* 127.0.0.1 */
  fx_set_str(opts, RELOCK_OPT_HOST, "localhost");
  expect_tls_failure(opts, "hostname mismatch");
  /* the name the certificate does have, given as the server name */
  fx_set_str(opts, RELOCK_OPT_TLS_SERVER_NAME, "other.example");
  relock_client_t *c = fx_client(opts);
  expect_ok(c);
  relock_client_free(c);
  relock_options_free(opts);
  relock_test_redis_free(r);
}

static void test_expired(void **state) {
  (void)state;
  char crt[192], key[192];
  snprintf(crt, sizeof crt, "%s", cert("expired.crt"));
  snprintf(key, sizeof key, "%s", cert("expired.key"));
  const char *extra[] = {"--tls-cert-file", crt, "--tls-key-file", key, NULL};
  relock_test_redis_t *r = tls_server(extra, 0);
  relock_options_t *opts = tls_options(r, "ca.crt");
  expect_tls_failure(opts, "certificate has expired");
  /* for tests only: no verification at all */
  fx_set_int(opts, RELOCK_OPT_TLS_INSECURE_SKIP_VERIFY, 1);
  relock_client_t *c = fx_client(opts);
  expect_ok(c);
  relock_client_free(c);
  relock_options_free(opts);
  relock_test_redis_free(r);
}

/* -- mixed up: plaintext and TLS ------------------------------------------------*/

static void test_plaintext_client_on_tls_port(void **state) {
  (void)state;
  relock_test_redis_t *r = tls_server(NULL, 0);
  relock_options_t *opts = tls_options(r, NULL);
  fx_set_int(opts, RELOCK_OPT_TLS, 0);
  /* the server drops what is no TLS at once: the command fails, no hang */
  double ms = expect_failure(opts, RELOCK_ECONNLOST, "TLS port?");
  assert_true(ms < (double)fx_slack_ms(3000));
  /* the same with AUTH first: the handshake is dropped, commands wait for
   * their timeout (1 s here), then say why */
  fx_set_str(opts, RELOCK_OPT_PASSWORD, "secret");
  fx_set_ms(opts, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(1000));
  ms = expect_failure(opts, RELOCK_ECONNLOST, "TLS port?");
  assert_true(ms < (double)fx_slack_ms(1000) + 300);
  relock_options_free(opts);
  relock_test_redis_free(r);
}

static void test_tls_client_on_plain_port(void **state) {
  (void)state;
  relock_test_redis_t *r = relock_test_redis_start(NULL);
  assert_non_null(r);
  relock_options_t *opts = tls_options(r, "ca.crt");
  fx_set_ms(opts, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(1000));
  /* Redis reads the ClientHello as an inline command: it answers an error
   * (TLS fails at once) or, without a newline in it, waits for more (the
   * command times out before the 3 s connect timeout). Either way the
   * message points at TLS. */
  for (int i = 0; i < 3; i++) { /* a new ClientHello, new random bytes */
    relock_client_t *c = fx_client(opts);
    uint64_t t0 = relock__now_ns();
    relock_future_t *f = FX_CMD(c, "PING");
    double ms = fx_ms_since(t0);
    int err = relock_future_error(f);
    print_message("# %s: %s (%.0f ms)\n", relock_err_name(err), relock_future_message(f), ms);
    assert_true(err == RELOCK_ETLS || err == RELOCK_ETIMEDOUT);
    assert_non_null(strstr(relock_future_message(f), "speak TLS on this port?"));
    assert_true(ms < (double)fx_slack_ms(1000) + 300);
    relock_future_release(f);
    relock_client_free(c);
  }
  relock_options_free(opts);
  relock_test_redis_free(r);
}

/* -- a restart, and a dead socket -----------------------------------------------*/

typedef struct {
  relock_test_redis_t *r;
  int64_t min_pttl;
} pttl_want_t;

static int pttl_above(void *arg) {
  pttl_want_t *w = arg;
  char reply[64];
  return relock_test_redis_cmd(w->r, reply, sizeof reply, "PTTL", "tls-held", NULL) == 0 && reply[0] == ':' &&
         atoll(reply + 1) > w->min_pttl;
}

static void test_restart_mid_hold(void **state) {
  (void)state;
  relock_test_redis_t *r = tls_server(NULL, 1); /* AOF: the hold survives */
  relock_options_t *opts = tls_options(r, "ca.crt");
  fx_set_ms(opts, RELOCK_OPT_WATCHDOG_TIMEOUT, 3000); /* renewed every second */
  relock_client_t *c = fx_client(opts);
  relock_lock_t *l = relock_lock_new(c, "tls-held", NULL);
  assert_int_equal(value_of(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE)), 1);
  uint64_t reconnects = c->redis.cmd.connects;
  assert_int_equal(relock_test_redis_restart(r), 0);
  /* Without renewals after the restart the 3 s lease, last renewed at most
   * a second before it, ends within 3 s; with them it stays above 1 s. */
  pttl_want_t never = {r, INT64_MAX};
  fx_run_until(fx_loop(), pttl_above, &never, 3500);
  pttl_want_t high = {r, 1000};
  assert_true(pttl_above(&high));
  assert_true(c->redis.cmd.connects > reconnects);
  assert_int_equal(value_of(relock_lock_unlock_async(l, 1)), 1);
  relock_lock_free(l);
  relock_client_free(c);
  relock_options_free(opts);
  relock_test_redis_free(r);
}

static int is_ready(void *arg) { return ((relock_client_t *)arg)->redis.cmd.state == RELOCK__CONN_READY; }

/* SSL_write on a socket that can no longer send raises SIGPIPE, whose
 * default action ends the process: the library must keep it away. This
 * test keeps SIGPIPE at its default, so a leak kills it. */
static void test_write_to_dead_tls_socket(void **state) {
  (void)state;
  struct sigaction sa;
  assert_int_equal(sigaction(SIGPIPE, NULL, &sa), 0);
  assert_true(sa.sa_handler == SIG_DFL);
  relock_test_redis_t *r = tls_server(NULL, 0);
  relock_options_t *opts = tls_options(r, "ca.crt");
  relock_client_t *c = fx_client(opts);
  expect_ok(c);
  /* Our side of the socket closed for writing: the next write is EPIPE.
   * The server is paused meanwhile, so that no hang-up from it is read
   * before the write is tried. */
  redisContext *ctx = (redisContext *)(void *)c->redis.cmd.ac; /* its first member */
  assert_int_equal(relock_test_redis_pause(r), 0);
  assert_int_equal(shutdown(ctx->fd, SHUT_WR), 0);
  relock_future_t *f = FX_CMD(c, "PING");
  assert_int_equal(relock_future_error(f), RELOCK_ECONNLOST);
  print_message("# %s\n", relock_future_message(f));
  relock_future_release(f);
  assert_int_equal(relock_test_redis_resume(r), 0);
  assert_true(fx_run_until(fx_loop(), is_ready, c, 3000));
  expect_ok(c); /* and it reconnected */
  relock_client_free(c);
  relock_options_free(opts);
  relock_test_redis_free(r);
}

#endif /* RELOCK_HAVE_TLS */

int main(void) {
  const struct CMUnitTest no_tls[] = {cmocka_unit_test(test_no_tls_refused)};
  cmocka_set_message_output(CM_OUTPUT_TAP);
  if (!relock_tls_available()) /* the half this build can run: never a silent skip */
    return cmocka_run_group_tests_name("tls (a build without TLS)", no_tls, NULL, NULL);
#ifdef RELOCK_HAVE_TLS
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_options),
      cmocka_unit_test(test_lock_unlock),
      cmocka_unit_test(test_threaded_client),
      cmocka_unit_test(test_waiting),
      cmocka_unit_test(test_mutual_tls),
      cmocka_unit_test(test_unknown_ca),
      cmocka_unit_test(test_name_mismatch),
      cmocka_unit_test(test_expired),
      cmocka_unit_test(test_plaintext_client_on_tls_port),
      cmocka_unit_test(test_tls_client_on_plain_port),
      cmocka_unit_test(test_restart_mid_hold),
      cmocka_unit_test(test_write_to_dead_tls_socket),
  };
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found: install the Debian package redis-server");
  const char *base = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
  snprintf(certs, sizeof certs, "%s/relock-tls-XXXXXX", base);
  if (mkdtemp(certs) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  char cmd[512];
  snprintf(cmd, sizeof cmd, "sh '%s' '%s'", RELOCK_TLS_SH, certs);
  if (system(cmd) != 0) {
    fprintf(stderr, "# %s failed\n", cmd);
    return 1;
  }
  int rc = cmocka_run_group_tests_name("tls", tests, NULL, NULL);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", certs);
  if (system(cmd) != 0)
    fprintf(stderr, "# could not remove %s\n", certs);
  return rc;
#endif
  return 1;
}
