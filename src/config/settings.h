/* The client's own copy of its options, validated and made once at
 * creation, so that nothing depends on the caller's options object
 * afterwards and the client reads plain fields (settings.opt.command_timeout_ms).
 * A new option needs nothing here: it is a field of the options. */
#ifndef RELOCK__CONFIG_SETTINGS_H
#define RELOCK__CONFIG_SETTINGS_H

#include <stdint.h>

#include <relock/config.h>
#include <relock/error.h>

#include "config/options_impl.h"

typedef struct relock__settings {
  struct relock_options opt; /* every option, validated: the client's own copy */
  char client_id[65];        /* opt.client_id, or a generated UUID */
  char address[300];         /* "host:port" or the socket path, for messages;
                                with Sentinel "master NAME", with Cluster
                                "cluster host:port,host:port..." (the seeds) */
  relock__hostport_t sentinels[RELOCK__SENTINELS_MAX]; /* opt.sentinels, parsed */
  int nsentinels;            /* 0: no Sentinel */
  relock__hostport_t cluster_nodes[RELOCK__CLUSTER_SEEDS_MAX]; /* opt.cluster_nodes, parsed */
  int ncluster_nodes;        /* 0: no Cluster */
  /* Where statistics and events go: the client's own (client_impl.h), set
   * by the client once made; the connections reach it through here. */
  struct relock__stats *stats;
} relock__settings_t;

/* Validates opts (NULL: the defaults) and copies them, generating the client
 * id if unset. Returns 0, RELOCK_EINVAL or RELOCK_ENOMEM with err filled; on
 * error nothing needs freeing. */
int relock__settings_init(relock__settings_t *s, const relock_options_t *opts, relock_error_t *err);

void relock__settings_cleanup(relock__settings_t *s);

#endif /* RELOCK__CONFIG_SETTINGS_H */
