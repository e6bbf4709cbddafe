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

static int from_options(relock__settings_t *s, const relock_options_t *o, relock_error_t *err) {
  int r = relock_options_validate(o, err);
  if (r != 0 || (r = relock__options_copy_into(&s->opt, o, err)) != 0)
    return r;
  if (o->client_id != NULL) {
    snprintf(s->client_id, sizeof s->client_id, "%s", o->client_id);
  } else if ((r = relock__uuid_v4(s->client_id)) != 0) {
    relock__settings_cleanup(s);
    return relock__error_set(err, r, "cannot generate a client id: no system randomness");
  }
  if (o->sentinels != NULL) {
    s->nsentinels = relock__parse_hostports(o->sentinels, s->sentinels, RELOCK__SENTINELS_MAX, err);
    if (s->nsentinels < 0) { /* checked when set: cannot happen */
      r = s->nsentinels;
      relock__settings_cleanup(s);
      return r;
    }
    snprintf(s->address, sizeof s->address, "master %s", o->sentinel_master);
  } else if (o->unix_path != NULL)
    snprintf(s->address, sizeof s->address, "%s", o->unix_path);
  else
    snprintf(s->address, sizeof s->address, "%s:%d", o->host, o->port);
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
  relock__options_cleanup(&s->opt);
  memset(s, 0, sizeof(*s));
}
