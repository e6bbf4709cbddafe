/* Tests of the fault-injecting proxy (tests/support/proxy.c) against a small echo
 * server run by this program in a thread of its own, not Redis: data goes
 * through both ways, and cut, reset, stall, delay, refuse, blackhole_accept,
 * hang_connect and watch do what proxy.h says, as seen by a plain blocking client.
 * Lower bounds on time are exact; upper bounds are generous deadlines. */
#include <config.h>

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* accept4, pipe2 */
#endif

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "support/proxy.h"
#include "support/test.h"

/* -- time -------------------------------------------------------------------*/

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* A deadline for things that should happen at once: generous, for a loaded
 * machine and for valgrind. */
static int patience_ms(void) { return relock_test_under_valgrind() ? 30000 : 5000; }

/* How long to watch for something that must not happen. */
#define QUIET_MS 200

/* -- an echo server ---------------------------------------------------------*/

#define ECHO_MAX_CONNS 64
#define ECHO_BUF 65536

typedef struct {
  int fd;
  char *buf;
  size_t off, len; /* bytes read, not yet echoed */
  int eof;
} echo_conn_t;

typedef struct {
  int lfd, port;
  int wake[2];
  pthread_t thread;
  echo_conn_t conns[ECHO_MAX_CONNS];
  pthread_mutex_t mu;
  int accepted; /* under mu */
} echo_t;

static int listen_loopback(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in sin;
  socklen_t len = sizeof sin;
  memset(&sin, 0, sizeof sin);
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr *)&sin, sizeof sin) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, (struct sockaddr *)&sin, &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(sin.sin_port);
  return fd;
}

static void echo_close(echo_conn_t *c) {
  close(c->fd);
  free(c->buf);
  memset(c, 0, sizeof *c);
  c->fd = -1;
}

static void echo_serve(echo_conn_t *c) {
  if (c->len == 0 && !c->eof) {
    ssize_t n = recv(c->fd, c->buf, ECHO_BUF, 0);
    if (n > 0) {
      c->off = 0;
      c->len = (size_t)n;
    } else if (n == 0) {
      c->eof = 1;
    } else if (errno != EAGAIN && errno != EINTR) {
      echo_close(c);
      return;
    }
  }
  while (c->len > 0) {
    ssize_t n = send(c->fd, c->buf + c->off, c->len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      echo_close(c);
      return;
    }
    c->off += (size_t)n;
    c->len -= (size_t)n;
  }
  if (c->eof && c->len == 0) echo_close(c); /* the peer is done: so are we */
}

static void *echo_run(void *arg) {
  echo_t *e = arg;
  struct pollfd pfds[2 + ECHO_MAX_CONNS];
  for (;;) {
    pfds[0] = (struct pollfd){e->wake[0], POLLIN, 0};
    pfds[1] = (struct pollfd){e->lfd, POLLIN, 0};
    for (int i = 0; i < ECHO_MAX_CONNS; i++) {
      echo_conn_t *c = &e->conns[i];
      short ev = c->len > 0 ? POLLOUT : c->eof ? 0 : POLLIN;
      pfds[2 + i] = (struct pollfd){c->fd >= 0 && ev ? c->fd : -1, ev, 0};
    }
    if (poll(pfds, 2 + ECHO_MAX_CONNS, -1) < 0) continue;
    if (pfds[0].revents) break;
    if (pfds[1].revents) {
      int fd;
      while ((fd = accept4(e->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
        int slot = -1;
        for (int i = 0; i < ECHO_MAX_CONNS && slot < 0; i++) {
          if (e->conns[i].fd < 0) slot = i;
        }
        char *buf = slot >= 0 ? malloc(ECHO_BUF) : NULL;
        if (buf == NULL) {
          close(fd);
          continue;
        }
        e->conns[slot].fd = fd;
        e->conns[slot].buf = buf;
        pthread_mutex_lock(&e->mu);
        e->accepted++;
        pthread_mutex_unlock(&e->mu);
      }
    }
    for (int i = 0; i < ECHO_MAX_CONNS; i++) {
      if (pfds[2 + i].revents) echo_serve(&e->conns[i]);
    }
  }
  for (int i = 0; i < ECHO_MAX_CONNS; i++) {
    if (e->conns[i].fd >= 0) echo_close(&e->conns[i]);
  }
  return NULL;
}

static echo_t *echo_start(void) {
  echo_t *e = calloc(1, sizeof *e);
  assert_non_null(e);
  for (int i = 0; i < ECHO_MAX_CONNS; i++) e->conns[i].fd = -1;
  e->lfd = listen_loopback(&e->port);
  assert_true(e->lfd >= 0);
  assert_int_equal(pipe2(e->wake, O_CLOEXEC), 0);
  assert_int_equal(pthread_mutex_init(&e->mu, NULL), 0);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  assert_int_equal(pthread_create(&e->thread, NULL, echo_run, e), 0);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return e;
}

static int echo_accepted(echo_t *e) {
  pthread_mutex_lock(&e->mu);
  int n = e->accepted;
  pthread_mutex_unlock(&e->mu);
  return n;
}

static void echo_stop(echo_t *e) {
  char byte = 1;
  assert_int_equal(write(e->wake[1], &byte, 1), 1);
  pthread_join(e->thread, NULL);
  pthread_mutex_destroy(&e->mu);
  close(e->lfd);
  close(e->wake[0]);
  close(e->wake[1]);
  free(e);
}

/* -- a plain blocking client -------------------------------------------------*/

static int dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_in sin;
  memset(&sin, 0, sizeof sin);
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sin.sin_port = htons((uint16_t)port);
  assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof sin), 0);
  int one = 1;
  assert_int_equal(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), 0);
  return fd;
}

static void send_str(int fd, const char *s) {
  assert_int_equal(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

#define TIMED_OUT (-2)

/* One recv() that waits at most ms: bytes, 0 at EOF, -1 with errno, or
 * TIMED_OUT. */
static ssize_t recv_within(int fd, char *buf, size_t len, int ms) {
  struct pollfd pfd = {fd, POLLIN, 0};
  int rc = poll(&pfd, 1, ms);
  if (rc == 0) return TIMED_OUT;
  if (rc < 0) return -1;
  return recv(fd, buf, len, 0);
}

/* Reads exactly strlen(want) bytes within the patience deadline and checks
 * them. */
static void expect_str(int fd, const char *want) {
  size_t len = strlen(want), got = 0;
  char buf[256];
  assert_true(len < sizeof buf);
  int64_t deadline = now_ms() + patience_ms();
  while (got < len) {
    int left = (int)(deadline - now_ms());
    ssize_t n = recv_within(fd, buf + got, len - got, left > 0 ? left : 0);
    assert_true(n > 0);
    got += (size_t)n;
  }
  buf[got] = '\0';
  assert_string_equal(buf, want);
}

/* Nothing arrives for QUIET_MS: the connection is neither answered nor
 * closed. */
static void expect_silence(int fd) {
  char buf[16];
  assert_int_equal(recv_within(fd, buf, sizeof buf, QUIET_MS), TIMED_OUT);
}

/* The connection was closed under us: EOF, or a reset. */
static void expect_closed(int fd) {
  char buf[16];
  ssize_t n = recv_within(fd, buf, sizeof buf, patience_ms());
  if (n < 0) {
    assert_int_equal(n, -1);
    assert_int_equal(errno, ECONNRESET);
  } else {
    assert_int_equal(n, 0);
  }
}

static void round_trip(int fd, const char *s) {
  send_str(fd, s);
  expect_str(fd, s);
}

/* -- fixtures ---------------------------------------------------------------*/

typedef struct {
  echo_t *echo;
  relock_test_proxy_t *proxy;
  int port; /* the proxy's */
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  assert_non_null(f);
  f->echo = echo_start();
  f->proxy = relock_test_proxy_start("127.0.0.1", f->echo->port);
  assert_non_null(f->proxy);
  f->port = relock_test_proxy_port(f->proxy);
  assert_true(f->port > 0 && f->port != f->echo->port);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  relock_test_proxy_stop(f->proxy);
  echo_stop(f->echo);
  free(f);
  return 0;
}

/* Waits until the proxy counts n connections; fails after the deadline. */
static void wait_connections(relock_test_proxy_t *p, int n) {
  int64_t deadline = now_ms() + patience_ms();
  while (relock_test_proxy_connections(p) != n) {
    assert_true(now_ms() < deadline);
    sleep_ms(5);
  }
}

/* -- tests ------------------------------------------------------------------*/

static void test_forwards_and_counts(void **state) {
  fixture_t *f = *state;
  assert_int_equal(relock_test_proxy_connections(f->proxy), 0);
  assert_int_equal(relock_test_proxy_accepted(f->proxy), 0);
  int a = dial(f->port), b = dial(f->port);
  round_trip(a, "hello");
  round_trip(b, "world");
  round_trip(a, "again");
  assert_int_equal(relock_test_proxy_connections(f->proxy), 2);
  assert_int_equal(relock_test_proxy_accepted(f->proxy), 2);
  assert_int_equal(echo_accepted(f->echo), 2);
  close(a);
  wait_connections(f->proxy, 1);
  close(b);
  wait_connections(f->proxy, 0);
  assert_int_equal(relock_test_proxy_accepted(f->proxy), 2);
}

/* Counted as soon as connect() has returned: no need to poll for it. */
static void test_counts_a_connection_once_connect_returns(void **state) {
  fixture_t *f = *state;
  int fds[5];
  for (int i = 0; i < 5; i++) {
    fds[i] = dial(f->port);
    assert_int_equal(relock_test_proxy_connections(f->proxy), i + 1);
    assert_int_equal(relock_test_proxy_accepted(f->proxy), (uint64_t)i + 1);
  }
  for (int i = 0; i < 5; i++) close(fds[i]);
  wait_connections(f->proxy, 0);
}

/* watch counts the text in what the upstream sends back, over reads and
 * connections, overlapping occurrences included; a new text counts from 0,
 * and the stream up is not looked at. */
static void test_watch_counts_text_sent_down(void **state) {
  fixture_t *f = *state;
  relock_test_proxy_watch(f->proxy, "-BUSY ");
  int a = dial(f->port), b = dial(f->port);
  round_trip(a, "+OK\r\n-BU"); /* split over two reads */
  assert_int_equal(relock_test_proxy_seen(f->proxy), 0);
  round_trip(a, "SY Redis is busy\r\n");
  assert_int_equal(relock_test_proxy_seen(f->proxy), 1);
  round_trip(b, "-BUSY x\r\n-BUSY y\r\n");
  assert_int_equal(relock_test_proxy_seen(f->proxy), 3);
  relock_test_proxy_watch(f->proxy, "aa");
  assert_int_equal(relock_test_proxy_seen(f->proxy), 0);
  round_trip(a, "aaaa");
  assert_int_equal(relock_test_proxy_seen(f->proxy), 3);
  relock_test_proxy_watch(f->proxy, NULL);
  round_trip(b, "aaaa -BUSY ");
  assert_int_equal(relock_test_proxy_seen(f->proxy), 0);
  close(a);
  close(b);
}

/* More than the proxy buffers, both ways at once, byte for byte: the
 * bounded buffers fill, wrap around and drain. */
static void test_bulk_both_ways(void **state) {
  fixture_t *f = *state;
  size_t total = relock_test_under_valgrind() ? (size_t)1 << 20 : (size_t)8 << 20;
  int fd = dial(f->port);
  assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
  char out[7919], in[65536]; /* a prime, so writes straddle the ring's end */
  size_t sent = 0, got = 0;
  int64_t deadline = now_ms() + 6 * patience_ms();
  while (got < total) {
    assert_true(now_ms() < deadline);
    struct pollfd pfd = {fd, (short)(POLLIN | (sent < total ? POLLOUT : 0)), 0};
    assert_true(poll(&pfd, 1, 1000) >= 0);
    if (sent < total && (pfd.revents & POLLOUT)) {
      size_t len = total - sent < sizeof out ? total - sent : sizeof out;
      for (size_t i = 0; i < len; i++) out[i] = (char)((sent + i) * 31 % 251);
      ssize_t n = send(fd, out, len, MSG_NOSIGNAL);
      if (n > 0) sent += (size_t)n;
      else assert_int_equal(errno, EAGAIN);
    }
    if (pfd.revents & POLLIN) {
      ssize_t n = recv(fd, in, sizeof in, 0);
      assert_true(n > 0 || (n < 0 && errno == EAGAIN));
      for (ssize_t i = 0; i < n; i++) assert_int_equal(in[i], (char)((got + (size_t)i) * 31 % 251));
      if (n > 0) got += (size_t)n;
    }
  }
  assert_int_equal(got, total);
  close(fd);
  wait_connections(f->proxy, 0);
}

/* An end of stream goes through as a half-close: the client shuts down its
 * write side, still gets its echo, then the server's close as EOF. */
static void test_passes_half_close_on(void **state) {
  fixture_t *f = *state;
  int fd = dial(f->port);
  send_str(fd, "last words");
  assert_int_equal(shutdown(fd, SHUT_WR), 0);
  expect_str(fd, "last words");
  char buf[16];
  assert_int_equal(recv_within(fd, buf, sizeof buf, patience_ms()), 0);
  wait_connections(f->proxy, 0);
  close(fd);
}

static void test_cut_closes_every_connection(void **state) {
  fixture_t *f = *state;
  int a = dial(f->port), b = dial(f->port);
  round_trip(a, "a");
  round_trip(b, "b");
  relock_test_proxy_cut(f->proxy);
  assert_int_equal(relock_test_proxy_connections(f->proxy), 0);
  expect_closed(a);
  expect_closed(b);
  close(a);
  close(b);
  /* New connections work after a cut. */
  int c = dial(f->port);
  round_trip(c, "after the cut");
  assert_int_equal(relock_test_proxy_connections(f->proxy), 1);
  assert_int_equal(relock_test_proxy_accepted(f->proxy), 3);
  close(c);
}

/* A client whose connect() returned just before the cut is cut too, even if
 * the proxy had not accepted it yet. */
static void test_cut_takes_unaccepted_connections(void **state) {
  fixture_t *f = *state;
  for (int i = 0; i < 5; i++) {
    int fd = dial(f->port);
    relock_test_proxy_cut(f->proxy);
    expect_closed(fd);
    close(fd);
  }
  assert_int_equal(relock_test_proxy_accepted(f->proxy), 5);
}

static void test_reset_sends_rst(void **state) {
  fixture_t *f = *state;
  int a = dial(f->port);
  round_trip(a, "a");
  relock_test_proxy_reset(f->proxy);
  assert_int_equal(relock_test_proxy_connections(f->proxy), 0);
  char buf[16];
  assert_int_equal(recv_within(a, buf, sizeof buf, patience_ms()), -1);
  assert_int_equal(errno, ECONNRESET);
  close(a);
  int b = dial(f->port);
  round_trip(b, "after the reset");
  close(b);
}

static void test_stall_holds_data_until_released(void **state) {
  fixture_t *f = *state;
  int a = dial(f->port);
  round_trip(a, "before");
  relock_test_proxy_stall(f->proxy, 1);
  send_str(a, "held");
  expect_silence(a);
  /* A connection made during the stall is accepted, but silent too. */
  int b = dial(f->port);
  send_str(b, "late");
  expect_silence(b);
  assert_int_equal(relock_test_proxy_connections(f->proxy), 2);
  /* A client that leaves during the stall is not seen to leave. */
  int c = dial(f->port);
  close(c);
  sleep_ms(50);
  assert_int_equal(relock_test_proxy_connections(f->proxy), 3);
  relock_test_proxy_stall(f->proxy, 0);
  expect_str(a, "held");
  expect_str(b, "late");
  round_trip(a, "after");
  close(a);
  close(b);
  wait_connections(f->proxy, 0);
}

static void test_cut_during_a_stall(void **state) {
  fixture_t *f = *state;
  int a = dial(f->port);
  relock_test_proxy_stall(f->proxy, 1);
  send_str(a, "x");
  relock_test_proxy_cut(f->proxy);
  expect_closed(a);
  close(a);
  relock_test_proxy_stall(f->proxy, 0);
  int b = dial(f->port);
  round_trip(b, "fine");
  close(b);
}

/* Each chunk is held for the delay in each direction: a round trip takes at
 * least twice the delay, measured from when each chunk was sent. */
static void test_delay_holds_each_chunk(void **state) {
  fixture_t *f = *state;
  const int delay = 150;
  int fd = dial(f->port);
  round_trip(fd, "warm");
  relock_test_proxy_delay(f->proxy, delay);
  int64_t sent_at[3];
  const char *chunks[3] = {"1", "2", "3"};
  for (int i = 0; i < 3; i++) {
    sent_at[i] = now_ms();
    send_str(fd, chunks[i]);
    sleep_ms(40);
  }
  for (int i = 0; i < 3; i++) {
    expect_str(fd, chunks[i]); /* in order, one byte at a time */
    assert_true(now_ms() - sent_at[i] >= 2 * delay);
  }
  relock_test_proxy_delay(f->proxy, 0);
  int64_t t0 = now_ms();
  round_trip(fd, "fast again");
  assert_true(now_ms() - t0 < 2 * delay);
  close(fd);
}

static void test_refuse_closes_new_connections(void **state) {
  fixture_t *f = *state;
  int a = dial(f->port);
  round_trip(a, "kept");
  relock_test_proxy_refuse(f->proxy, 1);
  int b = dial(f->port);
  expect_closed(b);
  close(b);
  round_trip(a, "still kept");
  assert_int_equal(relock_test_proxy_accepted(f->proxy), 2);
  assert_int_equal(relock_test_proxy_connections(f->proxy), 1);
  assert_int_equal(echo_accepted(f->echo), 1);
  relock_test_proxy_refuse(f->proxy, 0);
  int c = dial(f->port);
  round_trip(c, "welcome back");
  close(a);
  close(c);
}

static void test_blackhole_accept_swallows_new_connections(void **state) {
  fixture_t *f = *state;
  relock_test_proxy_blackhole_accept(f->proxy, 1);
  int a = dial(f->port);
  send_str(a, "PING");
  expect_silence(a);
  assert_int_equal(relock_test_proxy_connections(f->proxy), 1);
  assert_int_equal(relock_test_proxy_accepted(f->proxy), 1);
  assert_int_equal(echo_accepted(f->echo), 0);
  relock_test_proxy_blackhole_accept(f->proxy, 0);
  /* New connections are forwarded again; the swallowed one stays silent. */
  int b = dial(f->port);
  round_trip(b, "PONG");
  expect_silence(a);
  /* The proxy sees the client of a swallowed connection leave. */
  close(a);
  wait_connections(f->proxy, 1);
  /* And cut closes swallowed connections. */
  relock_test_proxy_blackhole_accept(f->proxy, 1);
  int c = dial(f->port);
  relock_test_proxy_cut(f->proxy);
  expect_closed(c);
  expect_closed(b);
  close(b);
  close(c);
}

static int dial_nonblocking(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_in sin;
  memset(&sin, 0, sizeof sin);
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sin.sin_port = htons((uint16_t)port);
  int rc = connect(fd, (struct sockaddr *)&sin, sizeof sin);
  assert_true(rc == 0 || errno == EINPROGRESS);
  return fd;
}

static void test_hang_connect_makes_connect_hang(void **state) {
  fixture_t *f = *state;
  int old = dial(f->port);
  assert_int_equal(relock_test_proxy_hang_connect(f->proxy, 1), 0);
  int fd = dial_nonblocking(f->port);
  struct pollfd pfd = {fd, POLLOUT, 0};
  assert_int_equal(poll(&pfd, 1, QUIET_MS), 0); /* neither connected nor refused */
  round_trip(old, "existing connections carry on");
  assert_int_equal(relock_test_proxy_connections(f->proxy), 1);
  assert_int_equal(relock_test_proxy_hang_connect(f->proxy, 0), 0);
  /* The hanging connect gets through on its next SYN retry (after 1 s). */
  assert_int_equal(poll(&pfd, 1, patience_ms()), 1);
  int err = -1;
  socklen_t len = sizeof err;
  assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
  assert_int_equal(err, 0);
  int flags = fcntl(fd, F_GETFL);
  assert_int_equal(fcntl(fd, F_SETFL, flags & ~O_NONBLOCK), 0);
  round_trip(fd, "through at last");
  /* The proxy's own connection filling the queue is not counted. */
  assert_int_equal(relock_test_proxy_accepted(f->proxy), 2);
  assert_int_equal(relock_test_proxy_connections(f->proxy), 2);
  close(fd);
  close(old);
}

static void test_upstream_down_closes_the_client(void **state) {
  (void)state;
  int port;
  int lfd = listen_loopback(&port);
  assert_true(lfd >= 0);
  close(lfd); /* nothing listens there now */
  relock_test_proxy_t *p = relock_test_proxy_start("localhost", port);
  assert_non_null(p);
  int fd = dial(relock_test_proxy_port(p));
  expect_closed(fd);
  close(fd);
  wait_connections(p, 0);
  assert_int_equal(relock_test_proxy_accepted(p), 1);
  relock_test_proxy_stop(p);
}

static void test_start_rejects_a_bad_upstream(void **state) {
  (void)state;
  assert_null(relock_test_proxy_start(NULL, 6379));
  assert_null(relock_test_proxy_start("127.0.0.1", 0));
  assert_null(relock_test_proxy_start("127.0.0.1", 70000));
  relock_test_proxy_stop(NULL);
}

/* Stop with connections in every state: forwarding with data in flight,
 * stalled, swallowed, hanging. Valgrind and ASan check that nothing leaks. */
static void test_stop_with_live_connections(void **state) {
  fixture_t *f = *state;
  int a = dial(f->port);
  round_trip(a, "a");
  send_str(a, "in flight");
  relock_test_proxy_delay(f->proxy, 10000);
  send_str(a, "delayed");
  relock_test_proxy_stall(f->proxy, 1);
  int b = dial(f->port);
  send_str(b, "stalled");
  relock_test_proxy_stall(f->proxy, 0);
  relock_test_proxy_blackhole_accept(f->proxy, 1);
  int c = dial(f->port);
  assert_int_equal(relock_test_proxy_hang_connect(f->proxy, 1), 0);
  int d = dial_nonblocking(f->port);
  assert_int_equal(relock_test_proxy_connections(f->proxy), 3);
  relock_test_proxy_stop(f->proxy);
  f->proxy = NULL;
  int fds[] = {b, c}; /* a may get its "in flight" echo before the close */
  for (int i = 0; i < 2; i++) {
    expect_closed(fds[i]);
    close(fds[i]);
  }
  close(a);
  close(d);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_forwards_and_counts, setup, teardown),
    cmocka_unit_test_setup_teardown(test_counts_a_connection_once_connect_returns, setup, teardown),
    cmocka_unit_test_setup_teardown(test_bulk_both_ways, setup, teardown),
    cmocka_unit_test_setup_teardown(test_watch_counts_text_sent_down, setup, teardown),
    cmocka_unit_test_setup_teardown(test_passes_half_close_on, setup, teardown),
    cmocka_unit_test_setup_teardown(test_cut_closes_every_connection, setup, teardown),
    cmocka_unit_test_setup_teardown(test_cut_takes_unaccepted_connections, setup, teardown),
    cmocka_unit_test_setup_teardown(test_reset_sends_rst, setup, teardown),
    cmocka_unit_test_setup_teardown(test_stall_holds_data_until_released, setup, teardown),
    cmocka_unit_test_setup_teardown(test_cut_during_a_stall, setup, teardown),
    cmocka_unit_test_setup_teardown(test_delay_holds_each_chunk, setup, teardown),
    cmocka_unit_test_setup_teardown(test_refuse_closes_new_connections, setup, teardown),
    cmocka_unit_test_setup_teardown(test_blackhole_accept_swallows_new_connections, setup, teardown),
    cmocka_unit_test_setup_teardown(test_hang_connect_makes_connect_hang, setup, teardown),
    cmocka_unit_test(test_upstream_down_closes_the_client),
    cmocka_unit_test(test_start_rejects_a_bad_upstream),
    cmocka_unit_test_setup_teardown(test_stop_with_live_connections, setup, teardown),
};

RELOCK_TEST_MAIN(tests, NULL, NULL)
