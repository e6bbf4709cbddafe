/* Unit tests of the client configuration: the defaults, every URL form the
 * parser accepts, the ones it refuses (with a message that names the problem
 * and never shows the password), and every rule of validation. */
#include <config.h>

#include <limits.h>
#include <string.h>

#include <relock/client.h>
#include <relock/error.h>

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

/* -- defaults ---------------------------------------------------------------*/

static void test_defaults(void **state) {
  (void)state;
  relock_config_t c;
  memset(&c, 0xa5, sizeof c);
  relock_config_init(&c);
  assert_string_equal(c.host, "127.0.0.1");
  assert_int_equal(c.port, 6379);
  assert_null(c.unix_path);
  assert_null(c.username);
  assert_null(c.password);
  assert_int_equal(c.db, 0);
  assert_null(c.client_name);
  assert_int_equal(c.connect_timeout_ms, 5000);
  assert_int_equal(c.command_timeout_ms, 3000);
  assert_int_equal(c.retry_attempts, 3);
  assert_int_equal(c.retry_interval_ms, 1500);
  assert_int_equal(c.reconnect_min_ms, 100);
  assert_int_equal(c.reconnect_max_ms, 10000);
  assert_null(c.client_id);
  assert_int_equal(c.watchdog_timeout_ms, 30000);
  assert_null(c.owned_);

  relock_error_t err = dirty_error();
  assert_int_equal(relock_config_validate(&c, &err), 0);
  assert_int_equal(err.code, 0);
  assert_string_equal(err.message, "");
  assert_int_equal(relock_config_validate(&c, NULL), 0);

  relock_config_cleanup(&c); /* nothing parsed: a no-op */
  assert_string_equal(c.host, "127.0.0.1");
  relock_config_init(NULL);
  relock_config_cleanup(NULL);
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
    relock_config_t c;
    relock_config_init(&c);
    c.command_timeout_ms = 1234; /* not a connection field: left alone */
    c.client_id = "me";
    relock_error_t err = dirty_error();
    int r = relock_config_from_url(&c, g->url, &err);
    if (r != 0)
      fail_msg("%s: %s", g->url, err.message);
    assert_int_equal(err.code, 0);
    assert_string_equal(err.message, "");
    assert_string_equal(c.host, g->host);
    assert_int_equal(c.port, g->port);
    assert_str_or_null(c.unix_path, g->unix_path);
    assert_str_or_null(c.username, g->username);
    assert_str_or_null(c.password, g->password);
    assert_int_equal(c.db, g->db);
    assert_int_equal(c.command_timeout_ms, 1234);
    assert_string_equal(c.client_id, "me");
    assert_non_null(c.owned_);
    assert_int_equal(relock_config_validate(&c, &err), 0);
    relock_config_cleanup(&c);
    assert_null(c.owned_);
  }
}

static void test_parsed_strings_outlive_the_url(void **state) {
  (void)state;
  relock_config_t c;
  relock_config_init(&c);
  char *url = strdup("redis://alice:wonder%20land@cache.internal:6390/4");
  assert_non_null(url);
  assert_int_equal(relock_config_from_url(&c, url, NULL), 0);
  memset(url, 'z', strlen(url));
  free(url);
  assert_string_equal(c.host, "cache.internal");
  assert_string_equal(c.username, "alice");
  assert_string_equal(c.password, "wonder land");
  assert_int_equal(c.port, 6390);
  assert_int_equal(c.db, 4);
  relock_config_cleanup(&c);
}

/* Every connection field comes from the URL (or its default), whatever an
 * earlier URL or the caller had set. */
static void test_url_replaces_every_connection_field(void **state) {
  (void)state;
  relock_config_t c;
  relock_config_init(&c);
  assert_int_equal(relock_config_from_url(&c, "unix:///tmp/a.sock?db=5&username=u&password=p", NULL), 0);
  assert_int_equal(relock_config_from_url(&c, "redis://other", NULL), 0);
  assert_string_equal(c.host, "other");
  assert_int_equal(c.port, 6379);
  assert_null(c.unix_path);
  assert_null(c.username);
  assert_null(c.password);
  assert_int_equal(c.db, 0);

  c.port = 1;
  c.db = 9;
  assert_int_equal(relock_config_from_url(&c, "unix:///tmp/b.sock", NULL), 0);
  assert_string_equal(c.host, "127.0.0.1");
  assert_int_equal(c.port, 6379);
  assert_string_equal(c.unix_path, "/tmp/b.sock");
  assert_int_equal(c.db, 0);
  relock_config_cleanup(&c);
}

static void test_from_url_twice_then_cleanup(void **state) {
  (void)state;
  relock_config_t c;
  relock_config_init(&c);
  assert_int_equal(relock_config_from_url(&c, "redis://u:p1@first:7000/1", NULL), 0);
  void *first = c.owned_;
  assert_non_null(first);
  assert_int_equal(relock_config_from_url(&c, "redis://:p2@second:7001/2", NULL), 0);
  assert_non_null(c.owned_); /* the first block was freed (valgrind/ASan check) */
  assert_string_equal(c.host, "second");
  assert_null(c.username);
  assert_string_equal(c.password, "p2");

  /* A field the caller set since stays; the parsed ones get their defaults. */
  c.username = "caller";
  relock_config_cleanup(&c);
  assert_null(c.owned_);
  assert_string_equal(c.host, "127.0.0.1");
  assert_null(c.password);
  assert_string_equal(c.username, "caller");
  assert_int_equal(c.port, 7001); /* values stay: nothing dangles */
  relock_config_cleanup(&c);      /* twice: a no-op */
  assert_null(c.owned_);
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
    {"http://host", "unsupported URL scheme \"http\": use redis:// or unix://", NULL},
    {"redis-sentinel://host", "unsupported URL scheme \"redis-sentinel\"", NULL},
    {"rediss://:hunter2@host", "rediss:// (TLS) is not supported by this build", "hunter2"},
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
    {"unix:///tmp/r.sock?password=hun&ter2", "unknown parameter after \"password\"", "ter2"},
    {"unix:///tmp/r.sock?password=hun&ter2=x", "unknown parameter after \"password\"", "ter2"},
    {"unix:///tmp/r.sock?password=hun&db=ter2", "invalid database in URL", "ter2"},
    {"unix:///tmp/r.sock?db=x&password=hunter2", "invalid database \"x\"", "hunter2"},
    {"unix:///tmp/r ock", "space or control character", NULL},
};

static void test_refused_urls(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof bad_urls / sizeof bad_urls[0]; i++) {
    const bad_url_t *b = &bad_urls[i];
    relock_config_t c;
    relock_config_init(&c);
    assert_int_equal(relock_config_from_url(&c, "redis://:keep@before:7777/7", NULL), 0);
    relock_config_t before = c;

    relock_error_t err = dirty_error();
    int r = relock_config_from_url(&c, b->url, &err);
    if (r != RELOCK_EINVAL)
      fail_msg("\"%s\" gave %d (%s), not RELOCK_EINVAL", b->url, r, err.message);
    assert_int_equal(err.code, RELOCK_EINVAL);
    if (strstr(err.message, b->phrase) == NULL)
      fail_msg("\"%s\": message \"%s\" lacks \"%s\"", b->url, err.message, b->phrase);
    if (b->secret != NULL && strstr(err.message, b->secret) != NULL)
      fail_msg("\"%s\": message \"%s\" shows the password", b->url, err.message);
    /* the password of the config before never shows either */
    assert_null(strstr(err.message, "keep"));

    /* unchanged: same pointers, same values, same storage */
    assert_ptr_equal(c.host, before.host);
    assert_ptr_equal(c.unix_path, before.unix_path);
    assert_ptr_equal(c.username, before.username);
    assert_ptr_equal(c.password, before.password);
    assert_ptr_equal(c.owned_, before.owned_);
    assert_int_equal(c.port, before.port);
    assert_int_equal(c.db, before.db);
    assert_string_equal(c.host, "before");
    assert_string_equal(c.password, "keep");
    assert_int_equal(c.port, 7777);
    assert_int_equal(c.db, 7);

    /* without an error struct: the same code */
    assert_int_equal(relock_config_from_url(&c, b->url, NULL), RELOCK_EINVAL);
    relock_config_cleanup(&c);
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
  relock_config_t c;
  relock_config_init(&c);
  relock_error_t err;
  assert_int_equal(relock_config_from_url(&c, url, &err), 0);
  assert_int_equal(strlen(c.unix_path), 107);
  assert_int_equal(relock_config_validate(&c, &err), 0);

  url[prefix + 107] = 'a';
  url[prefix + 108] = '\0';
  assert_int_equal(relock_config_from_url(&c, url, &err), RELOCK_EINVAL);
  assert_non_null(strstr(err.message, "too long (108 bytes, at most 107)"));
  assert_int_equal(strlen(c.unix_path), 107); /* unchanged */

  c.unix_path = url + prefix;
  assert_int_equal(relock_config_validate(&c, &err), RELOCK_EINVAL);
  assert_non_null(strstr(err.message, "unix_path is 108 bytes long"));
  relock_config_cleanup(&c);
}

static void test_long_values_are_cut_in_messages(void **state) {
  (void)state;
  char url[2200] = "redis://host/";
  size_t n = strlen(url);
  memset(url + n, 'x', 2000);
  url[n + 2000] = '\0';
  relock_config_t c;
  relock_config_init(&c);
  relock_error_t err;
  assert_int_equal(relock_config_from_url(&c, url, &err), RELOCK_EINVAL);
  assert_non_null(strstr(err.message, "invalid database \"xxxx"));
  assert_non_null(strstr(err.message, "...\""));
  assert_true(strlen(err.message) < 120);

  /* a long host parses (a name is not checked for DNS length limits here) */
  memcpy(url, "redis://", 8);
  memset(url + 8, 'h', 2000);
  url[2008] = '\0';
  assert_int_equal(relock_config_from_url(&c, url, &err), 0);
  assert_int_equal(strlen(c.host), 2000);
  relock_config_cleanup(&c);
}

static void test_null_arguments(void **state) {
  (void)state;
  relock_config_t c;
  relock_config_init(&c);
  relock_error_t err = dirty_error();
  assert_int_equal(relock_config_from_url(NULL, "redis://h", &err), RELOCK_EINVAL);
  assert_string_equal(err.message, "config is NULL");
  assert_int_equal(relock_config_from_url(&c, NULL, &err), RELOCK_EINVAL);
  assert_string_equal(err.message, "url is NULL");
  assert_int_equal(relock_config_from_url(&c, NULL, NULL), RELOCK_EINVAL);
  assert_int_equal(relock_config_validate(NULL, &err), RELOCK_EINVAL);
  assert_string_equal(err.message, "config is NULL");
  assert_int_equal(relock_config_validate(NULL, NULL), RELOCK_EINVAL);
  assert_null(c.owned_);
}

/* -- validation ---------------------------------------------------------------*/

typedef void (*mutate_fn)(relock_config_t *c);

typedef struct {
  const char *what;
  mutate_fn mutate;
  const char *phrase; /* NULL: valid */
} rule_t;

#define RULE(name, body)                                                                                     \
  static void name(relock_config_t *c) { body; }

RULE(port_0, c->port = 0)
RULE(port_1, c->port = 1)
RULE(port_65535, c->port = 65535)
RULE(port_65536, c->port = 65536)
RULE(port_negative, c->port = -6379)
RULE(port_ignored_with_unix_path, (c->unix_path = "/tmp/r.sock", c->port = 0))
RULE(host_null, c->host = NULL)
RULE(host_empty, c->host = "")
RULE(host_null_with_unix_path, (c->unix_path = "/tmp/r.sock", c->host = NULL))
RULE(unix_path_relative, c->unix_path = "tmp/r.sock")
RULE(unix_path_empty, c->unix_path = "")
RULE(db_negative, c->db = -1)
RULE(db_0, c->db = 0)
RULE(db_max, c->db = INT_MAX)
RULE(connect_timeout_0, c->connect_timeout_ms = 0)
RULE(connect_timeout_1, c->connect_timeout_ms = 1)
RULE(connect_timeout_negative, c->connect_timeout_ms = -1)
RULE(command_timeout_0, c->command_timeout_ms = 0)
RULE(command_timeout_1, c->command_timeout_ms = 1)
RULE(command_timeout_infinite, c->command_timeout_ms = RELOCK_INFINITE)
RULE(retry_attempts_negative, c->retry_attempts = -1)
RULE(retry_attempts_0, c->retry_attempts = 0)
RULE(retry_interval_negative, c->retry_interval_ms = -1)
RULE(retry_interval_0, c->retry_interval_ms = 0)
RULE(reconnect_min_0, c->reconnect_min_ms = 0)
RULE(reconnect_min_1, c->reconnect_min_ms = 1)
RULE(reconnect_min_equals_max, (c->reconnect_min_ms = 500, c->reconnect_max_ms = 500))
RULE(reconnect_min_above_max, (c->reconnect_min_ms = 501, c->reconnect_max_ms = 500))
RULE(watchdog_2, c->watchdog_timeout_ms = 2)
RULE(watchdog_3, c->watchdog_timeout_ms = 3)
RULE(watchdog_negative, c->watchdog_timeout_ms = RELOCK_INFINITE)
RULE(client_id_uuid, c->client_id = "3b0c7c1e-8f0a-4d5e-9a41-0c2f6b7d8e90")
RULE(client_id_empty, c->client_id = "")
RULE(client_id_64, c->client_id = "1234567890123456789012345678901234567890123456789012345678901234")
RULE(client_id_65, c->client_id = "12345678901234567890123456789012345678901234567890123456789012345")
RULE(client_id_colon, c->client_id = "host:42")
RULE(client_id_space, c->client_id = "my client")
RULE(client_id_tab, c->client_id = "a\tb")
RULE(client_id_newline, c->client_id = "a\n")
RULE(client_id_del, c->client_id = "a\x7f")
RULE(client_id_utf8, c->client_id = "caf\xc3\xa9")
RULE(client_name_ok, c->client_name = "worker-1")
RULE(client_name_empty, c->client_name = "")
RULE(client_name_space, c->client_name = "worker 1")
RULE(client_name_utf8, c->client_name = "caf\xc3\xa9")
RULE(password_only, c->password = "pw")
RULE(password_empty, c->password = "")
RULE(username_and_password, (c->username = "app", c->password = "pw"))
RULE(username_without_password, c->username = "app")
RULE(username_empty, (c->username = "", c->password = "pw"))

static const rule_t rules[] = {
    {"port 0", port_0, "invalid port 0: must be 1-65535"},
    {"port 1", port_1, NULL},
    {"port 65535", port_65535, NULL},
    {"port 65536", port_65536, "invalid port 65536"},
    {"port -6379", port_negative, "invalid port -6379"},
    {"port with unix_path", port_ignored_with_unix_path, NULL},
    {"host NULL", host_null, "empty host"},
    {"host \"\"", host_empty, "empty host"},
    {"host NULL with unix_path", host_null_with_unix_path, NULL},
    {"relative unix_path", unix_path_relative, "unix_path must be an absolute path"},
    {"empty unix_path", unix_path_empty, "unix_path must be an absolute path"},
    {"db -1", db_negative, "invalid database -1: must be >= 0"},
    {"db 0", db_0, NULL},
    {"db INT_MAX", db_max, NULL},
    {"connect timeout 0", connect_timeout_0, "connect_timeout_ms must be > 0 (got 0)"},
    {"connect timeout 1", connect_timeout_1, NULL},
    {"connect timeout -1", connect_timeout_negative, "connect_timeout_ms must be > 0 (got -1)"},
    {"command timeout 0", command_timeout_0, "command_timeout_ms must be > 0"},
    {"command timeout 1", command_timeout_1, NULL},
    {"command timeout -1", command_timeout_infinite, "command_timeout_ms must be > 0 (got -1)"},
    {"retry attempts -1", retry_attempts_negative, "retry_attempts must be >= 0 (got -1)"},
    {"retry attempts 0", retry_attempts_0, NULL},
    {"retry interval -1", retry_interval_negative, "retry_interval_ms must be >= 0"},
    {"retry interval 0", retry_interval_0, NULL},
    {"reconnect min 0", reconnect_min_0, "reconnect_min_ms must be >= 1 (got 0)"},
    {"reconnect min 1", reconnect_min_1, NULL},
    {"reconnect min == max", reconnect_min_equals_max, NULL},
    {"reconnect min > max", reconnect_min_above_max, "reconnect_min_ms (501) must not exceed reconnect_max_ms (500)"},
    {"watchdog 2", watchdog_2, "watchdog_timeout_ms must be >= 3"},
    {"watchdog 3", watchdog_3, NULL},
    {"watchdog -1", watchdog_negative, "watchdog_timeout_ms must be >= 3"},
    {"client id UUID", client_id_uuid, NULL},
    {"client id \"\"", client_id_empty, "client_id must not be empty"},
    {"client id 64 bytes", client_id_64, NULL},
    {"client id 65 bytes", client_id_65, "client_id is 65 bytes long: at most 64"},
    {"client id with ':'", client_id_colon, "client_id must not contain \":\""},
    {"client id with space", client_id_space, "client_id must not contain spaces or control characters"},
    {"client id with tab", client_id_tab, "client_id must not contain spaces or control characters"},
    {"client id with newline", client_id_newline, "client_id must not contain spaces or control characters"},
    {"client id with DEL", client_id_del, "client_id must not contain spaces or control characters"},
    {"client id in UTF-8", client_id_utf8, NULL},
    {"client name", client_name_ok, NULL},
    {"client name \"\"", client_name_empty, "client_name must not be empty"},
    {"client name with space", client_name_space, "client_name must not contain spaces"},
    {"client name in UTF-8", client_name_utf8, "client_name must be printable ASCII"},
    {"password only", password_only, NULL},
    {"password \"\"", password_empty, "password is empty"},
    {"username and password", username_and_password, NULL},
    {"username without password", username_without_password, "username without password"},
    {"username \"\"", username_empty, "username is empty"},
};

static void test_validate_rules(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
    const rule_t *rule = &rules[i];
    relock_config_t c;
    relock_config_init(&c);
    rule->mutate(&c);
    relock_error_t err = dirty_error();
    int r = relock_config_validate(&c, &err);
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
      assert_int_equal(relock_config_validate(&c, NULL), RELOCK_EINVAL);
    }
  }
}

static void test_validate_never_shows_the_password(void **state) {
  (void)state;
  relock_config_t c;
  relock_config_init(&c);
  c.password = "hunter2";
  c.username = "app";
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
    relock_config_t d = c;
    rules[i].mutate(&d);
    relock_error_t err;
    relock_config_validate(&d, &err);
    assert_null(strstr(err.message, "hunter2"));
  }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_defaults),
    cmocka_unit_test(test_accepted_urls),
    cmocka_unit_test(test_parsed_strings_outlive_the_url),
    cmocka_unit_test(test_url_replaces_every_connection_field),
    cmocka_unit_test(test_from_url_twice_then_cleanup),
    cmocka_unit_test(test_refused_urls),
    cmocka_unit_test(test_long_socket_path),
    cmocka_unit_test(test_long_values_are_cut_in_messages),
    cmocka_unit_test(test_null_arguments),
    cmocka_unit_test(test_validate_rules),
    cmocka_unit_test(test_validate_never_shows_the_password),
};

RELOCK_TEST_MAIN(tests, NULL, NULL)
