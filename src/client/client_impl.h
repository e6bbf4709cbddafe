/* The client's insides, shared by the objects built on it and by white-box
 * tests. */
#ifndef RELOCK__CLIENT_CLIENT_IMPL_H
#define RELOCK__CLIENT_CLIENT_IMPL_H

#include <ev.h>

#include <relock/client.h>

#include "base/hashtab.h"
#include "base/list.h"
#include "config/settings.h"
#include "loop/exec.h"
#include "loop/wheel.h"
#include "redis/redis.h"
#include "stats/stats.h"
#include "watchdog/renewal.h"

struct relock_client {
  /* The handle's reference, and one per object made on it (atomic): the
   * objects outlive the client's close and free, and answer
   * RELOCK_ECLOSED. relock_client_free tears everything down but this
   * struct, the settings and the exec, which the last reference frees. */
  int refs;
  relock__exec_t *exec;     /* the loop, and which threads may call (a reference) */
  struct ev_loop *loop;     /* exec->loop */
  relock__settings_t settings;
  relock__tls_t *tls;            /* the TLS context, NULL without TLS */
  relock__wheel_t wheel;
  relock__redis_t redis;    /* the connections: commands, scripts, pub/sub */
  relock__ledger_t ledger;  /* what this client holds (watchdog/hold.h) */
  relock__renewal_t renewal; /* the watchdog's renewal of it */
  relock__htab_t turns;     /* owners' count-changing requests in flight, by lock name and field (objects/lock_turn.h) */
  relock__link_t blocked;   /* blocking acquisitions, for relock_lock_interrupt */
  uint64_t rng;             /* xorshift state for jitter and request ids */
  relock__stats_t stats;    /* statistics and the event callback (settings.stats points here) */
  /* The wait queues of the objects above (objects/wait_queue.c), opaque
   * here: made by their first waiter, which sets waitqs_free for the
   * client to let them go when it goes. NULL: none yet. */
  struct relock__waitqs *waitqs;
  void (*waitqs_free)(struct relock__waitqs *waitqs);
  /* Give-backs (lock_acquire.c's undo): those not yet answered, and those
   * over without an answer (relock_client_unreturned). Changed on the loop
   * thread, read from any (atomic). */
  size_t give_backs_owed;
  size_t give_backs_failed;

  int closing;
  int down;                 /* everything is down; the close callback is due */
  int free_when_down;       /* relock_client_free came before that */
  int in_close_cb;
  relock_close_cb close_cb;
  void *close_arg;
  ev_timer close_notify;    /* calls close_cb from the loop, never from close */
  /* A close called from inside a callback whose caller still walks what
   * the close frees (an event, a subscription's message: in_callback,
   * stats.emitting) is only marked (closing) and done by this timer, from
   * the loop, once that caller is out (issue 46). */
  int in_callback;
  ev_timer close_later;
  /* Embedded: told when the caller destroys the loop (ev_loop_destroy)
   * before freeing the client, which then closes at once and never
   * touches the loop again (loop_gone). */
  ev_cleanup loop_cleanup;
  int loop_gone;
};

/* An object made on c keeps it (relock__client_ref) and lets it go when
 * the object goes (relock__client_unref); the last reference frees what
 * relock_client_free left. Any thread. */
relock_client_t *relock__client_ref(relock_client_t *c);
void relock__client_unref(relock_client_t *c);

/* Starts a public call on an object of c: relock__future_enter, then a
 * client that is closed (closing, or freed while the object lives) refuses
 * with a future failed with RELOCK_ECLOSED. 0: go on (relock__exec_leave
 * must follow); else *refused is the future to return. */
int relock__client_enter(relock_client_t *c, relock_future_t **refused);

/* The same for a call answering a code: 0 (relock__exec_leave must
 * follow), or RELOCK_ECLOSED / RELOCK_EWRONGTHREAD / RELOCK_EFORKED, also
 * the thread's last error (relock_last_error_message). */
int relock__client_enter_code(relock_client_t *c);

/* The message of a call on an object of a closed client. */
#define RELOCK__CLOSED_MSG "the client is closed (relock_client_close or relock_client_free was called)"

#endif /* RELOCK__CLIENT_CLIENT_IMPL_H */
