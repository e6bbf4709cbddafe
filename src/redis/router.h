/* Key -> connection. One node, whose address is the settings' or the
 * Sentinel-discovered master's (sentinel.h steers the connection); the same
 * seam will serve Redis Cluster slots (MOVED / ASK), so nothing above it
 * knows the topology. */
#ifndef RELOCK__REDIS_ROUTER_H
#define RELOCK__REDIS_ROUTER_H

#include <stddef.h>

#include "redis/conn.h"
#include "redis/redis.h"

/* The connection that serves key (len bytes; NULL for a keyless command). */
relock__conn_t *relock__route(relock__redis_t *redis, const char *key, size_t len);

#endif /* RELOCK__REDIS_ROUTER_H */
