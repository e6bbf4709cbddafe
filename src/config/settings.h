/* The client's own copy of its options, validated and made once at
 * creation, so that nothing depends on the caller's options object
 * afterwards and the client reads plain fields. */
#ifndef RELOCK__CONFIG_SETTINGS_H
#define RELOCK__CONFIG_SETTINGS_H

#include <stdint.h>

#include <relock/config.h>
#include <relock/error.h>

typedef struct relock__settings {
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
  char client_id[65];
  int64_t watchdog_timeout_ms;
  int64_t ping_interval_ms; /* 0: no PING */
  char address[300]; /* "host:port" or the socket path, for messages */
} relock__settings_t;

/* Validates opts (NULL: the defaults) and copies them, generating the client
 * id if unset. Returns 0, RELOCK_EINVAL or RELOCK_ENOMEM with err filled; on
 * error nothing needs freeing. */
int relock__settings_init(relock__settings_t *s, const relock_options_t *opts, relock_error_t *err);

void relock__settings_cleanup(relock__settings_t *s);

#endif /* RELOCK__CONFIG_SETTINGS_H */
