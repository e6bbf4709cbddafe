/* The libev hooks of a hiredis async context, and SIGPIPE safety.
 *
 * hiredis writes with write(2), which raises SIGPIPE when the peer has gone;
 * its default action kills the process. A library must neither install
 * handlers nor change the process's signal dispositions, so each write runs
 * with SIGPIPE blocked on the calling thread, and a SIGPIPE the write raised
 * is consumed before the mask is restored. A program that already ignores
 * SIGPIPE skips all of this. Over TLS reads get the same treatment: SSL_read
 * writes as well (the rest of the handshake, alerts, key updates); once the
 * SSL sends with MSG_NOSIGNAL (tls.c), neither needs it. */
#include <config.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include <relock/error.h>

#include "redis/ev_adapter.h"

typedef struct ev_adapter {
  struct ev_loop *loop;
  redisAsyncContext *ac;
  ev_io rev;
  ev_io wev;
  void (*read_fn)(void *arg); /* instead of hiredis's read handler */
  void *read_arg;
  int guard_reads;            /* TLS: reads may write */
  int no_sigpipe;             /* relock__ev_no_sigpipe: no guard at all */
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

static void on_readable(struct ev_loop *loop, ev_io *w, int revents) {
  (void)loop;
  (void)revents;
  ev_adapter_t *a = w->data;
  if (a->guard_reads && !a->no_sigpipe)
    without_sigpipe(handle_read, a);
  else
    handle_read(a);
}

static void on_writable(struct ev_loop *loop, ev_io *w, int revents) {
  (void)loop;
  (void)revents;
  ev_adapter_t *a = w->data;
  if (a->no_sigpipe)
    handle_write(a);
  else
    without_sigpipe(handle_write, a);
}

static void add_read(void *privdata) {
  ev_adapter_t *a = privdata;
  ev_io_start(a->loop, &a->rev);
}

static void del_read(void *privdata) {
  ev_adapter_t *a = privdata;
  ev_io_stop(a->loop, &a->rev);
}

static void add_write(void *privdata) {
  ev_adapter_t *a = privdata;
  ev_io_start(a->loop, &a->wev);
}

static void del_write(void *privdata) {
  ev_adapter_t *a = privdata;
  ev_io_stop(a->loop, &a->wev);
}

static void cleanup(void *privdata) {
  ev_adapter_t *a = privdata;
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

int relock__ev_attach(redisAsyncContext *ac, struct ev_loop *loop, int guard_reads) {
  ev_adapter_t *a = calloc(1, sizeof(*a));
  if (a == NULL)
    return RELOCK_ENOMEM;
  a->loop = loop;
  a->ac = ac;
  a->guard_reads = guard_reads;
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
