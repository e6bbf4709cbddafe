/* The libev hooks of a hiredis async context, and SIGPIPE safety.
 *
 * hiredis writes with write(2) (0.14) or send(2) without MSG_NOSIGNAL (1.x),
 * which raise SIGPIPE when the peer has gone; its default action kills the
 * process. A library must neither install handlers nor change the process's
 * signal dispositions. So in plaintext the write hook sends the output
 * itself, with MSG_NOSIGNAL, before hiredis gets the event (send_output
 * says why that is safe); only a send that fails runs hiredis's own write,
 * under the guard: SIGPIPE blocked on the calling thread, and a SIGPIPE the
 * write raised consumed before the mask is restored. A program that already
 * ignores SIGPIPE skips the guard. Over TLS hiredis writes with SSL_write,
 * which takes no flags: until the SSL sends with MSG_NOSIGNAL (tls.c: from
 * the end of the handshake, relock__ev_no_sigpipe) every write runs under
 * the guard, and so does every read: SSL_read writes as well (the rest of
 * the handshake, alerts, key updates). */
#include <config.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include <relock/error.h>

#include "base/list.h"
#include "loop/exec.h"
#include "redis/ev_adapter.h"

typedef struct ev_adapter {
  struct ev_loop *loop;
  redisAsyncContext *ac;
  ev_io rev;
  ev_io wev;
  void (*read_fn)(void *arg); /* instead of hiredis's read handler */
  void *read_arg;
  int tls;                    /* SSL_write and SSL_read: under the guard, until no_sigpipe */
  int no_sigpipe;             /* relock__ev_no_sigpipe: the SSL sends with MSG_NOSIGNAL, no guard at all */
  relock__exec_deferred_t flush; /* a write deferred to the end of a call (add_write) */
} ev_adapter_t;

static int sigpipe_ignored(void) {
  struct sigaction sa;
  return sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
}

static void handle_read(ev_adapter_t *a) {
  if (a->read_fn != NULL)
    a->read_fn(a->read_arg); /* may free the context, and a with it */
  else
    redisAsyncHandleRead(a->ac);
}

static void handle_write(ev_adapter_t *a) { redisAsyncHandleWrite(a->ac); }

/* fn(a), with SIGPIPE kept from killing the process. a may be gone after. */
static void without_sigpipe(void (*fn)(ev_adapter_t *a), ev_adapter_t *a) {
  if (sigpipe_ignored()) {
    fn(a);
    return;
  }
  sigset_t pipe_set, old_set, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  /* A SIGPIPE already pending for another reason must not be swallowed. */
  sigpending(&pending);
  int was_pending = sigismember(&pending, SIGPIPE);

  fn(a);

  if (!was_pending && !sigismember(&old_set, SIGPIPE)) {
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE)) {
      static const struct timespec zero = {0, 0};
      while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
        ;
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_set, NULL);
}

/* A buffer this large is freed once sent, as hiredis does, rather than
 * kept for the connection's next commands. */
#define KEEP_OUTPUT_MAX 16384

/* Sends what hiredis has queued, as far as the socket takes it now, and
 * takes what was sent off the front of its output buffer. 1 when the buffer
 * is empty, 0 when the socket is full (what is left waits for the next
 * writable event), -1 on an error, with the buffer left whole from the
 * failed send on: hiredis's own write then meets the same error and reports
 * it, under the guard.
 *
 * Safe because of what hiredis does with the buffer (0.14.1 and 1.2.0
 * alike): redisBufferWrite writes c->obuf from its start, and on success
 * drops the written bytes from the front of it (sdsrange) or replaces it by
 * an empty string; with an empty buffer it makes no system call and reports
 * the write done, after which redisAsyncHandleWrite stops the write watcher
 * and starts the read watcher. Commands are only ever appended to c->obuf.
 * Sending a prefix and removing it is what its own write would have done,
 * with the same bytes in the same order, minus the signal. Called only
 * where hiredis would write: the context connected (before that its write
 * hook completes the connection instead) and without error (then it writes
 * nothing). */
static int send_output(redisContext *c) {
  while (sdslen(c->obuf) > 0) {
    ssize_t n = send(c->fd, c->obuf, sdslen(c->obuf), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    }
    if ((size_t)n < sdslen(c->obuf)) {
      sdsrange(c->obuf, n, -1);
      return 0;
    }
    sds empty = sdsalloc(c->obuf) > KEEP_OUTPUT_MAX ? sdsempty() : NULL;
    if (empty != NULL) {
      sdsfree(c->obuf);
      c->obuf = empty;
    } else {
      sdsclear(c->obuf);
    }
  }
  return 1;
}

static void on_readable(struct ev_loop *loop, ev_io *w, int revents) {
  (void)loop;
  (void)revents;
  ev_adapter_t *a = w->data;
  if (a->tls && !a->no_sigpipe)
    without_sigpipe(handle_read, a);
  else
    handle_read(a);
}

static void start(ev_adapter_t *a, ev_io *w);

/* Writes what hiredis has queued: from the write watcher, or at the end of
 * a call from another thread (write_deferred), when no watcher is on. */
static void write_output(ev_adapter_t *a) {
  if (a->no_sigpipe) {
    handle_write(a);
    return;
  }
  redisContext *c = &a->ac->c;
  if (!a->tls && (c->flags & REDIS_CONNECTED) != 0 && c->err == 0) {
    switch (send_output(c)) {
    case 1: /* hiredis finds nothing to write: it stops the write watcher, starts reads */
      redisAsyncHandleWrite(a->ac);
      return;
    case 0: /* the rest waits for the write watcher; hiredis would start reads too */
      start(a, &a->wev);
      start(a, &a->rev);
      return;
    default: /* the error comes from hiredis's write, as before */
      break;
    }
  }
  without_sigpipe(handle_write, a);
}

static void on_writable(struct ev_loop *loop, ev_io *w, int revents) {
  (void)loop;
  (void)revents;
  write_output(w->data);
}

static void start(ev_adapter_t *a, ev_io *w) {
  if (!ev_is_active(w))
    relock__exec_changed(); /* a call from another thread wakes the loop to see it */
  ev_io_start(a->loop, w);
}

static void add_read(void *privdata) {
  ev_adapter_t *a = privdata;
  start(a, &a->rev);
}

static void del_read(void *privdata) {
  ev_adapter_t *a = privdata;
  ev_io_stop(a->loop, &a->rev);
}

/* The end of a call that deferred the write (add_write): what the write
 * watcher would have done. hiredis starts the watcher again if the socket
 * took only part (add_write, deferring no more), and may free the context. */
static void write_deferred(relock__exec_deferred_t *d) {
  write_output(relock__container_of(d, ev_adapter_t, flush));
}

/* A command from another thread than a threaded client's loop thread is
 * sent by that thread, at the end of its call, with whatever else the call
 * sent: waking the loop thread to send it would cost that thread a wake-up
 * and the caller the CPU. Not before the connection is up: hiredis's write
 * handler would take the connect as done. */
static void add_write(void *privdata) {
  ev_adapter_t *a = privdata;
  relock__exec_t *x = (a->ac->c.flags & REDIS_CONNECTED) != 0 ? relock__exec_deferring(a->loop) : NULL;
  if (x != NULL && !ev_is_active(&a->wev))
    relock__exec_defer(x, &a->flush);
  else
    start(a, &a->wev);
}

static void del_write(void *privdata) {
  ev_adapter_t *a = privdata;
  relock__exec_undefer(&a->flush);
  ev_io_stop(a->loop, &a->wev);
}

static void cleanup(void *privdata) {
  ev_adapter_t *a = privdata;
  relock__exec_undefer(&a->flush);
  ev_io_stop(a->loop, &a->rev);
  ev_io_stop(a->loop, &a->wev);
  a->ac->ev.data = NULL;
  free(a);
}

void relock__ev_set_reader(redisAsyncContext *ac, void (*fn)(void *arg), void *arg) {
  ev_adapter_t *a = ac->ev.data;
  if (a != NULL) {
    a->read_fn = fn;
    a->read_arg = arg;
  }
}

void relock__ev_no_sigpipe(redisAsyncContext *ac) {
  ev_adapter_t *a = ac->ev.data;
  if (a != NULL)
    a->no_sigpipe = 1;
}

int relock__ev_attach(redisAsyncContext *ac, struct ev_loop *loop, int tls) {
  ev_adapter_t *a = calloc(1, sizeof(*a));
  if (a == NULL)
    return RELOCK_ENOMEM;
  a->loop = loop;
  a->ac = ac;
  a->tls = tls;
  relock__exec_deferred_init(&a->flush, write_deferred);
  ev_io_init(&a->rev, on_readable, ac->c.fd, EV_READ);
  ev_io_init(&a->wev, on_writable, ac->c.fd, EV_WRITE);
  a->rev.data = a;
  a->wev.data = a;
  ac->ev.data = a;
  ac->ev.addRead = add_read;
  ac->ev.delRead = del_read;
  ac->ev.addWrite = add_write;
  ac->ev.delWrite = del_write;
  ac->ev.cleanup = cleanup;
  return 0;
}

int relock__ev_append(redisAsyncContext *ac, const char *cmd, size_t len) {
  if ((ac->c.flags & (REDIS_DISCONNECTING | REDIS_FREEING)) != 0)
    return -1;
  if (redisAppendFormattedCommand(&ac->c, cmd, len) != REDIS_OK)
    return -1;
  if (ac->ev.addWrite != NULL)
    ac->ev.addWrite(ac->ev.data);
  return 0;
}
