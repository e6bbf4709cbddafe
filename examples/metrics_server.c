/* A relock client's statistics for Prometheus: a small HTTP/1.1 server on
 * the program's own libev loop, beside an embedded relock client, serving
 * the client's relock_stats_prometheus text. To have something to count,
 * the program takes locks of its own: periodically (--work), and on request.
 *
 *   RELOCK_URL=redis://host:port/db examples/metrics_server [--listen HOST:PORT] [--labels TEXT]
 *       [--work NAME [--every MS]] [--read-timeout MS]
 *     Redis: RELOCK_URL (or RELOCK_URL_FILE), else redis://127.0.0.1:6379.
 *     --listen        where to serve, 127.0.0.1:0 by default (port 0: a free
 *                     one); "listening on HOST:PORT" is printed on stdout
 *     --labels        added to every sample, e.g. 'service="billing"'
 *     --work NAME     takes and releases lock NAME every MS ms (1000),
 *                     waiting at most MS for it
 *     --read-timeout  how long a request may take to arrive (10000 ms); its
 *                     reply may stall that long too
 *
 *   curl http://127.0.0.1:PORT/metrics
 *       200, Content-Type: text/plain; version=0.0.4; charset=utf-8
 *   curl -X POST 'http://127.0.0.1:PORT/lock/NAME?wait=MS'
 *       takes lock NAME (waiting at most MS ms, 0 by default: one try) and
 *       releases it: 200 acquired, 409 not acquired in time, 503 an error.
 *       Lock names are letters, digits and - _ . : (no escapes).
 * Other paths: 404; other methods: 405; a malformed request: 400; a request
 * head over 8 KiB: 431; one that takes too long: 408. Each connection gets
 * one response, then closes. A connection that sends nothing holds only
 * its own state: the others are served meanwhile.
 *
 * Outside this tree it builds with libev named too, since it runs the loop
 * itself: cc metrics_server.c $(pkg-config --cflags --libs relock) -lev
 *
 * SIGINT or SIGTERM stops it: it stops accepting, lets the locks in
 * progress and the responses being sent finish (a second signal stops
 * waiting for the locks), closes the client and exits 0. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
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

#define HEAD_MAX 8192           /* bytes of a request's line and headers */
#define WAIT_MAX_MS 60000       /* the most a POST /lock may wait */
#define DRAIN_TIMEOUT_S 2.0     /* how long the peer may take to close after the response */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef struct server server_t;

/* Where a connection is: LOCKING and UNLOCKING have a future in flight. */
typedef enum { READING, LOCKING, UNLOCKING, WRITING, DRAINING } step_t;

typedef struct conn {
  server_t *srv;
  struct conn *prev, *next; /* in srv->conns */
  int fd;
  ev_io io;
  ev_timer timeout;         /* the request's arrival; then a stalled response; then the peer's close */
  step_t step;
  int head_only;            /* a HEAD request: the response without its body */
  uint64_t owner;           /* POST /lock: the owner id of this request */
  int64_t wait_ms;
  relock_lock_t *lock;
  char *out;                /* the response (malloc'd) */
  size_t out_len, sent;
  size_t len;               /* of in */
  char in[HEAD_MAX + 1];
} conn_t;

struct server {
  struct ev_loop *loop;
  relock_client_t *client;
  const char *labels;
  double read_timeout_s;
  int listen_fd;
  ev_io accept_w;
  ev_timer accept_pause;    /* out of file descriptors: try again later */
  ev_signal sigint_w, sigterm_w;
  conn_t *conns;
  uint64_t next_owner;
  char *body;               /* the last exposition, kept to be reused */
  size_t body_cap;
  /* --work */
  relock_lock_t *work_lock;
  int64_t work_every_ms;
  ev_timer work_w;
  relock_future_t *work_op; /* in flight, or NULL */
  int work_unlocking;       /* work_op is the release */
  uint64_t work_owner;
  long work_ok, work_busy, work_failed;
  long responses;
  int stopping, closing, closed;
};

static void maybe_close_client(server_t *srv);

/* -- connections ---------------------------------------------------------------*/

static void conn_free(conn_t *c) {
  server_t *srv = c->srv;
  ev_io_stop(srv->loop, &c->io);
  ev_timer_stop(srv->loop, &c->timeout);
  close(c->fd);
  relock_lock_free(c->lock);
  free(c->out);
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

/* Sends status, the extra header lines (each ending in \r\n) and body
 * (body_len bytes; only its length for a HEAD request); the connection
 * closes once it is out. */
static void respond(conn_t *c, const char *status, const char *type, const char *extra, const char *body,
                    size_t body_len) {
  int head_only = c->head_only;
  server_t *srv = c->srv;
  char head[512];
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n", status,
                   type, body_len, extra);
  size_t head_len = n < 0 || (size_t)n >= sizeof head ? 0 : (size_t)n;
  size_t len = head_len + (head_only ? 0 : body_len);
  free(c->out);
  c->out = head_len == 0 ? NULL : malloc(len);
  if (c->out == NULL) { /* nothing to say it with */
    c->out_len = 0;
    conn_free(c);
    return;
  }
  memcpy(c->out, head, head_len);
  if (!head_only)
    memcpy(c->out + head_len, body, body_len);
  c->out_len = len;
  c->sent = 0;
  c->step = WRITING;
  srv->responses++;
  ev_io_stop(srv->loop, &c->io);
  ev_io_set(&c->io, c->fd, EV_WRITE);
  ev_io_start(srv->loop, &c->io);
  /* restarted at each write that makes progress: a peer that stops
   * reading is let go after the read timeout */
  ev_timer_stop(srv->loop, &c->timeout);
  ev_timer_set(&c->timeout, srv->read_timeout_s, srv->read_timeout_s);
  ev_timer_start(srv->loop, &c->timeout);
  maybe_close_client(srv); /* when stopping, this may have been the last lock in flight */
}

/* A short plain-text response: one line, whatever the message holds. */
__attribute__((format(printf, 4, 5))) static void respond_text(conn_t *c, const char *status, const char *extra,
                                                               const char *fmt, ...) {
  char body[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(body, sizeof body - 1, fmt, ap);
  va_end(ap);
  size_t len = n < 0 ? 0 : (size_t)n < sizeof body - 2 ? (size_t)n : sizeof body - 2;
  for (size_t i = 0; i < len; i++)
    if (body[i] == '\n' || body[i] == '\r')
      body[i] = ' ';
  body[len++] = '\n';
  respond(c, status, "text/plain; charset=utf-8", extra, body, len);
}

static void on_write(conn_t *c) {
  server_t *srv = c->srv;
  ssize_t n = send(c->fd, c->out + c->sent, c->out_len - c->sent, MSG_NOSIGNAL);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return;
  if (n > 0) {
    ev_timer_again(srv->loop, &c->timeout);
    if ((c->sent += (size_t)n) < c->out_len)
      return;
  }
  if (n <= 0 || shutdown(c->fd, SHUT_WR) != 0) { /* the peer is gone */
    conn_free(c);
    return;
  }
  /* Closing with unread input (a body, a second request) would reset the
   * connection, and the peer could lose the response: read until it
   * closes too (or for a while). */
  c->step = DRAINING;
  ev_io_stop(srv->loop, &c->io);
  ev_io_set(&c->io, c->fd, EV_READ);
  ev_io_start(srv->loop, &c->io);
  ev_timer_stop(srv->loop, &c->timeout);
  ev_timer_set(&c->timeout, DRAIN_TIMEOUT_S, 0.0);
  ev_timer_start(srv->loop, &c->timeout);
}

/* -- GET /metrics -------------------------------------------------------------*/

/* The exposition into srv->body, grown until it fits; its length, or -1. */
static long render_metrics(server_t *srv) {
  relock_stats_t st;
  if (relock_client_stats(srv->client, &st, sizeof st) != 0)
    return -1;
  for (;;) {
    size_t n = relock_stats_prometheus(&st, srv->labels, srv->body, srv->body_cap);
    if (n < srv->body_cap)
      return (long)n;
    char *bigger = realloc(srv->body, n + 1); /* the same snapshot: n + 1 fits */
    if (bigger == NULL)
      return -1;
    srv->body = bigger;
    srv->body_cap = n + 1;
  }
}

static void serve_metrics(conn_t *c) {
  long n = render_metrics(c->srv);
  if (n < 0)
    respond_text(c, "500 Internal Server Error", "", "the statistics could not be rendered");
  else
    respond(c, "200 OK", METRICS_CONTENT_TYPE, "", c->srv->body, (size_t)n);
}

/* -- POST /lock/NAME: acquire, then release -----------------------------------*/

static void on_lock_step(relock_future_t *f, void *arg);

/* Waits for f, the operation of the step c enters (f NULL: out of memory).
 * A future already done calls back at once, inside relock_future_on_done:
 * c may be past this step, even freed, when this returns. */
static void start_step(conn_t *c, step_t step, relock_future_t *f) {
  c->step = step;
  if (f != NULL && relock_future_on_done(f, on_lock_step, c) == 0)
    return;
  if (f != NULL) {
    relock_future_cancel(f); /* nobody would see it: an acquired lock is given back */
    relock_future_release(f);
  }
  respond_text(c, "503 Service Unavailable", "", "%s", relock_strerror(RELOCK_ENOMEM));
}

static void on_lock_step(relock_future_t *f, void *arg) {
  conn_t *c = arg;
  int err = relock_future_error(f);
  int acquired = err == 0 && relock_future_bool(f);
  char msg[160] = "";
  if (err != 0)
    snprintf(msg, sizeof msg, "%s", relock_future_message(f));
  relock_future_release(f);
  if (c->step == LOCKING && acquired) /* the work under the lock would go here */
    start_step(c, UNLOCKING, relock_lock_unlock_async(c->lock, c->owner));
  else if (c->step == LOCKING && err == 0)
    respond_text(c, "409 Conflict", "", "%s: not acquired within %lld ms", relock_lock_name(c->lock),
                 (long long)c->wait_ms);
  else if (c->step == LOCKING)
    respond_text(c, "503 Service Unavailable", "", "%s: %s", relock_lock_name(c->lock), msg);
  else if (err != 0) /* e.g. RELOCK_ELOST: it was held, but maybe not alone */
    respond_text(c, "500 Internal Server Error", "", "%s: acquired, but the release failed: %s",
                 relock_lock_name(c->lock), msg);
  else
    respond_text(c, "200 OK", "", "%s: acquired and released", relock_lock_name(c->lock));
}

static int valid_name(const char *s, size_t len) {
  if (len == 0)
    return 0;
  for (size_t i = 0; i < len; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
          strchr("-_.:", s[i]) != NULL))
      return 0;
  return 1;
}

/* query: "wait=MS" or empty; -1 when it is something else. */
static int64_t parse_wait(const char *query) {
  if (query == NULL || *query == '\0')
    return 0;
  if (strncmp(query, "wait=", 5) != 0 || query[5] < '0' || query[5] > '9')
    return -1;
  char *end;
  errno = 0;
  long long ms = strtoll(query + 5, &end, 10);
  return *end != '\0' || errno != 0 || ms > WAIT_MAX_MS ? -1 : (int64_t)ms;
}

static void serve_lock(conn_t *c, const char *name, const char *query) {
  relock_error_t err;
  if (!valid_name(name, strlen(name))) {
    respond_text(c, "400 Bad Request", "", "a lock name is letters, digits and - _ . : only");
  } else if ((c->wait_ms = parse_wait(query)) < 0) {
    respond_text(c, "400 Bad Request", "", "the query is wait=MS, at most %d", WAIT_MAX_MS);
  } else if ((c->lock = relock_lock_new(c->srv->client, name, &err)) == NULL) {
    respond_text(c, "503 Service Unavailable", "", "%s", err.message);
  } else {
    c->owner = ++c->srv->next_owner;
    ev_io_stop(c->srv->loop, &c->io); /* nothing more is read: the wait is bounded */
    ev_timer_stop(c->srv->loop, &c->timeout);
    start_step(c, LOCKING, relock_lock_lock_async(c->lock, c->owner, c->wait_ms, RELOCK_INFINITE));
  }
}

/* -- requests --------------------------------------------------------------------*/

/* c->in holds a whole request head (NUL-terminated, head_len bytes up to
 * its blank line). Only its request line matters; the header lines are
 * only checked to be header lines. */
static void serve(conn_t *c, size_t head_len) {
  char *line_end = strchr(c->in, '\n');
  char *method = c->in, *target = NULL, *version = NULL;
  if (line_end > c->in && line_end[-1] == '\r') /* there is one: the head ends in a blank line */
    line_end[-1] = '\0';
  *line_end = '\0';
  if ((target = strchr(method, ' ')) != NULL) {
    *target++ = '\0';
    if ((version = strchr(target, ' ')) != NULL)
      *version++ = '\0';
  }
  int ok = version != NULL && method[0] != '\0' && strspn(method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == strlen(method) &&
           target[0] == '/' && (strcmp(version, "HTTP/1.1") == 0 || strcmp(version, "HTTP/1.0") == 0);
  for (char *l = line_end + 1; ok && l < c->in + head_len;) { /* "Name: value" lines, then the blank one */
    char *e = strchr(l, '\n');
    size_t len = (size_t)(e - l) - (e > l && e[-1] == '\r');
    ok = len == 0 || (memchr(l, ':', len) != NULL && l[0] != ' ' && l[0] != '\t' && l[0] != ':');
    l = e + 1;
  }
  if (!ok) {
    respond_text(c, "400 Bad Request", "", "not an HTTP/1.x request");
    return;
  }
  char *query = strchr(target, '?');
  if (query != NULL)
    *query++ = '\0';
  c->head_only = strcmp(method, "HEAD") == 0;
  if (strcmp(target, "/metrics") == 0) {
    if (strcmp(method, "GET") == 0 || c->head_only)
      serve_metrics(c);
    else
      respond_text(c, "405 Method Not Allowed", "Allow: GET, HEAD\r\n", "%s: GET or HEAD only", target);
  } else if (strncmp(target, "/lock/", 6) == 0) {
    if (strcmp(method, "POST") == 0)
      serve_lock(c, target + 6, query);
    else
      respond_text(c, "405 Method Not Allowed", "Allow: POST\r\n", "/lock/NAME: POST only");
  } else {
    respond_text(c, "404 Not Found", "", "not found: GET /metrics, or POST /lock/NAME");
  }
}

/* The end of the request head in c->in (the byte after its blank line), or NULL. */
static char *head_end(conn_t *c) {
  for (char *p = c->in; (p = memchr(p, '\n', c->len - (size_t)(p - c->in))) != NULL; p++) {
    if (p + 1 < c->in + c->len && p[1] == '\n')
      return p + 2;
    if (p + 2 < c->in + c->len && p[1] == '\r' && p[2] == '\n')
      return p + 3;
  }
  return NULL;
}

static void on_read(conn_t *c) {
  char discard[4096];
  int reading = c->step == READING;
  ssize_t n = reading ? recv(c->fd, c->in + c->len, HEAD_MAX - c->len, 0) : recv(c->fd, discard, sizeof discard, 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return;
  if (!reading) { /* DRAINING: until the peer closes */
    if (n <= 0)
      conn_free(c);
    return;
  }
  if (n < 0 || (n == 0 && c->len == 0)) { /* gone, or left before asking */
    conn_free(c);
    return;
  }
  if (n == 0) {
    respond_text(c, "400 Bad Request", "", "the request ended before its blank line");
    return;
  }
  c->len += (size_t)n;
  c->in[c->len] = '\0';
  char *end = head_end(c);
  if (end != NULL) {
    if (memchr(c->in, '\0', (size_t)(end - c->in)) != NULL)
      respond_text(c, "400 Bad Request", "", "a NUL byte in the request");
    else
      serve(c, (size_t)(end - c->in));
  } else if (c->len == HEAD_MAX) {
    respond_text(c, "431 Request Header Fields Too Large", "", "a request head is %d bytes at most", HEAD_MAX);
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
  if (c->step == READING)
    respond_text(c, "408 Request Timeout", "", "no whole request within %.0f ms", c->srv->read_timeout_s * 1000);
  else /* a response the peer stopped reading, or a peer that does not close */
    conn_free(c);
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
  ev_timer_init(&c->timeout, on_conn_timeout, srv->read_timeout_s, 0.0);
  c->timeout.data = c;
  c->next = srv->conns;
  if (c->next != NULL)
    c->next->prev = c;
  srv->conns = c;
  ev_io_start(srv->loop, &c->io);
  ev_timer_start(srv->loop, &c->timeout);
}

/* -- --work: a lock taken and released every so often -------------------------*/

static void work_done(server_t *srv, long *counter) {
  (*counter)++;
  srv->work_op = NULL;
  srv->work_unlocking = 0;
  maybe_close_client(srv);
}

static void on_work_step(relock_future_t *f, void *arg);

/* Waits for f, the acquisition or (unlocking) the release (f NULL: out of
 * memory). Set first: a future already done calls back at once. */
static void wait_work(server_t *srv, relock_future_t *f, int unlocking) {
  srv->work_op = f;
  srv->work_unlocking = unlocking;
  if (f != NULL && relock_future_on_done(f, on_work_step, srv) == 0)
    return;
  if (f != NULL) {
    relock_future_cancel(f); /* nobody would see it: an acquired lock is given back */
    relock_future_release(f);
  }
  work_done(srv, &srv->work_failed);
}

static void on_work_step(relock_future_t *f, void *arg) {
  server_t *srv = arg;
  int err = relock_future_error(f);
  int acquired = err == 0 && relock_future_bool(f);
  if (err != 0)
    fprintf(stderr, "metrics_server: %s %s: %s\n", srv->work_unlocking ? "release of" : "acquisition of",
            relock_lock_name(srv->work_lock), relock_future_message(f));
  relock_future_release(f);
  if (err != 0)
    work_done(srv, &srv->work_failed);
  else if (srv->work_unlocking)
    work_done(srv, &srv->work_ok);
  else if (!acquired)
    work_done(srv, &srv->work_busy);
  else /* held: the work would go here */
    wait_work(srv, relock_lock_unlock_async(srv->work_lock, srv->work_owner), 1);
}

static void on_work_tick(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  server_t *srv = w->data;
  if (srv->work_op != NULL) /* the last one is still at it */
    return;
  srv->work_owner = ++srv->next_owner;
  wait_work(srv, relock_lock_lock_async(srv->work_lock, srv->work_owner, srv->work_every_ms, RELOCK_INFINITE), 0);
}

/* -- the server -----------------------------------------------------------------*/

static void on_accept(struct ev_loop *loop, ev_io *w, int revents) {
  (void)revents;
  server_t *srv = w->data;
  while (!srv->stopping) {
    int fd = accept(srv->listen_fd, NULL, NULL);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        perror("metrics_server: accept"); /* pause rather than spin */
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

/* What was in flight has completed by now; responses may still be going
 * out: the last one out ends the loop (conn_free). */
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
  relock_client_close(srv->client, on_client_closed, srv); /* fails what is in flight */
}

/* Once stopping and no lock is being taken or released, the client closes. */
static void maybe_close_client(server_t *srv) {
  if (!srv->stopping || srv->work_op != NULL)
    return;
  for (conn_t *c = srv->conns; c != NULL; c = c->next)
    if (c->step == LOCKING || c->step == UNLOCKING)
      return;
  close_client(srv);
}

static void server_stop(server_t *srv) {
  srv->stopping = 1;
  ev_io_stop(srv->loop, &srv->accept_w);
  ev_timer_stop(srv->loop, &srv->accept_pause);
  ev_timer_stop(srv->loop, &srv->work_w);
  if (srv->listen_fd >= 0)
    close(srv->listen_fd);
  srv->listen_fd = -1;
  for (conn_t *c = srv->conns, *next; c != NULL; c = next) {
    next = c->next;
    if (c->step == READING) /* no request yet: none will be served */
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
    fprintf(stderr, "metrics_server: not waiting for the locks in progress\n");
    close_client(srv);
  }
}

/* Listens on "HOST:PORT" ("[v6]:PORT"; an empty HOST: every address) and
 * prints where. */
static int listen_on(server_t *srv, const char *where) {
  char host[256];
  const char *colon = strrchr(where, ':');
  size_t hlen = colon == NULL ? 0 : (size_t)(colon - where);
  if (colon == NULL || hlen >= sizeof host || colon[1] == '\0') {
    fprintf(stderr, "metrics_server: --listen wants HOST:PORT, not %s\n", where);
    return -1;
  }
  memcpy(host, where, hlen);
  host[hlen] = '\0';
  if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
    memmove(host, host + 1, hlen - 2);
    host[hlen - 2] = '\0';
  }
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  int rc = getaddrinfo(host[0] != '\0' ? host : NULL, colon + 1, &hints, &res);
  if (rc != 0) {
    fprintf(stderr, "metrics_server: %s: %s\n", where, gai_strerror(rc));
    return -1;
  }
  int fd = -1, one = 1;
  for (struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd >= 0 && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
                    bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0 ||
                    fcntl(fd, F_SETFL, O_NONBLOCK) != 0)) {
      rc = errno;
      close(fd);
      fd = -1;
      errno = rc;
    }
  }
  freeaddrinfo(res);
  struct sockaddr_storage sa;
  socklen_t salen = sizeof sa;
  char name[NI_MAXHOST], port[NI_MAXSERV];
  if (fd < 0 || getsockname(fd, (struct sockaddr *)&sa, &salen) != 0 ||
      getnameinfo((struct sockaddr *)&sa, salen, name, sizeof name, port, sizeof port,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    fprintf(stderr, "metrics_server: listen on %s: %s\n", where, strerror(errno));
    if (fd >= 0)
      close(fd);
    return -1;
  }
  srv->listen_fd = fd;
  int v6 = sa.ss_family == AF_INET6;
  printf("metrics_server: listening on %s%s%s:%s\n", v6 ? "[" : "", name, v6 ? "]" : "", port);
  fflush(stdout);
  return 0;
}

static int usage(void) {
  fprintf(stderr, "usage: metrics_server [--listen HOST:PORT] [--labels TEXT] [--work NAME [--every MS]]"
                  " [--read-timeout MS]\n       Redis: RELOCK_URL (or RELOCK_URL_FILE)\n");
  return 2;
}

/* A positive number of milliseconds, at most a day; -1 when not. */
static long parse_ms(const char *s) {
  char *end;
  long ms = strtol(s, &end, 10);
  return *end != '\0' || end == s || ms <= 0 || ms > 86400000 ? -1 : ms;
}

int main(int argc, char **argv) {
  server_t srv;
  memset(&srv, 0, sizeof srv);
  srv.listen_fd = -1;
  srv.read_timeout_s = 10.0;
  srv.work_every_ms = 1000;
  const char *listen_addr = "127.0.0.1:0", *work = NULL;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    long ms = 0;
    if (val == NULL)
      return usage();
    if (strcmp(arg, "--listen") == 0)
      listen_addr = val;
    else if (strcmp(arg, "--labels") == 0)
      srv.labels = val;
    else if (strcmp(arg, "--work") == 0)
      work = val;
    else if (strcmp(arg, "--every") == 0 && (ms = parse_ms(val)) > 0)
      srv.work_every_ms = ms;
    else if (strcmp(arg, "--read-timeout") == 0 && (ms = parse_ms(val)) > 0)
      srv.read_timeout_s = (double)ms / 1000;
    else
      return usage();
    i++;
  }

  relock_error_t err;
  relock_options_t *opts = relock_options_new(&err);
  if (opts == NULL || relock_options_from_env(opts, &err) < 0) {
    fprintf(stderr, "metrics_server: %s\n", err.message);
    relock_options_free(opts);
    return opts == NULL ? 1 : 2;
  }
  if ((srv.loop = EV_DEFAULT) == NULL) {
    relock_options_free(opts);
    fprintf(stderr, "metrics_server: cannot make the libev loop\n");
    return 1;
  }
  srv.client = relock_client_new(srv.loop, opts, &err); /* on the server's loop */
  relock_options_free(opts);
  if (srv.client == NULL) {
    fprintf(stderr, "metrics_server: cannot create client: %s\n", err.message);
    return 1;
  }
  if (work != NULL && (srv.work_lock = relock_lock_new(srv.client, work, &err)) == NULL) {
    fprintf(stderr, "metrics_server: --work %s: %s\n", work, err.message);
    relock_client_free(srv.client);
    return 2;
  }
  srv.body_cap = 16384; /* grown when an exposition needs more */
  if ((srv.body = malloc(srv.body_cap)) == NULL || listen_on(&srv, listen_addr) != 0) {
    relock_lock_free(srv.work_lock);
    relock_client_free(srv.client);
    free(srv.body);
    return 1;
  }

  ev_io_init(&srv.accept_w, on_accept, srv.listen_fd, EV_READ);
  ev_timer_init(&srv.accept_pause, on_accept_pause, 0.5, 0.0);
  ev_timer_init(&srv.work_w, on_work_tick, 0.0, (double)srv.work_every_ms / 1000);
  ev_signal_init(&srv.sigint_w, on_signal, SIGINT);
  ev_signal_init(&srv.sigterm_w, on_signal, SIGTERM);
  srv.accept_w.data = srv.accept_pause.data = srv.work_w.data = srv.sigint_w.data = srv.sigterm_w.data = &srv;
  ev_io_start(srv.loop, &srv.accept_w);
  if (srv.work_lock != NULL)
    ev_timer_start(srv.loop, &srv.work_w);
  ev_signal_start(srv.loop, &srv.sigint_w);
  ev_signal_start(srv.loop, &srv.sigterm_w);

  ev_run(srv.loop, 0);

  relock_lock_free(srv.work_lock);
  relock_client_free(srv.client);
  free(srv.body);
  int left = 0;
  for (conn_t *c = srv.conns; c != NULL; c = c->next)
    left++;
  fprintf(stderr, "metrics_server: %ld responses", srv.responses);
  if (srv.work_lock != NULL)
    fprintf(stderr, "; %s: %ld taken and released, %ld not in time, %ld failed", work, srv.work_ok, srv.work_busy,
            srv.work_failed);
  fprintf(stderr, "%s\n", left > 0 ? " (connections left over!)" : "");
  ev_loop_destroy(srv.loop);
  return left > 0 ? 1 : 0;
}
