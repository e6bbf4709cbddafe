/* The client: connections to Redis on a libev loop. relock_client(3). */
#ifndef RELOCK_CLIENT_H
#define RELOCK_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <relock/common.h>
#include <relock/config.h>
#include <relock/error.h>
#include <relock/future.h>
#include <relock/reply.h>

struct ev_loop;

#ifdef __cplusplus
extern "C" {
#endif

/* -- the client ------------------------------------------------------------*/

typedef struct relock_client relock_client_t;

/* A client for opts (NULL: the defaults; copied, so opts may be freed at
 * once). loop NULL: threaded - its own loop thread, every call from any
 * thread, callbacks on the loop thread. loop given: embedded on it - every
 * call from the thread that made it (else RELOCK_EWRONGTHREAD). Connecting
 * goes on in the background; before the first connection a refusal fails
 * the waiting commands at once (relock_client(3): failing fast). A child
 * after fork() makes its own (RELOCK_EFORKED). NULL with err set (may be
 * NULL): RELOCK_EINVAL (a rule of relock_options_validate), RELOCK_ENOMEM.
 * Free with relock_client_free. */
RELOCK_EXTERN relock_client_t *relock_client_new(struct ev_loop *loop, const relock_options_t *opts,
                                                 relock_error_t *err);

/* A client for opts on peer's loop (thread), for objects spanning clients
 * (a RedLock). Free each with relock_client_free, in any order. NULL with
 * err set: RELOCK_EINVAL (NULL peer), RELOCK_ECLOSED, or as
 * relock_client_new. */
RELOCK_EXTERN relock_client_t *relock_client_new_beside(relock_client_t *peer, const relock_options_t *opts,
                                                        relock_error_t *err);

typedef void (*relock_close_cb)(relock_client_t *client, void *arg);

/* Starts closing: what is pending fails with RELOCK_ECLOSED (give-backs of
 * holds are still sent), then cb(client, arg) (may be NULL) runs once, on
 * the loop, never from inside this call. Safe from any callback (from
 * inside an event or a message, the teardown waits for the loop to run
 * again; calls are refused with RELOCK_ECLOSED at once). Returns 0, or
 * RELOCK_ECLOSED if closing had already started. An embedded client whose
 * loop is destroyed (ev_loop_destroy) first closes then, at once: what is
 * pending fails with RELOCK_ECLOSED, and relock_client_free stays safe. */
RELOCK_EXTERN int relock_client_close(relock_client_t *client, relock_close_cb cb, void *arg);

/* Frees the client, closing it first if needed and waiting for that;
 * from inside any callback, where it cannot wait, it starts the close and
 * returns, and the client is freed once down. Objects on it may be freed
 * before or after; afterwards their calls answer RELOCK_ECLOSED
 * (relock_client(3), Lifetimes). */
RELOCK_EXTERN void relock_client_free(relock_client_t *client);

/* The loop the client runs on. A threaded client's: never run it or add
 * watchers to it. */
RELOCK_EXTERN struct ev_loop *relock_client_loop(const relock_client_t *client);

/* The client's id (the UUID used in lock fields). */
RELOCK_EXTERN const char *relock_client_id(const relock_client_t *client);

/* Sends a command (argv[i] of argvlen[i] bytes; argvlen NULL: NUL-terminated
 * strings), never twice. The future (the caller's to release; NULL only out
 * of memory) succeeds with a relock_reply_t (relock_future_reply), or fails:
 * RELOCK_ESERVER (the server's text), RELOCK_ETIMEDOUT, RELOCK_ECONNLOST,
 * RELOCK_ECONNREFUSED, RELOCK_EAUTH, RELOCK_ECLOSED, RELOCK_EINVAL. */
RELOCK_EXTERN relock_future_t *relock_client_command_async(relock_client_t *client, int argc, const char *const *argv,
                                                           const size_t *argvlen);

/* The same with hiredis's format: "SET %s %b", key, val, vallen. */
RELOCK_EXTERN relock_future_t *relock_client_commandf_async(relock_client_t *client, const char *format, ...);

/* The masters that a command answering for one node alone (SCAN, DBSIZE,
 * KEYS) must be sent to, one by one with relock_client_command_at_async,
 * to cover every key: with Redis Cluster, every master of the slot map (in
 * the order of their first slot; a map is loaded first when none is yet),
 * else the one node. The future succeeds with an array reply of their
 * addresses ("host:port"; a Unix socket's path), or fails: the slot map's
 * load failed (its error), RELOCK_ECLOSED, RELOCK_EINVAL. */
RELOCK_EXTERN relock_future_t *relock_client_masters_async(relock_client_t *client);

/* Sends a command to the node at address, one that
 * relock_client_masters_async listed, as relock_client_command_async does,
 * but there, whatever its keys: no redirection (MOVED, ASK) is followed,
 * it is the node's own answer. RELOCK_EINVAL for an address of no node the
 * client knows. */
RELOCK_EXTERN relock_future_t *relock_client_command_at_async(relock_client_t *client, const char *address, int argc,
                                                              const char *const *argv, const size_t *argvlen);

/* How many give-backs of abandoned acquisitions Redis has not answered
 * yet; after the close, what could not be given back. 0 for NULL. Any
 * thread. */
RELOCK_EXTERN size_t relock_client_unreturned(const relock_client_t *client);

/* With RELOCK_OPT_RELEASE_ON_CLOSE: how many lock holds and permits
 * (relock/config.h) the close released (*released) and how many it could
 * not (*not_released: no answer within the command timeout, or an error;
 * a lock's hold then stays until its lease ends, a permit without a lease
 * for good). Either may be NULL. 0, RELOCK_EPENDING before the close has ended (call it
 * from the close callback, or after it), RELOCK_EINVAL for NULL. Both are 0
 * without the option. */
RELOCK_EXTERN int relock_client_released(const relock_client_t *client, size_t *released, size_t *not_released);

/* -- pub/sub ---------------------------------------------------------------*/

typedef struct relock_subscription relock_subscription_t;

/* A message on the channel; payload NULL (len 0): restored after a
 * reconnect, messages in between missed. Runs on the loop. */
typedef void (*relock_message_cb)(relock_subscription_t *sub, const char *payload, size_t len, void *arg);

/* Subscribes cb to channel (len bytes). *sub receives the subscription at
 * once (the caller's: relock_subscription_free). The future succeeds when
 * Redis confirmed it, or fails after the command timeout (the subscription
 * stays, retried after reconnects); RELOCK_EINVAL with *sub NULL for NULL
 * arguments. NULL only when out of memory. */
RELOCK_EXTERN relock_future_t *relock_client_subscribe_async(relock_client_t *client, const char *channel, size_t len,
                                                             relock_message_cb cb, void *arg,
                                                             relock_subscription_t **sub);

/* Ends and frees a subscription. Safe from its own callback, and after the
 * client closed. */
RELOCK_EXTERN void relock_subscription_free(relock_subscription_t *sub);

#ifdef __cplusplus
}
#endif
#endif /* RELOCK_CLIENT_H */
