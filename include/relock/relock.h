/* relock: distributed locks for C programs on Redis, compatible with
 * Redisson's, driven by a libev loop. Include this one header. */
#ifndef RELOCK_RELOCK_H
#define RELOCK_RELOCK_H

#include <relock/client.h>
#include <relock/common.h>
#include <relock/config.h>
#include <relock/error.h>
#include <relock/future.h>
#include <relock/latch.h>
#include <relock/lock.h>
#include <relock/multi_lock.h>
#include <relock/permit_semaphore.h>
#include <relock/reply.h>
#include <relock/semaphore.h>
#include <relock/stats.h>
#include <relock/version.h>

#endif /* RELOCK_RELOCK_H */
