/* Redisson's naming, for every object: the field a holder is known by in
 * Redis, the names derived from an object's name (its unlock channel, its
 * latches), request ids and how long a latch lives (docs/ARCHITECTURE.md,
 * "Where Redisson's format is defined").
 *
 * Plain inputs only (a name and its length, the client id, the settings),
 * so that any object - lock, semaphore, fair lock - names things the way
 * Redisson does without depending on another object. */
#ifndef RELOCK__OBJECTS_KEYS_H
#define RELOCK__OBJECTS_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "config/settings.h"

/* "<client-id>:<owner>": 64 + 1 + 20 digits + NUL fit. */
#define RELOCK__FIELD_MAX 96

/* A request id: 32 hex digits and a NUL. */
#define RELOCK__REQUEST_ID_SIZE 33

/* Writes the field "<client_id>:<owner>" (owner in decimal); returns its
 * length. */
size_t relock__field(const char *client_id, uint64_t owner, char field[RELOCK__FIELD_MAX]);

/* A name derived from an object's name (len bytes) the way Redisson derives
 * its channel and latch names, so that it lands in the object's cluster
 * slot: "prefix:{name}" or, when the name has a hash tag already,
 * "prefix:name"; then suffix (NULL: none). Returns a malloc'ed string, its
 * length in *out_len (may be NULL); NULL when out of memory. */
char *relock__derived_name(const char *name, size_t len, const char *prefix, const char *suffix, size_t *out_len);

/* "<prefix>{name}", whatever the name holds (Redisson's count-down latch
 * channel). Malloc'ed, its length in *out_len; NULL when out of memory. */
char *relock__braced_name(const char *prefix, const char *name, size_t len, size_t *out_len);

/* The same names (relock__derived_name without a suffix), written into out
 * (size bytes, NUL included) only if they fit; each returns the name's
 * length, whether it was written or not (as snprintf does, without the
 * truncated copy): a caller tries a buffer on its stack, and allocates only
 * for the rare name that does not fit. */
size_t relock__derived_name_to(char *out, size_t size, const char *name, size_t len, const char *prefix);
size_t relock__braced_name_to(char *out, size_t size, const char *prefix, const char *name, size_t len);

/* The lock's unlock channel: "redisson_lock__channel:{name}". */
char *relock__lock_channel_name(const char *name, size_t len, size_t *out_len);

/* The relock processes waiting for a lock, "relock_lock_latch:{name}:waiters"
 * (ours: a zset of waker ids, lua/lock_acquire.lua; named like the
 * acquisition latches, so that a user the ACL lets take latches may keep
 * it, docs/ACL.md). */
char *relock__lock_waiters_name(const char *name, size_t len, size_t *out_len);

/* The latch remembering the answer to release request id:
 * "redisson_unlock_latch:{name}:<id>". */
char *relock__unlock_latch_name(const char *name, size_t len, const char *id, size_t *out_len);

/* The latch remembering what acquire request id took:
 * "relock_lock_latch:{name}:<id>" (ours: Redisson has no such latch). */
char *relock__acquire_latch_name(const char *name, size_t len, const char *id, size_t *out_len);

/* A waker id: 18 decimal digits, the first not 0 (a number Redisson's
 * waiters, which decode the unlock channel's messages as longs, take for
 * neither of theirs: "0" unlock, "1" read unlock). */
#define RELOCK__WAKER_ID_SIZE 19
void relock__waker_id(uint64_t *rng, char id[RELOCK__WAKER_ID_SIZE]);

/* A random request id (32 hex digits) from the xorshift state rng. */
void relock__request_id(uint64_t *rng, char id[RELOCK__REQUEST_ID_SIZE]);

/* The request id of the 128 bits bits[0..1] (relock__request_id's format):
 * an id kept as two numbers (a hold's next release id) and written out when
 * it is sent. */
void relock__request_id_of(const uint64_t bits[2], char id[RELOCK__REQUEST_ID_SIZE]);

/* How long a latch (acquire or release) remembers its answer: longer than
 * every retry of the request it answers for. */
int64_t relock__latch_ttl_ms(const relock__settings_t *s);

#endif /* RELOCK__OBJECTS_KEYS_H */
