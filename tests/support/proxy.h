/* A fault-injecting TCP proxy for integration tests: it sits between the
 * library and a real redis-server and, on command, cuts or resets every
 * connection, stalls traffic (a network black hole), adds latency, closes or
 * swallows new connections, or makes new TCP connects hang.
 *
 * The proxy listens on a free port of 127.0.0.1 and runs in a thread of its
 * own (a poll() loop), so it works while the test's main thread is inside a
 * libev loop, or blocked. Every call below is synchronous: it returns after
 * the proxy thread has applied it, so after relock_test_proxy_cut() returns
 * the connections are closed. Call them from one thread (the test's main
 * thread). Linux only (accept4, POLLRDHUP, MSG_NOSIGNAL, TCP_INFO); link
 * with -pthread.
 *
 * Each direction of a connection buffers at most 256 KiB; the proxy stops
 * reading from a side while the buffer towards the other is full. End of
 * stream is passed on as a half-close (shutdown(SHUT_WR)), so a peer that
 * closes is seen closing on the other side. If the upstream cannot be
 * reached, the accepted connection is closed (the client sees EOF). */
#ifndef RELOCK_TEST_PROXY_H
#define RELOCK_TEST_PROXY_H

#include <stdint.h>

typedef struct relock_test_proxy relock_test_proxy_t;

/* Starts a proxy on 127.0.0.1:<free port> that forwards every connection it
 * accepts to upstream_host:upstream_port (a name or a numeric address,
 * resolved once, here). NULL on failure, with the reason on stderr. */
relock_test_proxy_t *relock_test_proxy_start(const char *upstream_host, int upstream_port);

/* The port the proxy listens on (host 127.0.0.1). */
int relock_test_proxy_port(const relock_test_proxy_t *p);

/* Closes both sides of every current connection (shutdown then close: the
 * peers read EOF, or ECONNRESET if they had data the proxy had not read).
 * Connections still waiting in the listen queue are accepted first, so a
 * client whose connect() returned before the call is cut too. New
 * connections are accepted afterwards as usual. */
void relock_test_proxy_cut(relock_test_proxy_t *p);
/* The same with an RST on both sides (SO_LINGER 0): peers get ECONNRESET. */
void relock_test_proxy_reset(relock_test_proxy_t *p);

/* While on, nothing is forwarded in either direction, for current and new
 * connections alike: the proxy neither reads nor writes (data waits in the
 * kernel's and the proxy's buffers) and closes nothing, even when a side
 * closes: a network black hole. Off forwards everything held, in order,
 * then carries on. New connections are still accepted and connected
 * upstream meanwhile. */
void relock_test_proxy_stall(relock_test_proxy_t *p, int on);

/* Makes every current connection a black hole for good, as stall does, but
 * only those: connections accepted afterwards are forwarded as usual (a
 * client that reconnects gets through, as after a route change). The
 * proxy no longer looks at the old ones, not even to see a side close:
 * they stay open (and counted by relock_test_proxy_connections) until
 * cut, reset or stop. */
void relock_test_proxy_blackhole_current(relock_test_proxy_t *p);

/* Holds every chunk the proxy reads for ms milliseconds before passing it on
 * (0 = none, the default): a latency in each direction, so a request/reply
 * round trip takes at least 2 * ms more. Applies to chunks read after the
 * call; bytes are never reordered. */
void relock_test_proxy_delay(relock_test_proxy_t *p, int64_t ms);

/* While on, each new connection is accepted and closed at once: the client's
 * connect() succeeds, then it reads EOF (ECONNRESET if it had sent data).
 * Wins over blackhole_accept. Current connections are left alone. */
void relock_test_proxy_refuse(relock_test_proxy_t *p, int on);

/* While on, each new connection is accepted and then left alone: no
 * upstream connection, nothing read, nothing answered, never closed by the
 * proxy. The client's TCP connect() succeeds, but the first reply it waits
 * for (a handshake such as AUTH, HELLO or PING, or any command) never comes.
 * Such connections stay black holes after off, until the client closes them
 * (then the proxy closes its side too) or cut/reset/stop. */
void relock_test_proxy_blackhole_accept(relock_test_proxy_t *p, int on);

/* While on, new TCP connects hang in the handshake: the proxy stops
 * accepting and keeps its listen queue full, so the kernel drops incoming
 * SYNs and a client's connect() neither succeeds nor fails (until its own
 * connect timeout, or the kernel's after about two minutes). After off,
 * the clients still trying get through on their next SYN retry (1 s, 3 s,
 * 7 s ... after their first attempt). Wins over refuse and
 * blackhole_accept. 0, or -1 if the queue could not be filled (then the
 * mode is off). */
int relock_test_proxy_hang_connect(relock_test_proxy_t *p, int on);

/* How many accepted connections are open in the proxy now (forwarded, held
 * by blackhole_accept, or still connecting upstream). Connections waiting in
 * the listen queue are accepted first, as for cut. A connection closed by a
 * peer is counted until the proxy has seen the close: poll with a deadline
 * when waiting for a drop. */
int relock_test_proxy_connections(relock_test_proxy_t *p);
/* How many connections the proxy has accepted since start, the ones closed
 * by refuse and held by blackhole_accept included (the listen queue is
 * accepted first, as above). */
uint64_t relock_test_proxy_accepted(relock_test_proxy_t *p);

/* Counts, from now on and from 0, the occurrences of text (at most 64
 * bytes; "" or NULL: none) in what the upstream sends the clients, over
 * every connection: the replies the clients were given, e.g. "-BUSY ".
 * relock_test_proxy_seen says how many so far (all the bytes read from
 * the upstream before the call counted). */
void relock_test_proxy_watch(relock_test_proxy_t *p, const char *text);
uint64_t relock_test_proxy_seen(relock_test_proxy_t *p);

/* Closes every connection and the listening socket, stops the thread, frees.
 * NULL is ok. */
void relock_test_proxy_stop(relock_test_proxy_t *p);

#endif /* RELOCK_TEST_PROXY_H */
