/* The client: configuration, connections to Redis on a libev loop, and the
 * generic command API. Locks and other objects are made from a client. */
#ifndef RELOCK_CLIENT_H
#define RELOCK_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <relock/common.h>
#include <relock/future.h>

struct ev_loop;

#ifdef __cplusplus
extern "C" {
#endif

/* The outcome of a call that completes at once but can fail in more than one
 * way: the code and a message naming the problem. */
typedef struct relock_error {
  int code;           /* 0 or a RELOCK_E* code */
  char message[256];  /* "" on success */
} relock_error_t;

/* -- configuration ---------------------------------------------------------*/

/* Every field has a documented default, set by relock_config_init. Strings
 * are borrowed: relock_client_new copies what it keeps, so they need to live
 * only until then. */
typedef struct relock_config {
  const char *host;             /* "127.0.0.1" */
  int port;                     /* 6379 */
  const char *unix_path;        /* NULL; when set, used instead of host:port */
  const char *username;         /* NULL: AUTH with the password only (or no AUTH) */
  const char *password;         /* NULL: no AUTH */
  int db;                       /* 0; anything else is SELECTed */
  const char *client_name;      /* NULL: no CLIENT SETNAME */
  int64_t connect_timeout_ms;   /* 5000: one connection attempt, handshake included */
  int64_t command_timeout_ms;   /* 3000: from sending a command to its reply */
  int retry_attempts;           /* 3: re-sends of a command that is safe to repeat */
  int64_t retry_interval_ms;    /* 1500: base of the jittered back-off between them */
  int64_t reconnect_min_ms;     /* 100: first reconnect delay (jittered, doubling) */
  int64_t reconnect_max_ms;     /* 10000: cap of the reconnect delay */
  const char *client_id;        /* NULL: a random RFC 4122 version-4 UUID */
  int64_t watchdog_timeout_ms;  /* 30000: lease of a lock held without a fixed lease */
  /* 1000: health check. A connection that has received nothing for this
   * long is sent a PING; no answer within command_timeout_ms and it is
   * presumed dead (a silent peer: dropped route, frozen host), its pending
   * commands fail with RELOCK_ECONNLOST and it is replaced, so a held lock
   * keeps being renewed. TCP keepalive (and TCP_USER_TIMEOUT) on every TCP
   * connection is set from it too (idle = this interval, probes every third
   * of the command timeout, 3 probes; user timeout = interval + command
   * timeout). 0 disables the PING; keepalive stays, derived from the
   * command timeout instead. Redisson's pingConnectionInterval. (A later
   * version replaces this struct with an extensible options API.) */
  int64_t ping_interval_ms;

  void *owned_; /* private: storage of strings parsed by relock_config_from_url */
} relock_config_t;

/* Sets every field to its default. It does not free what an earlier
 * relock_config_from_url stored: call relock_config_cleanup for that. */
RELOCK_EXTERN void relock_config_init(relock_config_t *config);

/* Fills the connection fields (host, port, unix_path, username, password, db)
 * of an initialised config from a URL, leaving the others alone; the ones the
 * URL leaves out get their defaults:
 *   redis://[[username]:password@]host[:port][/db]
 *   unix:///path/to/socket[?db=N]   (also ?password=..., ?username=...)
 * IPv6 hosts go in brackets: redis://[::1]:6380. Percent-escapes are decoded
 * in the username and password. rediss:// (TLS) is refused: this build has
 * no TLS. On error the config is unchanged and err says what is wrong
 * (RELOCK_EINVAL). The parsed strings belong to config until
 * relock_config_cleanup or the next relock_config_from_url. */
RELOCK_EXTERN int relock_config_from_url(relock_config_t *config, const char *url, relock_error_t *err);

/* Frees what relock_config_from_url stored in config; fields still pointing
 * there get their defaults back. Safe to call more than once. */
RELOCK_EXTERN void relock_config_cleanup(relock_config_t *config);

/* Checks every value: host (or an absolute unix_path), port 1-65535, db >= 0,
 * a username only with a password, timeouts > 0, retries and their interval
 * >= 0, 1 <= reconnect_min_ms <= reconnect_max_ms, watchdog_timeout_ms >= 3,
 * ping_interval_ms >= 0,
 * a client id of at most 64 bytes without ':', spaces or control characters,
 * a client name Redis accepts. Returns 0 or RELOCK_EINVAL with err naming the
 * value (err may be NULL). */
RELOCK_EXTERN int relock_config_validate(const relock_config_t *config, relock_error_t *err);

/* -- replies ---------------------------------------------------------------*/

typedef enum relock_reply_type {
  RELOCK_REPLY_NIL = 0,
  RELOCK_REPLY_INTEGER,
  RELOCK_REPLY_STRING,
  RELOCK_REPLY_STATUS,
  RELOCK_REPLY_ERROR,
  RELOCK_REPLY_ARRAY
} relock_reply_type_t;

/* A library-owned copy of a Redis reply: read it, don't change it. */
typedef struct relock_reply {
  relock_reply_type_t type;
  int64_t integer;                 /* INTEGER */
  const char *str;                 /* STRING, STATUS, ERROR: NUL-terminated */
  size_t len;                      /* its length (a STRING may hold NULs) */
  struct relock_reply *const *element; /* ARRAY (NULL when it is empty) */
  size_t elements;
} relock_reply_t;

/* -- the client ------------------------------------------------------------*/

typedef struct relock_client relock_client_t;

/* Makes a client on loop (NULL: the client makes and owns a loop of its own,
 * run by the blocking calls, so a simple program never touches libev).
 * Connecting starts at once and goes on in the background; commands issued
 * meanwhile wait for it. Returns NULL with err set on invalid configuration
 * or out of memory; err may be NULL. */
RELOCK_EXTERN relock_client_t *relock_client_new(struct ev_loop *loop, const relock_config_t *config,
                                                 relock_error_t *err);

typedef void (*relock_close_cb)(relock_client_t *client, void *arg);

/* Starts closing: everything pending fails with RELOCK_ECLOSED, the
 * connections close, and cb(client, arg) (if not NULL) is called once when
 * all is down, never from inside this call. Calls after this fail with
 * RELOCK_ECLOSED. Safe from inside any callback. Returns 0, or
 * RELOCK_ECLOSED if closing had already started. */
RELOCK_EXTERN int relock_client_close(relock_client_t *client, relock_close_cb cb, void *arg);

/* Frees a client that has finished closing (after its close callback). A
 * client that was never closed is closed first, waiting for it on its loop
 * (which must not be running: not from inside a callback). */
RELOCK_EXTERN void relock_client_free(relock_client_t *client);

/* The loop the client runs on (its own if it was made with NULL). */
RELOCK_EXTERN struct ev_loop *relock_client_loop(const relock_client_t *client);

/* The client's id (the UUID used in lock fields). */
RELOCK_EXTERN const char *relock_client_id(const relock_client_t *client);

/* Sends a command (argv[i] of argvlen[i] bytes; argvlen NULL: NUL-terminated
 * strings). The future succeeds with a relock_reply_t (relock_future_ptr), or
 * fails: RELOCK_ESERVER with the server's text for an error reply,
 * RELOCK_ETIMEDOUT when no reply came within the command timeout,
 * RELOCK_ECONNLOST when the connection dropped with the command in flight,
 * RELOCK_ECONNREFUSED / RELOCK_EAUTH when no connection could be made in
 * time, RELOCK_ECLOSED after close. A command is never sent twice. Returns
 * NULL only for invalid arguments or when out of memory. */
RELOCK_EXTERN relock_future_t *relock_client_command_async(relock_client_t *client, int argc, const char *const *argv,
                                                           const size_t *argvlen);

/* The same with hiredis's printf-like format: "SET %s %b", key, val, vallen. */
RELOCK_EXTERN relock_future_t *relock_client_commandf_async(relock_client_t *client, const char *format, ...);

/* The reply of a succeeded command future (NULL otherwise). */
RELOCK_EXTERN const relock_reply_t *relock_future_reply(const relock_future_t *future);

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
 * (the subscription stays and is retried after reconnects). NULL when out of
 * memory or on invalid arguments. */
RELOCK_EXTERN relock_future_t *relock_client_subscribe(relock_client_t *client, const char *channel, size_t len,
                                                       relock_message_cb cb, void *arg,
                                                       relock_subscription_t **sub);

/* Ends a subscription (the last one of a channel sends UNSUBSCRIBE) and frees
 * it. Safe from inside its own callback, and after the client closed. */
RELOCK_EXTERN void relock_subscription_free(relock_subscription_t *sub);

#ifdef __cplusplus
}
#endif
#endif /* RELOCK_CLIENT_H */
