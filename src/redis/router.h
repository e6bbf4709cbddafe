/* Key -> connection. One node today; the same seam will serve a
 * Sentinel-discovered master and Redis Cluster slots (MOVED / ASK), so
 * nothing above it knows the topology. */
#ifndef RELOCK__REDIS_ROUTER_H
#define RELOCK__REDIS_ROUTER_H

#include <stddef.h>

#include "redis/conn.h"
#include "redis/redis.h"

/* The connection that serves key (len bytes; NULL for a keyless command). */
relock__conn_t *relock__route(relock__redis_t *redis, const char *key, size_t len);

#endif /* RELOCK__REDIS_ROUTER_H */
