/* Redis Sentinel: where the master is, and following it through failovers.
 *
 * The sentinels are asked in random order (the one last asked first, so a
 * poll reuses its connection) for the master's address
 * (SENTINEL get-master-addr-by-name), for the other sentinels they know
 * (SENTINEL sentinels), which join the list, and for the replicas they see
 * up (SENTINEL replicas, for messages). The connections it steers (the
 * command and subscriber connections) are pointed at that address, where
 * their handshake checks ROLE. A sentinel whose answer turns out not to be
 * a master is asked last in the next round.
 *
 * Failovers are followed three ways: +switch-master on a subscribed sentinel
 * connection (at once), a poll every second (a lost event, a partition),
 * and the steered connections' own signs (a failed attempt, a drop, a node
 * that is not a master, READONLY), each of which starts a round at once.
 *
 * When no round finds a master and the steered connections have none yet,
 * what waits on them fails: RELOCK_ECONNREFUSED when no sentinel could be
 * reached, RELOCK_ENOMASTER when some answered but none named a master,
 * with a message naming every sentinel tried and what it said. A master
 * once found is kept while no round finds another (sentinels all down, the
 * master up: locking goes on). */
#ifndef RELOCK__REDIS_SENTINEL_H
#define RELOCK__REDIS_SENTINEL_H

#include "config/settings.h"
#include "loop/exec.h"
#include "loop/wheel.h"
#include "redis/conn.h"
#include "redis/tls.h"

typedef struct relock__sentinel relock__sentinel_t;

/* Makes the object for the connections steered[0..nsteered) (at most 2,
 * borrowed: they must outlive it; not touched before start); its own
 * connections use tls (NULL: none) and the settings' sentinel credentials.
 * on_closed runs once relock__sentinel_close is done. NULL when out of
 * memory. */
relock__sentinel_t *relock__sentinel_new(relock__exec_t *exec, relock__wheel_t *wheel,
                                         const relock__settings_t *settings, relock__tls_t *tls, uint64_t *rng,
                                         relock__conn_t *const *steered, int nsteered,
                                         void (*on_closed)(relock__sentinel_t *s, void *arg), void *closed_arg);

/* Becomes the steered connections' locator (their handshake checks ROLE
 * from now on) and starts the first round. */
void relock__sentinel_start(relock__sentinel_t *s);

/* Stops following the master and closes its connections; on_closed runs
 * once they are down (possibly from inside this call), after which the
 * object is freed. */
void relock__sentinel_close(relock__sentinel_t *s);

/* The replicas the sentinels last said are up (SENTINEL replicas, asked
 * with every round that finds the master); -1 when not known or s is NULL. */
int relock__sentinel_replicas_up(const relock__sentinel_t *s);

#endif /* RELOCK__REDIS_SENTINEL_H */
