/* Unit tests of the client options (relock/config.h): the defaults, setting
 * and reading by name and type, every URL form the parser accepts, the ones
 * it refuses (with a message that names the problem and never shows the
 * password), every rule a value or a combination must follow, the
 * client's parsed copy of a Cluster's seeds (config/settings.h), and the
 * URL taken from the environment on request (relock_options_from_env). */
#include <config.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <relock/config.h>
#include <relock/error.h>

#include "config/settings.h"
#include "support/test.h"

/* -- helpers ----------------------------------------------------------------*/

static void assert_str_or_null(const char *actual, const char *expected) {
  if (expected == NULL)
    assert_null(actual);
  else {
    assert_non_null(actual);
    assert_string_equal(actual, expected);
  }
}

/* An error struct full of junk, to see that success clears it. */
static relock_error_t dirty_error(void) {
  relock_error_t err;
  err.code = 12345;
  memset(err.message, 'x', sizeof err.message - 1);
  err.message[sizeof err.message - 1] = '\0';
  return err;
}

static relock_options_t *options(void) {
  relock_error_t err = dirty_error();
  relock_options_t *o = relock_options_new(&err);
  assert_non_null(o);
  return o;
}

/* The value of an option of each type (which must be readable). */
static const char *str(const relock_options_t *o, const char *name) {
  const char *v = "junk";
  assert_int_equal(relock_options_get_string(o, name, &v, NULL), 0);
  return v;
}

static int num(const relock_options_t *o, const char *name) {
  int v = -12345;
  assert_int_equal(relock_options_get_int(o, name, &v, NULL), 0);
  return v;
}

static int64_t ms(const relock_options_t *o, const char *name) {
  int64_t v = -12345;
  assert_int_equal(relock_options_get_ms(o, name, &v, NULL), 0);
  return v;
}

static void set_str(relock_options_t *o, const char *name, const char *value) {
  relock_error_t err;
  if (relock_options_set_string(o, name, value, &err) != 0)
    fail_msg("%s: %s", name, err.message);
}

/* -- defaults ---------------------------------------------------------------*/

static void test_defaults(void **state) {
  (void)state;
  relock_options_t *c = options();
  assert_string_equal(str(c, RELOCK_OPT_HOST), "127.0.0.1");
  assert_int_equal(num(c, RELOCK_OPT_PORT), 6379);
  assert_null(str(c, RELOCK_OPT_UNIX_PATH));
  assert_null(str(c, RELOCK_OPT_USERNAME));
  assert_null(str(c, RELOCK_OPT_PASSWORD));
  assert_int_equal(num(c, RELOCK_OPT_DB), 0);
  assert_null(str(c, RELOCK_OPT_CLIENT_NAME));
  assert_int_equal(ms(c, RELOCK_OPT_CONNECT_TIMEOUT), 5000);
  assert_int_equal(ms(c, RELOCK_OPT_COMMAND_TIMEOUT), 3000);
  assert_int_equal(num(c, RELOCK_OPT_RETRY_ATTEMPTS), 3);
  assert_int_equal(ms(c, RELOCK_OPT_RETRY_INTERVAL), 1500);
  assert_int_equal(ms(c, RELOCK_OPT_RECONNECT_MIN), 100);
  assert_int_equal(ms(c, RELOCK_OPT_RECONNECT_MAX), 10000);
  assert_null(str(c, RELOCK_OPT_CLIENT_ID));
  assert_int_equal(ms(c, RELOCK_OPT_WATCHDOG_TIMEOUT), 30000);
  assert_int_equal(ms(c, RELOCK_OPT_PING_INTERVAL), 1000);
  assert_int_equal(num(c, RELOCK_OPT_MIN_REPLICAS_ACKED), 0);
  assert_int_equal(ms(c, RELOCK_OPT_MIN_REPLICAS_TIMEOUT), 500);
  assert_null(str(c, RELOCK_OPT_CLUSTER_NODES));

  relock_error_t err = dirty_error();
  assert_int_equal(relock_options_validate(c, &err), 0);
  assert_int_equal(err.code, 0);
  assert_string_equal(err.message, "");
  assert_int_equal(relock_options_validate(c, NULL), 0);

  /* a setter that succeeds clears the error too */
  err = dirty_error();
  assert_int_equal(relock_options_set_int(c, RELOCK_OPT_DB, 2, &err), 0);
  assert_int_equal(err.code, 0);
  assert_string_equal(err.message, "");

  relock_options_free(c);
  relock_options_free(NULL);
}

/* -- names, types, text -------------------------------------------------------*/

static void test_unknown_option_and_wrong_type(void **state) {
  (void)state;
  relock_options_t *o = options();
  relock_error_t err = dirty_error();
  assert_int_equal(relock_options_set_int(o, "prot", 1, &err), RELOCK_EINVAL);
  assert_int_equal(err.code, RELOCK_EINVAL);
  assert_string_equal(err.message, "unknown option \"prot\"");
  assert_int_equal(relock_options_set(o, "x", "1", &err), RELOCK_EINVAL);
  assert_string_equal(err.message, "unknown option \"x\"");
  const char *s;
  assert_int_equal(relock_options_get_string(o, "", &s, &err), RELOCK_EINVAL);
  assert_string_equal(err.message, "unknown option \"\"");
  assert_int_equal(relock_options_set_int(o, NULL, 1, &err), RELOCK_EINVAL);
  assert_string_equal(err.message, "option name is NULL");

  assert_int_equal(relock_options_set_string(o, RELOCK_OPT_PORT, "6380", &err), RELOCK_EINVAL);
  assert_string_equal(err.message, "option \"port\" is an int, not a string");
  assert_int_equal(relock_options_set_ms(o, RELOCK_OPT_HOST, 1, &err), RELOCK_EINVAL);
  assert_string_equal(err.message, "option \"host\" is a string, not a duration in ms");
  assert_int_equal(relock_options_set_int(o, RELOCK_OPT_COMMAND_TIMEOUT, 1, &err), RELOCK_EINVAL);
  assert_string_equal(err.message, "option \"command-timeout\" is a duration in ms, not an int");
  int64_t v;
  assert_int_equal(relock_options_get_ms(o, RELOCK_OPT_PORT, &v, &err), RELOCK_EINVAL);
  assert_string_equal(err.message, "option \"port\" is an int, not a duration in ms");
  assert_int_equal(relock_options_get_ms(o, RELOCK_OPT_COMMAND_TIMEOUT, NULL, &err), RELOCK_EINVAL);
  assert_int_equal(relock_options_set_int(o, RELOCK_OPT_PORT, 1, NULL), 0); /* no err: fine */
  assert_int_equal(relock_options_set_int(o, "nope", 1, NULL), RELOCK_EINVAL);

  /* refused: the option keeps its value */
  assert_int_equal(relock_options_set_int(o, RELOCK_OPT_PORT, 0, &err), RELOCK_EINVAL);
  assert_int_equal(num(o, RELOCK_OPT_PORT), 1);
  set_str(o, RELOCK_OPT_CLIENT_ID, "mine");
  assert_int_equal(relock_options_set_string(o, RELOCK_OPT_CLIENT_ID, "a:b", &err), RELOCK_EINVAL);
  assert_string_equal(str(o, RELOCK_OPT_CLIENT_ID), "mine");
  set_str(o, RELOCK_OPT_CLIENT_ID, NULL); /* back to "not set" */
  assert_null(str(o, RELOCK_OPT_CLIENT_ID));
  relock_options_free(o);
}

static void test_set_from_text(void **state) {
  (void)state;
  relock_options_t *o = options();
  relock_error_t err = dirty_error();
  assert_int_equal(relock_options_set(o, RELOCK_OPT_PORT, "6380", &err), 0);
  assert_int_equal(err.code, 0);
  assert_int_equal(num(o, RELOCK_OPT_PORT), 6380);
  assert_int_equal(relock_options_set(o, RELOCK_OPT_COMMAND_TIMEOUT, "250", NULL), 0);
  assert_int_equal(ms(o, RELOCK_OPT_COMMAND_TIMEOUT), 250);
  assert_int_equal(relock_options_set(o, RELOCK_OPT_COMMAND_TIMEOUT, "750ms", NULL), 0);
  assert_int_equal(ms(o, RELOCK_OPT_COMMAND_TIMEOUT), 750);
  assert_int_equal(relock_options_set(o, RELOCK_OPT_WATCHDOG_TIMEOUT, "45s", NULL), 0);
  assert_int_equal(ms(o, RELOCK_OPT_WATCHDOG_TIMEOUT), 45000);
  assert_int_equal(relock_options_set(o, RELOCK_OPT_CLIENT_NAME, "from-text", NULL), 0);
  assert_string_equal(str(o, RELOCK_OPT_CLIENT_NAME), "from-text");
  assert_int_equal(relock_options_set(o, "min-replicas-acked", "2", NULL), 0);
  assert_int_equal(num(o, RELOCK_OPT_MIN_REPLICAS_ACKED), 2);
  assert_int_equal(relock_options_set(o, "min-replicas-timeout", "250ms", NULL), 0);
  assert_int_equal(ms(o, RELOCK_OPT_MIN_REPLICAS_TIMEOUT), 250);
  assert_int_equal(ms(o, RELOCK_OPT_FAIR_LOCK_WAIT_TIMEOUT), 300000); /* Redisson's default */
  assert_int_equal(relock_options_set(o, "fair-lock-wait-timeout", "2s", NULL), 0);
  assert_int_equal(ms(o, RELOCK_OPT_FAIR_LOCK_WAIT_TIMEOUT), 2000);
  relock_error_t fe;
  assert_int_equal(relock_options_set(o, "fair-lock-wait-timeout", "2ms", &fe), RELOCK_EINVAL);
  assert_non_null(strstr(fe.message, "fair-lock-wait-timeout must be >= 3"));

  static const struct {
    const char *name, *text, *phrase;
  } bad[] = {
      {RELOCK_OPT_PORT, "", "invalid value \"\" for option \"port\": expected an int"},
      {RELOCK_OPT_PORT, "12x", "expected an int"},
      {RELOCK_OPT_PORT, " 1", "expected an int"},
      {RELOCK_OPT_PORT, "99999999999", "expected an int"},
      {RELOCK_OPT_PORT, "0", "invalid port 0: must be 1-65535"},
      {RELOCK_OPT_DB, "-1", "invalid database -1"},
      {RELOCK_OPT_COMMAND_TIMEOUT, "1.5s", "expected a duration in ms"},
      {RELOCK_OPT_COMMAND_TIMEOUT, "5m", "expected a duration in ms"},
      {RELOCK_OPT_COMMAND_TIMEOUT, "ms", "expected a duration in ms"},
      {RELOCK_OPT_COMMAND_TIMEOUT, "99999999999999999999", "expected a duration in ms"},
      {RELOCK_OPT_COMMAND_TIMEOUT, "9999999999999999s", "expected a duration in ms"},
      {RELOCK_OPT_COMMAND_TIMEOUT, "0", "command-timeout must be > 0 (got 0)"},
      {RELOCK_OPT_COMMAND_TIMEOUT, "-1ms", "command-timeout must be > 0 (got -1)"},
      {RELOCK_OPT_RETRY_INTERVAL, "2000000000s", "retry-interval is 2000000000000 ms: at most"},
      {RELOCK_OPT_COMMAND_TIMEOUT, NULL, "option \"command-timeout\" needs a value"},
      {RELOCK_OPT_CLIENT_NAME, "two words", "client-name must not contain spaces"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(relock_options_set(o, bad[i].name, bad[i].text, &err), RELOCK_EINVAL);
    if (strstr(err.message, bad[i].phrase) == NULL)
      fail_msg("%s = \"%s\": message \"%s\" lacks \"%s\"", bad[i].name, bad[i].text ? bad[i].text : "(NULL)",
               err.message, bad[i].phrase);
  }
  assert_int_equal(num(o, RELOCK_OPT_PORT), 6380);
  assert_int_equal(ms(o, RELOCK_OPT_COMMAND_TIMEOUT), 750);
  relock_options_free(o);
}

static void test_copy(void **state) {
  (void)state;
  relock_options_t *o = options();
  assert_int_equal(relock_options_set_url(o, "redis://u:pw@h:7000/3", NULL), 0);
  set_str(o, RELOCK_OPT_CLIENT_ID, "id-1");
  relock_error_t err = dirty_error();
  relock_options_t *c = relock_options_copy(o, &err);
  assert_non_null(c);
  assert_int_equal(err.code, 0);
  /* its own strings: changing or freeing the original does not touch it */
  set_str(o, RELOCK_OPT_CLIENT_ID, "id-2");
  relock_options_free(o);
  assert_string_equal(str(c, RELOCK_OPT_HOST), "h");
  assert_string_equal(str(c, RELOCK_OPT_USERNAME), "u");
  assert_string_equal(str(c, RELOCK_OPT_PASSWORD), "pw");
  assert_int_equal(num(c, RELOCK_OPT_PORT), 7000);
  assert_int_equal(num(c, RELOCK_OPT_DB), 3);
  assert_string_equal(str(c, RELOCK_OPT_CLIENT_ID), "id-1");
  assert_null(relock_options_copy(NULL, &err));
  assert_int_equal(err.code, RELOCK_EINVAL);
  relock_options_free(c);
}

/* -- URLs that parse --------------------------------------------------------*/

typedef struct {
  const char *url;
  const char *host;
  int port;
  const char *unix_path;
  const char *username;
  const char *password;
  int db;
} good_url_t;

static const good_url_t good_urls[] = {
    {"redis://localhost", "localhost", 6379, NULL, NULL, NULL, 0},
    {"redis://redis.example.com:6380", "redis.example.com", 6380, NULL, NULL, NULL, 0},
    {"redis://10.0.0.7:1", "10.0.0.7", 1, NULL, NULL, NULL, 0},
    {"redis://h:65535", "h", 65535, NULL, NULL, NULL, 0},
    {"redis://h:06379", "h", 6379, NULL, NULL, NULL, 0},
    {"redis://my_host-1.local/", "my_host-1.local", 6379, NULL, NULL, NULL, 0},
    {"redis://:s3cret@host", "host", 6379, NULL, NULL, "s3cret", 0},
    {"redis://user:pass@host:7000/3", "host", 7000, NULL, "user", "pass", 3},
    {"redis://[::1]:6380/2", "::1", 6380, NULL, NULL, NULL, 2},
    {"redis://[::1]", "::1", 6379, NULL, NULL, NULL, 0},
    {"redis://[2001:db8::10]/15", "2001:db8::10", 6379, NULL, NULL, NULL, 15},
    {"redis://[::ffff:192.0.2.1]:7001", "::ffff:192.0.2.1", 7001, NULL, NULL, NULL, 0},
    {"redis://[fe80::1%25eth0]:6379", "fe80::1%eth0", 6379, NULL, NULL, NULL, 0},
    {"redis://host/2147483647", "host", 6379, NULL, NULL, NULL, INT_MAX},
    {"REDIS://Host:6380", "Host", 6380, NULL, NULL, NULL, 0},
    /* percent-decoding of the user and password; a raw ':' or '@' in the
     * password is unambiguous (first ':' / last '@') */
    {"redis://us%65r:p%40ss%2Fw%3Ad@host", "host", 6379, NULL, "user", "p@ss/w:d", 0},
    {"redis://:a:b@host", "host", 6379, NULL, NULL, "a:b", 0},
    {"redis://:a@b@host", "host", 6379, NULL, NULL, "a@b", 0},
    {"redis://:%e2%82%ac%25@host", "host", 6379, NULL, NULL, "\xe2\x82\xac%", 0},
    {"redis://:+x+@[::1]:1/0", "::1", 1, NULL, NULL, "+x+", 0},
    {"unix:///tmp/redis.sock", "127.0.0.1", 6379, "/tmp/redis.sock", NULL, NULL, 0},
    {"unix:///tmp/redis.sock?db=2&password=x", "127.0.0.1", 6379, "/tmp/redis.sock", NULL, "x", 2},
    {"unix:///run/r.sock?password=p%26q&username=app", "127.0.0.1", 6379, "/run/r.sock", "app", "p&q", 0},
    {"unix:///var/run/redis/redis-server.sock?db=0", "127.0.0.1", 6379, "/var/run/redis/redis-server.sock", NULL,
     NULL, 0},
    {"Unix:///s", "127.0.0.1", 6379, "/s", NULL, NULL, 0},
};

static void test_accepted_urls(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof good_urls / sizeof good_urls[0]; i++) {
    const good_url_t *g = &good_urls[i];
    relock_options_t *c = options();
    /* not connection options: left alone */
    assert_int_equal(relock_options_set_ms(c, RELOCK_OPT_COMMAND_TIMEOUT, 1234, NULL), 0);
    set_str(c, RELOCK_OPT_CLIENT_ID, "me");
    relock_error_t err = dirty_error();
    int r = relock_options_set_url(c, g->url, &err);
    if (r != 0)
      fail_msg("%s: %s", g->url, err.message);
    assert_int_equal(err.code, 0);
    assert_string_equal(err.message, "");
    assert_string_equal(str(c, RELOCK_OPT_HOST), g->host);
    assert_int_equal(num(c, RELOCK_OPT_PORT), g->port);
    assert_str_or_null(str(c, RELOCK_OPT_UNIX_PATH), g->unix_path);
    assert_str_or_null(str(c, RELOCK_OPT_USERNAME), g->username);
    assert_str_or_null(str(c, RELOCK_OPT_PASSWORD), g->password);
    assert_int_equal(num(c, RELOCK_OPT_DB), g->db);
    assert_int_equal(ms(c, RELOCK_OPT_COMMAND_TIMEOUT), 1234);
    assert_string_equal(str(c, RELOCK_OPT_CLIENT_ID), "me");
    assert_int_equal(relock_options_validate(c, &err), 0);
    relock_options_free(c);
  }
}

static void test_parsed_strings_outlive_the_url(void **state) {
  (void)state;
  relock_options_t *c = options();
  char *url = strdup("redis://alice:wonder%20land@cache.internal:6390/4");
  assert_non_null(url);
  assert_int_equal(relock_options_set_url(c, url, NULL), 0);
  memset(url, 'z', strlen(url));
  free(url);
  assert_string_equal(str(c, RELOCK_OPT_HOST), "cache.internal");
  assert_string_equal(str(c, RELOCK_OPT_USERNAME), "alice");
  assert_string_equal(str(c, RELOCK_OPT_PASSWORD), "wonder land");
  assert_int_equal(num(c, RELOCK_OPT_PORT), 6390);
  assert_int_equal(num(c, RELOCK_OPT_DB), 4);
  relock_options_free(c);
}

/* Every connection option comes from the URL (or its default), whatever an
 * earlier URL or the caller had set. */
static void test_url_replaces_every_connection_field(void **state) {
  (void)state;
  relock_options_t *c = options();
  assert_int_equal(relock_options_set_url(c, "unix:///tmp/a.sock?db=5&username=u&password=p", NULL), 0);
  assert_int_equal(relock_options_set_url(c, "redis://other", NULL), 0);
  assert_string_equal(str(c, RELOCK_OPT_HOST), "other");
  assert_int_equal(num(c, RELOCK_OPT_PORT), 6379);
  assert_null(str(c, RELOCK_OPT_UNIX_PATH));
  assert_null(str(c, RELOCK_OPT_USERNAME));
  assert_null(str(c, RELOCK_OPT_PASSWORD));
  assert_int_equal(num(c, RELOCK_OPT_DB), 0);

  assert_int_equal(relock_options_set_int(c, RELOCK_OPT_PORT, 1, NULL), 0);
  assert_int_equal(relock_options_set_int(c, RELOCK_OPT_DB, 9, NULL), 0);
  assert_int_equal(relock_options_set_url(c, "unix:///tmp/b.sock", NULL), 0);
  assert_string_equal(str(c, RELOCK_OPT_HOST), "127.0.0.1");
  assert_int_equal(num(c, RELOCK_OPT_PORT), 6379);
  assert_string_equal(str(c, RELOCK_OPT_UNIX_PATH), "/tmp/b.sock");
  assert_int_equal(num(c, RELOCK_OPT_DB), 0);
  relock_options_free(c);
}

static void test_set_url_twice(void **state) {
  (void)state;
  relock_options_t *c = options();
  assert_int_equal(relock_options_set_url(c, "redis://u:p1@first:7000/1", NULL), 0);
  assert_int_equal(relock_options_set_url(c, "redis://:p2@second:7001/2", NULL), 0);
  /* the first URL's strings were freed (valgrind/ASan check) */
  assert_string_equal(str(c, RELOCK_OPT_HOST), "second");
  assert_null(str(c, RELOCK_OPT_USERNAME));
  assert_string_equal(str(c, RELOCK_OPT_PASSWORD), "p2");
  assert_int_equal(num(c, RELOCK_OPT_PORT), 7001);
  assert_int_equal(num(c, RELOCK_OPT_DB), 2);

  /* An option set after the URL is the caller's own string. */
  set_str(c, RELOCK_OPT_USERNAME, "caller");
  assert_string_equal(str(c, RELOCK_OPT_USERNAME), "caller");
  assert_int_equal(relock_options_validate(c, NULL), 0);
  relock_options_free(c);
}

/* -- URLs that are refused ---------------------------------------------------*/

typedef struct {
  const char *url;
  const char *phrase; /* the message contains it */
  const char *secret; /* the message never contains it (NULL: nothing) */
} bad_url_t;

static const bad_url_t bad_urls[] = {
    {"", "not a Redis URL", NULL},
    {"localhost:6379", "not a Redis URL", NULL},
    {"redis:/host", "not a Redis URL", NULL},
    {"://host", "not a Redis URL", NULL},
    {"http://host",
     "unsupported URL scheme \"http\": use redis://, rediss://, unix://, redis+sentinel:// or redis+cluster://", NULL},
    {"redis-cluster://host", "unsupported URL scheme \"redis-cluster\"", NULL},
    {"redis-sentinel://host", "unsupported URL scheme \"redis-sentinel\"", NULL},
    {"redis://", "empty host", NULL},
    {"redis://:6379", "empty host", NULL},
    {"redis:///3", "empty host", NULL},
    {"redis://:hunter2@", "empty host", "hunter2"},
    {"redis://:hunter2@:6379", "empty host", "hunter2"},
    {"redis://[]:6379", "empty host", NULL},
    {"redis://host:99999", "invalid port \"99999\" in URL: must be 1-65535", NULL},
    {"redis://host:65536", "invalid port \"65536\"", NULL},
    {"redis://host:0", "invalid port \"0\"", NULL},
    {"redis://host:", "invalid port \"\"", NULL},
    {"redis://host:-1", "invalid port in URL", NULL},
    {"redis://host:12a", "invalid port in URL", NULL},
    {"redis://host:99999999999999999999", "invalid port in URL", NULL},
    /* a forgotten "@host": the "port" may be a password, so it is not quoted */
    {"redis://user:hunter2", "invalid port in URL", "hunter2"},
    {"redis://user:1234567", "invalid port in URL", "1234567"},
    {"redis://:hunter2", "empty host", "hunter2"},
    {"redis://host/x", "invalid database \"x\"", NULL},
    {"redis://host/-1", "invalid database \"-1\"", NULL},
    {"redis://host/1.5", "invalid database \"1.5\"", NULL},
    {"redis://host/2147483648", "invalid database \"2147483648\"", NULL},
    {"redis://host/3/", "invalid database \"3/\"", NULL},
    {"redis://host:6379/0/extra", "invalid database \"0/extra\"", NULL},
    {"redis://host/0?db=1", "query parameters", NULL},
    {"redis://host?password=x", "query parameters", NULL},
    {"redis://host/0#frag", "URL fragments", NULL},
    {"redis://host#", "URL fragments", NULL},
    {"redis://ho st", "space or control character", NULL},
    {"redis://host\t", "space or control character", NULL},
    {"redis://:hunter 2@host", "space or control character", "hunter"},
    {"redis://ho!st", "invalid character \"!\" in the host", NULL},
    {"redis://h%41st", "invalid character \"%\" in the host", NULL},
    {"redis://h\xc3\xa9st", "invalid character \"\\xc3\" in the host", NULL},
    {"redis://::1", "empty host", NULL},
    {"redis://h::1", "must be in brackets", NULL},
    {"redis://[::1", "unterminated \"[\"", NULL},
    {"redis://[::1]x", "unexpected characters after \"]\"", NULL},
    {"redis://[::1]6379", "unexpected characters after \"]\"", NULL},
    {"redis://[::g]", "invalid IPv6 address", NULL},
    {"redis://[host]", "invalid IPv6 address", NULL},
    {"redis://[127.0.0.1]", "invalid IPv6 address", NULL},
    {"redis://[fe80::1%eth0]", "invalid IPv6 zone", NULL},
    {"redis://[fe80::1%25]", "invalid IPv6 zone", NULL},
    {"redis://[fe80::1%25e/h]", "unterminated", NULL},
    {"redis://[fe80::1%25e!h]", "invalid IPv6 zone", NULL},
    {"redis://[::1]:0", "invalid port \"0\"", NULL},
    /* user info */
    {"redis://hunter2@host", "user info without \":\"", "hunter2"},
    {"redis://@host", "user info without \":\"", NULL},
    {"redis://:@host", "empty password", NULL},
    {"redis://user:@host", "empty password", NULL},
    {"redis://:hunt%zzer2@host", "invalid percent-escape in the password", "hunt"},
    {"redis://:hunter2%4@host", "invalid percent-escape in the password", "hunter2"},
    {"redis://:hunter2%@host", "invalid percent-escape in the password", "hunter2"},
    {"redis://us%g1er:hunter2@host", "invalid percent-escape in the user name", "hunter2"},
    {"redis://:hun%00ter2@host", "%00 (a NUL byte)", "hun"},
    {"redis://u%00:hunter2@host", "user name in the URL contains %00", NULL},
    /* a raw '/', '?' or '#' in the password splits the URL early */
    {"redis://:hun/ter2@host", "\"@\" after the host", "ter2"},
    {"redis://:hun?ter2@host", "\"@\" after the host", "ter2"},
    {"redis://:hun#ter2@host", "\"@\" after the host", "ter2"},
    {"redis://user:hunter2@host:abc", "invalid port in URL", "hunter2"},
    {"redis://user:hunter2@host/abc", "invalid database \"abc\"", "hunter2"},
    {"redis://user:hunter2@ho$t", "invalid character \"$\"", "hunter2"},
    {"redis://user:hunter2@host?x", "query parameters", "hunter2"},
    /* unix:// */
    {"unix://", "unix:// URL needs an absolute socket path", NULL},
    {"unix://tmp/redis.sock", "unix:// URL needs an absolute socket path", NULL},
    {"unix://localhost/tmp/redis.sock", "unix:// URL needs an absolute socket path", NULL},
    {"unix://?db=1", "unix:// URL needs an absolute socket path", NULL},
    {"unix:///", "must not end in \"/\"", NULL},
    {"unix:///tmp/", "must not end in \"/\"", NULL},
    {"unix:///tmp/r.sock?", "empty parameter", NULL},
    {"unix:///tmp/r.sock?db=1&", "empty parameter", NULL},
    {"unix:///tmp/r.sock?db=1&&password=x", "empty parameter", NULL},
    {"unix:///tmp/r.sock?db=x", "invalid database \"x\"", NULL},
    {"unix:///tmp/r.sock?db=", "parameter \"db\" in the URL query needs a value", NULL},
    {"unix:///tmp/r.sock?db", "parameter \"db\" in the URL query needs a value", NULL},
    {"unix:///tmp/r.sock?db=1&db=2", "parameter \"db\" given twice", NULL},
    {"unix:///tmp/r.sock?timeout=5", "unknown parameter \"timeout\"", NULL},
    {"unix:///tmp/r.sock?DB=1", "unknown parameter \"DB\"", NULL},
    {"unix:///tmp/r.sock?password=", "parameter \"password\" in the URL query needs a value", NULL},
    {"unix:///tmp/r.sock?password=hunter2&password=hunter3", "given twice", "hunter"},
    {"unix:///tmp/r.sock?password=hun%zzter2", "invalid percent-escape in the password", "hun"},
    {"unix:///tmp/r.sock?username=app", "username without password", NULL},
    /* a raw '&' in the password: its tail is not quoted */
    {"unix:///tmp/r.sock?password=hun&ter2", "unknown parameter after a password", "ter2"},
    {"unix:///tmp/r.sock?password=hun&ter2=x", "unknown parameter after a password", "ter2"},
    {"unix:///tmp/r.sock?password=hun&db=ter2", "invalid database in URL", "ter2"},
    {"unix:///tmp/r.sock?db=x&password=hunter2", "invalid database \"x\"", "hunter2"},
    {"unix:///tmp/r ock", "space or control character", NULL},
};

static void test_refused_urls(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof bad_urls / sizeof bad_urls[0]; i++) {
    const bad_url_t *b = &bad_urls[i];
    relock_options_t *c = options();
    assert_int_equal(relock_options_set_url(c, "redis://:keep@before:7777/7", NULL), 0);
    const char *host = str(c, RELOCK_OPT_HOST), *password = str(c, RELOCK_OPT_PASSWORD);

    relock_error_t err = dirty_error();
    int r = relock_options_set_url(c, b->url, &err);
    if (r != RELOCK_EINVAL)
      fail_msg("\"%s\" gave %d (%s), not RELOCK_EINVAL", b->url, r, err.message);
    assert_int_equal(err.code, RELOCK_EINVAL);
    if (strstr(err.message, b->phrase) == NULL)
      fail_msg("\"%s\": message \"%s\" lacks \"%s\"", b->url, err.message, b->phrase);
    if (b->secret != NULL && strstr(err.message, b->secret) != NULL)
      fail_msg("\"%s\": message \"%s\" shows the password", b->url, err.message);
    /* the password of the options before never shows either */
    assert_null(strstr(err.message, "keep"));

    /* unchanged: same strings, same values */
    assert_ptr_equal(str(c, RELOCK_OPT_HOST), host);
    assert_ptr_equal(str(c, RELOCK_OPT_PASSWORD), password);
    assert_null(str(c, RELOCK_OPT_UNIX_PATH));
    assert_null(str(c, RELOCK_OPT_USERNAME));
    assert_string_equal(host, "before");
    assert_string_equal(password, "keep");
    assert_int_equal(num(c, RELOCK_OPT_PORT), 7777);
    assert_int_equal(num(c, RELOCK_OPT_DB), 7);

    /* without an error struct: the same code */
    assert_int_equal(relock_options_set_url(c, b->url, NULL), RELOCK_EINVAL);
    relock_options_free(c);
  }
}

static void test_long_socket_path(void **state) {
  (void)state;
  char url[300] = "unix://";
  size_t prefix = strlen(url);
  /* sun_path is 108 bytes on Linux: 107 for the path and its NUL */
  url[prefix] = '/';
  memset(url + prefix + 1, 'a', 106);
  url[prefix + 107] = '\0';
  relock_options_t *c = options();
  relock_error_t err;
  assert_int_equal(relock_options_set_url(c, url, &err), 0);
  assert_int_equal(strlen(str(c, RELOCK_OPT_UNIX_PATH)), 107);
  assert_int_equal(relock_options_validate(c, &err), 0);

  url[prefix + 107] = 'a';
  url[prefix + 108] = '\0';
  assert_int_equal(relock_options_set_url(c, url, &err), RELOCK_EINVAL);
  assert_non_null(strstr(err.message, "too long (108 bytes, at most 107)"));
  assert_int_equal(strlen(str(c, RELOCK_OPT_UNIX_PATH)), 107); /* unchanged */

  assert_int_equal(relock_options_set_string(c, RELOCK_OPT_UNIX_PATH, url + prefix, &err), RELOCK_EINVAL);
  assert_non_null(strstr(err.message, "unix-path is 108 bytes long"));
  assert_int_equal(strlen(str(c, RELOCK_OPT_UNIX_PATH)), 107); /* unchanged */
  relock_options_free(c);
}

static void test_long_values_are_cut_in_messages(void **state) {
  (void)state;
  char url[2200] = "redis://host/";
  size_t n = strlen(url);
  memset(url + n, 'x', 2000);
  url[n + 2000] = '\0';
  relock_options_t *c = options();
  relock_error_t err;
  assert_int_equal(relock_options_set_url(c, url, &err), RELOCK_EINVAL);
  assert_non_null(strstr(err.message, "invalid database \"xxxx"));
  assert_non_null(strstr(err.message, "...\""));
  assert_true(strlen(err.message) < 120);

  /* a long host parses (a name is not checked for DNS length limits here) */
  memcpy(url, "redis://", 8);
  memset(url + 8, 'h', 2000);
  url[2008] = '\0';
  assert_int_equal(relock_options_set_url(c, url, &err), 0);
  assert_int_equal(strlen(str(c, RELOCK_OPT_HOST)), 2000);

  /* and an unknown option's long name is cut */
  assert_int_equal(relock_options_set_int(c, url, 1, &err), RELOCK_EINVAL);
  assert_true(strlen(err.message) < 120);
  relock_options_free(c);
}

/* -- relock_options_from_env ------------------------------------------------
 * RELOCK_URL or RELOCK_URL_FILE, only on request, never silently: each test
 * sets what it needs and clears both when done. */

static void clear_env(void) {
  unsetenv("RELOCK_URL");
  unsetenv("RELOCK_URL_FILE");
}

/* A new file of the given content in $TMPDIR (or /tmp), made by mkstemp
 * from the template "relock-env-XXXXXX"; path gets its name (the caller
 * removes it with remove_file). */
static void write_file(char path[64], const char *content, size_t len) {
  const char *dir = getenv("TMPDIR") != NULL && strlen(getenv("TMPDIR")) < 40 ? getenv("TMPDIR") : "/tmp";
  snprintf(path, 64, "%s/relock-env-XXXXXX", dir);
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, content, len), (ssize_t)len);
  assert_int_equal(close(fd), 0);
}

/* from_env's error: code, and a message that starts with prefix, contains
 * what (when not NULL) and never the password "s3cret". Checks that opts
 * kept the host it had. */
static void assert_env_error(relock_options_t *o, int code, const char *prefix, const char *what) {
  relock_error_t err = dirty_error();
  const char *host_before = str(o, RELOCK_OPT_HOST);
  char before[64];
  snprintf(before, sizeof before, "%s", host_before);
  assert_int_equal(relock_options_from_env(o, &err), code);
  assert_int_equal(err.code, code);
  if (strncmp(err.message, prefix, strlen(prefix)) != 0)
    fail_msg("message \"%s\" does not start with \"%s\"", err.message, prefix);
  if (what != NULL && strstr(err.message, what) == NULL)
    fail_msg("message \"%s\" does not say \"%s\"", err.message, what);
  assert_null(strstr(err.message, "s3cret"));
  assert_string_equal(str(o, RELOCK_OPT_HOST), before);
}

static void test_from_env_neither_set(void **state) {
  (void)state;
  clear_env();
  relock_options_t *o = options();
  assert_int_equal(relock_options_set_url(o, "redis://mine:7001", NULL), 0);
  relock_error_t err = dirty_error();
  assert_int_equal(relock_options_from_env(o, &err), 0); /* nothing to apply: the program's settings stand */
  assert_int_equal(err.code, 0);
  assert_string_equal(err.message, "");
  assert_string_equal(str(o, RELOCK_OPT_HOST), "mine");
  assert_int_equal(num(o, RELOCK_OPT_PORT), 7001);
  relock_options_free(o);
}

static void test_from_env_url(void **state) {
  (void)state;
  clear_env();
  relock_options_t *o = options();
  setenv("RELOCK_URL", "redis://app:s3cret@cache.internal:6380/2", 1);
  relock_error_t err = dirty_error();
  assert_int_equal(relock_options_from_env(o, &err), 1);
  assert_int_equal(err.code, 0);
  assert_string_equal(err.message, "");
  assert_string_equal(str(o, RELOCK_OPT_HOST), "cache.internal");
  assert_int_equal(num(o, RELOCK_OPT_PORT), 6380);
  assert_int_equal(num(o, RELOCK_OPT_DB), 2);
  assert_string_equal(str(o, RELOCK_OPT_USERNAME), "app");
  assert_string_equal(str(o, RELOCK_OPT_PASSWORD), "s3cret");
  assert_int_equal(relock_options_from_env(NULL, &err), RELOCK_EINVAL);
  assert_string_equal(err.message, "opts is NULL");
  clear_env();
  relock_options_free(o);
}

static void test_from_env_refuses_unusable_urls(void **state) {
  (void)state;
  clear_env();
  relock_options_t *o = options();
  setenv("RELOCK_URL", "", 1);
  assert_env_error(o, RELOCK_EINVAL, "RELOCK_URL is set but empty", NULL);
  setenv("RELOCK_URL", "http://cache:6379", 1);
  assert_env_error(o, RELOCK_EINVAL, "RELOCK_URL: unsupported URL scheme", "\"http\"");
  setenv("RELOCK_URL", "redis://:s3cret@cache:notaport", 1);
  assert_env_error(o, RELOCK_EINVAL, "RELOCK_URL: ", NULL);
  setenv("RELOCK_URL", "redis://cache:6379", 1);
  setenv("RELOCK_URL_FILE", "/nonexistent", 1);
  assert_env_error(o, RELOCK_EINVAL, "both RELOCK_URL and RELOCK_URL_FILE are set", NULL);
  unsetenv("RELOCK_URL");
  setenv("RELOCK_URL_FILE", "", 1);
  assert_env_error(o, RELOCK_EINVAL, "RELOCK_URL_FILE is set but empty", NULL);
  clear_env();
  relock_options_free(o);
}

static void test_from_env_url_file(void **state) {
  (void)state;
  clear_env();
  relock_options_t *o = options();
  char path[64];
  static const char crlf[] = "redis://:s3cret@from-file:7000/1\r\nthe rest is not read\n";
  write_file(path, crlf, sizeof crlf - 1);
  setenv("RELOCK_URL_FILE", path, 1);
  relock_error_t err = dirty_error();
  assert_int_equal(relock_options_from_env(o, &err), 1);
  assert_string_equal(err.message, "");
  assert_string_equal(str(o, RELOCK_OPT_HOST), "from-file");
  assert_int_equal(num(o, RELOCK_OPT_PORT), 7000);
  assert_int_equal(num(o, RELOCK_OPT_DB), 1);
  assert_string_equal(str(o, RELOCK_OPT_PASSWORD), "s3cret");
  unlink(path);
  /* no newline at the end */
  write_file(path, "unix:///run/redis.sock", 22);
  setenv("RELOCK_URL_FILE", path, 1);
  assert_int_equal(relock_options_from_env(o, &err), 1);
  assert_string_equal(str(o, RELOCK_OPT_UNIX_PATH), "/run/redis.sock");
  unlink(path);
  clear_env();
  relock_options_free(o);
}

static void test_from_env_refuses_unusable_files(void **state) {
  (void)state;
  clear_env();
  relock_options_t *o = options();
  char path[64];
  setenv("RELOCK_URL_FILE", "/nonexistent/relock-url", 1);
  assert_env_error(o, RELOCK_EIO, "RELOCK_URL_FILE /nonexistent/relock-url: ", "No such file or directory");
  write_file(path, "", 0);
  setenv("RELOCK_URL_FILE", path, 1);
  assert_env_error(o, RELOCK_EINVAL, "RELOCK_URL_FILE /tmp/relock-env-", "is empty");
  unlink(path);
  /* a blank first line is not "the default server" */
  write_file(path, "\nredis://:s3cret@cache:6379\n", 28);
  setenv("RELOCK_URL_FILE", path, 1);
  assert_env_error(o, RELOCK_EINVAL, "RELOCK_URL_FILE /tmp/relock-env-", "the first line is blank");
  unlink(path);
  write_file(path, "redis://:s3cret@cache:port\n", 27);
  setenv("RELOCK_URL_FILE", path, 1);
  assert_env_error(o, RELOCK_EINVAL, "RELOCK_URL_FILE /tmp/relock-env-", NULL);
  unlink(path);
  static char long_line[5000];
  memset(long_line, 'a', sizeof long_line);
  memcpy(long_line, "redis://", 8);
  write_file(path, long_line, sizeof long_line);
  setenv("RELOCK_URL_FILE", path, 1);
  assert_env_error(o, RELOCK_EINVAL, "RELOCK_URL_FILE /tmp/relock-env-", "longer than 4096 bytes");
  unlink(path);
  /* a directory: fopen succeeds, reading fails */
  setenv("RELOCK_URL_FILE", "/tmp", 1);
  assert_env_error(o, RELOCK_EIO, "RELOCK_URL_FILE /tmp: ", "Is a directory");
  clear_env();
  relock_options_free(o);
}

static void test_null_arguments(void **state) {
  (void)state;
  relock_options_t *c = options();
  relock_error_t err = dirty_error();
  assert_int_equal(relock_options_set_url(NULL, "redis://h", &err), RELOCK_EINVAL);
  assert_string_equal(err.message, "opts is NULL");
  assert_int_equal(relock_options_set_url(c, NULL, &err), RELOCK_EINVAL);
  assert_string_equal(err.message, "url is NULL");
  assert_int_equal(relock_options_set_url(c, NULL, NULL), RELOCK_EINVAL);
  assert_int_equal(relock_options_validate(NULL, &err), RELOCK_EINVAL);
  assert_string_equal(err.message, "opts is NULL");
  assert_int_equal(relock_options_validate(NULL, NULL), RELOCK_EINVAL);
  assert_int_equal(relock_options_set_int(NULL, RELOCK_OPT_PORT, 1, &err), RELOCK_EINVAL);
  assert_string_equal(err.message, "opts is NULL");
  int v;
  assert_int_equal(relock_options_get_int(NULL, RELOCK_OPT_PORT, &v, &err), RELOCK_EINVAL);
  assert_string_equal(err.message, "opts is NULL");
  assert_string_equal(str(c, RELOCK_OPT_HOST), "127.0.0.1"); /* unchanged */
  relock_options_free(c);
}

/* -- Sentinel URLs -------------------------------------------------------------*/

typedef struct {
  const char *url;
  const char *sentinels, *master, *username, *password, *sentinel_username, *sentinel_password;
  int db;
} sentinel_url_t;

static const sentinel_url_t sentinel_urls[] = {
    {"redis+sentinel://s1:26379,s2:26380/mymaster", "s1:26379,s2:26380", "mymaster", NULL, NULL, NULL, NULL, 0},
    {"redis+sentinel://s1/m", "s1", "m", NULL, NULL, NULL, NULL, 0},
    {"REDIS+SENTINEL://[::1]:5000,10.0.0.1/m/3", "[::1]:5000,10.0.0.1", "m", NULL, NULL, NULL, NULL, 3},
    {"redis+sentinel://app:s%40cret@s1,s2/m", "s1,s2", "m", "app", "s@cret", NULL, NULL, 0},
    {"redis+sentinel://:pw@s1/m/2?sentinel-password=x%26y&sentinel-username=sen", "s1", "m", NULL, "pw", "sen",
     "x&y", 2},
    {"redis+sentinel://s1/m?db=4", "s1", "m", NULL, NULL, NULL, NULL, 4},
    {"redis+sentinel://s1/my%2Dmaster", "s1", "my-master", NULL, NULL, NULL, NULL, 0},
};

static void test_sentinel_urls(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof sentinel_urls / sizeof sentinel_urls[0]; i++) {
    const sentinel_url_t *g = &sentinel_urls[i];
    relock_options_t *c = options();
    relock_error_t err = dirty_error();
    if (relock_options_set_url(c, g->url, &err) != 0)
      fail_msg("%s: %s", g->url, err.message);
    assert_int_equal(err.code, 0);
    assert_string_equal(str(c, RELOCK_OPT_SENTINELS), g->sentinels);
    assert_string_equal(str(c, RELOCK_OPT_SENTINEL_MASTER), g->master);
    assert_str_or_null(str(c, RELOCK_OPT_USERNAME), g->username);
    assert_str_or_null(str(c, RELOCK_OPT_PASSWORD), g->password);
    assert_str_or_null(str(c, RELOCK_OPT_SENTINEL_USERNAME), g->sentinel_username);
    assert_str_or_null(str(c, RELOCK_OPT_SENTINEL_PASSWORD), g->sentinel_password);
    assert_int_equal(num(c, RELOCK_OPT_DB), g->db);
    assert_int_equal(num(c, RELOCK_OPT_TLS), 0);
    assert_null(str(c, RELOCK_OPT_UNIX_PATH));
    assert_int_equal(relock_options_validate(c, &err), 0);
    /* a plain URL afterwards leaves no Sentinel behind */
    assert_int_equal(relock_options_set_url(c, "redis://h", NULL), 0);
    assert_null(str(c, RELOCK_OPT_SENTINELS));
    assert_null(str(c, RELOCK_OPT_SENTINEL_MASTER));
    assert_null(str(c, RELOCK_OPT_SENTINEL_PASSWORD));
    relock_options_free(c);
  }
  /* rediss+sentinel:// is TLS to sentinels and nodes, or refused without TLS */
  relock_options_t *c = options();
  int r = relock_options_set_url(c, "rediss+sentinel://s1/m", NULL);
  assert_int_equal(r, relock_tls_available() ? 0 : RELOCK_ETLS);
  if (r == 0)
    assert_int_equal(num(c, RELOCK_OPT_TLS), 1);
  relock_options_free(c);
}

static const bad_url_t bad_sentinel_urls[] = {
    {"redis+sentinel://", "no sentinel in URL", NULL},
    {"redis+sentinel://:hunter2@/m", "no sentinel in URL", "hunter2"},
    {"redis+sentinel://s1", "no master name in URL", NULL},
    {"redis+sentinel://s1/", "no master name in URL", NULL},
    {"redis+sentinel://s1,,s2/m", "empty entry in the sentinel list", NULL},
    {"redis+sentinel://s1:0/m", "invalid port \"0\"", NULL},
    {"redis+sentinel://s1/m%20x", "master name in the URL must not contain spaces", NULL},
    {"redis+sentinel://s1/m/x", "invalid database \"x\"", NULL},
    {"redis+sentinel://s1/m?sentinel-username=u", "sentinel-username without sentinel-password", NULL},
    {"redis+sentinel://s1/m?sentinel-password=hunter2&x=1", "unknown parameter after a password", "hunter2"},
    {"redis+sentinel://s1/m?sentinel-password=hunter2&sentinel-password=hunter3", "given twice", "hunter"},
    {"redis+sentinel://s1/m#frag", "fragments", NULL},
    {"redis://h?sentinel-password=x", "query parameters", NULL},
    {"unix:///s?sentinel-password=x", "unknown parameter \"sentinel-password\"", NULL},
};

static void test_refused_sentinel_urls(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof bad_sentinel_urls / sizeof bad_sentinel_urls[0]; i++) {
    const bad_url_t *b = &bad_sentinel_urls[i];
    relock_options_t *c = options();
    relock_error_t err = dirty_error();
    int r = relock_options_set_url(c, b->url, &err);
    if (r != RELOCK_EINVAL)
      fail_msg("\"%s\" gave %d (%s), not RELOCK_EINVAL", b->url, r, err.message);
    if (strstr(err.message, b->phrase) == NULL)
      fail_msg("\"%s\": message \"%s\" lacks \"%s\"", b->url, err.message, b->phrase);
    if (b->secret != NULL && strstr(err.message, b->secret) != NULL)
      fail_msg("\"%s\": message \"%s\" shows the password", b->url, err.message);
    assert_null(str(c, RELOCK_OPT_SENTINELS)); /* unchanged */
    relock_options_free(c);
  }
}

/* -- Cluster URLs --------------------------------------------------------------*/

typedef struct {
  const char *url;
  const char *nodes, *username, *password;
} cluster_url_t;

static const cluster_url_t cluster_urls[] = {
    {"redis+cluster://127.0.0.1:7000,127.0.0.1:7001", "127.0.0.1:7000,127.0.0.1:7001", NULL, NULL},
    {"redis+cluster://n1", "n1", NULL, NULL},
    {"REDIS+CLUSTER://[::1]:7000,n2/0", "[::1]:7000,n2", NULL, NULL},
    {"redis+cluster://n1/", "n1", NULL, NULL},
    {"redis+cluster://app:s%40cret@n1:7000,n2:7001,n3", "n1:7000,n2:7001,n3", "app", "s@cret"},
    {"redis+cluster://:pw@n1", "n1", NULL, "pw"},
    {"redis+cluster://n1,n2?username=app&password=p%26q", "n1,n2", "app", "p&q"},
    {"redis+cluster://n1/0?password=pw&db=0", "n1", NULL, "pw"},
    {"redis+cluster://[fe80::1%25eth0]:7000", "[fe80::1%25eth0]:7000", NULL, NULL},
};

static void test_cluster_urls(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cluster_urls / sizeof cluster_urls[0]; i++) {
    const cluster_url_t *g = &cluster_urls[i];
    relock_options_t *c = options();
    /* what an earlier URL set is replaced: host and port back to their
     * defaults, no socket, no Sentinel */
    assert_int_equal(relock_options_set_url(c, "redis+sentinel://:old@s1/m/3?sentinel-password=x", NULL), 0);
    set_str(c, RELOCK_OPT_UNIX_PATH, "/tmp/r.sock");
    set_str(c, RELOCK_OPT_HOST, "elsewhere");
    assert_int_equal(relock_options_set_int(c, RELOCK_OPT_PORT, 7777, NULL), 0);
    relock_error_t err = dirty_error();
    if (relock_options_set_url(c, g->url, &err) != 0)
      fail_msg("%s: %s", g->url, err.message);
    assert_int_equal(err.code, 0);
    assert_string_equal(str(c, RELOCK_OPT_CLUSTER_NODES), g->nodes);
    assert_str_or_null(str(c, RELOCK_OPT_USERNAME), g->username);
    assert_str_or_null(str(c, RELOCK_OPT_PASSWORD), g->password);
    assert_int_equal(num(c, RELOCK_OPT_DB), 0);
    assert_int_equal(num(c, RELOCK_OPT_TLS), 0);
    assert_string_equal(str(c, RELOCK_OPT_HOST), "127.0.0.1");
    assert_int_equal(num(c, RELOCK_OPT_PORT), 6379);
    assert_null(str(c, RELOCK_OPT_UNIX_PATH));
    assert_null(str(c, RELOCK_OPT_SENTINELS));
    assert_null(str(c, RELOCK_OPT_SENTINEL_MASTER));
    assert_null(str(c, RELOCK_OPT_SENTINEL_PASSWORD));
    assert_int_equal(relock_options_validate(c, &err), 0);
    /* a plain URL afterwards leaves no Cluster behind */
    assert_int_equal(relock_options_set_url(c, "redis://h", NULL), 0);
    assert_null(str(c, RELOCK_OPT_CLUSTER_NODES));
    assert_int_equal(relock_options_validate(c, &err), 0);
    relock_options_free(c);
  }
  /* nor a Sentinel or unix:// URL */
  relock_options_t *c = options();
  assert_int_equal(relock_options_set_url(c, "redis+cluster://n1", NULL), 0);
  assert_int_equal(relock_options_set_url(c, "redis+sentinel://s1/m", NULL), 0);
  assert_null(str(c, RELOCK_OPT_CLUSTER_NODES));
  assert_int_equal(relock_options_validate(c, NULL), 0);
  assert_int_equal(relock_options_set_url(c, "redis+cluster://n1", NULL), 0);
  assert_int_equal(relock_options_set_url(c, "unix:///tmp/r.sock", NULL), 0);
  assert_null(str(c, RELOCK_OPT_CLUSTER_NODES));
  assert_int_equal(relock_options_validate(c, NULL), 0);

  /* rediss+cluster:// is TLS to every node, or refused without TLS */
  relock_error_t err = dirty_error();
  int r = relock_options_set_url(c, "rediss+cluster://n1:7000,n2:7001", &err);
  assert_int_equal(r, relock_tls_available() ? 0 : RELOCK_ETLS);
  if (r == 0) {
    assert_int_equal(num(c, RELOCK_OPT_TLS), 1);
    assert_string_equal(str(c, RELOCK_OPT_CLUSTER_NODES), "n1:7000,n2:7001");
  } else {
    assert_non_null(strstr(err.message, "rediss+cluster:// URL: this build has no TLS support"));
    assert_null(str(c, RELOCK_OPT_CLUSTER_NODES)); /* unchanged */
  }
  relock_options_free(c);
}

static const bad_url_t bad_cluster_urls[] = {
    {"redis+cluster://", "no cluster node in URL: redis+cluster://host[:port][,host[:port]...]", NULL},
    {"redis+cluster:///0", "no cluster node in URL", NULL},
    {"redis+cluster://:hunter2@", "no cluster node in URL", "hunter2"},
    {"redis+cluster://n1/1", "a database other than 0 in a redis+cluster:// URL: Redis Cluster has only database 0",
     NULL},
    {"redis+cluster://:hunter2@n1/2", "Redis Cluster has only database 0", "hunter2"},
    {"redis+cluster://n1?db=3", "Redis Cluster has only database 0", NULL},
    {"redis+cluster://n1?password=hunter2&db=7", "Redis Cluster has only database 0", "hunter2"},
    {"redis+cluster://n1/x", "invalid database \"x\"", NULL},
    {"redis+cluster://n1/0/x", "invalid database \"0/x\"", NULL},
    {"redis+cluster://n1,,n2", "empty entry in the cluster-nodes list", NULL},
    {"redis+cluster://n1,", "empty entry in the cluster-nodes list", NULL},
    {"redis+cluster://n1:0", "invalid port \"0\"", NULL},
    {"redis+cluster://n1,fe80::1", "must be in brackets", NULL},
    {"redis+cluster://a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", "more than 16 cluster seed nodes", NULL},
    {"redis+cluster://n1?sentinel-password=x", "unknown parameter \"sentinel-password\"", NULL},
    {"redis+cluster://n1?username=u", "username without password", NULL},
    {"redis+cluster://n1?password=hunter2&x=1", "unknown parameter after a password", "hunter2"},
    {"redis+cluster://n1#frag", "fragments", NULL},
    {"redis+cluster://n1 ,n2", "space or control character", NULL},
};

static void test_refused_cluster_urls(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof bad_cluster_urls / sizeof bad_cluster_urls[0]; i++) {
    const bad_url_t *b = &bad_cluster_urls[i];
    relock_options_t *c = options();
    assert_int_equal(relock_options_set_url(c, "redis://:keep@before:7777/7", NULL), 0);
    relock_error_t err = dirty_error();
    int r = relock_options_set_url(c, b->url, &err);
    if (r != RELOCK_EINVAL)
      fail_msg("\"%s\" gave %d (%s), not RELOCK_EINVAL", b->url, r, err.message);
    if (strstr(err.message, b->phrase) == NULL)
      fail_msg("\"%s\": message \"%s\" lacks \"%s\"", b->url, err.message, b->phrase);
    if (b->secret != NULL && strstr(err.message, b->secret) != NULL)
      fail_msg("\"%s\": message \"%s\" shows the password", b->url, err.message);
    assert_null(strstr(err.message, "keep"));
    /* unchanged */
    assert_null(str(c, RELOCK_OPT_CLUSTER_NODES));
    assert_string_equal(str(c, RELOCK_OPT_HOST), "before");
    assert_string_equal(str(c, RELOCK_OPT_PASSWORD), "keep");
    assert_int_equal(num(c, RELOCK_OPT_DB), 7);
    relock_options_free(c);
  }
}

/* -- the client's copy of the seeds --------------------------------------------*/

/* relock__settings_init on options with cluster-nodes set to nodes; fails
 * the test unless it succeeds. */
static void cluster_settings(relock__settings_t *s, const char *nodes) {
  relock_options_t *c = options();
  relock_error_t err = dirty_error();
  /* as the command line sets it: by name, as text */
  if (relock_options_set(c, "cluster-nodes", nodes, &err) != 0 || relock__settings_init(s, c, &err) != 0)
    fail_msg("%s: %s", nodes, err.message);
  assert_int_equal(err.code, 0);
  relock_options_free(c);
}

static void test_cluster_settings(void **state) {
  (void)state;
  relock__settings_t s;
  cluster_settings(&s, "127.0.0.1:7000");
  assert_int_equal(s.ncluster_nodes, 1);
  assert_int_equal(s.nsentinels, 0);
  assert_string_equal(s.cluster_nodes[0].host, "127.0.0.1");
  assert_int_equal(s.cluster_nodes[0].port, 7000);
  assert_string_equal(s.address, "cluster 127.0.0.1:7000");
  assert_string_equal(s.opt.cluster_nodes, "127.0.0.1:7000");
  relock__settings_cleanup(&s);

  /* port 6379 when left out (not Sentinel's 26379); IPv6 without brackets */
  cluster_settings(&s, "a:7000,b,[::1]:7002");
  assert_int_equal(s.ncluster_nodes, 3);
  assert_string_equal(s.cluster_nodes[0].host, "a");
  assert_int_equal(s.cluster_nodes[0].port, 7000);
  assert_string_equal(s.cluster_nodes[1].host, "b");
  assert_int_equal(s.cluster_nodes[1].port, 6379);
  assert_string_equal(s.cluster_nodes[2].host, "::1");
  assert_int_equal(s.cluster_nodes[2].port, 7002);
  assert_string_equal(s.address, "cluster a:7000,b:6379,[::1]:7002");
  relock__settings_cleanup(&s);

  /* 16 seeds of 255-byte names do not fit the address: the ones that do
   * not are cut to ",...", never an address in half */
  char nodes[16 * 262];
  size_t n = 0;
  for (int i = 0; i < 16; i++) {
    if (i > 0)
      nodes[n++] = ',';
    memset(nodes + n, 'a' + i, 255);
    n += 255;
    n += (size_t)sprintf(nodes + n, ":%d", 7000 + i);
  }
  cluster_settings(&s, nodes);
  assert_int_equal(s.ncluster_nodes, 16);
  assert_int_equal(strlen(s.cluster_nodes[15].host), 255);
  assert_int_equal(s.cluster_nodes[15].port, 7015);
  assert_true(strlen(s.address) < sizeof s.address);
  assert_int_equal(strncmp(s.address, "cluster aaaa", 12), 0);
  assert_non_null(strstr(s.address, "a:7000,...")); /* the second (b...) did not fit */
  assert_string_equal(s.address + strlen(s.address) - 4, ",...");
  relock__settings_cleanup(&s);

  /* no Cluster: nothing parsed */
  relock_options_t *c = options();
  assert_int_equal(relock__settings_init(&s, c, NULL), 0);
  assert_int_equal(s.ncluster_nodes, 0);
  assert_string_equal(s.address, "127.0.0.1:6379");
  relock__settings_cleanup(&s);

  /* the client refuses what validation refuses */
  set_str(c, RELOCK_OPT_CLUSTER_NODES, "n1");
  assert_int_equal(relock_options_set_int(c, RELOCK_OPT_DB, 2, NULL), 0);
  relock_error_t err = dirty_error();
  assert_int_equal(relock__settings_init(&s, c, &err), RELOCK_EINVAL);
  assert_string_equal(err.message, "db 2 with cluster-nodes: Redis Cluster has only database 0; set db to 0");
  relock_options_free(c);
}

/* -- validation ---------------------------------------------------------------*/

/* Sets options as a program would; the first refusal is the outcome, else
 * relock_options_validate's. */
typedef int (*mutate_fn)(relock_options_t *c, relock_error_t *err);

typedef struct {
  const char *what;
  mutate_fn mutate;
  const char *phrase; /* NULL: valid */
} rule_t;

#define SET(type, name, value)                                         \
  do {                                                                 \
    int set_r_ = relock_options_set_##type(c, (name), (value), err);   \
    if (set_r_ != 0)                                                   \
      return set_r_;                                                   \
  } while (0)

#define RULE(name, body)                                                 \
  static int name(relock_options_t *c, relock_error_t *err) {            \
    body;                                                                \
    return relock_options_validate(c, err);                              \
  }

RULE(port_0, SET(int, RELOCK_OPT_PORT, 0))
RULE(port_1, SET(int, RELOCK_OPT_PORT, 1))
RULE(port_65535, SET(int, RELOCK_OPT_PORT, 65535))
RULE(port_65536, SET(int, RELOCK_OPT_PORT, 65536))
RULE(port_negative, SET(int, RELOCK_OPT_PORT, -6379))
RULE(port_ignored_with_unix_path, SET(string, RELOCK_OPT_UNIX_PATH, "/tmp/r.sock"); SET(int, RELOCK_OPT_PORT, 0))
RULE(host_null, SET(string, RELOCK_OPT_HOST, NULL))
RULE(host_empty, SET(string, RELOCK_OPT_HOST, ""))
RULE(host_null_with_unix_path, SET(string, RELOCK_OPT_UNIX_PATH, "/tmp/r.sock"); SET(string, RELOCK_OPT_HOST, NULL))
RULE(unix_path_relative, SET(string, RELOCK_OPT_UNIX_PATH, "tmp/r.sock"))
RULE(unix_path_empty, SET(string, RELOCK_OPT_UNIX_PATH, ""))
RULE(db_negative, SET(int, RELOCK_OPT_DB, -1))
RULE(db_0, SET(int, RELOCK_OPT_DB, 0))
RULE(db_max, SET(int, RELOCK_OPT_DB, INT_MAX))
RULE(connect_timeout_0, SET(ms, RELOCK_OPT_CONNECT_TIMEOUT, 0))
RULE(connect_timeout_1, SET(ms, RELOCK_OPT_CONNECT_TIMEOUT, 1))
RULE(connect_timeout_negative, SET(ms, RELOCK_OPT_CONNECT_TIMEOUT, -1))
RULE(command_timeout_0, SET(ms, RELOCK_OPT_COMMAND_TIMEOUT, 0))
RULE(command_timeout_1, SET(ms, RELOCK_OPT_COMMAND_TIMEOUT, 1))
RULE(command_timeout_infinite, SET(ms, RELOCK_OPT_COMMAND_TIMEOUT, RELOCK_INFINITE))
RULE(retry_attempts_negative, SET(int, RELOCK_OPT_RETRY_ATTEMPTS, -1))
RULE(retry_attempts_0, SET(int, RELOCK_OPT_RETRY_ATTEMPTS, 0))
RULE(retry_interval_negative, SET(ms, RELOCK_OPT_RETRY_INTERVAL, -1))
RULE(retry_interval_0, SET(ms, RELOCK_OPT_RETRY_INTERVAL, 0))
RULE(reconnect_min_0, SET(ms, RELOCK_OPT_RECONNECT_MIN, 0))
RULE(reconnect_min_1, SET(ms, RELOCK_OPT_RECONNECT_MIN, 1))
RULE(reconnect_min_equals_max, SET(ms, RELOCK_OPT_RECONNECT_MIN, 500); SET(ms, RELOCK_OPT_RECONNECT_MAX, 500))
RULE(reconnect_min_above_max, SET(ms, RELOCK_OPT_RECONNECT_MIN, 501); SET(ms, RELOCK_OPT_RECONNECT_MAX, 500))
RULE(watchdog_2, SET(ms, RELOCK_OPT_WATCHDOG_TIMEOUT, 2))
RULE(watchdog_9, SET(ms, RELOCK_OPT_WATCHDOG_TIMEOUT, 9))
RULE(watchdog_10, SET(ms, RELOCK_OPT_WATCHDOG_TIMEOUT, 10))
RULE(watchdog_negative, SET(ms, RELOCK_OPT_WATCHDOG_TIMEOUT, RELOCK_INFINITE))
RULE(client_id_uuid, SET(string, RELOCK_OPT_CLIENT_ID, "3b0c7c1e-8f0a-4d5e-9a41-0c2f6b7d8e90"))
RULE(client_id_empty, SET(string, RELOCK_OPT_CLIENT_ID, ""))
RULE(client_id_64, SET(string, RELOCK_OPT_CLIENT_ID, "1234567890123456789012345678901234567890123456789012345678901234"))
RULE(client_id_65, SET(string, RELOCK_OPT_CLIENT_ID, "12345678901234567890123456789012345678901234567890123456789012345"))
RULE(client_id_colon, SET(string, RELOCK_OPT_CLIENT_ID, "host:42"))
RULE(client_id_space, SET(string, RELOCK_OPT_CLIENT_ID, "my client"))
RULE(client_id_tab, SET(string, RELOCK_OPT_CLIENT_ID, "a\tb"))
RULE(client_id_newline, SET(string, RELOCK_OPT_CLIENT_ID, "a\n"))
RULE(client_id_del, SET(string, RELOCK_OPT_CLIENT_ID, "a\x7f"))
RULE(client_id_utf8, SET(string, RELOCK_OPT_CLIENT_ID, "caf\xc3\xa9"))
RULE(client_name_ok, SET(string, RELOCK_OPT_CLIENT_NAME, "worker-1"))
RULE(client_name_empty, SET(string, RELOCK_OPT_CLIENT_NAME, ""))
RULE(client_name_space, SET(string, RELOCK_OPT_CLIENT_NAME, "worker 1"))
RULE(client_name_utf8, SET(string, RELOCK_OPT_CLIENT_NAME, "caf\xc3\xa9"))
RULE(password_only, SET(string, RELOCK_OPT_PASSWORD, "pw"))
RULE(password_empty, SET(string, RELOCK_OPT_PASSWORD, ""))
RULE(username_and_password, SET(string, RELOCK_OPT_USERNAME, "app"); SET(string, RELOCK_OPT_PASSWORD, "pw"))
RULE(username_without_password, SET(string, RELOCK_OPT_USERNAME, "app"))
RULE(username_empty, SET(string, RELOCK_OPT_USERNAME, ""); SET(string, RELOCK_OPT_PASSWORD, "pw"))
RULE(replicas_negative, SET(int, RELOCK_OPT_MIN_REPLICAS_ACKED, -1))
RULE(replicas_0, SET(int, RELOCK_OPT_MIN_REPLICAS_ACKED, 0))
RULE(replicas_1, SET(int, RELOCK_OPT_MIN_REPLICAS_ACKED, 1))
RULE(replicas_100, SET(int, RELOCK_OPT_MIN_REPLICAS_ACKED, 100))
RULE(replicas_101, SET(int, RELOCK_OPT_MIN_REPLICAS_ACKED, 101))
RULE(replicas_timeout_0, SET(ms, RELOCK_OPT_MIN_REPLICAS_TIMEOUT, 0))
RULE(replicas_timeout_negative, SET(ms, RELOCK_OPT_MIN_REPLICAS_TIMEOUT, RELOCK_INFINITE))
RULE(replicas_timeout_1, SET(int, RELOCK_OPT_MIN_REPLICAS_ACKED, 1); SET(ms, RELOCK_OPT_MIN_REPLICAS_TIMEOUT, 1))
RULE(replicas_timeout_below_command, SET(int, RELOCK_OPT_MIN_REPLICAS_ACKED, 2);
     SET(ms, RELOCK_OPT_COMMAND_TIMEOUT, 1000); SET(ms, RELOCK_OPT_MIN_REPLICAS_TIMEOUT, 999))
RULE(replicas_timeout_equals_command, SET(int, RELOCK_OPT_MIN_REPLICAS_ACKED, 1);
     SET(ms, RELOCK_OPT_COMMAND_TIMEOUT, 1000); SET(ms, RELOCK_OPT_MIN_REPLICAS_TIMEOUT, 1000))
/* the default timeout (500 ms) against a short command timeout */
RULE(replicas_default_timeout_above_command, SET(int, RELOCK_OPT_MIN_REPLICAS_ACKED, 1);
     SET(ms, RELOCK_OPT_COMMAND_TIMEOUT, 400))
/* without WAIT the timeout is not used, and ties nothing */
RULE(replicas_off_timeout_above_command, SET(ms, RELOCK_OPT_COMMAND_TIMEOUT, 100);
     SET(ms, RELOCK_OPT_MIN_REPLICAS_TIMEOUT, 5000))

RULE(sentinels_ok, SET(string, RELOCK_OPT_SENTINELS, "a:1,b,[::1]:26380"); SET(string, RELOCK_OPT_SENTINEL_MASTER, "m"))
RULE(sentinels_without_master, SET(string, RELOCK_OPT_SENTINELS, "a:1"))
RULE(master_without_sentinels, SET(string, RELOCK_OPT_SENTINEL_MASTER, "m"))
RULE(sentinels_with_unix_path, SET(string, RELOCK_OPT_SENTINELS, "a"); SET(string, RELOCK_OPT_SENTINEL_MASTER, "m");
     SET(string, RELOCK_OPT_UNIX_PATH, "/tmp/s"))
RULE(sentinels_empty, SET(string, RELOCK_OPT_SENTINELS, ""))
RULE(sentinels_empty_entry, SET(string, RELOCK_OPT_SENTINELS, "a,,b"))
RULE(sentinels_trailing_comma, SET(string, RELOCK_OPT_SENTINELS, "a,"))
RULE(sentinels_bad_port, SET(string, RELOCK_OPT_SENTINELS, "a:0"))
RULE(sentinels_bad_host, SET(string, RELOCK_OPT_SENTINELS, "a b"))
RULE(sentinels_17, SET(string, RELOCK_OPT_SENTINELS, "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q"))
RULE(sentinels_16, SET(string, RELOCK_OPT_SENTINELS, "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p");
     SET(string, RELOCK_OPT_SENTINEL_MASTER, "m"))
RULE(sentinel_master_space, SET(string, RELOCK_OPT_SENTINEL_MASTER, "my master"))
RULE(sentinel_username_without_password, SET(string, RELOCK_OPT_SENTINELS, "a");
     SET(string, RELOCK_OPT_SENTINEL_MASTER, "m"); SET(string, RELOCK_OPT_SENTINEL_USERNAME, "u"))
RULE(sentinel_password_empty, SET(string, RELOCK_OPT_SENTINEL_PASSWORD, ""))
RULE(sentinel_credentials, SET(string, RELOCK_OPT_SENTINELS, "a"); SET(string, RELOCK_OPT_SENTINEL_MASTER, "m");
     SET(string, RELOCK_OPT_SENTINEL_USERNAME, "u"); SET(string, RELOCK_OPT_SENTINEL_PASSWORD, "hunter2"))

RULE(cluster_1, SET(string, RELOCK_OPT_CLUSTER_NODES, "127.0.0.1:7000"))
RULE(cluster_3, SET(string, RELOCK_OPT_CLUSTER_NODES, "n1:7000,n2:7001,[::1]:7002"))
RULE(cluster_default_port, SET(string, RELOCK_OPT_CLUSTER_NODES, "n1,n2"))
RULE(cluster_ipv6, SET(string, RELOCK_OPT_CLUSTER_NODES, "[2001:db8::10],[fe80::1%25eth0]:7000"))
RULE(cluster_16, SET(string, RELOCK_OPT_CLUSTER_NODES, "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p"))
RULE(cluster_17, SET(string, RELOCK_OPT_CLUSTER_NODES, "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q"))
RULE(cluster_empty, SET(string, RELOCK_OPT_CLUSTER_NODES, ""))
RULE(cluster_trailing_comma, SET(string, RELOCK_OPT_CLUSTER_NODES, "a,"))
RULE(cluster_bad_port, SET(string, RELOCK_OPT_CLUSTER_NODES, "a:70000"))
RULE(cluster_bare_ipv6, SET(string, RELOCK_OPT_CLUSTER_NODES, "fe80::1"))
RULE(cluster_long_host, char host[300]; memset(host, 'h', 256); host[256] = '\0';
     SET(string, RELOCK_OPT_CLUSTER_NODES, host))
RULE(cluster_with_sentinels, SET(string, RELOCK_OPT_CLUSTER_NODES, "n1"); SET(string, RELOCK_OPT_SENTINELS, "s1");
     SET(string, RELOCK_OPT_SENTINEL_MASTER, "m"))
RULE(cluster_with_unix_path, SET(string, RELOCK_OPT_CLUSTER_NODES, "n1"); SET(string, RELOCK_OPT_UNIX_PATH, "/tmp/s"))
RULE(cluster_db_1, SET(string, RELOCK_OPT_CLUSTER_NODES, "n1"); SET(int, RELOCK_OPT_DB, 1))
RULE(cluster_db_0, SET(int, RELOCK_OPT_DB, 0); SET(string, RELOCK_OPT_CLUSTER_NODES, "n1"))
RULE(cluster_min_replicas, SET(string, RELOCK_OPT_CLUSTER_NODES, "n1,n2"); SET(int, RELOCK_OPT_MIN_REPLICAS_ACKED, 1))
RULE(cluster_credentials, SET(string, RELOCK_OPT_CLUSTER_NODES, "n1"); SET(string, RELOCK_OPT_USERNAME, "u");
     SET(string, RELOCK_OPT_PASSWORD, "hunter2"))
/* host and port have defaults and mean nothing with Cluster, as with Sentinel */
RULE(cluster_with_host, SET(string, RELOCK_OPT_CLUSTER_NODES, "n1"); SET(string, RELOCK_OPT_HOST, "h");
     SET(int, RELOCK_OPT_PORT, 7000))

static const rule_t rules[] = {
    {"1 cluster seed", cluster_1, NULL},
    {"3 cluster seeds", cluster_3, NULL},
    {"cluster seeds without ports", cluster_default_port, NULL},
    {"cluster seeds in IPv6", cluster_ipv6, NULL},
    {"16 cluster seeds", cluster_16, NULL},
    {"17 cluster seeds", cluster_17, "more than 16 cluster seed nodes in the list"},
    {"cluster-nodes \"\"", cluster_empty, "empty entry in the cluster-nodes list \"host[:port],host[:port],...\""},
    {"cluster-nodes a,", cluster_trailing_comma, "empty entry in the cluster-nodes list"},
    {"cluster-nodes a:70000", cluster_bad_port, "invalid port"},
    {"cluster-nodes fe80::1", cluster_bare_ipv6, "must be in brackets"},
    {"cluster seed of 256 bytes", cluster_long_host, "a host in the cluster-nodes list is longer than 255 bytes"},
    {"cluster-nodes with sentinels", cluster_with_sentinels,
     "cluster-nodes and sentinels together: a client uses Redis Cluster or Sentinel, not both; unset one of them"},
    {"cluster-nodes with unix-path", cluster_with_unix_path,
     "cluster-nodes and unix-path together: with Redis Cluster, the nodes are the host:port addresses the cluster "
     "gives; unset unix-path"},
    {"cluster-nodes with db 1", cluster_db_1, "db 1 with cluster-nodes: Redis Cluster has only database 0; set db to 0"},
    {"cluster-nodes with db 0", cluster_db_0, NULL},
    {"cluster-nodes with min-replicas-acked", cluster_min_replicas, NULL},
    {"cluster-nodes with credentials", cluster_credentials, NULL},
    {"cluster-nodes with host and port", cluster_with_host, NULL},
    {"sentinels and master", sentinels_ok, NULL},
    {"sentinels without master", sentinels_without_master, "sentinels without sentinel-master"},
    {"master without sentinels", master_without_sentinels, "sentinel-master without sentinels"},
    {"sentinels with unix-path", sentinels_with_unix_path, "sentinels and unix-path together"},
    {"sentinels \"\"", sentinels_empty, "empty entry in the sentinel list"},
    {"sentinels a,,b", sentinels_empty_entry, "empty entry in the sentinel list"},
    {"sentinels a,", sentinels_trailing_comma, "empty entry in the sentinel list"},
    {"sentinels a:0", sentinels_bad_port, "invalid port \"0\""},
    {"sentinels \"a b\"", sentinels_bad_host, "invalid character \" \""},
    {"17 sentinels", sentinels_17, "more than 16 sentinels"},
    {"16 sentinels", sentinels_16, NULL},
    {"sentinel master with space", sentinel_master_space, "sentinel-master must not contain spaces"},
    {"sentinel username without password", sentinel_username_without_password,
     "sentinel-username without sentinel-password"},
    {"sentinel password \"\"", sentinel_password_empty, "sentinel-password is empty"},
    {"sentinel credentials", sentinel_credentials, NULL},
    {"port 0", port_0, "invalid port 0: must be 1-65535"},
    {"port 1", port_1, NULL},
    {"port 65535", port_65535, NULL},
    {"port 65536", port_65536, "invalid port 65536"},
    {"port -6379", port_negative, "invalid port -6379"},
    /* refused when set, whatever else is set: a port is checked on its own */
    {"port with unix-path", port_ignored_with_unix_path, "invalid port 0: must be 1-65535"},
    {"host NULL", host_null, "empty host"},
    {"host \"\"", host_empty, "empty host"},
    {"host NULL with unix-path", host_null_with_unix_path, NULL},
    {"relative unix-path", unix_path_relative, "unix-path must be an absolute path"},
    {"empty unix-path", unix_path_empty, "unix-path must be an absolute path"},
    {"db -1", db_negative, "invalid database -1: must be >= 0"},
    {"db 0", db_0, NULL},
    {"db INT_MAX", db_max, NULL},
    {"connect timeout 0", connect_timeout_0, "connect-timeout must be > 0 (got 0)"},
    {"connect timeout 1", connect_timeout_1, NULL},
    {"connect timeout -1", connect_timeout_negative, "connect-timeout must be > 0 (got -1)"},
    {"command timeout 0", command_timeout_0, "command-timeout must be > 0"},
    {"command timeout 1", command_timeout_1, NULL},
    {"command timeout -1", command_timeout_infinite, "command-timeout must be > 0 (got -1)"},
    {"retry attempts -1", retry_attempts_negative, "retry-attempts must be >= 0 (got -1)"},
    {"retry attempts 0", retry_attempts_0, NULL},
    {"retry interval -1", retry_interval_negative, "retry-interval must be >= 0"},
    {"retry interval 0", retry_interval_0, NULL},
    {"reconnect min 0", reconnect_min_0, "reconnect-min must be >= 1 (got 0)"},
    {"reconnect min 1", reconnect_min_1, NULL},
    {"reconnect min == max", reconnect_min_equals_max, NULL},
    {"reconnect min > max", reconnect_min_above_max, "reconnect-min (501) must not exceed reconnect-max (500)"},
    {"watchdog 2", watchdog_2, "watchdog-timeout must be >= 10"},
    {"watchdog 9 (nearly all drift margin)", watchdog_9, "drift margin"},
    {"watchdog 10 (RELOCK_MIN_LEASE_MS)", watchdog_10, NULL},
    {"watchdog -1", watchdog_negative, "watchdog-timeout must be >= 10"},
    {"client id UUID", client_id_uuid, NULL},
    {"client id \"\"", client_id_empty, "client-id must not be empty"},
    {"client id 64 bytes", client_id_64, NULL},
    {"client id 65 bytes", client_id_65, "client-id is 65 bytes long: at most 64"},
    {"client id with ':'", client_id_colon, "client-id must not contain \":\""},
    {"client id with space", client_id_space, "client-id must not contain spaces or control characters"},
    {"client id with tab", client_id_tab, "client-id must not contain spaces or control characters"},
    {"client id with newline", client_id_newline, "client-id must not contain spaces or control characters"},
    {"client id with DEL", client_id_del, "client-id must not contain spaces or control characters"},
    {"client id in UTF-8", client_id_utf8, NULL},
    {"client name", client_name_ok, NULL},
    {"client name \"\"", client_name_empty, "client-name must not be empty"},
    {"client name with space", client_name_space, "client-name must not contain spaces"},
    {"client name in UTF-8", client_name_utf8, "client-name must be printable ASCII"},
    {"password only", password_only, NULL},
    {"password \"\"", password_empty, "password is empty"},
    {"username and password", username_and_password, NULL},
    {"username without password", username_without_password, "username without password"},
    {"username \"\"", username_empty, "username is empty"},
    {"min replicas -1", replicas_negative, "min-replicas-acked must be 0-100, 0 for no WAIT (got -1)"},
    {"min replicas 0", replicas_0, NULL},
    {"min replicas 1", replicas_1, NULL},
    {"min replicas 100", replicas_100, NULL},
    {"min replicas 101", replicas_101, "min-replicas-acked must be 0-100, 0 for no WAIT (got 101)"},
    {"replicas timeout 0", replicas_timeout_0, "min-replicas-timeout must be > 0 (WAIT 0 would block forever) (got 0)"},
    {"replicas timeout -1", replicas_timeout_negative, "min-replicas-timeout must be > 0"},
    {"replicas timeout 1", replicas_timeout_1, NULL},
    {"replicas timeout < command timeout", replicas_timeout_below_command, NULL},
    {"replicas timeout == command timeout", replicas_timeout_equals_command,
     "min-replicas-timeout (1000 ms) must be less than command-timeout (1000 ms)"},
    {"default replicas timeout > command timeout", replicas_default_timeout_above_command,
     "min-replicas-timeout (500 ms) must be less than command-timeout (400 ms)"},
    {"replicas off, timeout > command timeout", replicas_off_timeout_above_command, NULL},
};

static void test_validate_rules(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
    const rule_t *rule = &rules[i];
    relock_options_t *c = options();
    relock_error_t err = dirty_error();
    int r = rule->mutate(c, &err);
    if (rule->phrase == NULL) {
      if (r != 0)
        fail_msg("%s: refused: %s", rule->what, err.message);
      assert_int_equal(err.code, 0);
      assert_string_equal(err.message, "");
    } else {
      if (r != RELOCK_EINVAL)
        fail_msg("%s: accepted (%d)", rule->what, r);
      assert_int_equal(err.code, RELOCK_EINVAL);
      if (strstr(err.message, rule->phrase) == NULL)
        fail_msg("%s: message \"%s\" lacks \"%s\"", rule->what, err.message, rule->phrase);
      relock_options_free(c);
      c = options();
      assert_int_equal(rule->mutate(c, NULL), RELOCK_EINVAL);
    }
    relock_options_free(c);
  }
}

static void test_validate_never_shows_the_password(void **state) {
  (void)state;
  relock_options_t *c = options();
  set_str(c, RELOCK_OPT_PASSWORD, "hunter2");
  set_str(c, RELOCK_OPT_USERNAME, "app");
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
    relock_options_t *d = relock_options_copy(c, NULL);
    assert_non_null(d);
    relock_error_t err;
    rules[i].mutate(d, &err);
    assert_null(strstr(err.message, "hunter2"));
    relock_options_free(d);
  }
  relock_options_free(c);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_defaults),
    cmocka_unit_test(test_unknown_option_and_wrong_type),
    cmocka_unit_test(test_set_from_text),
    cmocka_unit_test(test_copy),
    cmocka_unit_test(test_accepted_urls),
    cmocka_unit_test(test_parsed_strings_outlive_the_url),
    cmocka_unit_test(test_url_replaces_every_connection_field),
    cmocka_unit_test(test_set_url_twice),
    cmocka_unit_test(test_refused_urls),
    cmocka_unit_test(test_sentinel_urls),
    cmocka_unit_test(test_refused_sentinel_urls),
    cmocka_unit_test(test_cluster_urls),
    cmocka_unit_test(test_refused_cluster_urls),
    cmocka_unit_test(test_cluster_settings),
    cmocka_unit_test(test_long_socket_path),
    cmocka_unit_test(test_long_values_are_cut_in_messages),
    cmocka_unit_test(test_from_env_neither_set),
    cmocka_unit_test(test_from_env_url),
    cmocka_unit_test(test_from_env_refuses_unusable_urls),
    cmocka_unit_test(test_from_env_url_file),
    cmocka_unit_test(test_from_env_refuses_unusable_files),
    cmocka_unit_test(test_null_arguments),
    cmocka_unit_test(test_validate_rules),
    cmocka_unit_test(test_validate_never_shows_the_password),
};

RELOCK_TEST_MAIN(tests, NULL, NULL)
