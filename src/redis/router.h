/* Key -> connection. One node today; the same seam will serve a
 * Sentinel-discovered master and Redis Cluster slots (MOVED / ASK), so
 * nothing above it knows the topology. */
#ifndef RELOCK_ROUTER_H
#define RELOCK_ROUTER_H

#include <stddef.h>

#include "client/client_impl.h"

/* The connection that serves key (len bytes; NULL for a keyless command). */
relock__conn_t *relock__route(relock_client_t *client, const char *key, size_t len);

#endif /* RELOCK_ROUTER_H */
