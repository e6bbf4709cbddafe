/* Filling a relock_error_t: the one helper every constructor and option
 * setter reports through, so that all of them fill it the same way. */
#ifndef RELOCK__BASE_ERROR_H
#define RELOCK__BASE_ERROR_H

#include <relock/error.h>

/* Fills err (which may be NULL) with code and a printf-style message; fmt
 * NULL leaves the message empty (for success: code 0). Returns code. */
int relock__error_set(relock_error_t *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Records what relock_last_error_message says on this thread (msg NULL or
 * code 0: ""). Returns code. */
int relock__last_error_set(int code, const char *msg);

/* How deep the calling thread is in callbacks of the user's that the
 * library called: futures' (future/future.c) and events' (stats/stats.h).
 * Inside one a blocking call is refused (RELOCK_EWOULDBLOCK) and a free
 * cannot wait for the loop. Thread state, like the last error. */
extern _Thread_local int relock__callback_depth;

#endif /* RELOCK__BASE_ERROR_H */
