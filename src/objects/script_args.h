/* One builder for a kind's script: its KEYS, then its ARGV, each added in
 * the order the script reads them, and the send (lock_kind.h's
 * operations). It owns what it writes or is handed - numbers, the lock's
 * channel, names derived from the lock's - and lets go of all of it at the
 * send; a name it could not make (out of memory) is noted, and the send then
 * sends nothing and answers NULL:
 *
 *   relock__args_t a;
 *   relock__args_init(&a);
 *   relock__args_lock(&a, call->lock);                 KEYS[1]
 *   relock__args_channel(&a, call->lock);              KEYS[2]
 *   relock__args_number(&a, call->lease_ms);           ARGV[1]
 *   relock__args_str(&a, call->field, call->field_len); ARGV[2]
 *   return relock__args_send(call, RELOCK__SCRIPT_..., &a);
 *
 * Keys come first: a key added after an argument is a bug (asserted).
 * Everything added must live until the send; the builder copies nothing it
 * is given by pointer. Low in the objects layer: it knows the lock object
 * and Redisson's names (lock_impl.h, keys.c) and calls nothing of lock*.c. */
#ifndef RELOCK__OBJECTS_SCRIPT_ARGS_H
#define RELOCK__OBJECTS_SCRIPT_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include <relock/future.h>

#include "base/decimal.h"
#include "objects/lock_impl.h"

/* The most keys and arguments of one script (the fair lock's acquire: 11),
 * numbers, and names the builder frees. */
#define RELOCK__ARGS_MAX 12
#define RELOCK__ARGS_NUMBERS 4
#define RELOCK__ARGS_OWNED 4

typedef struct relock__args {
  const char *argv[RELOCK__ARGS_MAX]; /* KEYS (nkeys), then ARGV */
  size_t lens[RELOCK__ARGS_MAX];
  int argc, nkeys;
  int failed;                         /* a name could not be made: the send sends nothing */
  int nnumbers, nowned;
  char numbers[RELOCK__ARGS_NUMBERS][RELOCK__DECIMAL_MAX];
  char *owned[RELOCK__ARGS_OWNED];    /* malloc'ed names, freed at the send */
  char channel[RELOCK__CHANNEL_BUF];  /* the lock's channel, when it fits */
} relock__args_t;

void relock__args_init(relock__args_t *a);

/* KEYS. */
void relock__args_key(relock__args_t *a, const char *s, size_t len);
/* The lock's name. */
void relock__args_lock(relock__args_t *a, const relock_lock_t *lock);
/* The lock's channel (its kind's, relock__lock_channel_to). */
void relock__args_channel(relock__args_t *a, const relock_lock_t *lock);
/* "prefix:{name}" (relock__derived_name), the lock's name in its slot. */
void relock__args_derived(relock__args_t *a, const relock_lock_t *lock, const char *prefix);
/* A malloc'ed name (NUL-terminated), which the builder frees; NULL: out of
 * memory. */
void relock__args_take(relock__args_t *a, char *s);

/* ARGV. */
void relock__args_str(relock__args_t *a, const char *s, size_t len);
void relock__args_cstr(relock__args_t *a, const char *s); /* NUL-terminated */
void relock__args_number(relock__args_t *a, int64_t value); /* in decimal */
void relock__args_flag(relock__args_t *a, int flag);       /* "1" or "0" */
/* A release script's last latch argument: how long its latch remembers the
 * answer, or "undo" for a give-back (its latch is the acquisition's). */
void relock__args_latch_ttl(relock__args_t *a, const relock__lock_call_t *call, int undo);

/* Sends script (a relock__scripts index) with a's KEYS and ARGV and call's
 * options (call->spec), and frees what a owns. NULL when out of memory
 * (nothing was sent). */
relock_future_t *relock__args_send(relock__lock_call_t *call, int script, relock__args_t *a);

#endif /* RELOCK__OBJECTS_SCRIPT_ARGS_H */
