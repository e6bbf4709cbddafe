/* Parsing of redis://, rediss://, unix://, redis+sentinel:// and
 * redis+cluster:// URLs (and their rediss+ forms) into the connection
 * options (relock_options_set_url), and of host lists: the sentinels and a
 * Cluster's seed nodes.
 *
 * Error messages name the problem and may quote parts of the URL, but never
 * a password: parts that could be (a misplaced) one are described, not
 * quoted. */
#include <config.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <relock/config.h>
#include <relock/error.h>

#include "base/error.h"
#include "config/options_impl.h"

#define PORT_MAX RELOCK__PORT_MAX
#define UNIX_PATH_MAX_LEN RELOCK__UNIX_PATH_MAX_LEN

#define invalid(err, ...) relock__error_set((err), RELOCK_EINVAL, __VA_ARGS__)

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

/* -- URL parsing --------------------------------------------------------------*/

/* The connection fields a URL sets; parts it leaves out keep their defaults. */
typedef struct url_fields {
  const char *host;
  int port;
  const char *unix_path;
  const char *username;
  const char *password;
  int db;
  const char *sentinels; /* redis+sentinel://: the list as written */
  const char *sentinel_master;
  const char *sentinel_username;
  const char *sentinel_password;
  const char *cluster_nodes; /* redis+cluster://: the list as written */
} url_fields_t;

typedef struct parser {
  char *out; /* next free byte of the parsed strings' storage */
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

static int parse_query(parser_t *p, const char *q, int sentinel);

/* The authority rest[0..alen) of a URL: user info up to its last '@' (a
 * password may hold one), parsed; *hosts and *hlen get what follows it. */
static int parse_authority(parser_t *p, const char *rest, size_t alen, const char **hosts, size_t *hlen) {
  /* A password with a raw '/', '?' or '#' ends the host part early, and the
   * rest of it would be parsed (and quoted) as a database. */
  if (strchr(rest + alen, '@') != NULL)
    return invalid(p->err, "\"@\" after the host in URL: percent-encode \"/\", \"?\", \"#\" and \"@\" in the "
                           "user name and password (%%2F, %%3F, %%23, %%40)");
  *hosts = rest;
  *hlen = alen;
  for (size_t i = alen; i > 0; i--)
    if (rest[i - 1] == '@') {
      int r = parse_userinfo(p, rest, i - 1);
      *hosts = rest + i;
      *hlen = alen - i;
      return r;
    }
  return RELOCK_OK;
}

/* "/db" (empty: 0) at *after, if there; *after moves past it. */
static int parse_db_path(parser_t *p, const char **after) {
  if (**after != '/')
    return RELOCK_OK;
  size_t dlen = strcspn(*after + 1, "?#");
  int r = dlen > 0 ? parse_db(p, *after + 1, dlen, 1) : RELOCK_OK;
  *after += 1 + dlen;
  return r;
}

/* redis://[[user]:password@]host[:port][/db] */
static int parse_redis(parser_t *p, const char *rest) {
  size_t alen = strcspn(rest, "/?#");
  const char *after = rest + alen;
  const char *hostport;
  size_t hlen;
  int r;
  if ((r = parse_authority(p, rest, alen, &hostport, &hlen)) != RELOCK_OK ||
      (r = parse_hostport(p, hostport, hlen)) != RELOCK_OK || (r = parse_db_path(p, &after)) != RELOCK_OK)
    return r;
  if (*after == '?')
    return invalid(p->err, "query parameters (\"?...\") are not supported in redis:// URLs: "
                           "use redis://[[user]:password@]host[:port][/db]");
  if (*after == '#')
    return invalid(p->err, "URL fragments (\"#...\") are not supported");
  return RELOCK_OK;
}

/* The authority of a URL with a list of hosts: the user info, and the
 * hosts checked as a list of kind (none: "no <what> in URL: <form>").
 * *list gets the stored list, *after what follows the authority. */
static int parse_host_list(parser_t *p, const char *rest, const relock__hostlist_t *kind, const char *what,
                           const char *form, const char **list, const char **after) {
  size_t alen = strcspn(rest, "/?#");
  const char *hosts;
  size_t hlen;
  int r;
  *after = rest + alen;
  if ((r = parse_authority(p, rest, alen, &hosts, &hlen)) != RELOCK_OK)
    return r;
  if (hlen == 0)
    return invalid(p->err, "no %s in URL: %s", what, form);
  *list = store(p, hosts, hlen);
  relock__hostport_t parsed[RELOCK__SENTINELS_MAX > RELOCK__CLUSTER_SEEDS_MAX ? RELOCK__SENTINELS_MAX
                                                                               : RELOCK__CLUSTER_SEEDS_MAX];
  r = relock__parse_hostports(*list, kind, parsed, p->err);
  return r < 0 ? r : RELOCK_OK;
}

/* redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master[/db][?query] */
static int parse_sentinel(parser_t *p, const char *rest) {
  static const char form[] = "redis+sentinel://host[:port][,host[:port]...]/master[/db]";
  const char *after;
  int r;
  if ((r = parse_host_list(p, rest, &relock__sentinel_list, "sentinel", form, &p->f.sentinels, &after)) !=
      RELOCK_OK)
    return r;
  size_t mlen = *after == '/' ? strcspn(after + 1, "/?#") : 0;
  if (mlen == 0)
    return invalid(p->err, "no master name in URL: %s", form);
  if ((r = store_decoded(p, after + 1, mlen, "master name", &p->f.sentinel_master)) != RELOCK_OK)
    return r;
  for (const char *c = p->f.sentinel_master; *c != '\0'; c++)
    if ((unsigned char)*c <= 0x20 || *c == 0x7f)
      return invalid(p->err, "the master name in the URL must not contain spaces or control characters");
  after += 1 + mlen;
  if ((r = parse_db_path(p, &after)) != RELOCK_OK)
    return r;
  if (*after == '#')
    return invalid(p->err, "URL fragments (\"#...\") are not supported");
  return *after == '?' ? parse_query(p, after + 1, 1) : RELOCK_OK;
}

/* redis+cluster://[[user]:password@]host[:port][,host[:port]...][/0][?query]
 * The hosts are seeds: any one that answers gives the whole slot map. */
static int parse_cluster(parser_t *p, const char *rest) {
  const char *after;
  int r;
  if ((r = parse_host_list(p, rest, &relock__cluster_list, "cluster node",
                           "redis+cluster://host[:port][,host[:port]...]", &p->f.cluster_nodes, &after)) != RELOCK_OK)
    return r;
  if ((r = parse_db_path(p, &after)) != RELOCK_OK)
    return r;
  if (*after == '#')
    return invalid(p->err, "URL fragments (\"#...\") are not supported");
  if (*after == '?' && (r = parse_query(p, after + 1, 0)) != RELOCK_OK)
    return r;
  /* The number is not quoted: after a password in the query it may be the
   * tail of one. */
  if (p->f.db != 0)
    return invalid(p->err, "a database other than 0 in a redis+cluster:// URL: Redis Cluster has only database 0 "
                           "(leave the path out, or write /0)");
  return RELOCK_OK;
}

static int is_param(const char *s, size_t len, const char *name) {
  return len == strlen(name) && memcmp(s, name, len) == 0;
}

/* The query parameters a URL may have; the Sentinel ones only in a
 * redis+sentinel:// URL. */
enum { Q_DB, Q_PASSWORD, Q_USERNAME, Q_SENTINEL_PASSWORD, Q_SENTINEL_USERNAME, Q_COUNT };
static const char *const query_names[Q_COUNT] = {"db", "password", "username", "sentinel-password",
                                                 "sentinel-username"};

/* db=N&password=...&username=... (and sentinel-password=...&
 * sentinel-username=... when sentinel). After a password parameter nothing
 * is quoted: a raw '&' in the password would make its tail look like
 * another parameter. */
static int parse_query(parser_t *p, const char *q, int sentinel) {
  int seen[Q_COUNT] = {0};
  int nparams = sentinel ? Q_COUNT : Q_SENTINEL_PASSWORD;
  const char *known = sentinel ? "db, password, username, sentinel-password, sentinel-username"
                               : "db, password, username";
  int after_secret = 0;
  for (;;) {
    size_t n = strcspn(q, "&");
    if (n == 0)
      return invalid(p->err, "empty parameter in the URL query");
    const char *eq = memchr(q, '=', n);
    size_t nlen = eq != NULL ? (size_t)(eq - q) : n;
    const char *value = eq != NULL ? eq + 1 : NULL;
    size_t vlen = eq != NULL ? n - nlen - 1 : 0;
    int which = 0;
    while (which < nparams && !is_param(q, nlen, query_names[which]))
      which++;
    if (which == nparams && after_secret)
      return invalid(p->err, "unknown parameter after a password in the URL query (a \"&\" in a "
                             "password must be written %%26); known: %s", known);
    if (which == nparams) {
      char qn[48];
      return invalid(p->err, "unknown parameter \"%s\" in the URL query; known: %s", quote(qn, q, nlen), known);
    }
    const char *name = query_names[which];
    if (seen[which])
      return invalid(p->err, "parameter \"%s\" given twice in the URL query", name);
    seen[which] = 1;
    if (value == NULL || vlen == 0)
      return invalid(p->err, "parameter \"%s\" in the URL query needs a value (%s=...)", name, name);

    int r;
    switch (which) {
    case Q_DB: r = parse_db(p, value, vlen, !after_secret); break;
    case Q_PASSWORD: r = store_decoded(p, value, vlen, "password", &p->f.password); break;
    case Q_USERNAME: r = store_decoded(p, value, vlen, "user name", &p->f.username); break;
    case Q_SENTINEL_PASSWORD:
      r = store_decoded(p, value, vlen, "sentinel password", &p->f.sentinel_password);
      break;
    default: r = store_decoded(p, value, vlen, "sentinel user name", &p->f.sentinel_username); break;
    }
    if (r != RELOCK_OK)
      return r;
    after_secret |= which == Q_PASSWORD || which == Q_SENTINEL_PASSWORD;

    q += n;
    if (*q == '\0')
      break;
    q++;
  }
  if (p->f.username != NULL && p->f.password == NULL)
    return invalid(p->err, "username without password in the URL query: Redis AUTH needs both");
  if (p->f.sentinel_username != NULL && p->f.sentinel_password == NULL)
    return invalid(p->err, "sentinel-username without sentinel-password in the URL query: Redis AUTH needs both");
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
    return parse_query(p, rest + plen + 1, 0);
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

/* Replaces a string option; secret ones are wiped on the way out. */
static void replace(char **slot, char *value, int secret) {
  relock__options_free_string(*slot, secret);
  *slot = value;
}

/* strdup that keeps NULL as NULL; *ok is cleared when a copy fails. */
static char *copy(const char *s, int *ok) {
  char *c = s != NULL ? strdup(s) : NULL;
  if (s != NULL && c == NULL)
    *ok = 0;
  return c;
}

int relock_options_set_url(relock_options_t *opts, const char *url, relock_error_t *err) {
  if (opts == NULL || url == NULL)
    return invalid(err, "%s is NULL", opts == NULL ? "opts" : "url");
  size_t len = strlen(url);
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)url[i] <= 0x20 || url[i] == 0x7f)
      return invalid(err, "URL contains a space or control character (at offset %zu); in a user name or "
                          "password, percent-encode it",
                     i);
  size_t slen = scheme_length(url);
  if (slen == 0 || strncmp(url + slen, "://", 3) != 0)
    return invalid(err, "not a Redis URL: expected redis://host[:port][/db] or unix:///path/to/socket");
  int sentinel = scheme_is(url, slen, "redis+sentinel") || scheme_is(url, slen, "rediss+sentinel");
  int cluster = scheme_is(url, slen, "redis+cluster") || scheme_is(url, slen, "rediss+cluster");
  int tls = scheme_is(url, slen, "rediss") || scheme_is(url, slen, "rediss+sentinel") ||
            scheme_is(url, slen, "rediss+cluster");
#ifndef RELOCK_HAVE_TLS
  if (tls)
    return relock__error_set(err, RELOCK_ETLS, "%s URL: " RELOCK__NO_TLS_MESSAGE,
                             sentinel ? "rediss+sentinel://" : cluster ? "rediss+cluster://" : "rediss://");
#endif
  int is_redis = !sentinel && !cluster && (tls || scheme_is(url, slen, "redis"));
  if (!is_redis && !sentinel && !cluster && !scheme_is(url, slen, "unix")) {
    char q[48];
    return invalid(err,
                   "unsupported URL scheme \"%s\": use redis://, rediss://, unix://, redis+sentinel:// or "
                   "redis+cluster://",
                   quote(q, url, slen));
  }

  /* Decoded parts are never longer than they were in the URL: len bytes and
   * a NUL for each part one URL stores (at most eight, in a Sentinel URL)
   * suffice. */
  size_t size = len + 8;
  char *text = malloc(size);
  if (text == NULL)
    return relock__error_set(err, RELOCK_ENOMEM, "out of memory parsing a URL");
  parser_t p = {
      .out = text,
      .err = err,
      .f = {.host = RELOCK__DEFAULT_HOST,
            .port = RELOCK__DEFAULT_PORT,
            .unix_path = NULL,
            .username = NULL,
            .password = NULL,
            .db = 0},
  };
  const char *rest = url + slen + 3;
  int r = sentinel ? parse_sentinel(&p, rest)
          : cluster ? parse_cluster(&p, rest)
          : is_redis ? parse_redis(&p, rest)
          : parse_unix(&p, rest);
  /* The strings the URL sets, in this order; the secret ones are wiped. A
   * URL of one topology clears the others' (they are NULL here). */
  const char *parts[] = {p.f.host,      p.f.unix_path,       p.f.username,          p.f.password,
                         p.f.sentinels, p.f.sentinel_master, p.f.sentinel_username, p.f.sentinel_password,
                         p.f.cluster_nodes};
  enum { NPARTS = sizeof parts / sizeof parts[0] };
  static const int secret[NPARTS] = {0, 0, 0, 1, 0, 0, 0, 1, 0};
  char *copies[NPARTS] = {NULL};
  int ok = 1;
  for (size_t i = 0; i < NPARTS && r == RELOCK_OK; i++)
    copies[i] = copy(parts[i], &ok);
  memset(text, 0, size); /* it held the passwords */
  free(text);
  if (r == RELOCK_OK && !ok) {
    r = relock__error_set(err, RELOCK_ENOMEM, "out of memory parsing a URL");
    for (size_t i = 0; i < NPARTS; i++)
      relock__options_free_string(copies[i], secret[i]);
  }
  if (r != RELOCK_OK)
    return r;

  /* Committed only now: on error the options are unchanged. */
  char **slots[NPARTS] = {&opts->host,      &opts->unix_path,       &opts->username,          &opts->password,
                          &opts->sentinels, &opts->sentinel_master, &opts->sentinel_username, &opts->sentinel_password,
                          &opts->cluster_nodes};
  for (size_t i = 0; i < NPARTS; i++)
    replace(slots[i], copies[i], secret[i]);
  opts->port = p.f.port;
  opts->db = p.f.db;
  opts->tls = tls;
  return relock__error_set(err, RELOCK_OK, NULL);
}

const relock__hostlist_t relock__sentinel_list = {"sentinel list", "sentinels", RELOCK__DEFAULT_SENTINEL_PORT,
                                                  RELOCK__SENTINELS_MAX};
const relock__hostlist_t relock__cluster_list = {"cluster-nodes list", "cluster seed nodes", RELOCK__DEFAULT_PORT,
                                                 RELOCK__CLUSTER_SEEDS_MAX};

int relock__parse_hostports(const char *list, const relock__hostlist_t *kind, relock__hostport_t *out,
                            relock_error_t *err) {
  size_t len = strlen(list);
  char *text = malloc(len + 1);
  if (text == NULL)
    return relock__error_set(err, RELOCK_ENOMEM, "out of memory parsing the %s", kind->list);
  int n = 0, r = RELOCK_OK;
  for (const char *s = list;; s++) {
    size_t item = strcspn(s, ",");
    parser_t p = {.out = text, .err = err, .f = {.port = kind->default_port}};
    if (item == 0)
      r = invalid(err, "empty entry in the %s \"host[:port],host[:port],...\"", kind->list);
    else if (n == kind->max)
      r = invalid(err, "more than %d %s in the list", kind->max, kind->entries);
    else if ((r = parse_hostport(&p, s, item)) == RELOCK_OK && strlen(p.f.host) >= sizeof out[n].host)
      r = invalid(err, "a host in the %s is longer than %zu bytes", kind->list, sizeof out[n].host - 1);
    if (r != RELOCK_OK)
      break;
    snprintf(out[n].host, sizeof out[n].host, "%s", p.f.host);
    out[n++].port = p.f.port;
    s += item;
    if (*s == '\0')
      break;
  }
  free(text);
  return r != RELOCK_OK ? r : n;
}
