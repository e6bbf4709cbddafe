/* libFuzzer target: relock_options_set_url, relock_options_validate and the
 * string options' checks. The input, up to its first NUL, is a URL.
 *
 * Invariants checked, beyond ASan and UBSan:
 * - On error: RELOCK_EINVAL (RELOCK_ETLS for rediss:// in a build without
 *   TLS) in the result and in err, a non-empty message,
 *   and the options exactly as they were, their earlier strings still
 *   readable.
 * - On success: an empty message, the fields the URL names and nothing else
 *   changed, a sensible host (or the unix path as written), a port 1-65535,
 *   db >= 0; relock_options_validate accepts the result; and a URL written
 *   back from the fields parses to the same fields.
 * - A password never reaches a message: the URL is parsed again with a
 *   known password put in (as "redis://:<password>@..." or "?password=...",
 *   raw or percent-encoded), and no 4 bytes of it in a row may appear in the
 *   message unless they were in the input already.
 * - The checks of client-id and client-name, the input set as each, match
 *   an independent statement of them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <relock/config.h>
#include <relock/error.h>

#include "fuzz.h"

#define DEFAULT_HOST "127.0.0.1"
#define DEFAULT_PORT 6379
#define UNIX_PATH_MAX_LEN 107 /* sizeof sun_path - 1 on Linux */

/* Options that already hold parsed strings, and options the URL must not
 * touch set to values other than their defaults. */
static const char prior_url[] = "redis://prior-user:prior-secret@prior.example:7000/3";

/* Every option as read back (strings by identity: the object's own). */
typedef struct view {
  const char *host;
  int port;
  const char *unix_path;
  const char *username;
  const char *password;
  int db;
  const char *client_name;
  int64_t connect_timeout_ms, command_timeout_ms, retry_interval_ms, reconnect_min_ms, reconnect_max_ms,
      watchdog_timeout_ms, ping_interval_ms;
  int retry_attempts;
  const char *client_id;
} view_t;

static view_t view(const relock_options_t *o) {
  view_t v;
  memset(&v, 0, sizeof v); /* padding too: same_config compares bytes */
  FUZZ_CHECK(relock_options_get_string(o, RELOCK_OPT_HOST, &v.host, NULL) == 0);
  FUZZ_CHECK(relock_options_get_int(o, RELOCK_OPT_PORT, &v.port, NULL) == 0);
  FUZZ_CHECK(relock_options_get_string(o, RELOCK_OPT_UNIX_PATH, &v.unix_path, NULL) == 0);
  FUZZ_CHECK(relock_options_get_string(o, RELOCK_OPT_USERNAME, &v.username, NULL) == 0);
  FUZZ_CHECK(relock_options_get_string(o, RELOCK_OPT_PASSWORD, &v.password, NULL) == 0);
  FUZZ_CHECK(relock_options_get_int(o, RELOCK_OPT_DB, &v.db, NULL) == 0);
  FUZZ_CHECK(relock_options_get_string(o, RELOCK_OPT_CLIENT_NAME, &v.client_name, NULL) == 0);
  FUZZ_CHECK(relock_options_get_ms(o, RELOCK_OPT_CONNECT_TIMEOUT, &v.connect_timeout_ms, NULL) == 0);
  FUZZ_CHECK(relock_options_get_ms(o, RELOCK_OPT_COMMAND_TIMEOUT, &v.command_timeout_ms, NULL) == 0);
  FUZZ_CHECK(relock_options_get_int(o, RELOCK_OPT_RETRY_ATTEMPTS, &v.retry_attempts, NULL) == 0);
  FUZZ_CHECK(relock_options_get_ms(o, RELOCK_OPT_RETRY_INTERVAL, &v.retry_interval_ms, NULL) == 0);
  FUZZ_CHECK(relock_options_get_ms(o, RELOCK_OPT_RECONNECT_MIN, &v.reconnect_min_ms, NULL) == 0);
  FUZZ_CHECK(relock_options_get_ms(o, RELOCK_OPT_RECONNECT_MAX, &v.reconnect_max_ms, NULL) == 0);
  FUZZ_CHECK(relock_options_get_string(o, RELOCK_OPT_CLIENT_ID, &v.client_id, NULL) == 0);
  FUZZ_CHECK(relock_options_get_ms(o, RELOCK_OPT_WATCHDOG_TIMEOUT, &v.watchdog_timeout_ms, NULL) == 0);
  FUZZ_CHECK(relock_options_get_ms(o, RELOCK_OPT_PING_INTERVAL, &v.ping_interval_ms, NULL) == 0);
  return v;
}

static relock_options_t *prior_options(void) {
  relock_error_t err;
  relock_options_t *o = relock_options_new(&err);
  FUZZ_CHECK(o != NULL);
  FUZZ_CHECK(relock_options_set_string(o, RELOCK_OPT_CLIENT_NAME, "fuzz-name", &err) == RELOCK_OK);
  FUZZ_CHECK(relock_options_set_int(o, RELOCK_OPT_RETRY_ATTEMPTS, 5, &err) == RELOCK_OK);
  FUZZ_CHECK(relock_options_set_ms(o, RELOCK_OPT_COMMAND_TIMEOUT, 1234, &err) == RELOCK_OK);
  FUZZ_CHECK(relock_options_set_ms(o, RELOCK_OPT_WATCHDOG_TIMEOUT, 4321, &err) == RELOCK_OK);
  FUZZ_CHECK(relock_options_set_url(o, prior_url, &err) == RELOCK_OK);
  return o;
}

static int same_str(const char *a, const char *b) {
  return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* Every option, strings by identity. */
static int same_config(const view_t *a, const view_t *b) { return memcmp(a, b, sizeof *a) == 0; }

/* The options no URL sets. */
static int same_other_fields(const view_t *a, const view_t *b) {
  return a->client_name == b->client_name && a->connect_timeout_ms == b->connect_timeout_ms &&
         a->command_timeout_ms == b->command_timeout_ms && a->retry_attempts == b->retry_attempts &&
         a->retry_interval_ms == b->retry_interval_ms && a->reconnect_min_ms == b->reconnect_min_ms &&
         a->reconnect_max_ms == b->reconnect_max_ms && a->client_id == b->client_id &&
         a->watchdog_timeout_ms == b->watchdog_timeout_ms && a->ping_interval_ms == b->ping_interval_ms;
}

static int message_ok(const relock_error_t *err) {
  return memchr(err->message, '\0', sizeof err->message) != NULL && err->message[0] != '\0';
}

static int has_prefix_nocase(const char *s, const char *prefix) {
  for (; *prefix != '\0'; s++, prefix++) {
    char c = *s >= 'A' && *s <= 'Z' ? (char)(*s - 'A' + 'a') : *s;
    if (c != *prefix)
      return 0;
  }
  return 1;
}

static int in_set(char c, const char *set) { return c != '\0' && strchr(set, c) != NULL; }

#define ALNUM "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

/* A host as the parser promises it: a name, or an IPv6 address with an
 * optional zone after '%' (no brackets). */
static int host_ok(const char *h) {
  if (h[0] == '\0')
    return 0;
  if (strchr(h, ':') == NULL) {
    for (; *h != '\0'; h++)
      if (!in_set(*h, ALNUM "-._"))
        return 0;
    return 1;
  }
  for (; *h != '\0' && *h != '%'; h++)
    if (!in_set(*h, "0123456789abcdefABCDEF:."))
      return 0;
  if (*h == '%') {
    if (h[1] == '\0')
      return 0;
    for (h++; *h != '\0'; h++)
      if (!in_set(*h, ALNUM "-._~"))
        return 0;
  }
  return 1;
}

/* -- writing a URL back from the fields ---------------------------------------*/

static char *put(char *o, const char *s) {
  size_t n = strlen(s);
  memcpy(o, s, n);
  return o + n;
}

static char *put_encoded(char *o, const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  for (; *s != '\0'; s++) {
    unsigned char c = (unsigned char)*s;
    if (in_set((char)c, ALNUM "-._~")) {
      *o++ = (char)c;
    } else {
      *o++ = '%';
      *o++ = hex[c >> 4];
      *o++ = hex[c & 15];
    }
  }
  return o;
}

static char *put_int(char *o, int v) { return o + sprintf(o, "%d", v); }

/* The URL the fields of c came from, in its plainest form. */
static char *write_url(const view_t *c) {
  size_t cap = 64 + 3 * (strlen(c->host) + (c->unix_path ? strlen(c->unix_path) : 0) +
                         (c->username ? strlen(c->username) : 0) + (c->password ? strlen(c->password) : 0));
  char *url = malloc(cap), *o = url;
  FUZZ_CHECK(url != NULL);
  if (c->unix_path != NULL) {
    o = put(o, "unix://");
    o = put(o, c->unix_path);
    char sep = '?';
    if (c->db != 0) {
      *o++ = sep, sep = '&';
      o = put_int(put(o, "db="), c->db);
    }
    if (c->username != NULL) {
      *o++ = sep, sep = '&';
      o = put_encoded(put(o, "username="), c->username);
    }
    if (c->password != NULL) {
      *o++ = sep;
      o = put_encoded(put(o, "password="), c->password);
    }
  } else {
    o = put(o, "redis://");
    if (c->password != NULL) {
      if (c->username != NULL)
        o = put_encoded(o, c->username);
      *o++ = ':';
      o = put_encoded(o, c->password);
      *o++ = '@';
    }
    const char *zone = strchr(c->host, '%');
    if (strchr(c->host, ':') != NULL) {
      *o++ = '[';
      size_t n = zone != NULL ? (size_t)(zone - c->host) : strlen(c->host);
      memcpy(o, c->host, n);
      o += n;
      if (zone != NULL)
        o = put(put(o, "%25"), zone + 1);
      *o++ = ']';
    } else {
      o = put(o, c->host);
    }
    *o++ = ':';
    o = put_int(o, c->port);
    *o++ = '/';
    o = put_int(o, c->db);
  }
  *o = '\0';
  FUZZ_CHECK((size_t)(o - url) < cap);
  return url;
}

static void check_round_trip(const view_t *c) {
  char *url = write_url(c);
  relock_error_t err;
  relock_options_t *o = relock_options_new(NULL);
  FUZZ_CHECK(o != NULL);
  int rc = relock_options_set_url(o, url, &err);
  if (rc != RELOCK_OK)
    fprintf(stderr, "written back as %s: %s\n", url, err.message);
  FUZZ_CHECK(rc == RELOCK_OK);
  view_t again = view(o);
  FUZZ_CHECK(strcmp(again.host, c->host) == 0);
  FUZZ_CHECK(again.port == c->port);
  FUZZ_CHECK(same_str(again.unix_path, c->unix_path));
  FUZZ_CHECK(same_str(again.username, c->username));
  FUZZ_CHECK(same_str(again.password, c->password));
  FUZZ_CHECK(again.db == c->db);
  relock_options_free(o);
  free(url);
}

/* -- the URL as given -----------------------------------------------------------*/

static void check_success(const relock_options_t *o, const view_t *before, const char *url) {
  view_t v = view(o);
  const view_t *c = &v;
  FUZZ_CHECK(same_other_fields(c, before));
  FUZZ_CHECK(c->db >= 0);
  FUZZ_CHECK(c->username == NULL || (c->password != NULL && c->username[0] != '\0'));
  FUZZ_CHECK(c->password == NULL || c->password[0] != '\0');
  if (has_prefix_nocase(url, "unix://")) {
    const char *path = url + strlen("unix://");
    size_t plen = strcspn(path, "?");
    FUZZ_CHECK(c->unix_path != NULL);
    FUZZ_CHECK(strlen(c->unix_path) == plen && memcmp(c->unix_path, path, plen) == 0);
    FUZZ_CHECK(plen >= 1 && plen <= UNIX_PATH_MAX_LEN && path[0] == '/' && path[plen - 1] != '/');
    FUZZ_CHECK(strcmp(c->host, DEFAULT_HOST) == 0 && c->port == DEFAULT_PORT);
  } else {
    FUZZ_CHECK(has_prefix_nocase(url, "redis://"));
    FUZZ_CHECK(c->unix_path == NULL);
    FUZZ_CHECK(host_ok(c->host));
    FUZZ_CHECK(c->port >= 1 && c->port <= 65535);
  }
  relock_error_t err;
  int rc = relock_options_validate(o, &err);
  if (rc != RELOCK_OK)
    fprintf(stderr, "parsed, then refused by validate: %s\n", err.message);
  FUZZ_CHECK(rc == RELOCK_OK && err.code == RELOCK_OK && err.message[0] == '\0');
  check_round_trip(c);
}

static void check_url(const char *url) {
  relock_error_t err;
  relock_options_t *o = prior_options();
  view_t before = view(o);
  memset(&err, 0x5a, sizeof err); /* so that "err was set" means something */
  int rc = relock_options_set_url(o, url, &err);
  if (rc == RELOCK_OK) {
    FUZZ_CHECK(err.code == RELOCK_OK && err.message[0] == '\0');
    check_success(o, &before, url);
  } else {
    /* RELOCK_ETLS: rediss:// in a build without TLS */
    FUZZ_CHECK((rc == RELOCK_EINVAL || (rc == RELOCK_ETLS && !relock_tls_available())) && err.code == rc &&
               message_ok(&err));
    view_t c = view(o);
    FUZZ_CHECK(same_config(&c, &before));
    /* the earlier strings still belong to o: ASan would see them freed */
    FUZZ_CHECK(strcmp(c.host, "prior.example") == 0 && strcmp(c.username, "prior-user") == 0 &&
               strcmp(c.password, "prior-secret") == 0 && c.port == 7000 && c.db == 3);
    FUZZ_CHECK(relock_options_validate(o, NULL) == RELOCK_OK);
  }
  relock_options_free(o);
}

/* -- passwords stay out of messages ------------------------------------------*/

/* Letters that quote()'s escapes ("\\x" and lowercase hex digits) never
 * make, so any 4 of them in a row in a message came from the URL. */
#define CANARY "KqZwGvJt"
#define CANARY_ENCODED "%4BqZwGvJ%74" /* the same, percent-encoded */

/* Whether message holds 4 bytes of secret in a row that url does not. */
static int leaks(const char *message, const char *secret, const char *url) {
  for (size_t i = 0; i + 4 <= strlen(secret); i++) {
    char gram[5];
    memcpy(gram, secret + i, 4);
    gram[4] = '\0';
    if (strstr(message, gram) != NULL && strstr(url, gram) == NULL)
      return 1;
  }
  return 0;
}

static void check_canary(const char *url, const char *with_password, int password_first) {
  relock_error_t err;
  relock_options_t *o = relock_options_new(NULL);
  FUZZ_CHECK(o != NULL);
  if (relock_options_set_url(o, with_password, &err) == RELOCK_OK) {
    view_t c = view(o);
    FUZZ_CHECK(c.password != NULL);
    if (password_first) /* a second password= is refused: it is this one */
      FUZZ_CHECK(strcmp(c.password, CANARY) == 0);
    else
      FUZZ_CHECK(strncmp(c.password, CANARY, strlen(CANARY)) == 0);
  } else {
    if (leaks(err.message, CANARY, url))
      fprintf(stderr, "URL %s\nmessage %s\n", with_password, err.message);
    FUZZ_CHECK(!leaks(err.message, CANARY, url));
  }
  relock_options_free(o);
}

static void check_passwords(const char *url) {
  size_t len = strlen(url);
  char *v = malloc(len + 64);
  FUZZ_CHECK(v != NULL);
  if (has_prefix_nocase(url, "redis://")) {
    const char *rest = url + strlen("redis://");
    sprintf(v, "redis://:%s@%s", CANARY, rest);
    check_canary(url, v, 0);
    sprintf(v, "redis://user:%s@%s", CANARY_ENCODED, rest);
    check_canary(url, v, 0);
  } else if (has_prefix_nocase(url, "unix://")) {
    const char *q = strchr(url, '?');
    if (q == NULL) {
      sprintf(v, "%s?password=%s", url, CANARY_ENCODED);
    } else {
      size_t head = (size_t)(q - url) + 1;
      memcpy(v, url, head);
      sprintf(v + head, "password=%s&%s", CANARY, q + 1);
    }
    check_canary(url, v, 1);
  }
  free(v);
}

/* -- client_id and client_name ------------------------------------------------*/

/* The options' checks, stated independently: not empty, no space or control
 * character; a client id at most 64 bytes and without ':', a client name
 * printable ASCII. */
static int token_ok(const char *s, int is_client_id) {
  size_t len = strlen(s);
  if (len == 0 || (is_client_id && len > 64))
    return 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c <= 0x20 || c == 0x7f || (is_client_id ? c == ':' : c > 0x7e))
      return 0;
  }
  return 1;
}

static void check_tokens(const char *s) {
  relock_error_t err;
  relock_options_t *o = relock_options_new(NULL);
  FUZZ_CHECK(o != NULL);
  int rc = relock_options_set_string(o, RELOCK_OPT_CLIENT_ID, s, &err);
  FUZZ_CHECK((rc == RELOCK_OK) == token_ok(s, 1));
  FUZZ_CHECK(rc == RELOCK_OK ? err.message[0] == '\0' : rc == RELOCK_EINVAL && message_ok(&err));
  rc = relock_options_set_string(o, RELOCK_OPT_CLIENT_NAME, s, &err);
  FUZZ_CHECK((rc == RELOCK_OK) == token_ok(s, 0));
  FUZZ_CHECK(rc == RELOCK_OK ? err.message[0] == '\0' : rc == RELOCK_EINVAL && message_ok(&err));
  relock_options_free(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *url = malloc(size + 1);
  FUZZ_CHECK(url != NULL);
  memcpy(url, data, size);
  url[size] = '\0';
  check_url(url);
  check_passwords(url);
  check_tokens(url);
  free(url);
  return 0;
}
