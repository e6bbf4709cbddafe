/* Redis replies as relock hands them out: the value of a succeeded command
 * future (relock_client_command_async). */
#ifndef RELOCK_REPLY_H
#define RELOCK_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include <relock/common.h>
#include <relock/future.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum relock_reply_type {
  RELOCK_REPLY_NIL = 0,
  RELOCK_REPLY_INTEGER,
  RELOCK_REPLY_STRING,
  RELOCK_REPLY_STATUS,
  RELOCK_REPLY_ERROR,
  RELOCK_REPLY_ARRAY
} relock_reply_type_t;

/* A library-owned copy of a Redis reply: read it, don't change it. */
typedef struct relock_reply {
  relock_reply_type_t type;
  int64_t integer;                 /* INTEGER */
  const char *str;                 /* STRING, STATUS, ERROR: NUL-terminated */
  size_t len;                      /* its length (a STRING may hold NULs) */
  struct relock_reply *const *element; /* ARRAY (NULL when it is empty) */
  size_t elements;
} relock_reply_t;

/* The reply of a succeeded command future (NULL otherwise). Valid while the
 * caller holds a reference to the future. */
RELOCK_EXTERN const relock_reply_t *relock_future_reply(const relock_future_t *future);

#ifdef __cplusplus
}
#endif
#endif /* RELOCK_REPLY_H */
