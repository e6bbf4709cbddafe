/* The lock object's insides, shared by lock.c, lock_wait.c and renewal.c. */
#ifndef RELOCK_LOCK_IMPL_H
#define RELOCK_LOCK_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <relock/lock.h>

#include "client/client_impl.h"

/* "<client-id>:<owner>": 64 + 1 + 20 digits + NUL fit. */
#define RELOCK__FIELD_MAX 96

struct relock_lock {
  relock_client_t *client;
  int refs;                 /* the caller's, and one per operation or hold */
  relock_lost_cb lost_cb;
  void *lost_arg;
  char *channel;            /* redisson_lock__channel:{name} */
  size_t channel_len;
  size_t len;
  char name[];
};

relock_lock_t *relock__lock_retain(relock_lock_t *lock);
void relock__lock_release(relock_lock_t *lock);

/* Writes owner's field; returns its length. */
size_t relock__lock_field(const relock_lock_t *lock, uint64_t owner, char field[RELOCK__FIELD_MAX]);

/* A name derived from the lock's the way Redisson derives its channel and
 * latch names, so that it lands in the lock's cluster slot:
 * "prefix:{name}" or, when the name has a hash tag already, "prefix:name";
 * then suffix. Returns a malloc'ed string (NULL when out of memory). */
char *relock__lock_derived_name(const relock_lock_t *lock, const char *prefix, const char *suffix, size_t *len);

/* Tells the lock's lost callback (if any). */
void relock__lock_notify_lost(relock_lock_t *lock, uint64_t owner, int reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif /* RELOCK_LOCK_IMPL_H */
