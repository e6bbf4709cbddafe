/* Copies validated options into the client (settings.h). */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <relock/config.h>
#include <relock/error.h>

#include "base/error.h"
#include "base/uuid.h"
#include "config/options_impl.h"
#include "config/settings.h"

/* strdup that keeps NULL as NULL; *ok is cleared when a copy fails. */
static char *copy(const char *s, int *ok) {
  if (s == NULL)
    return NULL;
  char *c = strdup(s);
  if (c == NULL)
    *ok = 0;
  return c;
}

static int from_options(relock__settings_t *s, const relock_options_t *o, relock_error_t *err) {
  int r = relock_options_validate(o, err);
  if (r != 0)
    return r;
  int ok = 1;
  s->host = copy(o->host, &ok);
  s->unix_path = copy(o->unix_path, &ok);
  s->username = copy(o->username, &ok);
  s->password = copy(o->password, &ok);
  s->client_name = copy(o->client_name, &ok);
  if (!ok) {
    relock__settings_cleanup(s);
    return relock__error_set(err, RELOCK_ENOMEM, "out of memory copying the options");
  }
  s->port = o->port;
  s->db = o->db;
  s->connect_timeout_ms = o->connect_timeout_ms;
  s->command_timeout_ms = o->command_timeout_ms;
  s->retry_attempts = o->retry_attempts;
  s->retry_interval_ms = o->retry_interval_ms;
  s->reconnect_min_ms = o->reconnect_min_ms;
  s->reconnect_max_ms = o->reconnect_max_ms;
  s->watchdog_timeout_ms = o->watchdog_timeout_ms;
  s->ping_interval_ms = o->ping_interval_ms;

  if (o->client_id != NULL) {
    snprintf(s->client_id, sizeof s->client_id, "%s", o->client_id);
  } else if ((r = relock__uuid_v4(s->client_id)) != 0) {
    relock__settings_cleanup(s);
    return relock__error_set(err, r, "cannot generate a client id: no system randomness");
  }
  if (s->unix_path != NULL)
    snprintf(s->address, sizeof s->address, "%s", s->unix_path);
  else
    snprintf(s->address, sizeof s->address, "%s:%d", s->host, s->port);
  return relock__error_set(err, 0, NULL);
}

int relock__settings_init(relock__settings_t *s, const relock_options_t *opts, relock_error_t *err) {
  memset(s, 0, sizeof(*s));
  if (opts != NULL)
    return from_options(s, opts, err);
  relock_options_t *defaults = relock_options_new(err);
  if (defaults == NULL)
    return RELOCK_ENOMEM;
  int r = from_options(s, defaults, err);
  relock_options_free(defaults);
  return r;
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
