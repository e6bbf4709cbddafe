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

/* "cluster h1:p1,h2:p2" for messages, IPv6 hosts in brackets; seeds that do
 * not fit give way to ",..." so the text never ends mid-address. */
static void cluster_address(char *out, size_t size, const relock__hostport_t *seeds, int n) {
  static const char more[] = ",...";
  size_t len = (size_t)snprintf(out, size, "cluster ");
  for (int i = 0; i < n; i++) {
    char one[sizeof seeds[i].host + 16]; /* ",[" host "]:" port */
    int v6 = strchr(seeds[i].host, ':') != NULL;
    int w = snprintf(one, sizeof one, "%s%s%s%s:%d", i > 0 ? "," : "", v6 ? "[" : "", seeds[i].host, v6 ? "]" : "",
                     seeds[i].port);
    /* the last seed needs no room for a ",..." after it */
    size_t room = size - len - (i + 1 < n ? sizeof more - 1 : 0);
    if (w < 0 || (size_t)w >= room) {
      /* never at the first seed (a host is at most 255 bytes), but if it
       * were: no comma before the dots */
      snprintf(out + len, size - len, "%s", more + (i == 0));
      return;
    }
    memcpy(out + len, one, (size_t)w + 1);
    len += (size_t)w;
  }
}

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
    s->nsentinels = relock__parse_hostports(o->sentinels, &relock__sentinel_list, s->sentinels, err);
    if (s->nsentinels < 0) { /* checked when set: cannot happen */
      r = s->nsentinels;
      relock__settings_cleanup(s);
      return r;
    }
    snprintf(s->address, sizeof s->address, "master %s", o->sentinel_master);
  } else if (o->cluster_nodes != NULL) {
    s->ncluster_nodes = relock__parse_hostports(o->cluster_nodes, &relock__cluster_list, s->cluster_nodes, err);
    if (s->ncluster_nodes < 0) { /* checked when set: cannot happen */
      r = s->ncluster_nodes;
      relock__settings_cleanup(s);
      return r;
    }
    cluster_address(s->address, sizeof s->address, s->cluster_nodes, s->ncluster_nodes);
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
