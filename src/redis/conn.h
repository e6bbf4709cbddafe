/* One Redis connection: a hiredis async context on the loop, the handshake
 * (AUTH, SELECT, CLIENT SETNAME, ROLE), reconnection with jittered
 * exponential back-off, and its close. Its parts each have a file of their
 * own (conn_state.h lists them); its requests are request.h's. This header
 * is what the rest of the library includes. */
#ifndef RELOCK__REDIS_CONN_H
#define RELOCK__REDIS_CONN_H

#include <stdint.h>

#include <ev.h>

#include "config/settings.h"
#include "loop/wheel.h"
#include "redis/conn_state.h"
#include "redis/raw_reader.h"
#include "redis/request.h"

void relock__conn_init(relock__conn_t *c, struct ev_loop *loop, relock__wheel_t *wheel,
                       const relock__settings_t *settings, const char *role, const relock__conn_hooks_t *hooks,
                       uint64_t *rng);

/* Points the connection at host:port (a copy is kept): a connection
 * elsewhere is dropped (its requests in flight fail with RELOCK_ECONNLOST,
 * those waiting go to the new address). now: the address is tried at once,
 * the back-off starts afresh, and an idle connection already pointed there
 * tries again at once too; else the next attempt keeps its back-off (for
 * moving on from one failed sentinel to the next without a busy loop). */
void relock__conn_set_target(relock__conn_t *c, const char *host, int port, int now);

/* The locator found no address: what waits fails now if definitive and the
 * connection was never ready (relock__conn_fails_fast), else at its
 * timeout, with err and msg. */
void relock__conn_no_target(relock__conn_t *c, int err, const char *msg, int definitive);

/* Starts connecting if idle and not waiting to reconnect. */
void relock__conn_start(relock__conn_t *c);

/* Fails everything pending with RELOCK_ECLOSED and drops the connection;
 * hooks.on_closed runs once it is fully down (possibly from inside this call).
 * Requests marked flush_on_close are the exception: those in flight, those
 * waiting (for a connection still connecting, or in its reconnect
 * back-off: it makes one more attempt at once), and those sent while the
 * connection drains (an answer to a failed one may send one), are sent
 * and answered first, each within its own timeout; if the connection
 * fails meanwhile, those not sent fail with its error. They give back
 * holds: dropped unsent, a lock would stay held by a client that is gone,
 * until its lease ran out. */
void relock__conn_close(relock__conn_t *c);

#endif /* RELOCK__REDIS_CONN_H */
