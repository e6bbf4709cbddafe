/* The fault-injecting TCP proxy of the integration tests (see proxy.h).
 *
 * One thread runs a poll() loop over the listening socket, a self-pipe and
 * both sides of every connection. The test's thread never touches sockets:
 * it edits the wanted state under a mutex, bumps a request number, writes a
 * byte to the pipe and waits on a condition variable until the proxy thread
 * has applied that request. Everything below "the proxy thread" is touched
 * by that thread only. */
#include <config.h>

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* accept4, pipe2, POLLRDHUP */
#endif

#include "support/proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE (256 * 1024) /* per direction of a connection */
#define MAX_MARKS 1024        /* chunks in flight per direction, for delay */
#define BACKLOG 128
#define HANG_SETUP_MS 2000    /* filling the listen queue for hang_connect */
#define MAX_DELAY_MS (INT64_C(24) * 3600 * 1000)
#define NS_PER_MS UINT64_C(1000000)
#define WATCH_MAX 64          /* the longest text watch counts */

/* A chunk read at one time: the bytes before end may be sent from due_ns. */
typedef struct {
  uint64_t end;
  uint64_t due_ns;
} mark_t;

/* One direction of a connection: bytes read from one side, not yet written
 * to the other. Offsets count bytes since the connection began. */
typedef struct {
  char *buf;               /* a ring of BUF_SIZE bytes */
  uint64_t in, out;        /* read into buf / written out of it */
  mark_t marks[MAX_MARKS]; /* a ring, oldest first, due times ascending */
  unsigned mhead, mcount;
  int eof;  /* the source side has ended its stream */
  int shut; /* ... and that end was passed on: shutdown(SHUT_WR) */
} dir_t;

enum { ALIVE, CLOSE_FIN, CLOSE_RST };

typedef struct {
  int cfd, ufd;   /* client side, upstream side (-1: none) */
  int connecting; /* the upstream connect() is in progress */
  int held;       /* accepted under blackhole_accept: never forwarded */
  int frozen;     /* black-holed by blackhole_current: never serviced again */
  int fate;       /* ALIVE, or how to close it */
  dir_t up;       /* client -> upstream */
  dir_t down;     /* upstream -> client */
  size_t matched; /* how much of the watched text ends the stream down so far */
} pair_t;

typedef struct {
  int stall, refuse, blackhole, hang, stop;
  int64_t delay_ms;
  unsigned cuts, resets, freezes; /* one more per request */
  char watch[WATCH_MAX + 1];      /* the text counted in the streams down, "" for none */
} want_t;

struct relock_test_proxy {
  /* Set by start, read-only while the thread runs. */
  int port;
  struct sockaddr_storage upstream;
  socklen_t upstream_len;
  int lfd;
  int wake[2];
  pthread_t thread;

  /* Shared, under mu. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  want_t want;
  uint64_t posted, applied; /* request numbers */
  int hang_result;
  int nconn;
  uint64_t naccepted;
  uint64_t nseen;

  /* The proxy thread's own. */
  want_t cur;
  pair_t **pairs;
  size_t npairs, cap;
  struct pollfd *pfds;
  size_t pfds_cap;
  int filler;                     /* hang_connect: our own client in the listen queue */
  struct sockaddr_in filler_addr; /* its address, to know it when accepted */
  uint64_t accepted;
  size_t watch_len;
  size_t watch_back[WATCH_MAX]; /* cur.watch's failure function (Knuth-Morris-Pratt) */
  uint64_t seen;                /* occurrences of cur.watch since it was set */
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void set_nodelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* -- one direction ----------------------------------------------------------*/

static size_t dir_len(const dir_t *d) { return (size_t)(d->in - d->out); }

static int dir_can_read(const dir_t *d) {
  return !d->eof && dir_len(d) < BUF_SIZE && d->mcount < MAX_MARKS;
}

static mark_t *dir_mark(dir_t *d, unsigned i) { return &d->marks[(d->mhead + i) % MAX_MARKS]; }

/* The offset up to which the bytes may be sent at now. */
static uint64_t dir_due_end(dir_t *d, uint64_t now) {
  uint64_t end = d->out;
  for (unsigned i = 0; i < d->mcount && dir_mark(d, i)->due_ns <= now; i++) end = dir_mark(d, i)->end;
  return end;
}

/* When the next held-back byte becomes due; 0 if none is held back. */
static uint64_t dir_next_due(dir_t *d, uint64_t now) {
  for (unsigned i = 0; i < d->mcount; i++) {
    if (dir_mark(d, i)->due_ns > now) return dir_mark(d, i)->due_ns;
  }
  return 0;
}

/* Records n bytes just read. A chunk is never sent before an earlier one, so
 * one due no later than the last chunk's joins it. */
static void dir_note(dir_t *d, size_t n, uint64_t now, int64_t delay_ms) {
  uint64_t due = now + (uint64_t)delay_ms * NS_PER_MS;
  d->in += n;
  if (d->mcount > 0) {
    mark_t *last = dir_mark(d, d->mcount - 1);
    if (delay_ms == 0 || last->due_ns >= due) {
      last->end = d->in;
      return;
    }
  }
  *dir_mark(d, d->mcount) = (mark_t){d->in, due};
  d->mcount++;
}

/* Reads from fd while there is room. 0, or -1 on a socket error. */
static int dir_read(dir_t *d, int fd, uint64_t now, int64_t delay_ms) {
  while (dir_can_read(d)) {
    size_t off = (size_t)(d->in % BUF_SIZE);
    size_t room = BUF_SIZE - dir_len(d);
    size_t chunk = BUF_SIZE - off < room ? BUF_SIZE - off : room;
    ssize_t n = recv(fd, d->buf + off, chunk, 0);
    if (n > 0) {
      dir_note(d, (size_t)n, now, delay_ms);
    } else if (n == 0) {
      d->eof = 1;
    } else if (errno != EINTR) {
      return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    }
  }
  return 0;
}

/* Writes what is due to fd, then passes an end of stream on once everything
 * before it is written. 0, or -1 on a socket error. */
static int dir_write(dir_t *d, int fd, uint64_t now) {
  uint64_t end = dir_due_end(d, now);
  while (d->out < end) {
    size_t off = (size_t)(d->out % BUF_SIZE);
    size_t chunk = BUF_SIZE - off;
    if (chunk > end - d->out) chunk = (size_t)(end - d->out);
    ssize_t n = send(fd, d->buf + off, chunk, MSG_NOSIGNAL);
    if (n > 0) {
      d->out += (uint64_t)n;
    } else if (n < 0 && errno != EINTR) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return -1;
    }
  }
  while (d->mcount > 0 && dir_mark(d, 0)->end <= d->out) {
    d->mhead = (d->mhead + 1) % MAX_MARKS;
    d->mcount--;
  }
  if (d->eof && d->out == d->in && !d->shut) {
    if (shutdown(fd, SHUT_WR) != 0) return -1;
    d->shut = 1;
  }
  return 0;
}

/* -- connections ------------------------------------------------------------*/

static pair_t *pair_new(int cfd) {
  pair_t *pair = calloc(1, sizeof *pair);
  if (pair == NULL) return NULL;
  pair->up.buf = malloc(BUF_SIZE);
  pair->down.buf = malloc(BUF_SIZE);
  if (pair->up.buf == NULL || pair->down.buf == NULL) {
    free(pair->up.buf);
    free(pair->down.buf);
    free(pair);
    return NULL;
  }
  pair->cfd = cfd;
  pair->ufd = -1;
  return pair;
}

static void close_fd(int fd, int fate) {
  if (fd < 0) return;
  if (fate == CLOSE_RST) {
    struct linger lg = {1, 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  } else {
    (void)shutdown(fd, SHUT_RDWR);
  }
  close(fd);
}

static void pair_free(pair_t *pair) {
  close_fd(pair->cfd, pair->fate);
  close_fd(pair->ufd, pair->fate);
  free(pair->up.buf);
  free(pair->down.buf);
  free(pair);
}

static int add_pair(relock_test_proxy_t *p, pair_t *pair) {
  if (p->npairs == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 16;
    pair_t **pairs = realloc(p->pairs, cap * sizeof *pairs);
    if (pairs == NULL) return -1;
    p->pairs = pairs;
    p->cap = cap;
  }
  p->pairs[p->npairs++] = pair;
  return 0;
}

/* Frees the pairs marked for closing, keeping the others in order. */
static void reap(relock_test_proxy_t *p) {
  size_t kept = 0;
  for (size_t i = 0; i < p->npairs; i++) {
    if (p->pairs[i]->fate == ALIVE) {
      p->pairs[kept++] = p->pairs[i];
    } else {
      pair_free(p->pairs[i]);
    }
  }
  p->npairs = kept;
}

static void close_all(relock_test_proxy_t *p, int fate) {
  for (size_t i = 0; i < p->npairs; i++) p->pairs[i]->fate = fate;
  reap(p);
}

static int is_filler(const relock_test_proxy_t *p, const struct sockaddr_in *peer) {
  return p->filler >= 0 && peer->sin_family == AF_INET && peer->sin_port == p->filler_addr.sin_port &&
         peer->sin_addr.s_addr == p->filler_addr.sin_addr.s_addr;
}

/* Gives an accepted connection its fate under the current modes. */
static void take(relock_test_proxy_t *p, int cfd) {
  p->accepted++;
  if (p->cur.refuse) {
    close(cfd);
    return;
  }
  pair_t *pair = pair_new(cfd);
  if (pair == NULL) {
    close(cfd);
    return;
  }
  set_nodelay(cfd);
  if (p->cur.blackhole) {
    pair->held = 1;
  } else {
    pair->ufd = socket(p->upstream.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (pair->ufd < 0) goto fail;
    set_nodelay(pair->ufd);
    if (connect(pair->ufd, (const struct sockaddr *)&p->upstream, p->upstream_len) != 0) {
      if (errno != EINPROGRESS) goto fail;
      pair->connecting = 1;
    }
  }
  if (add_pair(p, pair) == 0) return;
fail:
  /* The client sees connect succeed, then EOF: the upstream is down. */
  pair->fate = CLOSE_FIN;
  pair_free(pair);
}

/* Accepts everything waiting in the listen queue. */
static void accept_pending(relock_test_proxy_t *p) {
  for (;;) {
    struct sockaddr_in peer;
    socklen_t len = sizeof peer;
    memset(&peer, 0, sizeof peer);
    int fd = accept4(p->lfd, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;
    }
    if (is_filler(p, &peer)) {
      close(fd);
      continue;
    }
    take(p, fd);
  }
}

/* -- hang_connect -----------------------------------------------------------*/

/* How many connections wait in a listening socket's accept queue (Linux
 * reports it in TCP_INFO's tcpi_unacked), -1 if unknown. */
static int listen_queue_len(int fd) {
  struct tcp_info ti;
  socklen_t len = sizeof ti;
  memset(&ti, 0, sizeof ti);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return -1;
  return (int)ti.tcpi_unacked;
}

static void hang_stop(relock_test_proxy_t *p) {
  (void)listen(p->lfd, BACKLOG);
  accept_pending(p); /* the filler among them, recognised and closed */
  if (p->filler >= 0) close(p->filler);
  p->filler = -1;
  memset(&p->filler_addr, 0, sizeof p->filler_addr);
}

/* A listen backlog of 0 lets one connection wait in the accept queue; with
 * it full, Linux drops new SYNs (tcp_abort_on_overflow only concerns the
 * final ACK), so the client's connect() retries, hanging. The proxy fills
 * the queue with a connection of its own and stops accepting. */
static int hang_start(relock_test_proxy_t *p) {
  struct sockaddr_in self;
  struct pollfd pfd;
  int err = 0;
  socklen_t len;

  accept_pending(p);
  if (listen(p->lfd, 0) != 0) return -1;
  memset(&self, 0, sizeof self);
  self.sin_family = AF_INET;
  self.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  self.sin_port = htons((uint16_t)p->port);
  p->filler = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (p->filler < 0) goto fail;
  if (connect(p->filler, (struct sockaddr *)&self, sizeof self) != 0 && errno != EINPROGRESS) goto fail;
  len = sizeof p->filler_addr;
  if (getsockname(p->filler, (struct sockaddr *)&p->filler_addr, &len) != 0) goto fail;
  pfd = (struct pollfd){p->filler, POLLOUT, 0};
  if (poll(&pfd, 1, HANG_SETUP_MS) != 1) goto fail;
  len = sizeof err;
  if (getsockopt(p->filler, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) goto fail;
  /* The client side completes before the server side queues the connection. */
  for (int waited = 0; listen_queue_len(p->lfd) < 1; waited++) {
    if (waited >= HANG_SETUP_MS) goto fail;
    sleep_ms(1);
  }
  return 0;
fail:
  hang_stop(p);
  return -1;
}

/* -- requests from the test's thread ----------------------------------------*/

static void publish(relock_test_proxy_t *p) {
  p->nconn = (int)p->npairs;
  p->naccepted = p->accepted;
  p->nseen = p->seen;
}

/* A new text to watch: counted from 0, in every connection from here. */
static void watch_start(relock_test_proxy_t *p) {
  const char *w = p->cur.watch;
  p->watch_len = strlen(w);
  p->seen = 0;
  for (size_t i = 0; i < p->npairs; i++) p->pairs[i]->matched = 0;
  if (p->watch_len == 0) return;
  p->watch_back[0] = 0;
  for (size_t i = 1, k = 0; i < p->watch_len; i++) {
    while (k > 0 && w[i] != w[k]) k = p->watch_back[k - 1];
    if (w[i] == w[k]) k++;
    p->watch_back[i] = k;
  }
}

/* Counts the watched text in the bytes read down from offset from on
 * (across reads: pair->matched carries a partial match over). */
static void watch_scan(relock_test_proxy_t *p, pair_t *pair, uint64_t from) {
  if (p->watch_len == 0) return;
  const char *w = p->cur.watch;
  size_t k = pair->matched;
  for (uint64_t o = from; o < pair->down.in; o++) {
    char c = pair->down.buf[o % BUF_SIZE];
    while (k > 0 && c != w[k]) k = p->watch_back[k - 1];
    if (c == w[k]) k++;
    if (k == p->watch_len) {
      p->seen++;
      k = p->watch_back[k - 1];
    }
  }
  pair->matched = k;
}

/* Applies the latest request, if there is one not applied yet; 1 if so. */
static int apply_requests(relock_test_proxy_t *p) {
  pthread_mutex_lock(&p->mu);
  publish(p);
  if (p->applied == p->posted) {
    pthread_mutex_unlock(&p->mu);
    return 0;
  }
  want_t want = p->want;
  uint64_t seq = p->posted;
  pthread_mutex_unlock(&p->mu);

  /* Connections made before the request are taken under the old modes. */
  if (!p->cur.hang) accept_pending(p);
  if (want.cuts != p->cur.cuts) close_all(p, CLOSE_FIN);
  if (want.resets != p->cur.resets) close_all(p, CLOSE_RST);
  if (want.freezes != p->cur.freezes)
    for (size_t i = 0; i < p->npairs; i++) p->pairs[i]->frozen = 1;
  int hang = p->cur.hang;
  int rewatch = strcmp(want.watch, p->cur.watch) != 0;
  p->cur = want;
  if (rewatch) watch_start(p);
  p->cur.delay_ms = want.delay_ms < 0 ? 0 : want.delay_ms > MAX_DELAY_MS ? MAX_DELAY_MS : want.delay_ms;
  int hang_result = 0;
  if (want.stop) {
    close_all(p, CLOSE_FIN);
    if (p->filler >= 0) close(p->filler); /* the listen queue dies with the socket */
    p->filler = -1;
  } else if (want.hang && !hang) {
    hang_result = hang_start(p);
    if (hang_result != 0) p->cur.hang = 0;
  } else if (!want.hang && hang) {
    hang_stop(p);
  }

  pthread_mutex_lock(&p->mu);
  if (hang_result != 0) p->want.hang = 0;
  p->hang_result = hang_result;
  p->applied = seq;
  publish(p);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return 1;
}

/* Called with mu held: posts the wanted state and waits until the proxy
 * thread has applied it. */
static void post_locked(relock_test_proxy_t *p) {
  uint64_t seq = ++p->posted;
  char byte = 1;
  if (write(p->wake[1], &byte, 1) < 0) {
    /* EAGAIN: the pipe is full, so the thread is awake anyway. */
  }
  while (p->applied < seq) pthread_cond_wait(&p->cv, &p->mu);
}

/* -- the proxy thread -------------------------------------------------------*/

/* What to poll a pair's sockets for; both 0 leaves them out of the poll. */
static void pair_events(const relock_test_proxy_t *p, pair_t *pair, uint64_t now, short *cev, short *uev) {
  *cev = *uev = 0;
  if (p->cur.stall || pair->frozen) return;
  if (pair->held) {
    *cev = POLLRDHUP; /* only to see the client go */
    return;
  }
  if (dir_can_read(&pair->up)) *cev |= POLLIN;
  if (dir_due_end(&pair->down, now) > pair->down.out) *cev |= POLLOUT;
  if (pair->connecting) {
    *uev = POLLOUT;
    return;
  }
  if (dir_can_read(&pair->down)) *uev |= POLLIN;
  if (dir_due_end(&pair->up, now) > pair->up.out) *uev |= POLLOUT;
}

static void pair_service(relock_test_proxy_t *p, pair_t *pair, short crev, short urev, uint64_t now) {
  if (pair->frozen) return;
  if (pair->held) {
    if (crev) pair->fate = CLOSE_FIN;
    return;
  }
  if (pair->connecting && urev) {
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(pair->ufd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      pair->fate = CLOSE_FIN; /* as if the upstream had closed at once */
      return;
    }
    pair->connecting = 0;
    urev = 0;
  }
  int rc = 0;
  if (crev & (POLLIN | POLLHUP | POLLERR)) rc |= dir_read(&pair->up, pair->cfd, now, p->cur.delay_ms);
  if (!pair->connecting) {
    if (urev & (POLLIN | POLLHUP | POLLERR)) {
      uint64_t from = pair->down.in;
      rc |= dir_read(&pair->down, pair->ufd, now, p->cur.delay_ms);
      watch_scan(p, pair, from);
    }
    rc |= dir_write(&pair->up, pair->ufd, now);
  }
  rc |= dir_write(&pair->down, pair->cfd, now);
  if (rc != 0) {
    pair->fate = CLOSE_RST; /* a reset (or worse) on one side: reset the other */
  } else if (pair->up.shut && pair->down.shut) {
    pair->fate = CLOSE_FIN; /* both ended their streams */
  }
}

/* Milliseconds until the next held-back chunk is due, -1 if none. */
static int poll_timeout(const relock_test_proxy_t *p, uint64_t now) {
  if (p->cur.stall) return -1;
  uint64_t next = 0;
  for (size_t i = 0; i < p->npairs; i++) {
    if (p->pairs[i]->frozen) continue;
    uint64_t a = dir_next_due(&p->pairs[i]->up, now);
    uint64_t b = dir_next_due(&p->pairs[i]->down, now);
    if (a && (!next || a < next)) next = a;
    if (b && (!next || b < next)) next = b;
  }
  if (!next) return -1;
  return (int)((next - now + NS_PER_MS - 1) / NS_PER_MS);
}

static int grow_pfds(relock_test_proxy_t *p, size_t n) {
  if (n <= p->pfds_cap) return 0;
  struct pollfd *pfds = realloc(p->pfds, n * sizeof *pfds);
  if (pfds == NULL) return -1;
  p->pfds = pfds;
  p->pfds_cap = n;
  return 0;
}

static void *run(void *arg) {
  relock_test_proxy_t *p = arg;
  for (;;) {
    if (apply_requests(p)) {
      if (p->cur.stop) break;
      continue; /* sockets may have been closed: poll afresh */
    }
    size_t n = p->npairs;
    if (grow_pfds(p, 2 + 2 * n) != 0) {
      sleep_ms(10); /* out of memory: try again later */
      continue;
    }
    uint64_t now = now_ns();
    p->pfds[0] = (struct pollfd){p->wake[0], POLLIN, 0};
    p->pfds[1] = (struct pollfd){p->cur.hang ? -1 : p->lfd, POLLIN, 0};
    for (size_t i = 0; i < n; i++) {
      pair_t *pair = p->pairs[i];
      short cev, uev;
      pair_events(p, pair, now, &cev, &uev);
      p->pfds[2 + 2 * i] = (struct pollfd){cev ? pair->cfd : -1, cev, 0};
      p->pfds[3 + 2 * i] = (struct pollfd){uev ? pair->ufd : -1, uev, 0};
    }
    if (poll(p->pfds, 2 + 2 * n, poll_timeout(p, now)) < 0) continue; /* EINTR */
    if (p->pfds[0].revents) {
      char drain[64];
      while (read(p->wake[0], drain, sizeof drain) > 0) {
      }
    }
    if (p->pfds[1].revents) accept_pending(p);
    if (!p->cur.stall) {
      now = now_ns();
      for (size_t i = 0; i < n; i++)
        pair_service(p, p->pairs[i], p->pfds[2 + 2 * i].revents, p->pfds[3 + 2 * i].revents, now);
    }
    reap(p);
  }
  return NULL;
}

/* -- the API ----------------------------------------------------------------*/

static int resolve(const char *host, int port, struct sockaddr_storage *addr, socklen_t *len) {
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  int rc = getaddrinfo(host, service, &hints, &res);
  if (rc != 0) {
    fprintf(stderr, "# relock_test_proxy: cannot resolve %s: %s\n", host, gai_strerror(rc));
    return -1;
  }
  memcpy(addr, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return 0;
}

static int listen_loopback(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  struct sockaddr_in sin;
  socklen_t len = sizeof sin;
  memset(&sin, 0, sizeof sin);
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, (struct sockaddr *)&sin, sizeof sin) != 0 || listen(fd, BACKLOG) != 0 ||
      getsockname(fd, (struct sockaddr *)&sin, &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(sin.sin_port);
  return fd;
}

relock_test_proxy_t *relock_test_proxy_start(const char *upstream_host, int upstream_port) {
  if (upstream_host == NULL || upstream_port <= 0 || upstream_port > 65535) {
    fprintf(stderr, "# relock_test_proxy: bad upstream\n");
    return NULL;
  }
  relock_test_proxy_t *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  p->lfd = p->wake[0] = p->wake[1] = p->filler = -1;
  if (resolve(upstream_host, upstream_port, &p->upstream, &p->upstream_len) != 0) goto fail;
  p->lfd = listen_loopback(&p->port);
  if (p->lfd < 0 || pipe2(p->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
    fprintf(stderr, "# relock_test_proxy: cannot listen: %s\n", strerror(errno));
    goto fail;
  }
  if (pthread_mutex_init(&p->mu, NULL) != 0) goto fail;
  if (pthread_cond_init(&p->cv, NULL) != 0) {
    pthread_mutex_destroy(&p->mu);
    goto fail;
  }
  /* Signals stay with the test's threads: the proxy thread blocks them all. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&p->thread, NULL, run, p);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    fprintf(stderr, "# relock_test_proxy: cannot start its thread: %s\n", strerror(rc));
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    goto fail;
  }
  return p;
fail:
  if (p->lfd >= 0) close(p->lfd);
  if (p->wake[0] >= 0) close(p->wake[0]);
  if (p->wake[1] >= 0) close(p->wake[1]);
  free(p);
  return NULL;
}

int relock_test_proxy_port(const relock_test_proxy_t *p) { return p->port; }

void relock_test_proxy_cut(relock_test_proxy_t *p) {
  pthread_mutex_lock(&p->mu);
  p->want.cuts++;
  post_locked(p);
  pthread_mutex_unlock(&p->mu);
}

void relock_test_proxy_reset(relock_test_proxy_t *p) {
  pthread_mutex_lock(&p->mu);
  p->want.resets++;
  post_locked(p);
  pthread_mutex_unlock(&p->mu);
}

void relock_test_proxy_stall(relock_test_proxy_t *p, int on) {
  pthread_mutex_lock(&p->mu);
  p->want.stall = on != 0;
  post_locked(p);
  pthread_mutex_unlock(&p->mu);
}

void relock_test_proxy_blackhole_current(relock_test_proxy_t *p) {
  pthread_mutex_lock(&p->mu);
  p->want.freezes++;
  post_locked(p);
  pthread_mutex_unlock(&p->mu);
}

void relock_test_proxy_delay(relock_test_proxy_t *p, int64_t ms) {
  pthread_mutex_lock(&p->mu);
  p->want.delay_ms = ms;
  post_locked(p);
  pthread_mutex_unlock(&p->mu);
}

void relock_test_proxy_refuse(relock_test_proxy_t *p, int on) {
  pthread_mutex_lock(&p->mu);
  p->want.refuse = on != 0;
  post_locked(p);
  pthread_mutex_unlock(&p->mu);
}

void relock_test_proxy_blackhole_accept(relock_test_proxy_t *p, int on) {
  pthread_mutex_lock(&p->mu);
  p->want.blackhole = on != 0;
  post_locked(p);
  pthread_mutex_unlock(&p->mu);
}

int relock_test_proxy_hang_connect(relock_test_proxy_t *p, int on) {
  pthread_mutex_lock(&p->mu);
  p->want.hang = on != 0;
  post_locked(p);
  int rc = p->hang_result;
  pthread_mutex_unlock(&p->mu);
  return rc;
}

int relock_test_proxy_connections(relock_test_proxy_t *p) {
  pthread_mutex_lock(&p->mu);
  post_locked(p);
  int n = p->nconn;
  pthread_mutex_unlock(&p->mu);
  return n;
}

uint64_t relock_test_proxy_accepted(relock_test_proxy_t *p) {
  pthread_mutex_lock(&p->mu);
  post_locked(p);
  uint64_t n = p->naccepted;
  pthread_mutex_unlock(&p->mu);
  return n;
}

void relock_test_proxy_watch(relock_test_proxy_t *p, const char *text) {
  pthread_mutex_lock(&p->mu);
  snprintf(p->want.watch, sizeof p->want.watch, "%s", text != NULL ? text : "");
  post_locked(p);
  pthread_mutex_unlock(&p->mu);
}

uint64_t relock_test_proxy_seen(relock_test_proxy_t *p) {
  pthread_mutex_lock(&p->mu);
  post_locked(p);
  uint64_t n = p->nseen;
  pthread_mutex_unlock(&p->mu);
  return n;
}

void relock_test_proxy_stop(relock_test_proxy_t *p) {
  if (p == NULL) return;
  pthread_mutex_lock(&p->mu);
  p->want.stop = 1;
  post_locked(p);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->thread, NULL);
  free(p->pairs);
  free(p->pfds);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  close(p->lfd);
  close(p->wake[0]);
  close(p->wake[1]);
  free(p);
}
