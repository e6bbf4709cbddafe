/* Error codes and the error record of calls that complete at once. Zero is
 * success; every error is a negative number. Codes are append-only: a
 * released code never changes its number or meaning. */
#ifndef RELOCK_ERROR_H
#define RELOCK_ERROR_H

#include <relock/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* XX(name, number, description) for every code, in order. Lets a program build
 * its own tables (as relock_strerror does) without repeating the list. */
#define RELOCK_ERRNO_MAP(XX)                                                  \
  XX(EINVAL, -1, "invalid argument")                                          \
  XX(ENOMEM, -2, "out of memory")                                             \
  XX(ENOTOWNER, -3, "lock not held by this owner")                            \
  XX(ETIMEDOUT, -4, "command timed out")                                      \
  XX(ENOTACQUIRED, -5, "lock not acquired in time")                           \
  XX(ECONNLOST, -6, "connection lost")                                        \
  XX(ECONNREFUSED, -7, "connection refused")                                  \
  XX(ESERVER, -8, "server error")                                             \
  XX(EPROTO, -9, "protocol error")                                            \
  XX(ECANCELED, -10, "operation cancelled")                                   \
  XX(ECLOSED, -11, "client closed")                                           \
  XX(EWOULDBLOCK, -12, "would block: blocking call inside a loop callback")   \
  XX(EPENDING, -13, "operation still pending")                                \
  XX(EAUTH, -14, "authentication failed")                                     \
  XX(ELOST, -15, "lock lost")                                                 \
  XX(EIO, -16, "system I/O error")                                            \
  XX(EWRONGTHREAD, -17, "called from a thread that may not use this client")   \
  XX(EFORKED, -18, "client made before fork(): not usable in the child")      \
  XX(EINTERRUPTED, -19, "blocking call interrupted")                          \
  XX(ENOPERM, -20, "not permitted by the Redis user's ACL")                   \
  XX(ETLS, -21, "TLS handshake or certificate verification failed")         \
  XX(ENOTREPLICATED, -22, "not acknowledged by enough replicas")          \
  XX(ENOMASTER, -23, "no master: the sentinels know none by that name")    \
  XX(EUPGRADE, -24, "a read holder cannot take the write lock (no upgrade)")  \
  XX(EWRONGKIND, -25, "the name holds another kind of object")

typedef enum relock_err {
  RELOCK_OK = 0,
#define RELOCK_ERR_ENUM_(name, num, desc) RELOCK_##name = (num),
  RELOCK_ERRNO_MAP(RELOCK_ERR_ENUM_)
#undef RELOCK_ERR_ENUM_
} relock_err_t;

/* A short English description of err ("connection lost"). Never NULL: an
 * unknown code gives "unknown error". */
RELOCK_EXTERN const char *relock_strerror(int err);

/* The code's name ("RELOCK_ECONNLOST"). Never NULL: an unknown code gives
 * "RELOCK_EUNKNOWN". */
RELOCK_EXTERN const char *relock_err_name(int err);

/* The message of the last error a blocking call (relock_lock_lock, ...)
 * returned on the calling thread - the server's text, or what was wrong -
 * until the thread's next blocking call. "" after a success. Never NULL;
 * valid until the thread's next blocking call. */
RELOCK_EXTERN const char *relock_last_error_message(void);

/* The outcome of a call that completes at once but can fail in more than one
 * way (constructors, options): the code and a message naming the problem.
 * Every function taking one accepts NULL for "don't tell me why". */
typedef struct relock_error {
  int code;           /* 0 or a RELOCK_E* code */
  char message[256];  /* "" on success */
} relock_error_t;

#ifdef __cplusplus
}
#endif
#endif /* RELOCK_ERROR_H */
