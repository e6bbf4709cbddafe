/* Attaches a hiredis async context to a libev loop. Written here rather than
 * taken from hiredis's header-only adapter, whose unused statics break
 * -Werror builds and whose details differ between hiredis versions. */
#ifndef RELOCK__REDIS_EV_ADAPTER_H
#define RELOCK__REDIS_EV_ADAPTER_H

#include <ev.h>
#include <hiredis/async.h>

/* Returns 0, or RELOCK_ENOMEM. hiredis calls the adapter's cleanup hook when
 * it frees the context, which stops the watchers and frees the adapter.
 * Writes never raise SIGPIPE, and with tls (the context speaks TLS: hiredis
 * writes with SSL_write, and its reads may write) reads neither. */
int relock__ev_attach(redisAsyncContext *ac, struct ev_loop *loop, int tls);

/* The context's reads and writes can no longer raise SIGPIPE (TLS, whose
 * SSL sends with MSG_NOSIGNAL: tls.h): they skip the signal mask. */
void relock__ev_no_sigpipe(redisAsyncContext *ac);

/* From now on, readability of the context's socket calls fn(arg) instead
 * of hiredis's read handler (hiredis still writes, and still starts and
 * stops the read watcher); fn NULL gives it back to hiredis. */
void relock__ev_set_reader(redisAsyncContext *ac, void (*fn)(void *arg), void *arg);

/* Appends the RESP command cmd (len bytes) to the context's output, with
 * no reply awaited and no callback (a raw connection reads its answers
 * itself), and arms the write watcher. 0, or -1 when the context is
 * disconnecting or memory ran out. */
int relock__ev_append(redisAsyncContext *ac, const char *cmd, size_t len);

#endif /* RELOCK__REDIS_EV_ADAPTER_H */
