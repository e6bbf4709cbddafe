/* The inside of relock_options_t, shared by the option table (options.c),
 * URL parsing (url.c) and the client's copy of its settings (settings.h). */
#ifndef RELOCK__CONFIG_OPTIONS_IMPL_H
#define RELOCK__CONFIG_OPTIONS_IMPL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include <relock/config.h>
#include <relock/error.h>

#define RELOCK__DEFAULT_HOST "127.0.0.1"
#define RELOCK__DEFAULT_PORT 6379
#define RELOCK__PORT_MAX 65535
/* sun_path holds the path and its terminating NUL. */
#define RELOCK__UNIX_PATH_MAX_LEN (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

/* One field per option; a string is the object's own copy, NULL when not
 * set. Only options.c knows which field is which option (its table). */
struct relock_options {
  char *host;
  int port;
  char *unix_path;
  char *username;
  char *password;
  int db;
  char *client_name;
  int64_t connect_timeout_ms;
  int64_t command_timeout_ms;
  int retry_attempts;
  int64_t retry_interval_ms;
  int64_t reconnect_min_ms;
  int64_t reconnect_max_ms;
  char *client_id;
  int64_t watchdog_timeout_ms;
  int64_t ping_interval_ms;
  int tls;
  char *tls_ca_file;
  char *tls_ca_dir;
  char *tls_cert;
  char *tls_key;
  char *tls_server_name;
  int tls_insecure_skip_verify;
  char *sentinels;
  char *sentinel_master;
  char *sentinel_username;
  char *sentinel_password;
  char *cluster_nodes;
  int min_replicas_acked;
  int64_t min_replicas_timeout_ms;
  int64_t fair_lock_wait_timeout_ms;
  int release_on_close;
  int statistics;
};

/* Why a TLS option is refused, in a build without TLS (RELOCK_ETLS). */
#define RELOCK__NO_TLS_MESSAGE                                                                                   \
  "this build has no TLS support (hiredis 0.14 has none; build against hiredis >= 1.0 with hiredis_ssl)"

#define RELOCK__DEFAULT_SENTINEL_PORT 26379
#define RELOCK__SENTINELS_MAX 16
/* Seeds only: the client learns every other node from the slot map, so a
 * few reachable ones are enough. */
#define RELOCK__CLUSTER_SEEDS_MAX 16

/* One host and port; host is a name, an IPv4 address or an IPv6 address
 * (without brackets; a zone after '%'). */
typedef struct relock__hostport {
  char host[256];
  int port;
} relock__hostport_t;

/* A kind of host list: how messages call it and its entries, the port of an
 * entry without one, and how many entries it may have. */
typedef struct relock__hostlist {
  const char *list;    /* "sentinel list": "empty entry in the sentinel list" */
  const char *entries; /* "sentinels": "more than 16 sentinels in the list" */
  int default_port;
  int max;
} relock__hostlist_t;

/* RELOCK_OPT_SENTINELS (port 26379) and RELOCK_OPT_CLUSTER_NODES (6379). */
extern const relock__hostlist_t relock__sentinel_list;
extern const relock__hostlist_t relock__cluster_list;

/* Parses a list "host[:port],..." of the given kind into out (room for
 * kind->max entries). The count, or RELOCK_EINVAL with err naming the
 * problem (url.c). */
int relock__parse_hostports(const char *list, const relock__hostlist_t *kind, relock__hostport_t *out,
                            relock_error_t *err);

/* Frees a string of the options; a secret one (a password) is wiped first,
 * so that it does not linger in freed memory. Here rather than in
 * options.c: url.c (relock_options_set_url) frees the strings it replaces,
 * and options.c calls url.c's host list parser, so url.c must not call
 * options.c. */
static inline void relock__options_free_string(char *s, int secret) {
  if (s != NULL && secret)
    memset(s, 0, strlen(s));
  free(s);
}

/* Copies src into dst (uninitialised), strings included. 0, or
 * RELOCK_ENOMEM with err set and nothing in dst to free. */
int relock__options_copy_into(struct relock_options *dst, const struct relock_options *src, relock_error_t *err);

/* Frees the strings of o (wiping a password) and clears it. */
void relock__options_cleanup(struct relock_options *o);

#endif /* RELOCK__CONFIG_OPTIONS_IMPL_H */
