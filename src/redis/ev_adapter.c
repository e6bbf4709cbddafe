/* The libev hooks of a hiredis async context, and SIGPIPE safety.
 *
 * hiredis writes with write(2), which raises SIGPIPE when the peer has gone;
 * its default action kills the process. A library must neither install
 * handlers nor change the process's signal dispositions, so each write runs
 * with SIGPIPE blocked on the calling thread, and a SIGPIPE the write raised
 * is consumed before the mask is restored. A program that already ignores
 * SIGPIPE skips all of this. Over TLS reads get the same treatment: SSL_read
 * writes as well (the rest of the handshake, alerts, key updates). */
#include <config.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
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
  int guard_reads;            /* TLS: reads may write */
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

static void on_readable(struct ev_loop *loop, ev_io *w, int revents) {
  (void)loop;
  (void)revents;
  ev_adapter_t *a = w->data;
  if (a->guard_reads)
    without_sigpipe(handle_read, a);
  else
    handle_read(a);
}

static void on_writable(struct ev_loop *loop, ev_io *w, int revents) {
  (void)loop;
  (void)revents;
  without_sigpipe(handle_write, w->data);
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
  without_sigpipe(handle_write, relock__container_of(d, ev_adapter_t, flush));
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

int relock__ev_attach(redisAsyncContext *ac, struct ev_loop *loop, int guard_reads) {
  ev_adapter_t *a = calloc(1, sizeof(*a));
  if (a == NULL)
    return RELOCK_ENOMEM;
  a->loop = loop;
  a->ac = ac;
  a->guard_reads = guard_reads;
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
