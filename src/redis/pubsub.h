/* Pub/sub on a dedicated subscriber connection (a RESP2 connection that has
 * subscribed can run no other command).
 *
 * Channels are reference-counted: every listener of a channel shares one
 * SUBSCRIBE, and the last one to leave sends UNSUBSCRIBE. A subscribe
 * returns a future that succeeds when Redis confirms. Messages reach every
 * listener of the channel, in order. After a reconnect every channel with
 * listeners is subscribed again, and its listeners are told that a gap
 * happened (messages published meanwhile are lost), so that a lock waiter
 * re-checks instead of trusting it saw every unlock. */
#ifndef RELOCK__REDIS_PUBSUB_H
#define RELOCK__REDIS_PUBSUB_H

#include <stddef.h>
#include <stdint.h>

#include <relock/future.h>

#include "redis/conn.h"
#include "base/hashtab.h"
#include "base/list.h"
#include "loop/exec.h"
#include "loop/wheel.h"

typedef struct relock__pubsub relock__pubsub_t;
typedef struct relock__listener relock__listener_t;
typedef struct relock__channel relock__channel_t;

/* A message (payload, len), or payload NULL for a gap: the subscription was
 * restored after the connection dropped. */
typedef void (*relock__message_fn)(relock__listener_t *l, const char *payload, size_t len, void *arg);

/* Embedded in the caller's structure; valid from subscribe to unsubscribe. */
struct relock__listener {
  relock__link_t link;       /* in channel->listeners */
  relock__channel_t *channel;
  relock__message_fn fn;
  void *arg;
  relock_future_t *confirm;  /* until Redis confirms the subscription */
  relock__timer_t timer;     /* bounds the wait for that confirmation */
  int confirmed;             /* has been confirmed at least once */
};

struct relock__pubsub {
  relock__conn_t conn;
  int sharded;               /* a Cluster master's: routed channels use SSUBSCRIBE */
  relock__exec_t *exec;      /* whose futures the confirmations are */
  relock__htab_t channels;   /* by name */
  int64_t timeout_ms;        /* for confirmations */
  relock__link_t orphans;    /* listeners detached by close, to be told */
  relock__channel_t **sent;  /* channels whose (un)subscribe awaits its answer, in order */
  size_t nsent, sent_cap;
  /* Cluster: an answer to a (un)subscribe that says the channel's slot is
   * elsewhere or the cluster is down (MOVED, ASK, CLUSTERDOWN, TRYAGAIN:
   * err, len bytes). The channel is left unsubscribed until
   * relock__pubsub_rehome moves its listeners or subscribes it again. */
  void (*on_redirect)(relock__pubsub_t *ps, const char *err, size_t len, void *arg);
  void *redirect_arg;
  int closing;
  void (*on_closed)(relock__pubsub_t *ps, void *arg);
  void *closed_arg;
};

int relock__pubsub_init(relock__pubsub_t *ps, relock__exec_t *exec, relock__wheel_t *wheel,
                        const relock__settings_t *settings, uint64_t *rng,
                        void (*on_closed)(relock__pubsub_t *ps, void *arg), void *closed_arg);

/* Adds listener l to channel (len bytes) and returns a future that succeeds
 * once the channel's subscription is confirmed, or fails if it is not within
 * the command timeout (l stays subscribed and is retried after reconnects).
 * routed: a channel the router placed (a lock's): SSUBSCRIBE on a sharded
 * subscriber, and relock__pubsub_rehome may move it; else a plain
 * SUBSCRIBE that stays. NULL when out of memory. */
relock_future_t *relock__pubsub_subscribe(relock__pubsub_t *ps, relock__listener_t *l, const char *channel,
                                          size_t len, int routed, relock__message_fn fn, void *arg);

/* Cluster: moves the listeners of every routed channel of ps for which
 * dest names another subscriber there (they are told of the gap once the
 * new subscription is confirmed: messages may have been missed), then
 * subscribes again what Redis dropped (relock__pubsub_t.on_redirect). dest
 * returns NULL to leave a channel where it is. */
void relock__pubsub_rehome(relock__pubsub_t *ps,
                           relock__pubsub_t *(*dest)(const char *name, size_t len, void *arg), void *arg);

/* Removes l (a pending confirmation is cancelled). The last listener of a
 * channel unsubscribes it. Safe from inside l's own message callback. */
void relock__pubsub_unsubscribe(relock__listener_t *l);

/* Number of channels with a subscription (wanted or still being undone). */
static inline size_t relock__pubsub_channels(const relock__pubsub_t *ps) { return ps->channels.count; }

/* Fails pending confirmations with RELOCK_ECLOSED, detaches every listener
 * and closes the connection; on_closed runs once it is down. */
void relock__pubsub_close(relock__pubsub_t *ps);

#endif /* RELOCK__REDIS_PUBSUB_H */
