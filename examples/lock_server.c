/* A small TCP server that takes a distributed lock per request without ever
 * blocking its libev loop: the relock client runs on the server's own loop,
 * and each step of a request is a future whose callback starts the next.
 *
 * A client sends one line, the name of a lock. The server acquires that lock
 * for the request (the owner id is the request's number; it waits at most
 * 2 s, and the watchdog keeps the lease while the lock is held), runs
 * its critical section (INCR counter:NAME), releases the lock, answers
 *   OK <counter>     the critical section ran; the counter it left
 *   BUSY             the lock was not free within 2 s
 *   ERR <message>    something failed
 * and closes the connection.
 *
 *   examples/lock_server [--requests N] [PORT [redis://host:port/db]]
 *       PORT 0 (the default) picks a free port; the port is printed on start.
 *       --requests N exits after N requests.
 *   printf 'mylock\n' | nc 127.0.0.1 PORT
 *
 * Outside this tree it builds with libev named too, since it runs the loop
 * itself: cc lock_server.c $(pkg-config --cflags --libs relock) -lev
 *
 * SIGINT or SIGTERM stops it: it stops accepting, lets the requests in
 * progress finish (a second signal stops waiting for them), closes the
 * client and exits. A client that resets its connection while its request
 * waits for the lock cancels the wait; in every case a connection's state
 * lives until its operation has completed, so no callback sees freed memory. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ev.h>

#include <relock/relock.h>

#define REQUEST_MAX 256     /* bytes of a request line, newline included */
#define WAIT_MS 2000        /* how long a request waits for its lock */
#define READ_TIMEOUT_S 10.0 /* how long a request line may take to arrive */
#define DRAIN_TIMEOUT_S 2.0 /* how long the peer may take to close after the reply */

typedef struct server server_t;

/* Where a connection is; each of LOCKING, LOCKED and UNLOCKING has one
 * future in flight. */
typedef enum { READING, LOCKING, LOCKED, UNLOCKING, REPLYING, DRAINING } step_t;

typedef struct conn {
  server_t *srv;
  struct conn *prev, *next; /* in srv->conns */
  int fd;
  ev_io io;                 /* the request, the peer going away, the reply */
  ev_timer timeout;         /* for the request line, and for the peer to close */
  step_t step;
  int peer_gone;            /* nobody left to answer */
  uint64_t owner;           /* the lock owner id of this request */
  relock_lock_t *lock;
  relock_future_t *op;      /* the future in flight (a reference), or NULL */
  size_t len, sent;         /* of in, then of out */
  char in[REQUEST_MAX];
  char out[192];
} conn_t;

struct server {
  struct ev_loop *loop;
  relock_client_t *client;
  int listen_fd;
  ev_io accept_w;
  ev_timer accept_pause;    /* out of file descriptors: try again later */
  ev_signal sigint_w, sigterm_w;
  conn_t *conns;
  uint64_t next_owner;
  long limit;               /* --requests (0: none) */
  long requests, ok, busy, failed, gone; /* gone: the peer reset before its reply */
  int stopping, closing, closed;
};

static void step_done(conn_t *c, int err, const char *msg, int64_t value);
static void maybe_close_client(server_t *srv);
static void server_stop(server_t *srv);

/* -- connections -------------------------------------------------------------*/

static void conn_free(conn_t *c) {
  server_t *srv = c->srv;
  ev_io_stop(srv->loop, &c->io);
  ev_timer_stop(srv->loop, &c->timeout);
  close(c->fd);
  relock_lock_free(c->lock);
  if (c->prev != NULL)
    c->prev->next = c->next;
  else
    srv->conns = c->next;
  if (c->next != NULL)
    c->next->prev = c->prev;
  free(c);
  if (srv->closed && srv->conns == NULL)
    ev_break(srv->loop, EVBREAK_ALL);
  else
    maybe_close_client(srv);
}

/* Sets the reply: one line, whatever the message holds. */
__attribute__((format(printf, 2, 3))) static void set_reply(conn_t *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(c->out, sizeof c->out - 1, fmt, ap);
  va_end(ap);
  size_t len = n < 0 ? 0 : (size_t)n < sizeof c->out - 2 ? (size_t)n : sizeof c->out - 2;
  for (size_t i = 0; i < len; i++)
    if (c->out[i] == '\n' || c->out[i] == '\r')
      c->out[i] = ' ';
  c->out[len++] = '\n';
  c->len = len;
  c->sent = 0;
}

/* Sends the reply set before; the connection closes once it is out. */
static void send_reply(conn_t *c) {
  server_t *srv = c->srv;
  if (c->peer_gone) {
    srv->gone++;
    conn_free(c);
    return;
  }
  srv->ok += strncmp(c->out, "OK ", 3) == 0;
  srv->busy += strncmp(c->out, "BUSY", 4) == 0;
  srv->failed += strncmp(c->out, "ERR ", 4) == 0;
  c->step = REPLYING;
  ev_timer_stop(srv->loop, &c->timeout);
  ev_io_stop(srv->loop, &c->io);
  ev_io_set(&c->io, c->fd, EV_WRITE);
  ev_io_start(srv->loop, &c->io);
}

static void on_write(conn_t *c) {
  server_t *srv = c->srv;
  ssize_t n = send(c->fd, c->out + c->sent, c->len - c->sent, MSG_NOSIGNAL);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return;
  if (n > 0 && (c->sent += (size_t)n) < c->len)
    return;
  if (n <= 0 || shutdown(c->fd, SHUT_WR) != 0) { /* the peer is gone */
    conn_free(c);
    return;
  }
  /* Closing with unread input would reset the connection, and the peer could
   * lose the reply: read until it closes too (or for a while). */
  c->step = DRAINING;
  ev_io_stop(srv->loop, &c->io);
  ev_io_set(&c->io, c->fd, EV_READ);
  ev_io_start(srv->loop, &c->io);
  ev_timer_set(&c->timeout, DRAIN_TIMEOUT_S, 0.0);
  ev_timer_start(srv->loop, &c->timeout);
}

/* -- a request: lock, critical section, unlock, reply -------------------------*/

static void on_op_done(relock_future_t *f, void *arg) {
  conn_t *c = arg;
  c->op = NULL;
  int err = relock_future_error(f);
  int64_t value = 0;
  char msg[128] = "";
  if (err == 0 && c->step == LOCKED) { /* INCR's reply */
    const relock_reply_t *r = relock_future_reply(f);
    if (r != NULL && r->type == RELOCK_REPLY_INTEGER)
      value = r->integer;
    else
      err = RELOCK_EPROTO;
  } else if (err == 0) {
    value = relock_future_bool(f);
  }
  if (err != 0)
    snprintf(msg, sizeof msg, "%s", relock_future_message(f));
  relock_future_release(f);
  step_done(c, err, msg, value);
}

/* Waits for f, the operation of the step c enters. May complete at once and
 * free c: the caller must not touch c after this. */
static void start_step(conn_t *c, step_t step, relock_future_t *f) {
  c->step = step;
  if (f == NULL) {
    step_done(c, RELOCK_ENOMEM, relock_strerror(RELOCK_ENOMEM), 0);
    return;
  }
  c->op = f;
  if (relock_future_on_done(f, on_op_done, c) != 0) {
    c->op = NULL;
    relock_future_cancel(f); /* nobody would see it: an acquired lock is given back */
    relock_future_release(f);
    step_done(c, RELOCK_ENOMEM, relock_strerror(RELOCK_ENOMEM), 0);
  }
}

static void step_done(conn_t *c, int err, const char *msg, int64_t value) {
  server_t *srv = c->srv;
  switch (c->step) {
  case LOCKING:
    if (err != 0) {
      set_reply(c, "ERR %s", msg);
    } else if (!value) {
      set_reply(c, "BUSY");
    } else { /* held: the critical section */
      start_step(c, LOCKED, relock_client_commandf_async(srv->client, "INCR counter:%s", relock_lock_name(c->lock)));
      return;
    }
    break;
  case LOCKED:
    if (err != 0)
      set_reply(c, "ERR %s", msg);
    else
      set_reply(c, "OK %lld", (long long)value);
    start_step(c, UNLOCKING, relock_lock_unlock_async(c->lock, c->owner));
    return;
  case UNLOCKING:
    if (err != 0) { /* e.g. RELOCK_ELOST: the section may not have been alone */
      fprintf(stderr, "lock_server: release of %s by %llu: %s\n", relock_lock_name(c->lock),
              (unsigned long long)c->owner, msg);
      set_reply(c, "ERR %s", msg);
    }
    break;
  case READING:
  case REPLYING:
  case DRAINING:
    break;
  }
  send_reply(c);
}

static void start_request(conn_t *c, size_t len) {
  server_t *srv = c->srv;
  while (len > 0 && (c->in[len - 1] == '\n' || c->in[len - 1] == '\r'))
    len--;
  c->in[len] = '\0';
  c->step = LOCKING;
  ev_timer_stop(srv->loop, &c->timeout);
  if (++srv->requests == srv->limit)
    server_stop(srv); /* as a signal would: this request still completes */
  relock_error_t err;
  if (len == 0 || memchr(c->in, '\0', len) != NULL) {
    set_reply(c, "ERR a request is one line: a lock name");
  } else if ((c->lock = relock_lock_new(srv->client, c->in, &err)) == NULL) {
    set_reply(c, "ERR %s", relock_strerror(err.code));
  } else {
    c->owner = ++srv->next_owner;
    start_step(c, LOCKING, relock_lock_lock_async(c->lock, c->owner, WAIT_MS, RELOCK_INFINITE));
    return;
  }
  send_reply(c);
}

/* Reading the request line; then watching for the peer going away; after
 * the reply, waiting for it to close. */
static void on_read(conn_t *c) {
  char discard[512];
  char *buf = c->step == READING ? c->in + c->len : discard;
  size_t room = c->step == READING ? sizeof c->in - 1 - c->len : sizeof discard;
  ssize_t n = recv(c->fd, buf, room, 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return;
  if (c->step == DRAINING) {
    if (n <= 0)
      conn_free(c);
    return;
  }
  if (c->step != READING) {
    if (n > 0) /* more than one line: ignored */
      return;
    ev_io_stop(c->srv->loop, &c->io); /* a half-close still gets its answer */
    if (n < 0) {                       /* reset: nobody to answer */
      c->peer_gone = 1;
      if (c->step == LOCKING && c->op != NULL)
        relock_future_cancel(c->op); /* completes it: c may be gone now */
    }
    return;
  }
  if (n < 0 || (n == 0 && c->len == 0)) { /* left before asking */
    conn_free(c);
    return;
  }
  char *nl = memchr(buf, '\n', (size_t)n);
  c->len += (size_t)n;
  if (nl != NULL)
    start_request(c, (size_t)(nl - c->in) + 1);
  else if (n == 0) /* the peer's last line needs no newline */
    start_request(c, c->len);
  else if (c->len == sizeof c->in - 1) {
    set_reply(c, "ERR request line too long");
    send_reply(c);
  }
}

static void on_conn_io(struct ev_loop *loop, ev_io *w, int revents) {
  (void)loop;
  conn_t *c = w->data;
  if (revents & EV_WRITE)
    on_write(c);
  else
    on_read(c);
}

static void on_conn_timeout(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  conn_t *c = w->data;
  if (c->step == DRAINING) {
    conn_free(c);
    return;
  }
  set_reply(c, "ERR no request line within %.0f s", READ_TIMEOUT_S);
  send_reply(c);
}

static void conn_new(server_t *srv, int fd) {
  conn_t *c = calloc(1, sizeof(*c));
  if (c == NULL) {
    close(fd);
    return;
  }
  c->srv = srv;
  c->fd = fd;
  c->step = READING;
  ev_io_init(&c->io, on_conn_io, fd, EV_READ);
  c->io.data = c;
  ev_timer_init(&c->timeout, on_conn_timeout, READ_TIMEOUT_S, 0.0);
  c->timeout.data = c;
  c->next = srv->conns;
  if (c->next != NULL)
    c->next->prev = c;
  srv->conns = c;
  ev_io_start(srv->loop, &c->io);
  ev_timer_start(srv->loop, &c->timeout);
}

/* -- the server --------------------------------------------------------------*/

static void on_accept(struct ev_loop *loop, ev_io *w, int revents) {
  (void)revents;
  server_t *srv = w->data;
  while (!srv->stopping) {
    int fd = accept(srv->listen_fd, NULL, NULL);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        perror("lock_server: accept"); /* pause rather than spin */
        ev_io_stop(loop, &srv->accept_w);
        ev_timer_start(loop, &srv->accept_pause);
      }
      return; /* EAGAIN: all taken; others (ECONNABORTED, ...) concern one peer */
    }
    if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0) {
      close(fd);
      continue;
    }
    conn_new(srv, fd);
  }
}

static void on_accept_pause(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)revents;
  server_t *srv = w->data;
  if (!srv->stopping)
    ev_io_start(loop, &srv->accept_w);
}

/* Every request has completed by now (the close failed what was in flight);
 * after a forced close some replies may still be going out: the last one
 * out ends the loop (conn_free). */
static void on_client_closed(relock_client_t *client, void *arg) {
  (void)client;
  server_t *srv = arg;
  srv->closed = 1;
  ev_signal_stop(srv->loop, &srv->sigint_w);
  ev_signal_stop(srv->loop, &srv->sigterm_w);
  if (srv->conns == NULL)
    ev_break(srv->loop, EVBREAK_ALL);
}

static void close_client(server_t *srv) {
  if (srv->closing)
    return;
  srv->closing = 1;
  relock_client_close(srv->client, on_client_closed, srv); /* fails what is in flight: ERR client closed */
}

/* Once stopping and every connection is done, the client closes. */
static void maybe_close_client(server_t *srv) {
  if (srv->stopping && srv->conns == NULL)
    close_client(srv);
}

static void server_stop(server_t *srv) {
  srv->stopping = 1;
  ev_io_stop(srv->loop, &srv->accept_w);
  ev_timer_stop(srv->loop, &srv->accept_pause);
  if (srv->listen_fd >= 0)
    close(srv->listen_fd);
  srv->listen_fd = -1;
  for (conn_t *c = srv->conns, *next; c != NULL; c = next) {
    next = c->next;
    if (c->step == READING) /* no request yet: none will be taken */
      conn_free(c);
  }
  maybe_close_client(srv);
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents) {
  (void)loop;
  (void)revents;
  server_t *srv = w->data;
  if (!srv->stopping) {
    server_stop(srv);
  } else if (!srv->closing) {
    fprintf(stderr, "lock_server: not waiting for the requests in progress\n");
    close_client(srv);
  }
}

static int listen_on(server_t *srv, int port) {
  struct sockaddr_in sa;
  socklen_t salen = sizeof sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 128) != 0 ||
      fcntl(fd, F_SETFL, O_NONBLOCK) != 0 || getsockname(fd, (struct sockaddr *)&sa, &salen) != 0) {
    perror("lock_server: listen on 127.0.0.1");
    if (fd >= 0)
      close(fd);
    return -1;
  }
  srv->listen_fd = fd;
  printf("lock_server: listening on 127.0.0.1:%d\n", ntohs(sa.sin_port));
  fflush(stdout);
  return 0;
}

static int usage(void) {
  fprintf(stderr, "usage: lock_server [--requests N] [PORT [redis://host:port/db]]\n");
  return 2;
}

int main(int argc, char **argv) {
  server_t srv;
  memset(&srv, 0, sizeof srv);
  srv.listen_fd = -1;
  long port = 0;
  const char *url = "redis://127.0.0.1:6379";
  int npos = 0;
  for (int i = 1; i < argc; i++) {
    char *end;
    if (strcmp(argv[i], "--requests") == 0 && i + 1 < argc) {
      srv.limit = strtol(argv[++i], &end, 10);
      if (*end != '\0' || srv.limit <= 0)
        return usage();
    } else if (argv[i][0] == '-' || npos == 2) {
      return usage();
    } else if (npos++ == 0) {
      port = strtol(argv[i], &end, 10);
      if (*end != '\0' || port < 0 || port > 65535)
        return usage();
    } else {
      url = argv[i];
    }
  }

  relock_error_t err;
  relock_options_t *opts = relock_options_new(&err);
  if (opts == NULL) {
    fprintf(stderr, "lock_server: %s\n", err.message);
    return 1;
  }
  if (relock_options_set_url(opts, url, &err) != 0) {
    fprintf(stderr, "lock_server: bad URL: %s\n", err.message);
    relock_options_free(opts);
    return 2;
  }
  if ((srv.loop = EV_DEFAULT) == NULL) {
    relock_options_free(opts);
    fprintf(stderr, "lock_server: cannot make the libev loop\n");
    return 1;
  }
  srv.client = relock_client_new(srv.loop, opts, &err); /* on the server's loop */
  relock_options_free(opts);
  if (srv.client == NULL) {
    fprintf(stderr, "lock_server: cannot create client: %s\n", err.message);
    return 1;
  }
  if (listen_on(&srv, (int)port) != 0) {
    relock_client_free(srv.client);
    return 1;
  }

  ev_io_init(&srv.accept_w, on_accept, srv.listen_fd, EV_READ);
  ev_timer_init(&srv.accept_pause, on_accept_pause, 0.5, 0.0);
  ev_signal_init(&srv.sigint_w, on_signal, SIGINT);
  ev_signal_init(&srv.sigterm_w, on_signal, SIGTERM);
  srv.accept_w.data = srv.accept_pause.data = srv.sigint_w.data = srv.sigterm_w.data = &srv;
  ev_io_start(srv.loop, &srv.accept_w);
  ev_signal_start(srv.loop, &srv.sigint_w);
  ev_signal_start(srv.loop, &srv.sigterm_w);

  ev_run(srv.loop, 0);

  relock_client_free(srv.client);
  int left = 0;
  for (conn_t *c = srv.conns; c != NULL; c = c->next)
    left++;
  fprintf(stderr, "lock_server: %ld requests: %ld ok, %ld busy, %ld failed, %ld gone%s\n", srv.requests, srv.ok,
          srv.busy, srv.failed, srv.gone, left > 0 ? " (connections left over!)" : "");
  ev_loop_destroy(srv.loop);
  return left > 0 ? 1 : 0;
}
