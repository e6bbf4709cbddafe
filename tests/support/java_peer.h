/* A Redisson peer for interop tests: tests/interop/Peer.java on real
 * Redisson, started as a child process (its own process group, killed by
 * pid at the end) and driven line by line over pipes. Built first by
 * tests/interop/build.sh into the build directory. A test that cannot start
 * it (no java, no mvn, no built classes) bails out: it fails, never skips.
 *
 * Lines (Peer.java has the protocol): the test sends "TAG OP ARGS..."; the
 * peer answers "TAG OP RESULT NANOTIME", NANOTIME being System.nanoTime(),
 * CLOCK_MONOTONIC as relock__now_ns(). Not thread-safe. */
#ifndef RELOCK_TEST_JAVA_PEER_H
#define RELOCK_TEST_JAVA_PEER_H

#include <stddef.h>
#include <stdint.h>

typedef struct java_peer java_peer_t;

/* Starts a peer on Redis at url (redis://host:port). watchdog_ms and
 * fair_wait_ms: Redisson's lockWatchdogTimeout and fairLockWaitTimeout (0:
 * its defaults). Waits for it to be ready. */
java_peer_t *java_peer_start(const char *url, int64_t watchdog_ms, int64_t fair_wait_ms);

/* Sends one command line. */
void java_peer_send(java_peer_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Waits at most timeout_ms for the answer of tag's op; fails the test if it
 * does not come (with what the peer printed on stderr). Returns the result
 * (valid until the next call) and the peer's nanoTime in *ns (may be NULL). */
const char *java_peer_expect(java_peer_t *p, const char *tag, const char *op, int64_t timeout_ms, uint64_t *ns);

/* Whether an answer of tag's op has come (without waiting longer than
 * wait_ms); does not consume it. */
int java_peer_has(java_peer_t *p, const char *tag, const char *op, int64_t wait_ms);

/* The lock field Redisson uses for tag's thread: "<client-id>:<thread-id>"
 * (the tag must have run a command). */
const char *java_peer_field(java_peer_t *p, const char *tag, char *buf, size_t size);

/* Tells the peer to quit, waits a little, kills it if needed. */
void java_peer_stop(java_peer_t *p);

#endif /* RELOCK_TEST_JAVA_PEER_H */
