/* Copies a validated configuration into the client (settings.h). */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <relock/error.h>

#include "config/settings.h"
#include "base/uuid.h"

int relock__error_set(relock_error_t *err, int code, const char *fmt, ...) {
  if (err == NULL)
    return code;
  err->code = code;
  err->message[0] = '\0';
  if (fmt != NULL) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* strdup that keeps NULL as NULL; *ok is cleared when a copy fails. */
static char *copy(const char *s, int *ok) {
  if (s == NULL)
    return NULL;
  char *c = strdup(s);
  if (c == NULL)
    *ok = 0;
  return c;
}

int relock__settings_init(relock__settings_t *s, const relock_config_t *config, relock_error_t *err) {
  memset(s, 0, sizeof(*s));
  if (config == NULL)
    return relock__error_set(err, RELOCK_EINVAL, "no configuration given");
  int r = relock_config_validate(config, err);
  if (r != 0)
    return r;

  int ok = 1;
  s->host = copy(config->host, &ok);
  s->unix_path = copy(config->unix_path, &ok);
  s->username = copy(config->username, &ok);
  s->password = copy(config->password, &ok);
  s->client_name = copy(config->client_name, &ok);
  if (!ok) {
    relock__settings_cleanup(s);
    return relock__error_set(err, RELOCK_ENOMEM, "out of memory copying the configuration");
  }
  s->port = config->port;
  s->db = config->db;
  s->connect_timeout_ms = config->connect_timeout_ms;
  s->command_timeout_ms = config->command_timeout_ms;
  s->retry_attempts = config->retry_attempts;
  s->retry_interval_ms = config->retry_interval_ms;
  s->reconnect_min_ms = config->reconnect_min_ms;
  s->reconnect_max_ms = config->reconnect_max_ms;
  s->watchdog_timeout_ms = config->watchdog_timeout_ms;
  s->ping_interval_ms = config->ping_interval_ms;

  if (config->client_id != NULL) {
    snprintf(s->client_id, sizeof s->client_id, "%s", config->client_id);
  } else if ((r = relock__uuid_v4(s->client_id)) != 0) {
    relock__settings_cleanup(s);
    return relock__error_set(err, r, "cannot generate a client id: no system randomness");
  }
  if (s->unix_path != NULL)
    snprintf(s->address, sizeof s->address, "%s", s->unix_path);
  else
    snprintf(s->address, sizeof s->address, "%s:%d", s->host, s->port);
  relock__error_set(err, 0, NULL);
  return 0;
}

void relock__settings_cleanup(relock__settings_t *s) {
  free(s->host);
  free(s->unix_path);
  free(s->username);
  if (s->password != NULL) /* don't leave the secret in freed memory */
    memset(s->password, 0, strlen(s->password));
  free(s->password);
  free(s->client_name);
  memset(s, 0, sizeof(*s));
}
