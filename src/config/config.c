/* Client configuration: the defaults, parsing of redis:// and unix:// URLs,
 * and validation of every value before a client is made from it.
 *
 * Error messages name the problem and may quote parts of the URL, but never
 * a password: parts that could be (a misplaced) one are described, not
 * quoted. */
#include <config.h>

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/un.h>

#include <relock/client.h>
#include <relock/error.h>

static const char default_host[] = "127.0.0.1";

#define DEFAULT_PORT 6379
#define CLIENT_ID_MAX 64
/* sun_path holds the path and its terminating NUL. */
#define UNIX_PATH_MAX_LEN (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)
#define PORT_MAX 65535

/* What relock_config_from_url allocates: the strings it parsed, and which
 * fields it pointed at them, so cleanup can tell them from the caller's. */
typedef struct owned {
  const char *host;
  const char *unix_path;
  const char *username;
  const char *password;
  char text[]; /* the strings, each NUL-terminated */
} owned_t;

/* -- errors -----------------------------------------------------------------*/

static int set_error(relock_error_t *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int set_error(relock_error_t *err, int code, const char *fmt, ...) {
  if (err != NULL) {
    va_list ap;
    va_start(ap, fmt);
    err->code = code;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
  }
  return code;
}

#define invalid(err, ...) set_error((err), RELOCK_EINVAL, __VA_ARGS__)

static void set_ok(relock_error_t *err) {
  if (err != NULL) {
    err->code = RELOCK_OK;
    err->message[0] = '\0';
  }
}

/* Part of a URL, made safe to quote in a message: non-ASCII bytes, quotes and
 * backslashes escaped, cut short with "..." when long. */
static const char *quote(char out[48], const char *s, size_t len) {
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (o + 4 > 40) {
      memcpy(out + o, "...", 3);
      o += 3;
      break;
    }
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      out[o++] = '\\';
      out[o++] = 'x';
      out[o++] = hex[c >> 4];
      out[o++] = hex[c & 15];
    } else {
      out[o++] = (char)c;
    }
  }
  out[o] = '\0';
  return out;
}

/* -- defaults and cleanup ---------------------------------------------------*/

void relock_config_init(relock_config_t *config) {
  if (config == NULL)
    return;
  *config = (relock_config_t){
      .host = default_host,
      .port = DEFAULT_PORT,
      .unix_path = NULL,
      .username = NULL,
      .password = NULL,
      .db = 0,
      .client_name = NULL,
      .connect_timeout_ms = 5000,
      .command_timeout_ms = 3000,
      .retry_attempts = 3,
      .retry_interval_ms = 1500,
      .reconnect_min_ms = 100,
      .reconnect_max_ms = 10000,
      .client_id = NULL,
      .watchdog_timeout_ms = 30000,
      .ping_interval_ms = 1000,
      .owned_ = NULL,
  };
}

void relock_config_cleanup(relock_config_t *config) {
  if (config == NULL || config->owned_ == NULL)
    return;
  owned_t *o = config->owned_;
  /* Fields still pointing into the storage would dangle: they get their
   * defaults back. Fields the caller has set since are left alone. */
  if (config->host == o->host)
    config->host = default_host;
  if (config->unix_path == o->unix_path)
    config->unix_path = NULL;
  if (config->username == o->username)
    config->username = NULL;
  if (config->password == o->password)
    config->password = NULL;
  free(o);
  config->owned_ = NULL;
}

/* -- URL parsing --------------------------------------------------------------*/

/* The connection fields a URL sets; parts it leaves out keep their defaults. */
typedef struct url_fields {
  const char *host;
  int port;
  const char *unix_path;
  const char *username;
  const char *password;
  int db;
} url_fields_t;

typedef struct parser {
  char *out; /* next free byte of owned_t.text */
  relock_error_t *err;
  url_fields_t f;
} parser_t;

static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static int hex_value(int c) {
  if (is_digit(c))
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Parses len decimal digits (nothing else) into *value if it is <= max. */
static int parse_decimal(const char *s, size_t len, long long max, long long *value) {
  if (len == 0)
    return -1;
  long long v = 0;
  for (size_t i = 0; i < len; i++) {
    if (!is_digit((unsigned char)s[i]))
      return -1;
    v = v * 10 + (s[i] - '0');
    if (v > max)
      return -1;
  }
  *value = v;
  return 0;
}

static const char *store(parser_t *p, const char *s, size_t len) {
  char *copy = p->out;
  memcpy(copy, s, len);
  copy[len] = '\0';
  p->out += len + 1;
  return copy;
}

/* Stores s with its percent-escapes decoded. what names the part for a
 * message; the part itself is never quoted (it may be a password). */
static int store_decoded(parser_t *p, const char *s, size_t len, const char *what, const char **out) {
  char *copy = p->out;
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] != '%') {
      copy[n++] = s[i];
      continue;
    }
    int hi = i + 2 < len ? hex_value((unsigned char)s[i + 1]) : -1;
    int lo = i + 2 < len ? hex_value((unsigned char)s[i + 2]) : -1;
    if (hi < 0 || lo < 0)
      return invalid(p->err, "invalid percent-escape in the %s in the URL: \"%%\" must be followed by two hex digits", what);
    if (hi == 0 && lo == 0)
      return invalid(p->err, "the %s in the URL contains %%00 (a NUL byte), which is not allowed", what);
    copy[n++] = (char)(hi << 4 | lo);
    i += 2;
  }
  copy[n] = '\0';
  p->out += n + 1;
  *out = copy;
  return RELOCK_OK;
}

/* A password in a URL stays out of messages; so does anything that might be
 * a misplaced one. Only a port of up to five digits is quoted. */
static int parse_port(parser_t *p, const char *s, size_t len) {
  long long port;
  if (parse_decimal(s, len, PORT_MAX, &port) == 0 && port >= 1) {
    p->f.port = (int)port;
    return RELOCK_OK;
  }
  int all_digits = len <= 5;
  for (size_t i = 0; i < len && all_digits; i++)
    all_digits = is_digit((unsigned char)s[i]);
  if (all_digits)
    return invalid(p->err, "invalid port \"%.*s\" in URL: must be 1-%d", (int)len, s, PORT_MAX);
  return invalid(p->err, "invalid port in URL: must be a number 1-%d", PORT_MAX);
}

static int parse_db(parser_t *p, const char *s, size_t len, int may_quote) {
  long long db;
  if (parse_decimal(s, len, INT_MAX, &db) == 0) {
    p->f.db = (int)db;
    return RELOCK_OK;
  }
  char q[48];
  if (may_quote)
    return invalid(p->err, "invalid database \"%s\" in URL: must be a number 0-%d", quote(q, s, len), INT_MAX);
  return invalid(p->err, "invalid database in URL: must be a number 0-%d", INT_MAX);
}

/* [user]:password, percent-decoded. The colon is required: "redis://x@host"
 * could mean a user or a password, and guessing wrong would send the
 * password as a user name. */
static int parse_userinfo(parser_t *p, const char *s, size_t len) {
  const char *colon = memchr(s, ':', len);
  if (colon == NULL)
    return invalid(p->err, "user info without \":\" in URL: write redis://:password@host or "
                           "redis://user:password@host");
  size_t ulen = (size_t)(colon - s);
  int r;
  if (ulen > 0 && (r = store_decoded(p, s, ulen, "user name", &p->f.username)) != RELOCK_OK)
    return r;
  if (len - ulen - 1 == 0)
    return invalid(p->err, "empty password in URL: leave out the user info for no AUTH");
  return store_decoded(p, colon + 1, len - ulen - 1, "password", &p->f.password);
}

/* An IPv6 address in brackets, without them: hex digits, ':' and '.' (for an
 * embedded IPv4 address), then optionally a zone "%25<id>" (RFC 6874). */
static int parse_ipv6(parser_t *p, const char *s, size_t len) {
  size_t i = 0;
  int colons = 0;
  for (; i < len && s[i] != '%'; i++) {
    if (s[i] == ':')
      colons++;
    else if (hex_value((unsigned char)s[i]) < 0 && s[i] != '.')
      return invalid(p->err, "invalid IPv6 address in URL: only hex digits, \":\" and \".\" may go in [...]");
  }
  if (colons < 2)
    return invalid(p->err, "invalid IPv6 address in URL: brackets are only for IPv6 addresses such as [::1]");
  char *host = p->out;
  size_t n = i;
  memcpy(host, s, i);
  if (i < len) {
    if (len - i < 4 || memcmp(s + i, "%25", 3) != 0)
      return invalid(p->err, "invalid IPv6 zone in URL: write it as %%25 and the zone, e.g. [fe80::1%%25eth0]");
    host[n++] = '%';
    for (i += 3; i < len; i++) {
      unsigned char c = (unsigned char)s[i];
      if (!is_alpha(c) && !is_digit(c) && c != '-' && c != '.' && c != '_' && c != '~')
        return invalid(p->err, "invalid IPv6 zone in URL: only letters, digits, \"-\", \".\", \"_\" and \"~\"");
      host[n++] = (char)c;
    }
  }
  host[n] = '\0';
  p->out += n + 1;
  p->f.host = host;
  return RELOCK_OK;
}

static int parse_hostname(parser_t *p, const char *s, size_t len) {
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!is_alpha(c) && !is_digit(c) && c != '-' && c != '.' && c != '_') {
      char q[48];
      return invalid(p->err, "invalid character \"%s\" in the host in URL", quote(q, s + i, 1));
    }
  }
  p->f.host = store(p, s, len);
  return RELOCK_OK;
}

/* host[:port] or [ipv6][:port] */
static int parse_hostport(parser_t *p, const char *s, size_t len) {
  const char *port = NULL;
  size_t hlen;
  int r;
  if (len > 0 && s[0] == '[') {
    const char *close = memchr(s, ']', len);
    if (close == NULL)
      return invalid(p->err, "unterminated \"[\" in the host in URL: write an IPv6 address as [::1]");
    hlen = (size_t)(close - s) + 1;
    if (hlen == 2)
      return invalid(p->err, "empty host in URL");
    if (hlen < len && s[hlen] != ':')
      return invalid(p->err, "unexpected characters after \"]\" in the host in URL");
    if ((r = parse_ipv6(p, s + 1, hlen - 2)) != RELOCK_OK)
      return r;
  } else {
    const char *colon = memchr(s, ':', len);
    hlen = colon != NULL ? (size_t)(colon - s) : len;
    if (hlen == 0)
      return invalid(p->err, "empty host in URL");
    if (colon != NULL && memchr(colon + 1, ':', len - hlen - 1) != NULL)
      return invalid(p->err, "an IPv6 address in a URL must be in brackets: redis://[::1]:6379");
    if ((r = parse_hostname(p, s, hlen)) != RELOCK_OK)
      return r;
  }
  if (hlen < len) {
    port = s + hlen + 1;
    return parse_port(p, port, len - hlen - 1);
  }
  return RELOCK_OK;
}

/* redis://[[user]:password@]host[:port][/db] */
static int parse_redis(parser_t *p, const char *rest) {
  size_t alen = strcspn(rest, "/?#");
  const char *after = rest + alen;
  int r;
  /* A password with a raw '/', '?' or '#' ends the host part early, and the
   * rest of it would be parsed (and quoted) as a database. */
  if (strchr(after, '@') != NULL)
    return invalid(p->err, "\"@\" after the host in URL: percent-encode \"/\", \"?\", \"#\" and \"@\" in the "
                           "user name and password (%%2F, %%3F, %%23, %%40)");

  const char *hostport = rest;
  size_t hlen = alen;
  const char *at = NULL;
  for (size_t i = alen; i > 0; i--) /* the last '@': a password may hold one */
    if (rest[i - 1] == '@') {
      at = rest + i - 1;
      break;
    }
  if (at != NULL) {
    if ((r = parse_userinfo(p, rest, (size_t)(at - rest))) != RELOCK_OK)
      return r;
    hostport = at + 1;
    hlen = alen - (size_t)(hostport - rest);
  }
  if ((r = parse_hostport(p, hostport, hlen)) != RELOCK_OK)
    return r;

  if (*after == '/') {
    size_t dlen = strcspn(after + 1, "?#");
    if (dlen > 0 && (r = parse_db(p, after + 1, dlen, 1)) != RELOCK_OK)
      return r;
    after += 1 + dlen;
  }
  if (*after == '?')
    return invalid(p->err, "query parameters (\"?...\") are not supported in redis:// URLs: "
                           "use redis://[[user]:password@]host[:port][/db]");
  if (*after == '#')
    return invalid(p->err, "URL fragments (\"#...\") are not supported");
  return RELOCK_OK;
}

static int is_param(const char *s, size_t len, const char *name) {
  return len == strlen(name) && memcmp(s, name, len) == 0;
}

/* db=N&password=...&username=... After a password parameter nothing is
 * quoted: a raw '&' in the password would make its tail look like another
 * parameter. */
static int parse_query(parser_t *p, const char *q) {
  int seen_db = 0, seen_password = 0, seen_username = 0;
  for (;;) {
    size_t n = strcspn(q, "&");
    if (n == 0)
      return invalid(p->err, "empty parameter in the URL query");
    const char *eq = memchr(q, '=', n);
    size_t nlen = eq != NULL ? (size_t)(eq - q) : n;
    const char *value = eq != NULL ? eq + 1 : NULL;
    size_t vlen = eq != NULL ? n - nlen - 1 : 0;
    const char *name;
    int *seen;
    if (is_param(q, nlen, "db")) {
      name = "db";
      seen = &seen_db;
    } else if (is_param(q, nlen, "password")) {
      name = "password";
      seen = &seen_password;
    } else if (is_param(q, nlen, "username")) {
      name = "username";
      seen = &seen_username;
    } else if (seen_password) {
      return invalid(p->err, "unknown parameter after \"password\" in the URL query (a \"&\" in the "
                             "password must be written %%26); known: db, password, username");
    } else {
      char qn[48];
      return invalid(p->err, "unknown parameter \"%s\" in the URL query; known: db, password, username",
                     quote(qn, q, nlen));
    }
    if (*seen)
      return invalid(p->err, "parameter \"%s\" given twice in the URL query", name);
    *seen = 1;
    if (value == NULL || vlen == 0)
      return invalid(p->err, "parameter \"%s\" in the URL query needs a value (%s=...)", name, name);

    int r;
    if (seen == &seen_db)
      r = parse_db(p, value, vlen, !seen_password);
    else if (seen == &seen_password)
      r = store_decoded(p, value, vlen, "password", &p->f.password);
    else
      r = store_decoded(p, value, vlen, "user name", &p->f.username);
    if (r != RELOCK_OK)
      return r;

    q += n;
    if (*q == '\0')
      break;
    q++;
  }
  if (p->f.username != NULL && p->f.password == NULL)
    return invalid(p->err, "username without password in the URL query: Redis AUTH needs both");
  return RELOCK_OK;
}

/* unix:///path/to/socket[?query] */
static int parse_unix(parser_t *p, const char *rest) {
  if (rest[0] != '/')
    return invalid(p->err, "unix:// URL needs an absolute socket path: unix:///path/to/socket");
  size_t plen = strcspn(rest, "?");
  if (rest[plen - 1] == '/')
    return invalid(p->err, "the socket path in a unix:// URL must not end in \"/\"");
  if (plen > UNIX_PATH_MAX_LEN)
    return invalid(p->err, "socket path in URL too long (%zu bytes, at most %zu)", plen, (size_t)UNIX_PATH_MAX_LEN);
  p->f.unix_path = store(p, rest, plen);
  if (rest[plen] == '?')
    return parse_query(p, rest + plen + 1);
  return RELOCK_OK;
}

/* The length of a URL scheme at the start of url (RFC 3986), 0 if none. */
static size_t scheme_length(const char *url) {
  if (!is_alpha((unsigned char)url[0]))
    return 0;
  size_t n = 1;
  while (is_alpha((unsigned char)url[n]) || is_digit((unsigned char)url[n]) || url[n] == '+' || url[n] == '-' ||
         url[n] == '.')
    n++;
  return n;
}

static int scheme_is(const char *url, size_t len, const char *name) {
  if (len != strlen(name))
    return 0;
  for (size_t i = 0; i < len; i++) {
    char c = url[i];
    if (c >= 'A' && c <= 'Z')
      c = (char)(c - 'A' + 'a'); /* schemes are case-insensitive */
    if (c != name[i])
      return 0;
  }
  return 1;
}

int relock_config_from_url(relock_config_t *config, const char *url, relock_error_t *err) {
  if (config == NULL || url == NULL)
    return invalid(err, "%s is NULL", config == NULL ? "config" : "url");
  size_t len = strlen(url);
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)url[i] <= 0x20 || url[i] == 0x7f)
      return invalid(err, "URL contains a space or control character (at offset %zu); in a user name or "
                          "password, percent-encode it",
                     i);
  size_t slen = scheme_length(url);
  if (slen == 0 || strncmp(url + slen, "://", 3) != 0)
    return invalid(err, "not a Redis URL: expected redis://host[:port][/db] or unix:///path/to/socket");
  if (scheme_is(url, slen, "rediss"))
    return invalid(err, "rediss:// (TLS) is not supported by this build");
  int is_redis = scheme_is(url, slen, "redis");
  if (!is_redis && !scheme_is(url, slen, "unix")) {
    char q[48];
    return invalid(err, "unsupported URL scheme \"%s\": use redis:// or unix://", quote(q, url, slen));
  }

  /* Decoded parts are never longer than they were in the URL: len bytes and
   * a NUL for each of host, unix_path, username and password suffice. */
  owned_t *o = malloc(sizeof(*o) + len + 4);
  if (o == NULL)
    return set_error(err, RELOCK_ENOMEM, "out of memory parsing a URL");
  parser_t p = {
      .out = o->text,
      .err = err,
      .f = {.host = default_host, .port = DEFAULT_PORT, .unix_path = NULL, .username = NULL, .password = NULL, .db = 0},
  };
  const char *rest = url + slen + 3;
  int r = is_redis ? parse_redis(&p, rest) : parse_unix(&p, rest);
  if (r != RELOCK_OK) {
    free(o);
    return r;
  }

  /* Committed only now: on error the config is unchanged. */
  relock_config_cleanup(config);
  o->host = config->host = p.f.host;
  config->port = p.f.port;
  o->unix_path = config->unix_path = p.f.unix_path;
  o->username = config->username = p.f.username;
  o->password = config->password = p.f.password;
  config->db = p.f.db;
  config->owned_ = o;
  set_ok(err);
  return RELOCK_OK;
}

/* -- validation ---------------------------------------------------------------*/

/* Redis refuses a client name with spaces, newlines or other characters
 * outside '!'..'~'; a client id goes into lock fields "<client-id>:<owner>",
 * so it must not hold the ':' that separates them either. */
static int check_token(const char *value, const char *field, size_t max, int is_client_id, relock_error_t *err) {
  size_t len = strlen(value);
  if (len == 0)
    return invalid(err, "%s must not be empty (NULL for the default)", field);
  if (max > 0 && len > max)
    return invalid(err, "%s is %zu bytes long: at most %zu", field, len, max);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)value[i];
    if (c <= 0x20 || c == 0x7f)
      return invalid(err, "%s must not contain spaces or control characters", field);
    if (c > 0x7f && !is_client_id)
      return invalid(err, "%s must be printable ASCII (Redis refuses other client names)", field);
    if (c == ':' && is_client_id)
      return invalid(err, "%s must not contain \":\" (it separates the client id from the owner in lock fields)",
                     field);
  }
  return RELOCK_OK;
}

static int validate_connection(const relock_config_t *c, relock_error_t *err) {
  if (c->unix_path != NULL) {
    size_t len = strlen(c->unix_path);
    if (c->unix_path[0] != '/')
      return invalid(err, "unix_path must be an absolute path");
    if (len > UNIX_PATH_MAX_LEN)
      return invalid(err, "unix_path is %zu bytes long: at most %zu", len, (size_t)UNIX_PATH_MAX_LEN);
  } else {
    if (c->host == NULL || c->host[0] == '\0')
      return invalid(err, "empty host (set host, or unix_path for a Unix socket)");
    if (c->port < 1 || c->port > PORT_MAX)
      return invalid(err, "invalid port %d: must be 1-%d", c->port, PORT_MAX);
  }
  if (c->db < 0)
    return invalid(err, "invalid database %d: must be >= 0", c->db);
  if (c->password != NULL && c->password[0] == '\0')
    return invalid(err, "password is empty (NULL for no AUTH)");
  if (c->username != NULL && c->username[0] == '\0')
    return invalid(err, "username is empty (NULL to AUTH with the password only)");
  if (c->username != NULL && c->password == NULL)
    return invalid(err, "username without password: Redis AUTH needs both");
  if (c->client_name != NULL)
    return check_token(c->client_name, "client_name", 0, 0, err);
  return RELOCK_OK;
}

/* The longest duration accepted anywhere: about 34 years. Bounding every
 * duration keeps the sums and products made of them (latch lifetimes, lease
 * deadlines in ns) far from overflow, and Redis accepts them as expiries. */
#define MAX_DURATION_MS (INT64_C(1) << 40)
#define MAX_RETRY_ATTEMPTS 1000

static int too_long(const char *name, int64_t v, relock_error_t *err) {
  return invalid(err, "%s is %" PRId64 " ms: at most %" PRId64 " (about 34 years)", name, v, MAX_DURATION_MS);
}

static int validate_timing(const relock_config_t *c, relock_error_t *err) {
  static const struct {
    const char *name;
    size_t offset;
  } durations[] = {{"connect_timeout_ms", offsetof(relock_config_t, connect_timeout_ms)},
                   {"command_timeout_ms", offsetof(relock_config_t, command_timeout_ms)},
                   {"retry_interval_ms", offsetof(relock_config_t, retry_interval_ms)},
                   {"reconnect_min_ms", offsetof(relock_config_t, reconnect_min_ms)},
                   {"reconnect_max_ms", offsetof(relock_config_t, reconnect_max_ms)},
                   {"watchdog_timeout_ms", offsetof(relock_config_t, watchdog_timeout_ms)},
                   {"ping_interval_ms", offsetof(relock_config_t, ping_interval_ms)}};
  for (size_t i = 0; i < sizeof durations / sizeof durations[0]; i++) {
    int64_t v;
    memcpy(&v, (const char *)c + durations[i].offset, sizeof v);
    if (v > MAX_DURATION_MS)
      return too_long(durations[i].name, v, err);
  }
  if (c->retry_attempts > MAX_RETRY_ATTEMPTS)
    return invalid(err, "retry_attempts must be <= %d (got %d)", MAX_RETRY_ATTEMPTS, c->retry_attempts);
  if (c->connect_timeout_ms <= 0)
    return invalid(err, "connect_timeout_ms must be > 0 (got %" PRId64 ")", c->connect_timeout_ms);
  if (c->command_timeout_ms <= 0)
    return invalid(err, "command_timeout_ms must be > 0 (got %" PRId64 ")", c->command_timeout_ms);
  if (c->retry_attempts < 0)
    return invalid(err, "retry_attempts must be >= 0 (got %d)", c->retry_attempts);
  if (c->retry_interval_ms < 0)
    return invalid(err, "retry_interval_ms must be >= 0 (got %" PRId64 ")", c->retry_interval_ms);
  if (c->reconnect_min_ms < 1)
    return invalid(err, "reconnect_min_ms must be >= 1 (got %" PRId64 ")", c->reconnect_min_ms);
  if (c->reconnect_min_ms > c->reconnect_max_ms)
    return invalid(err, "reconnect_min_ms (%" PRId64 ") must not exceed reconnect_max_ms (%" PRId64 ")",
                   c->reconnect_min_ms, c->reconnect_max_ms);
  if (c->watchdog_timeout_ms < 3)
    return invalid(err, "watchdog_timeout_ms must be >= 3: the lease is renewed every third of it (got %" PRId64 ")",
                   c->watchdog_timeout_ms);
  if (c->ping_interval_ms < 0)
    return invalid(err, "ping_interval_ms must be >= 0, 0 for no PING (got %" PRId64 ")", c->ping_interval_ms);
  return RELOCK_OK;
}

int relock_config_validate(const relock_config_t *config, relock_error_t *err) {
  if (config == NULL)
    return invalid(err, "config is NULL");
  int r;
  if ((r = validate_connection(config, err)) != RELOCK_OK)
    return r;
  if ((r = validate_timing(config, err)) != RELOCK_OK)
    return r;
  if (config->client_id != NULL && (r = check_token(config->client_id, "client_id", CLIENT_ID_MAX, 1, err)) != RELOCK_OK)
    return r;
  set_ok(err);
  return RELOCK_OK;
}
