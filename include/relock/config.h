/* Client options: an opaque object holding every setting of a client, set
 * and read by name (as nng's nng_socket_set_ms does).
 *
 * A struct with a field per setting breaks every program built against an
 * older header when a field is added; options by name do not, so TLS,
 * Sentinel and Cluster settings can come later without an API or ABI break.
 *
 *   relock_options_t *opts = relock_options_new(NULL);
 *   relock_options_set_url(opts, "redis://:secret@cache:6379/2", &err);
 *   relock_options_set_ms(opts, RELOCK_OPT_COMMAND_TIMEOUT, 500, &err);
 *   relock_client_t *client = relock_client_new(NULL, opts, &err);
 *   relock_options_free(opts); // the client copied what it needs
 *
 * Every option has a type - a string, an int, or a duration in
 * milliseconds (int64_t) - and is set and read with the functions of its
 * type; relock_options_set takes any option's value as text. A value is
 * checked when it is set (a refused value leaves the option unchanged);
 * rules that tie options together are checked by relock_options_validate and
 * again by relock_client_new. Strings are copied into the object. An
 * options object is not thread-safe: one thread at a time. */
#ifndef RELOCK_CONFIG_H
#define RELOCK_CONFIG_H

#include <stdint.h>

#include <relock/common.h>
#include <relock/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* -- the options, their types and their defaults -----------------------------
 * For a string option, NULL means "not set"; its default is NULL unless
 * stated. */

/* string, "127.0.0.1". Not empty; NULL only with RELOCK_OPT_UNIX_PATH. */
#define RELOCK_OPT_HOST "host"
/* int, 6379: 1-65535. */
#define RELOCK_OPT_PORT "port"
/* string: an absolute Unix socket path (at most 107 bytes); when set, used
 * instead of host and port. */
#define RELOCK_OPT_UNIX_PATH "unix-path"
/* string: the user for AUTH (needs a password). Not set: AUTH with the
 * password only. Not empty. */
#define RELOCK_OPT_USERNAME "username"
/* string: the password for AUTH. Not set: no AUTH. Not empty. */
#define RELOCK_OPT_PASSWORD "password"
/* int, 0: the database; anything else is SELECTed. >= 0. */
#define RELOCK_OPT_DB "db"
/* string: the connections' CLIENT SETNAME. Not set: no CLIENT SETNAME.
 * Printable ASCII without spaces, as Redis requires. */
#define RELOCK_OPT_CLIENT_NAME "client-name"
/* ms, 5000: one connection attempt, handshake included. > 0. */
#define RELOCK_OPT_CONNECT_TIMEOUT "connect-timeout"
/* ms, 3000: from sending a command to its reply. > 0. */
#define RELOCK_OPT_COMMAND_TIMEOUT "command-timeout"
/* int, 3: re-sends of a command that is safe to repeat. 0-1000. */
#define RELOCK_OPT_RETRY_ATTEMPTS "retry-attempts"
/* ms, 1500: base of the jittered back-off between those re-sends. >= 0. */
#define RELOCK_OPT_RETRY_INTERVAL "retry-interval"
/* ms, 100: first reconnect delay (jittered, doubling). >= 1, and at most
 * RELOCK_OPT_RECONNECT_MAX. */
#define RELOCK_OPT_RECONNECT_MIN "reconnect-min"
/* ms, 10000: cap of the reconnect delay. */
#define RELOCK_OPT_RECONNECT_MAX "reconnect-max"
/* string: the client's id in lock fields "<client-id>:<owner>". Not set: a
 * random RFC 4122 version-4 UUID. At most 64 bytes, without ':', spaces or
 * control characters. */
#define RELOCK_OPT_CLIENT_ID "client-id"
/* ms, 30000: the lease of a lock held without a fixed lease, renewed every
 * third of it. >= 3. */
#define RELOCK_OPT_WATCHDOG_TIMEOUT "watchdog-timeout"
/* int, 0: 1 = closing the client (relock_client_close, relock_client_free)
 * first releases every lock hold it has - each kind through its own
 * release, every hold of a re-entered lock, waking the waiters - and the
 * permit-expirable semaphores' permits it took without a lease and has not
 * released, within the command timeout; relock_client_released tells how
 * many were released and how many not. A plain semaphore's permits belong
 * to no client: not released. 0 (Redisson's shutdown): the holds stay in
 * Redis until their leases run out. */
#define RELOCK_OPT_RELEASE_ON_CLOSE "release-on-close"
/* int, 1: the client keeps statistics (relock_client_stats, relock_stats(3)).
 * 0: every count stays 0 - there only to measure what they cost (bench/);
 * events (relock_client_on_event) are told either way. 0 or 1. */
#define RELOCK_OPT_STATISTICS "statistics"
/* ms, 1000: health check. A connection that has received nothing for this
 * long is sent a PING; no answer within the command timeout and it is
 * presumed dead (a silent peer: dropped route, frozen host), its pending
 * commands fail with RELOCK_ECONNLOST and it is replaced, so a held lock
 * keeps being renewed. TCP keepalive (and TCP_USER_TIMEOUT) on every TCP
 * connection is set from it too (idle = this interval, probes every third
 * of the command timeout, 3 probes; user timeout = interval + command
 * timeout). 0 disables the PING; keepalive stays, derived from the command
 * timeout instead. Redisson's pingConnectionInterval. >= 0. */
#define RELOCK_OPT_PING_INTERVAL "ping-interval"

/* TLS. A build without TLS (hiredis 0.14 has none) refuses each of these
 * with RELOCK_ETLS when set to anything but its default; relock_tls_available
 * tells which build this is.
 *
 * int, 0: 1 = connect with TLS (rediss:// sets it). The server's certificate
 * is verified against the CA (below, or the system's store), and its name
 * against RELOCK_OPT_TLS_SERVER_NAME or the host (a DNS name, or an IP
 * address against the certificate's IP addresses). A failed handshake or
 * verification fails with RELOCK_ETLS, naming the reason. */
#define RELOCK_OPT_TLS "tls"
/* string: a PEM file of the CA certificates to trust. Not set (and no
 * RELOCK_OPT_TLS_CA_DIR): the system's default store. */
#define RELOCK_OPT_TLS_CA_FILE "tls-ca-file"
/* string: a directory of CA certificates, hashed (openssl rehash). */
#define RELOCK_OPT_TLS_CA_DIR "tls-ca-dir"
/* string: the client certificate (PEM, chain allowed) for mutual TLS
 * (Redis's tls-auth-clients); needs RELOCK_OPT_TLS_KEY. */
#define RELOCK_OPT_TLS_CERT "tls-cert"
/* string: the private key of RELOCK_OPT_TLS_CERT (PEM, not encrypted). */
#define RELOCK_OPT_TLS_KEY "tls-key"
/* string: the name sent as SNI and required in the server's certificate.
 * Not set: the host. */
#define RELOCK_OPT_TLS_SERVER_NAME "tls-server-name"
/* int, 0: 1 = do NOT verify the server's certificate or name. FOR TESTS
 * ONLY: anyone on the path can then read and change the traffic, AUTH
 * password included. */
#define RELOCK_OPT_TLS_INSECURE_SKIP_VERIFY "tls-insecure-skip-verify"

/* Redis Sentinel. Setting RELOCK_OPT_SENTINELS makes the client find its
 * master through the sentinels instead of host, port and unix-path: it asks
 * them (in random order) where the master called RELOCK_OPT_SENTINEL_MASTER
 * is, checks with ROLE that it is one, follows failovers (+switch-master,
 * and a poll every second as a backstop) and moves its connections,
 * subscriptions and held locks' renewals to the new master. Every sentinel
 * unreachable fails with RELOCK_ECONNREFUSED naming each address tried;
 * sentinels that answer but know no such master (or point to a node that
 * is not a master) with RELOCK_ENOMASTER. The data nodes use username,
 * password, db and the TLS options; the sentinels the same TLS options and
 * their own credentials below.
 *
 * string: the sentinels, "host[:port],host[:port],..." (port 26379 when
 * left out; IPv6 hosts in brackets), at most 16. Not set: no Sentinel. */
#define RELOCK_OPT_SENTINELS "sentinels"
/* string: the master's name as the sentinels know it (sentinel monitor
 * <name> ...). Required with RELOCK_OPT_SENTINELS. */
#define RELOCK_OPT_SENTINEL_MASTER "sentinel-master"
/* string: the user for AUTH to the sentinels (needs the password). */
#define RELOCK_OPT_SENTINEL_USERNAME "sentinel-username"
/* string: the password for AUTH to the sentinels (their requirepass). Not
 * set: no AUTH to the sentinels (the data nodes' password is not sent to
 * them). */
#define RELOCK_OPT_SENTINEL_PASSWORD "sentinel-password"
/* Redis Cluster. Setting RELOCK_OPT_CLUSTER_NODES makes the client talk to
 * a Cluster instead of the node at host, port or unix-path: it loads the
 * slot map from any seed that answers, sends each key to the master of its
 * slot (a lock's channel and latch keys share the lock's slot), follows
 * MOVED and ASK redirections, and reloads the map when a failover or a
 * resharding moves slots. The seeds are only where it starts: the nodes it
 * uses are those the map names. Every node gets username, password and the
 * TLS options. Redis Cluster has only database 0, so db must be 0; it does
 * not go with unix-path or RELOCK_OPT_SENTINELS. RELOCK_OPT_MIN_REPLICAS_ACKED
 * works as on a single master (WAIT is answered by the master of the slot).
 *
 * string: the seed nodes, "host[:port],host[:port],..." (port 6379 when
 * left out; IPv6 hosts in brackets), at most 16. Not set: no Cluster. */
#define RELOCK_OPT_CLUSTER_NODES "cluster-nodes"
/* Synced replicas (Redisson's checkLockSyncedSlaves). Redis replicates
 * asynchronously: a failover can promote a replica that never saw an
 * acquisition, and then grant the lock again.
 *
 * int, 0: n > 0 = every acquisition and every watchdog renewal is followed,
 * in the same round trip, by WAIT n <timeout> on the same connection. A lock
 * is reported acquired only once at least n replicas acknowledged it; with
 * fewer, the hold is given back and the acquisition fails with
 * RELOCK_ENOTREPLICATED ("lock X written on the master but acknowledged by
 * only 0 of 1 replicas within 500 ms"; not retried, also not inside a
 * wait: a failure of its own), so a lock the client believes it holds is on
 * at least n replicas. A renewal acknowledged by fewer counts as failed, as
 * if it had not reached Redis: it is tried again at the next renewal, and
 * the lock is reported lost (RELOCK_ETIMEDOUT) when its lease runs out
 * first. Releases send no WAIT: a release undone by a failover delays
 * others until its lease ends, it never makes two holders. 0-100; 0 sends no
 * WAIT at all.
 *
 * WAIT blocks the connection it runs on, which every command of the client
 * shares: while replicas lag, each command queued behind a WAIT waits up to
 * RELOCK_OPT_MIN_REPLICAS_TIMEOUT, and k acquisitions in a row up to k times
 * that. The ACL user needs +wait. */
#define RELOCK_OPT_MIN_REPLICAS_ACKED "min-replicas-acked"
/* ms, 500: WAIT's timeout. > 0, and with RELOCK_OPT_MIN_REPLICAS_ACKED set,
 * less than RELOCK_OPT_COMMAND_TIMEOUT (WAIT's answer must come within it).
 * A replica on the same network acknowledges in well under a millisecond;
 * 500 ms lets one ride out a brief stall (a fork, a slow disk) while a
 * replica that is really gone stalls the connection half a second at most,
 * far less than the 3 s command timeout and the 10 s renewal period. */
#define RELOCK_OPT_MIN_REPLICAS_TIMEOUT "min-replicas-timeout"

/* ms, 300000 (Redisson's fairLockWaitTimeout): how long a fair lock's
 * waiter that stopped trying (a dead process) keeps its place in the
 * queue: live waiters keep theirs however long they wait, trying again at
 * least every third of it. >= 3. */
#define RELOCK_OPT_FAIR_LOCK_WAIT_TIMEOUT "fair-lock-wait-timeout"

/* Every duration is at most 2^40 ms (about 34 years). */

typedef struct relock_options relock_options_t;

/* -- the object --------------------------------------------------------------*/

/* A new options object with every option at its default. NULL when out of
 * memory (err says so; err may be NULL). */
RELOCK_EXTERN relock_options_t *relock_options_new(relock_error_t *err);

/* Frees the object (NULL: nothing). A password in it is wiped first. */
RELOCK_EXTERN void relock_options_free(relock_options_t *opts);

/* A copy of opts, NULL with err set when out of memory (or opts is NULL). */
RELOCK_EXTERN relock_options_t *relock_options_copy(const relock_options_t *opts, relock_error_t *err);

/* -- setting and reading -----------------------------------------------------
 * Each returns 0, or RELOCK_EINVAL with err naming the problem: an unknown
 * name ("unknown option \"x\""), an option of another type, or a value the
 * option does not accept (it then keeps its value). RELOCK_ENOMEM when a
 * string cannot be copied; RELOCK_ETLS for a TLS option in a build without
 * TLS. err may be NULL. */

RELOCK_EXTERN int relock_options_set_string(relock_options_t *opts, const char *name, const char *value,
                                            relock_error_t *err);
RELOCK_EXTERN int relock_options_set_int(relock_options_t *opts, const char *name, int value, relock_error_t *err);
RELOCK_EXTERN int relock_options_set_ms(relock_options_t *opts, const char *name, int64_t value_ms,
                                        relock_error_t *err);

/* Sets an option of any type from text, for command lines and configuration
 * files: a string as it is, an int in decimal, a duration as a decimal
 * number of milliseconds, optionally followed by "ms" (or "s" for seconds). */
RELOCK_EXTERN int relock_options_set(relock_options_t *opts, const char *name, const char *text,
                                     relock_error_t *err);

/* *value gets the option's value. A string stays valid until the option is
 * set again or opts is freed; NULL when it is not set. */
RELOCK_EXTERN int relock_options_get_string(const relock_options_t *opts, const char *name, const char **value,
                                            relock_error_t *err);
RELOCK_EXTERN int relock_options_get_int(const relock_options_t *opts, const char *name, int *value,
                                         relock_error_t *err);
RELOCK_EXTERN int relock_options_get_ms(const relock_options_t *opts, const char *name, int64_t *value_ms,
                                        relock_error_t *err);

/* Sets the connection options (host, port, unix-path, username, password,
 * db, the Sentinel ones and cluster-nodes) from a URL, leaving the others
 * alone; the ones the URL leaves out get their defaults (so a redis:// URL
 * after a Sentinel or Cluster one leaves neither behind):
 *   redis://[[username]:password@]host[:port][/db]
 *   unix:///path/to/socket[?db=N]   (also ?password=..., ?username=...)
 *   rediss://...                     (as redis://, with TLS: RELOCK_OPT_TLS)
 *   redis+sentinel://[[username]:password@]host[:port][,host[:port]...]/master[/db]
 *       [?sentinel-password=...&sentinel-username=...&db=N]
 *                                    (Sentinel: the hosts are the sentinels,
 *                                    port 26379 by default, master the
 *                                    master's name; the user info is the
 *                                    data nodes' AUTH, the sentinels' goes
 *                                    in the query)
 *   rediss+sentinel://...            (the same, with TLS to sentinels and nodes)
 *   redis+cluster://[[username]:password@]host[:port][,host[:port]...][/0]
 *       [?password=...&username=...]
 *                                    (Redis Cluster: the hosts are seed
 *                                    nodes, port 6379 by default; a
 *                                    database other than 0 is refused)
 *   rediss+cluster://...             (the same, with TLS to every node)
 * IPv6 hosts go in brackets: redis://[::1]:6380. Percent-escapes are decoded
 * in the username and password. The URL sets RELOCK_OPT_TLS (1 for the
 * rediss schemes, 0 otherwise) but no other TLS option: CA, certificate and
 * server name are options of their own, not query parameters. rediss:// in
 * a build without TLS fails with RELOCK_ETLS. On error the options are unchanged and err says what is wrong
 * (RELOCK_EINVAL), never quoting a password. */
RELOCK_EXTERN int relock_options_set_url(relock_options_t *opts, const char *url, relock_error_t *err);

/* Sets the connection options from the environment: RELOCK_URL, a URL as
 * relock_options_set_url takes it (the variable the relock command reads), or
 * RELOCK_URL_FILE, a file whose first line is one (keeping a password out
 * of the environment and of ps). Only this call reads them: a client made
 * without it ignores both.
 * Returns 1 when it set the URL, 0 when neither variable is set (opts
 * unchanged: the defaults, or what the program set, stand), or an error,
 * with err naming the variable and the problem (never quoting a password)
 * and opts unchanged: RELOCK_EINVAL for a variable set but empty, both
 * set, a URL relock_options_set_url refuses (RELOCK_ETLS: rediss:// in a
 * build without TLS), a file that is empty or whose first line is blank
 * or longer than 4096 bytes;
 * RELOCK_EIO for a file that cannot be read (the system's reason). err
 * may be NULL. Reads the environment with getenv: not while another
 * thread changes it. */
RELOCK_EXTERN int relock_options_from_env(relock_options_t *opts, relock_error_t *err);

/* Checks the rules that tie options together: a host unless there is a Unix
 * socket path, a username only with a password, reconnect-min <=
 * reconnect-max, tls-cert and tls-key together, no TLS over a Unix socket,
 * sentinels and sentinel-master together and not with unix-path,
 * cluster-nodes without sentinels, unix-path or a db other than 0,
 * min-replicas-timeout < command-timeout when min-replicas-acked is set.
 * (Each value was checked when it was set.) Returns 0 or
 * RELOCK_EINVAL with err naming the problem; err may be NULL. */
RELOCK_EXTERN int relock_options_validate(const relock_options_t *opts, relock_error_t *err);

/* 1 if this build has TLS (rediss://), else 0. */
RELOCK_EXTERN int relock_tls_available(void);

#ifdef __cplusplus
}
#endif
#endif /* RELOCK_CONFIG_H */
