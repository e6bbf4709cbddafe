/* Client options (relock/config.h): one table describes every option - its
 * name, type, field, default and the check of a value - and the typed
 * setters and getters, the text setter and the cross-option validation all
 * work from it. A new option (TLS, Sentinel, Cluster) is its RELOCK_OPT_*
 * name in include/relock/config.h, one field in options_impl.h and one row
 * here (docs/ARCHITECTURE.md, "An option", says the rest: man page, tests).
 *
 * Messages name the problem and the value, but never a password. */
#include <config.h>

#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <relock/config.h>
#include <relock/error.h>
#include <relock/lock.h> /* RELOCK_MIN_LEASE_MS */

#include "base/error.h"
#include "config/options_impl.h"

#define CLIENT_ID_MAX 64
/* The longest duration accepted anywhere: about 34 years. Bounding every
 * duration keeps the sums and products made of them (latch lifetimes, lease
 * deadlines in ns) far from overflow, and Redis accepts them as expiries. */
#define MAX_DURATION_MS (INT64_C(1) << 40)
#define MAX_RETRY_ATTEMPTS 1000
/* More replicas than any real deployment has: a larger number is a typo. */
#define MAX_REPLICAS_ACKED 100

#define invalid(err, ...) relock__error_set((err), RELOCK_EINVAL, __VA_ARGS__)

typedef enum { OPT_STRING, OPT_INT, OPT_MS } opt_type_t;

/* A value on its way into an option: s for a string, n for the others. */
typedef struct {
  const char *s;
  int64_t n;
} value_t;

typedef int (*check_fn)(value_t v, relock_error_t *err);

typedef struct {
  const char *name;
  opt_type_t type;
  size_t offset;
  const char *def_s; /* the default of a string (NULL: not set) */
  int64_t def_n;     /* the default of the others */
  check_fn check;    /* NULL: any value of the type */
  int secret;        /* never quoted, wiped when freed */
} option_t;

/* -- checks of single values --------------------------------------------------
 * The messages name an option by its name (RELOCK_OPT_*), as it was set. */

static int check_host(value_t v, relock_error_t *err) {
  /* NULL is "no host": only valid with a Unix socket (relock_options_validate) */
  if (v.s != NULL && v.s[0] == '\0')
    return invalid(err, "empty host (set host, or unix-path for a Unix socket)");
  return RELOCK_OK;
}

static int check_port(value_t v, relock_error_t *err) {
  if (v.n < 1 || v.n > RELOCK__PORT_MAX)
    return invalid(err, "invalid port %d: must be 1-%d", (int)v.n, RELOCK__PORT_MAX);
  return RELOCK_OK;
}

static int check_unix_path(value_t v, relock_error_t *err) {
  if (v.s == NULL)
    return RELOCK_OK;
  size_t len = strlen(v.s);
  if (v.s[0] != '/')
    return invalid(err, "unix-path must be an absolute path");
  if (len > RELOCK__UNIX_PATH_MAX_LEN)
    return invalid(err, "unix-path is %zu bytes long: at most %zu", len, (size_t)RELOCK__UNIX_PATH_MAX_LEN);
  return RELOCK_OK;
}

static int check_username(value_t v, relock_error_t *err) {
  if (v.s != NULL && v.s[0] == '\0')
    return invalid(err, "username is empty (NULL to AUTH with the password only)");
  return RELOCK_OK;
}

static int check_password(value_t v, relock_error_t *err) {
  if (v.s != NULL && v.s[0] == '\0')
    return invalid(err, "password is empty (NULL for no AUTH)");
  return RELOCK_OK;
}

static int check_db(value_t v, relock_error_t *err) {
  if (v.n < 0)
    return invalid(err, "invalid database %d: must be >= 0", (int)v.n);
  return RELOCK_OK;
}

/* Redis refuses a client name with spaces, newlines or other characters
 * outside '!'..'~'; a client id goes into lock fields "<client-id>:<owner>",
 * so it must not hold the ':' that separates them either. */
static int check_token(const char *value, const char *field, size_t max, int is_client_id, relock_error_t *err) {
  if (value == NULL)
    return RELOCK_OK;
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

static int check_client_name(value_t v, relock_error_t *err) { return check_token(v.s, "client-name", 0, 0, err); }

static int check_client_id(value_t v, relock_error_t *err) {
  return check_token(v.s, "client-id", CLIENT_ID_MAX, 1, err);
}

static int too_long(const char *name, int64_t v, relock_error_t *err) {
  if (v > MAX_DURATION_MS)
    return invalid(err, "%s is %" PRId64 " ms: at most %" PRId64 " (about 34 years)", name, v, MAX_DURATION_MS);
  return RELOCK_OK;
}

/* A duration no longer than MAX_DURATION_MS and at least min; what says
 * what the lower bound is for. */
static int check_duration(const char *name, int64_t v, int64_t min, const char *bound, relock_error_t *err) {
  if (too_long(name, v, err) != RELOCK_OK)
    return RELOCK_EINVAL;
  if (v < min)
    return invalid(err, "%s must be %s (got %" PRId64 ")", name, bound, v);
  return RELOCK_OK;
}

static int check_connect_timeout(value_t v, relock_error_t *err) {
  return check_duration("connect-timeout", v.n, 1, "> 0", err);
}

static int check_command_timeout(value_t v, relock_error_t *err) {
  return check_duration("command-timeout", v.n, 1, "> 0", err);
}

static int check_retry_attempts(value_t v, relock_error_t *err) {
  if (v.n > MAX_RETRY_ATTEMPTS)
    return invalid(err, "retry-attempts must be <= %d (got %d)", MAX_RETRY_ATTEMPTS, (int)v.n);
  if (v.n < 0)
    return invalid(err, "retry-attempts must be >= 0 (got %d)", (int)v.n);
  return RELOCK_OK;
}

static int check_retry_interval(value_t v, relock_error_t *err) {
  return check_duration("retry-interval", v.n, 0, ">= 0", err);
}

static int check_reconnect_min(value_t v, relock_error_t *err) {
  return check_duration("reconnect-min", v.n, 1, ">= 1", err);
}

/* Its lower bound is reconnect-min: relock_options_validate. */
static int check_reconnect_max(value_t v, relock_error_t *err) { return too_long("reconnect-max", v.n, err); }

/* The watchdog's lease is a lease: RELOCK_MIN_LEASE_MS at least (lock.h). */
static int check_watchdog_timeout(value_t v, relock_error_t *err) {
  return check_duration("watchdog-timeout", v.n, RELOCK_MIN_LEASE_MS,
                        ">= 10: a shorter lease is all or nearly all drift margin (1% + 2 ms)", err);
}

static int check_fair_lock_wait_timeout(value_t v, relock_error_t *err) {
  return check_duration("fair-lock-wait-timeout", v.n, 3, ">= 3: waiters try again every third of it", err);
}

static int check_ping_interval(value_t v, relock_error_t *err) {
  return check_duration("ping-interval", v.n, 0, ">= 0, 0 for no PING", err);
}

/* TLS options: a build without TLS refuses them at once (RELOCK_ETLS), so
 * that a program asking for TLS learns it at setup rather than at its first
 * command. The value that means "no TLS" (0, NULL) is accepted anyway. */
#ifndef RELOCK_HAVE_TLS
static int no_tls(relock_error_t *err) { return relock__error_set(err, RELOCK_ETLS, RELOCK__NO_TLS_MESSAGE); }
#endif

static int check_tls_flag(value_t v, relock_error_t *err) {
  if (v.n != 0 && v.n != 1)
    return invalid(err, "a TLS switch must be 0 or 1 (got %d)", (int)v.n);
#ifndef RELOCK_HAVE_TLS
  if (v.n != 0)
    return no_tls(err);
#endif
  return RELOCK_OK;
}

static int check_tls_string(value_t v, relock_error_t *err) {
  if (v.s != NULL && v.s[0] == '\0')
    return invalid(err, "a TLS file, directory or name must not be empty (NULL for the default)");
#ifndef RELOCK_HAVE_TLS
  if (v.s != NULL)
    return no_tls(err);
#endif
  return RELOCK_OK;
}

static int check_sentinels(value_t v, relock_error_t *err) {
  if (v.s == NULL)
    return RELOCK_OK;
  relock__hostport_t list[RELOCK__SENTINELS_MAX];
  int n = relock__parse_hostports(v.s, &relock__sentinel_list, list, err);
  return n < 0 ? n : RELOCK_OK;
}

/* A master name goes into SENTINEL commands and is compared with the names
 * in +switch-master messages, which separate fields with spaces. */
static int check_sentinel_master(value_t v, relock_error_t *err) {
  return check_token(v.s, "sentinel-master", 0, 1, err);
}

static int check_sentinel_username(value_t v, relock_error_t *err) {
  if (v.s != NULL && v.s[0] == '\0')
    return invalid(err, "sentinel-username is empty (NULL to AUTH with the password only)");
  return RELOCK_OK;
}

static int check_sentinel_password(value_t v, relock_error_t *err) {
  if (v.s != NULL && v.s[0] == '\0')
    return invalid(err, "sentinel-password is empty (NULL for no AUTH to the sentinels)");
  return RELOCK_OK;
}

static int check_cluster_nodes(value_t v, relock_error_t *err) {
  if (v.s == NULL)
    return RELOCK_OK;
  relock__hostport_t list[RELOCK__CLUSTER_SEEDS_MAX];
  int n = relock__parse_hostports(v.s, &relock__cluster_list, list, err);
  return n < 0 ? n : RELOCK_OK;
}

static int check_min_replicas_acked(value_t v, relock_error_t *err) {
  if (v.n < 0 || v.n > MAX_REPLICAS_ACKED)
    return invalid(err, "min-replicas-acked must be 0-%d, 0 for no WAIT (got %d)", MAX_REPLICAS_ACKED, (int)v.n);
  return RELOCK_OK;
}

/* > 0: WAIT's 0 would mean "block the connection forever". Its upper bound
 * is the command timeout: relock_options_validate. */
static int check_min_replicas_timeout(value_t v, relock_error_t *err) {
  return check_duration("min-replicas-timeout", v.n, 1, "> 0 (WAIT 0 would block forever)", err);
}

static int check_release_on_close(value_t v, relock_error_t *err) {
  if (v.n != 0 && v.n != 1)
    return invalid(err, "release-on-close must be 0 or 1 (got %d)", (int)v.n);
  return RELOCK_OK;
}

static int check_statistics(value_t v, relock_error_t *err) {
  if (v.n != 0 && v.n != 1)
    return invalid(err, "statistics must be 0 or 1 (got %d)", (int)v.n);
  return RELOCK_OK;
}

/* -- the table --------------------------------------------------------------*/

#define FIELD(f) offsetof(struct relock_options, f)

static const option_t options[] = {
    {RELOCK_OPT_HOST, OPT_STRING, FIELD(host), RELOCK__DEFAULT_HOST, 0, check_host, 0},
    {RELOCK_OPT_PORT, OPT_INT, FIELD(port), NULL, RELOCK__DEFAULT_PORT, check_port, 0},
    {RELOCK_OPT_UNIX_PATH, OPT_STRING, FIELD(unix_path), NULL, 0, check_unix_path, 0},
    {RELOCK_OPT_USERNAME, OPT_STRING, FIELD(username), NULL, 0, check_username, 0},
    {RELOCK_OPT_PASSWORD, OPT_STRING, FIELD(password), NULL, 0, check_password, 1},
    {RELOCK_OPT_DB, OPT_INT, FIELD(db), NULL, 0, check_db, 0},
    {RELOCK_OPT_CLIENT_NAME, OPT_STRING, FIELD(client_name), NULL, 0, check_client_name, 0},
    {RELOCK_OPT_CONNECT_TIMEOUT, OPT_MS, FIELD(connect_timeout_ms), NULL, 5000, check_connect_timeout, 0},
    {RELOCK_OPT_COMMAND_TIMEOUT, OPT_MS, FIELD(command_timeout_ms), NULL, 3000, check_command_timeout, 0},
    {RELOCK_OPT_RETRY_ATTEMPTS, OPT_INT, FIELD(retry_attempts), NULL, 3, check_retry_attempts, 0},
    {RELOCK_OPT_RETRY_INTERVAL, OPT_MS, FIELD(retry_interval_ms), NULL, 1500, check_retry_interval, 0},
    {RELOCK_OPT_RECONNECT_MIN, OPT_MS, FIELD(reconnect_min_ms), NULL, 100, check_reconnect_min, 0},
    {RELOCK_OPT_RECONNECT_MAX, OPT_MS, FIELD(reconnect_max_ms), NULL, 10000, check_reconnect_max, 0},
    {RELOCK_OPT_CLIENT_ID, OPT_STRING, FIELD(client_id), NULL, 0, check_client_id, 0},
    {RELOCK_OPT_WATCHDOG_TIMEOUT, OPT_MS, FIELD(watchdog_timeout_ms), NULL, 30000, check_watchdog_timeout, 0},
    {RELOCK_OPT_PING_INTERVAL, OPT_MS, FIELD(ping_interval_ms), NULL, 1000, check_ping_interval, 0},
    {RELOCK_OPT_TLS, OPT_INT, FIELD(tls), NULL, 0, check_tls_flag, 0},
    {RELOCK_OPT_TLS_CA_FILE, OPT_STRING, FIELD(tls_ca_file), NULL, 0, check_tls_string, 0},
    {RELOCK_OPT_TLS_CA_DIR, OPT_STRING, FIELD(tls_ca_dir), NULL, 0, check_tls_string, 0},
    {RELOCK_OPT_TLS_CERT, OPT_STRING, FIELD(tls_cert), NULL, 0, check_tls_string, 0},
    {RELOCK_OPT_TLS_KEY, OPT_STRING, FIELD(tls_key), NULL, 0, check_tls_string, 0},
    {RELOCK_OPT_TLS_SERVER_NAME, OPT_STRING, FIELD(tls_server_name), NULL, 0, check_tls_string, 0},
    {RELOCK_OPT_TLS_INSECURE_SKIP_VERIFY, OPT_INT, FIELD(tls_insecure_skip_verify), NULL, 0, check_tls_flag, 0},
    {RELOCK_OPT_SENTINELS, OPT_STRING, FIELD(sentinels), NULL, 0, check_sentinels, 0},
    {RELOCK_OPT_SENTINEL_MASTER, OPT_STRING, FIELD(sentinel_master), NULL, 0, check_sentinel_master, 0},
    {RELOCK_OPT_SENTINEL_USERNAME, OPT_STRING, FIELD(sentinel_username), NULL, 0, check_sentinel_username, 0},
    {RELOCK_OPT_SENTINEL_PASSWORD, OPT_STRING, FIELD(sentinel_password), NULL, 0, check_sentinel_password, 1},
    {RELOCK_OPT_CLUSTER_NODES, OPT_STRING, FIELD(cluster_nodes), NULL, 0, check_cluster_nodes, 0},
    {RELOCK_OPT_MIN_REPLICAS_ACKED, OPT_INT, FIELD(min_replicas_acked), NULL, 0, check_min_replicas_acked, 0},
    {RELOCK_OPT_MIN_REPLICAS_TIMEOUT, OPT_MS, FIELD(min_replicas_timeout_ms), NULL, 500, check_min_replicas_timeout,
     0},
    {RELOCK_OPT_FAIR_LOCK_WAIT_TIMEOUT, OPT_MS, FIELD(fair_lock_wait_timeout_ms), NULL, 300000,
     check_fair_lock_wait_timeout, 0},
    {RELOCK_OPT_RELEASE_ON_CLOSE, OPT_INT, FIELD(release_on_close), NULL, 0, check_release_on_close, 0},
    {RELOCK_OPT_STATISTICS, OPT_INT, FIELD(statistics), NULL, 1, check_statistics, 0},
};

#define N_OPTIONS (sizeof options / sizeof options[0])

static const char *type_name(opt_type_t t) {
  return t == OPT_STRING ? "a string" : t == OPT_INT ? "an int" : "a duration in ms";
}

/* The option called name, or NULL with err set. */
static const option_t *find(const relock_options_t *opts, const char *name, relock_error_t *err) {
  if (opts == NULL) {
    invalid(err, "opts is NULL");
    return NULL;
  }
  if (name == NULL) {
    invalid(err, "option name is NULL");
    return NULL;
  }
  for (size_t i = 0; i < N_OPTIONS; i++)
    if (strcmp(options[i].name, name) == 0)
      return &options[i];
  invalid(err, "unknown option \"%.64s\"", name);
  return NULL;
}

/* find, for a use as type. */
static const option_t *find_typed(const relock_options_t *opts, const char *name, opt_type_t type,
                                  relock_error_t *err) {
  const option_t *o = find(opts, name, err);
  if (o != NULL && o->type != type) {
    invalid(err, "option \"%s\" is %s, not %s", o->name, type_name(o->type), type_name(type));
    return NULL;
  }
  return o;
}

static char **string_slot(relock_options_t *opts, const option_t *o) {
  return (char **)(void *)((char *)opts + o->offset);
}

static char *const *string_slot_c(const relock_options_t *opts, const option_t *o) {
  return (char *const *)(const void *)((const char *)opts + o->offset);
}

/* Stores a checked value (a string is copied). */
static int store(relock_options_t *opts, const option_t *o, value_t v, relock_error_t *err) {
  char *field = (char *)opts + o->offset;
  if (o->type == OPT_STRING) {
    char *copy = NULL;
    if (v.s != NULL && (copy = strdup(v.s)) == NULL)
      return relock__error_set(err, RELOCK_ENOMEM, "out of memory setting option \"%s\"", o->name);
    char **slot = string_slot(opts, o);
    relock__options_free_string(*slot, o->secret);
    *slot = copy;
  } else if (o->type == OPT_INT) {
    int n = (int)v.n;
    memcpy(field, &n, sizeof n);
  } else {
    memcpy(field, &v.n, sizeof v.n);
  }
  return relock__error_set(err, RELOCK_OK, NULL);
}

static int set_checked(relock_options_t *opts, const option_t *o, value_t v, relock_error_t *err) {
  int r = o->check != NULL ? o->check(v, err) : RELOCK_OK;
  return r != RELOCK_OK ? r : store(opts, o, v, err); /* RELOCK_ETLS: no TLS in this build */
}

/* -- the object ---------------------------------------------------------------*/

void relock__options_cleanup(struct relock_options *o) {
  for (size_t i = 0; i < N_OPTIONS; i++)
    if (options[i].type == OPT_STRING)
      relock__options_free_string(*string_slot(o, &options[i]), options[i].secret);
  memset(o, 0, sizeof(*o));
}

void relock_options_free(relock_options_t *opts) {
  if (opts == NULL)
    return;
  relock__options_cleanup(opts);
  free(opts);
}

relock_options_t *relock_options_new(relock_error_t *err) {
  relock_options_t *opts = calloc(1, sizeof(*opts));
  if (opts == NULL) {
    relock__error_set(err, RELOCK_ENOMEM, "out of memory creating options");
    return NULL;
  }
  for (size_t i = 0; i < N_OPTIONS; i++) {
    const option_t *o = &options[i];
    if (store(opts, o, (value_t){o->def_s, o->def_n}, err) != RELOCK_OK) {
      relock_options_free(opts);
      return NULL;
    }
  }
  return opts;
}

int relock__options_copy_into(struct relock_options *dst, const struct relock_options *src, relock_error_t *err) {
  *dst = *src;
  for (size_t i = 0; i < N_OPTIONS; i++)
    if (options[i].type == OPT_STRING)
      *string_slot(dst, &options[i]) = NULL; /* not yet copied: nothing to free */
  for (size_t i = 0; i < N_OPTIONS; i++) {
    const option_t *o = &options[i];
    if (o->type == OPT_STRING && store(dst, o, (value_t){*string_slot_c(src, o), 0}, err) != RELOCK_OK) {
      relock__options_cleanup(dst);
      return RELOCK_ENOMEM;
    }
  }
  return relock__error_set(err, RELOCK_OK, NULL);
}

relock_options_t *relock_options_copy(const relock_options_t *src, relock_error_t *err) {
  if (src == NULL) {
    invalid(err, "opts is NULL");
    return NULL;
  }
  relock_options_t *opts = malloc(sizeof(*opts));
  if (opts == NULL) {
    relock__error_set(err, RELOCK_ENOMEM, "out of memory copying options");
    return NULL;
  }
  if (relock__options_copy_into(opts, src, err) != RELOCK_OK) {
    free(opts);
    return NULL;
  }
  return opts;
}

/* -- setting ----------------------------------------------------------------*/

int relock_options_set_string(relock_options_t *opts, const char *name, const char *value, relock_error_t *err) {
  const option_t *o = find_typed(opts, name, OPT_STRING, err);
  return o == NULL ? RELOCK_EINVAL : set_checked(opts, o, (value_t){value, 0}, err);
}

int relock_options_set_int(relock_options_t *opts, const char *name, int value, relock_error_t *err) {
  const option_t *o = find_typed(opts, name, OPT_INT, err);
  return o == NULL ? RELOCK_EINVAL : set_checked(opts, o, (value_t){NULL, value}, err);
}

int relock_options_set_ms(relock_options_t *opts, const char *name, int64_t value_ms, relock_error_t *err) {
  const option_t *o = find_typed(opts, name, OPT_MS, err);
  return o == NULL ? RELOCK_EINVAL : set_checked(opts, o, (value_t){NULL, value_ms}, err);
}

/* An optional '-' and decimal digits, nothing else, within [min, max];
 * *end gets what follows the digits. */
static int parse_integer(const char *s, int64_t min, int64_t max, int64_t *value, const char **end) {
  int negative = *s == '-';
  const char *p = s + negative;
  if (*p < '0' || *p > '9')
    return -1;
  int64_t v = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    int digit = *p - '0';
    if (v > (INT64_MAX - digit) / 10)
      return -1;
    v = v * 10 + digit;
  }
  v = negative ? -v : v;
  if (v < min || v > max)
    return -1;
  *value = v;
  *end = p;
  return 0;
}

int relock_options_set(relock_options_t *opts, const char *name, const char *text, relock_error_t *err) {
  const option_t *o = find(opts, name, err);
  if (o == NULL)
    return RELOCK_EINVAL;
  if (o->type == OPT_STRING)
    return set_checked(opts, o, (value_t){text, 0}, err);
  if (text == NULL)
    return invalid(err, "option \"%s\" needs a value (%s)", o->name, type_name(o->type));
  int64_t v;
  const char *end;
  if (o->type == OPT_INT) {
    if (parse_integer(text, INT_MIN, INT_MAX, &v, &end) != 0 || *end != '\0')
      return invalid(err, "invalid value \"%.40s\" for option \"%s\": expected an int", text, o->name);
  } else {
    /* Past 2^62 the unit could overflow; the check refuses anything that
     * large anyway, with its own message. */
    int ok = parse_integer(text, -(INT64_C(1) << 62), INT64_C(1) << 62, &v, &end) == 0;
    if (ok && strcmp(end, "s") == 0 && (v > INT64_MAX / 1000 || v < INT64_MIN / 1000))
      ok = 0;
    else if (ok && strcmp(end, "s") == 0)
      v *= 1000;
    else if (ok && *end != '\0' && strcmp(end, "ms") != 0)
      ok = 0;
    if (!ok)
      return invalid(err, "invalid value \"%.40s\" for option \"%s\": expected a duration in ms (500, 500ms or 2s)",
                     text, o->name);
  }
  return set_checked(opts, o, (value_t){NULL, v}, err);
}

/* -- reading ----------------------------------------------------------------*/

int relock_options_get_string(const relock_options_t *opts, const char *name, const char **value,
                              relock_error_t *err) {
  const option_t *o = find_typed(opts, name, OPT_STRING, err);
  if (o == NULL)
    return RELOCK_EINVAL;
  if (value == NULL)
    return invalid(err, "value is NULL");
  *value = *string_slot_c(opts, o);
  return relock__error_set(err, RELOCK_OK, NULL);
}

int relock_options_get_int(const relock_options_t *opts, const char *name, int *value, relock_error_t *err) {
  const option_t *o = find_typed(opts, name, OPT_INT, err);
  if (o == NULL)
    return RELOCK_EINVAL;
  if (value == NULL)
    return invalid(err, "value is NULL");
  memcpy(value, (const char *)opts + o->offset, sizeof *value);
  return relock__error_set(err, RELOCK_OK, NULL);
}

int relock_options_get_ms(const relock_options_t *opts, const char *name, int64_t *value_ms, relock_error_t *err) {
  const option_t *o = find_typed(opts, name, OPT_MS, err);
  if (o == NULL)
    return RELOCK_EINVAL;
  if (value_ms == NULL)
    return invalid(err, "value_ms is NULL");
  memcpy(value_ms, (const char *)opts + o->offset, sizeof *value_ms);
  return relock__error_set(err, RELOCK_OK, NULL);
}

/* -- rules across options -------------------------------------------------------*/

int relock_options_validate(const relock_options_t *opts, relock_error_t *err) {
  if (opts == NULL)
    return invalid(err, "opts is NULL");
  if (opts->unix_path == NULL && opts->host == NULL)
    return invalid(err, "empty host (set host, or unix-path for a Unix socket)");
  if (opts->username != NULL && opts->password == NULL)
    return invalid(err, "username without password: Redis AUTH needs both");
  if (opts->reconnect_min_ms > opts->reconnect_max_ms)
    return invalid(err, "reconnect-min (%" PRId64 ") must not exceed reconnect-max (%" PRId64 ")",
                   opts->reconnect_min_ms, opts->reconnect_max_ms);
  if ((opts->tls_cert == NULL) != (opts->tls_key == NULL))
    return invalid(err, "%s without %s: a client certificate needs its key and the other way round",
                   opts->tls_cert != NULL ? "tls-cert" : "tls-key", opts->tls_cert != NULL ? "tls-key" : "tls-cert");
  if (opts->tls && opts->unix_path != NULL)
    return invalid(err, "TLS over a Unix socket is not supported: use rediss://host:port, or unix:// without TLS");
  if (opts->sentinels != NULL && opts->unix_path != NULL)
    return invalid(err, "sentinels and unix-path together: with sentinels, the master is the address they give");
  if (opts->sentinels != NULL && opts->sentinel_master == NULL)
    return invalid(err, "sentinels without sentinel-master: name the master the sentinels monitor");
  if (opts->sentinel_master != NULL && opts->sentinels == NULL)
    return invalid(err, "sentinel-master without sentinels: list the sentinels to ask (host:port,...)");
  if (opts->sentinel_username != NULL && opts->sentinel_password == NULL)
    return invalid(err, "sentinel-username without sentinel-password: Redis AUTH needs both");
  /* Cluster nodes are found through the seeds' slot map; every other way
   * of naming one node (or another topology) contradicts it. host and port
   * are left alone, as with Sentinel: they have defaults. */
  if (opts->cluster_nodes != NULL && opts->sentinels != NULL)
    return invalid(err, "cluster-nodes and sentinels together: a client uses Redis Cluster or Sentinel, not both; "
                        "unset one of them");
  if (opts->cluster_nodes != NULL && opts->unix_path != NULL)
    return invalid(err, "cluster-nodes and unix-path together: with Redis Cluster, the nodes are the host:port "
                        "addresses the cluster gives; unset unix-path");
  if (opts->cluster_nodes != NULL && opts->db != 0)
    return invalid(err, "db %d with cluster-nodes: Redis Cluster has only database 0; set db to 0", opts->db);
  /* WAIT answers within its timeout plus a round trip; a command timeout
   * shorter than that would fail every synced acquisition as "no reply". */
  if (opts->min_replicas_acked > 0 && opts->min_replicas_timeout_ms >= opts->command_timeout_ms)
    return invalid(err,
                   "min-replicas-timeout (%" PRId64 " ms) must be less than command-timeout (%" PRId64
                   " ms): WAIT answers only after it, and its reply must come within the command timeout",
                   opts->min_replicas_timeout_ms, opts->command_timeout_ms);
  return relock__error_set(err, RELOCK_OK, NULL);
}

int relock_tls_available(void) {
#ifdef RELOCK_HAVE_TLS
  return 1;
#else
  return 0;
#endif
}
