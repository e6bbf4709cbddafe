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

#endif /* RELOCK__BASE_ERROR_H */
