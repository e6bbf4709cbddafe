/* A private redis-server for integration tests: started in its own temp
 * dir on a free loopback port and a unix socket, stopped, restarted on the
 * same port, paused, killed, and always killed (by pid) when the test
 * program ends, however it ends. It also sends single commands over plain
 * sockets, so a test can check Redis without the library under test.
 *
 * Not thread-safe: call it from the test's main thread. */
#ifndef RELOCK_TEST_REDIS_SERVER_H
#define RELOCK_TEST_REDIS_SERVER_H

#include <stddef.h>
#include <sys/types.h>

typedef struct relock_test_redis relock_test_redis_t;

/* Zero-initialise; every field's zero is the default. */
typedef struct relock_test_redis_opts {
  /* Non-zero: appendonly yes, appendfsync always, so every acknowledged
   * write survives stop, restart and kill9. Default: no persistence at all
   * (--save '' --appendonly no). */
  int aof;
  /* Sets requirepass; relock_test_redis_cmd() then sends AUTH first. */
  const char *password;
  /* More redis-server arguments, NULL-terminated, appended last so they
   * override the defaults, e.g. {"--maxmemory", "10mb", NULL}. Copied. */
  const char *const *extra_args;
  /* A fixed TCP port; 0 picks a free one (and retries on a bind race). */
  int port;
  /* How long start and restart wait for the server to answer; 0 = 10 s. */
  int start_timeout_ms;
  /* Deadline of each relock_test_redis_cmd() call; 0 = 5 s. */
  int cmd_timeout_ms;
  /* A directory of certificates made by tests/support/tls.sh: the TCP port
   * then speaks TLS only (--port 0 --tls-port PORT), with server.crt,
   * server.key and ca.crt from there and --tls-auth-clients no; extra_args
   * can override any of them. The unix socket stays plain (for _cmd). */
  const char *tls_dir;
  /* Text of a config file written to <dir>/redis.conf on the first start
   * and passed first on the command line (the server may rewrite it, as a
   * sentinel does; restart keeps what it wrote). NULL: no config file. */
  const char *config_text;
  /* Non-zero: run as a Redis Sentinel (--sentinel; needs config_text with
   * its "sentinel monitor" lines). The port then answers Sentinel commands;
   * _cmd still reaches it over the unix socket. */
  int sentinel;
} relock_test_redis_opts_t;

/* Non-zero if a redis-server can be run: $REDIS_SERVER if set and
 * non-empty, else "redis-server" on $PATH. */
int relock_test_redis_available(void);
/* The redis-server that start() runs (see above). */
const char *relock_test_redis_server_path(void);
/* Its version as relock_test_redis_version() says it, before any start. */
int relock_test_redis_server_version(void);

/* Starts a server and waits until it answers PING (opts may be NULL). On
 * failure returns NULL and prints why, with the tail of the server's log,
 * to stderr. */
relock_test_redis_t *relock_test_redis_start(const relock_test_redis_opts_t *opts);
/* SIGTERM, wait, SIGKILL after a deadline; the temp dir stays. 0 or -1. */
int relock_test_redis_stop(relock_test_redis_t *r);
/* Stops (if running) and starts again on the same port, socket and dir
 * with the same options; with AOF the data survives. 0 or -1. */
int relock_test_redis_restart(relock_test_redis_t *r);
/* SIGSTOP / SIGCONT: the server keeps its sockets but stops answering. */
int relock_test_redis_pause(relock_test_redis_t *r);
int relock_test_redis_resume(relock_test_redis_t *r);
/* SIGKILL and reap: a crash, no shutdown work. 0 or -1. */
int relock_test_redis_kill9(relock_test_redis_t *r);
/* Stops the server if running, removes its temp dir, frees. NULL is ok. */
void relock_test_redis_free(relock_test_redis_t *r);

const char *relock_test_redis_host(const relock_test_redis_t *r); /* "127.0.0.1" */
int relock_test_redis_port(const relock_test_redis_t *r);
const char *relock_test_redis_unix_path(const relock_test_redis_t *r);
const char *relock_test_redis_dir(const relock_test_redis_t *r);
const char *relock_test_redis_log_path(const relock_test_redis_t *r);
/* The server's pid, or 0 when it is not running (stopped, killed). */
pid_t relock_test_redis_pid(const relock_test_redis_t *r);
int relock_test_redis_running(const relock_test_redis_t *r);
/* The server's version as major * 10000 + minor * 100 + patch, 0 if unknown. */
int relock_test_redis_version(const relock_test_redis_t *r);
/* Changes the deadline of later relock_test_redis_cmd() calls. */
void relock_test_redis_set_cmd_timeout(relock_test_redis_t *r, int ms);

/* Sends one command on a fresh unix-socket connection and reads one reply,
 * raw RESP, NUL-terminated, into reply (e.g. "+OK\r\n", "$1\r\nv\r\n",
 * "-ERR ...\r\n"). reply may be NULL to discard it (up to 4 KiB).
 * Returns 0 when a whole reply arrived (an error reply too: look at
 * reply[0]); else a negative errno: -ETIMEDOUT (no whole reply within the
 * cmd timeout), -ENOSPC (reply longer than replylen - 1; reply holds its
 * start), -ECONNREFUSED / -ENOENT (no server), -ECONNRESET (closed before
 * a whole reply), -EPROTO (not RESP), -EACCES (AUTH refused). */
int relock_test_redis_cmd(const relock_test_redis_t *r, char *reply, size_t replylen,
                          const char *arg0, ...)
#if defined(__GNUC__)
    __attribute__((sentinel))
#endif
    ;
/* ACL SETUSER user with the rules that follow (NULL-terminated), as the
 * admin, and "&*" - every channel - where the server has channel
 * permissions (Redis 6.2+; before, every user may use every channel and
 * the server refuses an '&' rule). 0 when answered +OK; else a negative
 * errno as relock_test_redis_cmd's, or -EPROTO (the reply is printed). */
int relock_test_redis_acl_user(const relock_test_redis_t *r, const char *user, ...)
#if defined(__GNUC__)
    __attribute__((sentinel))
#endif
    ;
/* The same with counted, possibly binary, arguments (argvlen NULL: strlen). */
int relock_test_redis_cmdv(const relock_test_redis_t *r, char *reply, size_t replylen, int argc,
                           const char *const *argv, const size_t *argvlen);

/* A connection of its own, for a subscriber: a fresh unix-socket connection
 * (AUTH sent first when there is a password) that has sent
 * SUBSCRIBE channel and read its confirmation. Returns the fd (close it
 * when done) or a negative errno as _cmd does. */
int relock_test_redis_subscribe(const relock_test_redis_t *r, const char *channel);
/* Reads one whole reply from fd (a subscriber's message, say) within
 * timeout_ms, raw RESP as _cmd gives it. 0, -ETIMEDOUT, -ECONNRESET...
 * Bytes that arrived after that reply are dropped: it suits waiting for
 * the first message, not reading a stream of them. */
int relock_test_redis_read(int fd, char *reply, size_t replylen, int timeout_ms);

#endif /* RELOCK_TEST_REDIS_SERVER_H */
