/* The client: connections to Redis on a libev loop, made from options
 * (config.h), and the generic command API. Locks and other objects are made
 * from a client. */
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

/* Makes a client with the options opts (NULL: every option at its default).
 *
 * loop NULL: threaded. The client starts a thread of its own that runs its
 * own loop all the time, so renewals, health checks and reconnects go on
 * whatever the program's threads do (sleeping, computing). Every function
 * may be called from any thread, concurrently; callbacks run on the loop
 * thread. relock_client_free stops and joins the thread.
 *
 * loop given: embedded. The client adds watchers to the caller's loop and
 * starts no thread; every call must come from the thread that makes the
 * client (the one running the loop) - another thread is refused with
 * RELOCK_EWRONGTHREAD, never run.
 *
 * After fork() a child must make its own client: every call on one made
 * before the fork fails with RELOCK_EFORKED there.
 * The client copies
 * what it needs: opts may be changed or freed afterwards. Connecting starts
 * at once and goes on in the background; commands issued meanwhile wait for
 * it, within their timeout.
 *
 * Failing fast: until the client has connected once, a connection attempt
 * that fails in a way the next one would meet too - refused (nobody
 * listens), no route to the host, a host name that does not resolve, a
 * missing unix socket, AUTH or SELECT refused - fails the commands waiting
 * for it at once (RELOCK_ECONNREFUSED or RELOCK_EAUTH, the message naming
 * host:port and the system's error), without retries. A command issued in
 * that state makes a fresh attempt at once and shares its fate, so a server
 * that has just started is found. A timeout is not such a failure: the
 * commands wait as usual. Once connected, the same refusal most likely is a
 * restart, so commands wait for the reconnect within their timeout and are
 * retried as configured (renewals of held locks go on through it). This
 * holds for every operation, blocking ones included: relock_lock_lock on a
 * server that refuses fails in milliseconds, not after the retries.
 *
 * Returns NULL with err set when the options break a rule of
 * relock_options_validate (RELOCK_EINVAL) or out of memory; err may be
 * NULL. */
RELOCK_EXTERN relock_client_t *relock_client_new(struct ev_loop *loop, const relock_options_t *opts,
                                                 relock_error_t *err);

/* A client for opts that runs on peer's loop: a threaded peer's loop
 * thread (one thread for both; it stops once the last of the clients on it
 * is freed, in any order), or an embedded peer's loop (as
 * relock_client_new on it). For objects that span clients on one loop: a
 * RedLock over several Redis servers (relock/multi_lock.h). NULL with err
 * set: RELOCK_EINVAL (NULL peer), RELOCK_ECLOSED (peer closed), or as
 * relock_client_new. */
RELOCK_EXTERN relock_client_t *relock_client_new_beside(relock_client_t *peer, const relock_options_t *opts,
                                                        relock_error_t *err);

typedef void (*relock_close_cb)(relock_client_t *client, void *arg);

/* Starts closing: everything pending fails with RELOCK_ECLOSED - but
 * what gives back a hold (a failed, timed-out or cancelled acquisition's
 * undo), which is still sent, on a connection not ready yet too, and
 * answered, each within the command timeout - the connections close, and
 * cb(client, arg) (if not NULL) is called once when all is down, never
 * from inside this call. Calls after this fail with
 * RELOCK_ECLOSED. Safe from inside any callback. Returns 0, or
 * RELOCK_ECLOSED if closing had already started. */
RELOCK_EXTERN int relock_client_close(relock_client_t *client, relock_close_cb cb, void *arg);

/* Frees a client that has finished closing (after its close callback). A
 * client that was never closed is closed first, waiting for it on its loop
 * (which must not be running: not from inside a callback). */
RELOCK_EXTERN void relock_client_free(relock_client_t *client);

/* The loop the client runs on. A threaded client's (made with NULL) is run
 * by the client's own thread: never run it or add watchers to it. */
RELOCK_EXTERN struct ev_loop *relock_client_loop(const relock_client_t *client);

/* The client's id (the UUID used in lock fields). */
RELOCK_EXTERN const char *relock_client_id(const relock_client_t *client);

/* Sends a command (argv[i] of argvlen[i] bytes; argvlen NULL: NUL-terminated
 * strings). The future succeeds with a relock_reply_t (relock_future_ptr), or
 * fails: RELOCK_ESERVER with the server's text for an error reply,
 * RELOCK_ETIMEDOUT when no reply came within the command timeout,
 * RELOCK_ECONNLOST when the connection dropped with the command in flight,
 * RELOCK_ECONNREFUSED / RELOCK_EAUTH when no connection could be made in
 * time (at once before the first connection: see relock_client_new), RELOCK_ECLOSED after close, RELOCK_EINVAL (at once, the message
 * naming the argument) for invalid arguments. A command is never sent
 * twice. Returns NULL only when out of memory. */
RELOCK_EXTERN relock_future_t *relock_client_command_async(relock_client_t *client, int argc, const char *const *argv,
                                                           const size_t *argvlen);

/* The same with hiredis's printf-like format: "SET %s %b", key, val, vallen.
 * A format of no words fails with RELOCK_EINVAL. */
RELOCK_EXTERN relock_future_t *relock_client_commandf_async(relock_client_t *client, const char *format, ...);

/* How many give-backs this client owes Redis: acquisitions (of a lock, a
 * semaphore's permits, a permit of a permit-expirable semaphore) whose
 * answer was lost, came too late, or was abandoned by a cancel or a
 * deadline, and whose give-back Redis has not answered yet. The client
 * retries each until Redis answers, for as long as it lives, however long
 * Redis is out of reach; a close tries those still owed within its bound
 * (a command timeout). Once the close is done (in its callback, or before
 * relock_client_free) the count is final: what could not be given back. A
 * semaphore's permits counted there stay taken in Redis (they have no
 * lease); a lock's hold ends with its lease. An acquisition whose outcome
 * was unknown is counted even if it took nothing. 0 for NULL. Any
 * thread. */
RELOCK_EXTERN size_t relock_client_unreturned(const relock_client_t *client);

/* -- pub/sub ---------------------------------------------------------------*/

typedef struct relock_subscription relock_subscription_t;

/* A message published on the channel; or payload NULL (len 0) when the
 * subscription was restored after the connection dropped: messages published
 * in between were missed. */
typedef void (*relock_message_cb)(relock_subscription_t *sub, const char *payload, size_t len, void *arg);

/* Subscribes cb to channel (len bytes) on the client's subscriber connection,
 * opened on first use; subscriptions to one channel share one SUBSCRIBE.
 * *sub receives the subscription at once. The future succeeds when Redis has
 * confirmed it, or fails if that does not happen within the command timeout
 * (the subscription stays and is retried after reconnects). Invalid
 * arguments (a NULL client, channel, cb or sub) give a future that has
 * already failed with RELOCK_EINVAL, and *sub (if sub is not NULL) is NULL.
 * NULL only when out of memory. */
RELOCK_EXTERN relock_future_t *relock_client_subscribe_async(relock_client_t *client, const char *channel, size_t len,
                                                             relock_message_cb cb, void *arg,
                                                             relock_subscription_t **sub);

/* Ends a subscription (the last one of a channel sends UNSUBSCRIBE) and frees
 * it. Safe from inside its own callback, and after the client closed. */
RELOCK_EXTERN void relock_subscription_free(relock_subscription_t *sub);

#ifdef __cplusplus
}
#endif
#endif /* RELOCK_CLIENT_H */
