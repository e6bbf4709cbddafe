/* The permit-expirable semaphore (Redisson's RPermitExpirableSemaphore,
 * include/relock/permit_semaphore.h): a lock object of a kind whose
 * acquisitions take one permit, known by the acquisition's request id
 * (no_latch, settle): the permit id, kept in "{name}:timeout" as the 16
 * bytes its hex digits spell (as Redisson keeps its ids), which also makes
 * a repeated try take nothing more and tells the undo which permit to give
 * back. It waits as the semaphore does, on "redisson_sc:{name}"
 * (RELOCK__WAIT_PERMITS), or until the next permit expires (the try's
 * answer). The handle a caller gets is that lock object's address; struct
 * relock_permit_semaphore is never defined.
 *
 * A permit with a lease is a hold the watchdog knows (permit_holds): it
 * renews a watched one (no fixed lease) and checks a fixed one, as it does
 * a lock's, and tells this object when one is lost. The watchdog knows a
 * hold by an owner (64 bits) and asks the holder for its field; a permit
 * id is 128. So a tracked permit's id is made of two halves: the client's
 * tag (the first 16 hex digits of its id), then the owner, a random
 * number - and the holder turns an owner back into the permit. */
#include <config.h>

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <relock/permit_semaphore.h>

#include "client/client_impl.h"
#include "future/promise.h"
#include "objects/counter.h"
#include "objects/lock_impl.h"
#include "objects/script_args.h"
#include "base/hashtab.h"
#include "base/random.h"
#include "redis/scripts.h"
#include "watchdog/hold.h"
#include "watchdog/renewal.h"

/* Redisson's suffixName: "{name}:timeout", or "name:timeout" when the
 * name has a hash tag already. Malloc'ed, its length in *len (may be
 * NULL); NULL when out of memory. */
static char *timeout_name(const relock_lock_t *lock, size_t *len) {
  int tagged = memchr(lock->name, '{', lock->len) != NULL;
  size_t n = lock->len + strlen(":timeout") + (tagged ? 0 : 2);
  if (len != NULL)
    *len = n;
  char *s = malloc(n + 1);
  if (s == NULL)
    return NULL;
  char *p = s;
  if (!tagged)
    *p++ = '{';
  memcpy(p, lock->name, lock->len);
  p += lock->len;
  if (!tagged)
    *p++ = '}';
  memcpy(p, ":timeout", sizeof(":timeout"));
  return s;
}

/* Redisson keeps a permit in the zset as the 16 bytes its id's hex digits
 * spell. Returns 0, or -1 if hex is not 32 hex digits. */
#define PERMIT_BYTES ((RELOCK_PERMIT_ID_SIZE - 1) / 2)

static int hex_digit(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int permit_bytes(const char *hex, char bytes[PERMIT_BYTES]) {
  for (size_t i = 0; i < PERMIT_BYTES; i++) {
    int hi = hex[2 * i] != '\0' ? hex_digit(hex[2 * i]) : -1, lo = hi >= 0 ? hex_digit(hex[2 * i + 1]) : -1;
    if (hi < 0 || lo < 0)
      return -1;
    bytes[i] = (char)(hi << 4 | lo);
  }
  return hex[2 * PERMIT_BYTES] == '\0' ? 0 : -1;
}

/* -- tracked permits: id = the client's tag, then the owner ------------------*/

/* The client's tag: its id's first 16 hex digits (a UUID's, dashes
 * skipped), so that a tool reading the zset can tell whose a permit is;
 * a client id that has fewer is hashed instead. */
static uint64_t client_tag(const relock_client_t *c) {
  const char *id = c->settings.client_id;
  uint64_t tag = 0;
  int digits = 0;
  for (const char *p = id; *p != '\0' && digits < 16; p++) {
    int d = hex_digit(*p);
    if (d < 0 && *p != '-')
      break;
    if (d >= 0)
      tag = tag << 4 | (uint64_t)d, digits++;
  }
  return digits == 16 ? tag : relock__hash_bytes(RELOCK__HASH_SEED, id, strlen(id));
}

static void hex64(uint64_t x, char out[16]) {
  static const char hex[] = "0123456789abcdef";
  for (int i = 15; i >= 0; i--, x >>= 4)
    out[i] = hex[x & 15];
}

/* The permit kind's request ids (relock__lock_kind_t.request_id). */
static void tracked_permit_id(const relock_lock_t *lock, char id[RELOCK__REQUEST_ID_SIZE], uint64_t *owner) {
  relock_client_t *c = lock->client;
  *owner = relock__random(&c->rng);
  hex64(client_tag(c), id);
  hex64(*owner, id + 16);
  id[32] = '\0';
}

/* The owner of permit id (32 hex digits) if this client made it. */
static int owner_of(const relock_lock_t *lock, const char *id, uint64_t *owner) {
  uint64_t halves[2] = {0, 0};
  for (int i = 0; i < 32; i++)
    halves[i / 16] = halves[i / 16] << 4 | (uint64_t)hex_digit(id[i]);
  *owner = halves[1];
  return halves[0] == client_tag(lock->client);
}

/* The acquisition's permit: its request id (ending its latch name). */
static void permit_of(const relock__lock_call_t *call, char bytes[PERMIT_BYTES]) {
  permit_bytes(call->latch + call->latch_len - (RELOCK_PERMIT_ID_SIZE - 1), bytes); /* hex digits: cannot fail */
}

static relock_future_t *acquire(relock__lock_call_t *call) {
  char permit[PERMIT_BYTES];
  permit_of(call, permit);
  relock__args_t a;
  relock__args_init(&a);
  relock__args_lock(&a, call->lock);
  relock__args_take(&a, timeout_name(call->lock, NULL));
  relock__args_channel(&a, call->lock);
  relock__args_number(&a, call->lease_ms);
  relock__args_str(&a, permit, PERMIT_BYTES);
  relock__args_cstr(&a, call->publish);
  return relock__args_send(call, RELOCK__SCRIPT_PERMIT_SEMAPHORE_ACQUIRE, &a);
}

static relock_future_t *undo(relock__lock_call_t *call) {
  char permit[PERMIT_BYTES];
  permit_of(call, permit);
  relock__args_t a;
  relock__args_init(&a);
  relock__args_lock(&a, call->lock);
  relock__args_take(&a, timeout_name(call->lock, NULL));
  relock__args_channel(&a, call->lock);
  relock__args_str(&a, permit, PERMIT_BYTES);
  relock__args_cstr(&a, call->publish);
  return relock__args_send(call, RELOCK__SCRIPT_PERMIT_SEMAPHORE_UNDO, &a);
}

_Static_assert(RELOCK_PERMIT_ID_SIZE == RELOCK__REQUEST_ID_SIZE, "a permit id is a request id");

/* The acquisition's future: its permit id (a string), no value when none
 * was acquired. */
static void settle(relock_future_t *out, const relock__answer_t *a, const char *id) {
  if (a != NULL)
    relock__future_succeed_string(out, id, strlen(id));
  else
    relock__future_succeed(out);
}

static const relock__lock_kind_t permit_semaphore = {
    .what = "permit-expirable semaphore",
    .stat = RELOCK_KIND_PERMIT_SEMAPHORE,
    .field_suffix = "",
    .channel_prefix = "redisson_sc",
    .role = RELOCK__ROLE_PERMIT,
    .wait = RELOCK__WAIT_PERMITS,
    .no_hold = 1,
    .no_latch = 1,
    .permit_holds = 1,
    .request_id = tracked_permit_id,
    .acquire = acquire,
    .settle = settle,
    .undo = undo,
};

_Static_assert(RELOCK_PERMIT_NO_LEASE == RELOCK__NO_LEASE, "the lease for no lease");

static relock_lock_t *obj(relock_permit_semaphore_t *s) { return (relock_lock_t *)(void *)s; }

static relock_future_t *update_of(relock_lock_t *lock, const char *what, int64_t n, int boolean, const char *permit,
                                  const relock__release_req_t *req);

/* -- the watchdog's holder: the object, for its tracked permits ---------------*/

static relock_lock_t *holder_lock(const relock__holder_t *h) {
  return relock__container_of(h, relock_lock_t, holder);
}

static const char *holder_key(const relock__holder_t *h, size_t *len) {
  *len = holder_lock(h)->len;
  return holder_lock(h)->name;
}

/* The permit's id, 32 hex digits and a NUL. */
static void holder_name(const relock__holder_t *h, uint64_t owner, char name[RELOCK__HOLD_FIELD_MAX]) {
  hex64(client_tag(holder_lock(h)->client), name);
  hex64(owner, name + 16);
  name[32] = '\0';
}

/* The permit as the zset keeps it: the 16 bytes its id spells. */
static size_t holder_field(const relock__holder_t *h, uint64_t owner, char field[RELOCK__HOLD_FIELD_MAX]) {
  char id[RELOCK__HOLD_FIELD_MAX];
  holder_name(h, owner, id);
  permit_bytes(id, field);
  field[PERMIT_BYTES] = '\0';
  return PERMIT_BYTES;
}

static void holder_lost(relock__holder_t *h, uint64_t owner, int reason, const char *msg) {
  relock_lock_t *lock = holder_lock(h);
  if (relock__lock_lost_cb(lock) == NULL)
    return;
  char id[RELOCK__HOLD_FIELD_MAX];
  holder_name(h, owner, id);
  /* kept as the lock's callback type; called as what it was set as */
  relock_permit_lost_cb cb = (relock_permit_lost_cb)(void (*)(void))lock->extra->lost_cb;
  cb((relock_permit_semaphore_t *)(void *)lock, id, reason, msg, lock->extra->lost_arg);
}

static void holder_drop(relock__holder_t *h) { relock__lock_unref(holder_lock(h)); }

/* A permit is one hold: no lease is kept for others, and no latch is
 * needed (releasing a permit twice releases it once). */
static relock_future_t *holder_release(relock__holder_t *h, uint64_t owner, const relock__release_req_t *req) {
  char permit[RELOCK__HOLD_FIELD_MAX];
  holder_field(h, owner, permit);
  return update_of(holder_lock(h), "release", 0, 1, permit, req);
}

static const relock__holder_ops_t holder_ops = {
    .what = "permit of semaphore",
    .key = holder_key,
    .field = holder_field,
    .name = holder_name,
    .on_lost = holder_lost,
    .drop = holder_drop,
    .release = holder_release,
    .not_held_false = 1,
};

relock_permit_semaphore_t *relock_permit_semaphore_new(relock_client_t *client, const char *name,
                                                       relock_error_t *err) {
  relock_lock_t *lock = relock__lock_new(client, name, &permit_semaphore, err);
  if (lock != NULL)
    lock->holder.ops = &holder_ops;
  return (relock_permit_semaphore_t *)(void *)lock;
}

void relock_permit_semaphore_free(relock_permit_semaphore_t *s) { relock_lock_free(obj(s)); }

const char *relock_permit_semaphore_name(const relock_permit_semaphore_t *s) {
  return relock_lock_name((const relock_lock_t *)(const void *)s);
}

/* -- asynchronous ------------------------------------------------------------*/

#define CHECK(s) \
  if ((s) == NULL) \
  return relock__counter_null("permit-expirable semaphore")

/* An update (lua/permit_semaphore_update.lua); a release's permit (its
 * PERMIT_BYTES bytes), else NULL; req: NULL, or the ledger's release
 * (release-on-close, or retried in the background). */
static relock_future_t *update_of(relock_lock_t *lock, const char *what, int64_t n, int boolean, const char *permit,
                                  const relock__release_req_t *req) {
  size_t timeout_len;
  char *timeout = timeout_name(lock, &timeout_len);
  if (timeout == NULL)
    return NULL;
  relock_future_t *f = relock__counter_update_with(lock, RELOCK__SCRIPT_PERMIT_SEMAPHORE_UPDATE, what, n, boolean,
                                                   timeout, timeout_len, permit, permit != NULL ? PERMIT_BYTES : 0,
                                                   req != NULL && req->on_close, req != NULL ? req->answer_by_ns : 0);
  free(timeout);
  return f;
}

static relock_future_t *update(relock_permit_semaphore_t *s, const char *what, int64_t n, int boolean,
                               const char *permit) {
  return update_of(obj(s), what, n, boolean, permit, NULL);
}

relock_future_t *relock_permit_semaphore_acquire_async(relock_permit_semaphore_t *s, int64_t wait_ms,
                                                       int64_t lease_ms) {
  CHECK(s);
  /* With a lease, or without one and release-on-close, the permit is a
   * hold of the ledger's (lock_acquire.c). */
  return relock__lock_acquire_async(obj(s), 0, 1, wait_ms, lease_ms);
}

static relock_future_t *bad_id(relock_lock_t *lock, const char *id) {
  return relock__future_failed(lock->client->exec, RELOCK_EINVAL, "id must be a permit id, 32 hex digits (got %s%.40s%s)",
                               id == NULL ? "NULL" : "\"", id == NULL ? "" : id, id == NULL ? "" : "\"");
}

relock_future_t *relock_permit_semaphore_release_async(relock_permit_semaphore_t *s, const char *id) {
  CHECK(s);
  relock_lock_t *lock = obj(s);
  char permit[PERMIT_BYTES];
  if (id == NULL || permit_bytes(id, permit) != 0)
    return bad_id(lock, id);
  relock_future_t *f;
  if (relock__client_enter(lock->client, &f) != 0)
    return f;
  /* A permit of this client's that the ledger knows (with a lease, or
   * kept for release-on-close) is released by it: it is let go at once,
   * and one found lost answers RELOCK_ELOST. Any other goes straight. */
  relock__hold_id_t hold = relock__lock_hold(lock, 0);
  if (owner_of(lock, id, &hold.owner) && relock__hold_validity_ms(&lock->client->ledger, &hold) != RELOCK_ENOTOWNER)
    f = relock__hold_release(&lock->client->ledger, &hold, &relock__lock_ref(lock)->holder, NULL, NULL);
  else
    f = update(s, "release", 0, 1, permit);
  relock__exec_leave(lock->exec);
  return f;
}

/* -- is it still mine? ------------------------------------------------------*/

int relock_permit_semaphore_on_lost(relock_permit_semaphore_t *s, relock_permit_lost_cb cb, void *arg) {
  if (s == NULL)
    return RELOCK_EINVAL;
  int r = relock__client_enter_code(obj(s)->client);
  if (r != 0)
    return r;
  /* kept as the lock's callback type, called as a permit's (holder_lost) */
  r = relock__lock_set_lost(obj(s), (relock_lost_cb)(void (*)(void))cb, arg);
  relock__exec_leave(obj(s)->exec);
  return r;
}

int64_t relock_permit_semaphore_validity_ms(relock_permit_semaphore_t *s, const char *id) {
  char permit[PERMIT_BYTES];
  uint64_t owner;
  if (s == NULL || id == NULL || permit_bytes(id, permit) != 0)
    return RELOCK_EINVAL;
  if (!owner_of(obj(s), id, &owner))
    return RELOCK_ENOTOWNER; /* not this client's */
  int r = relock__client_enter_code(obj(s)->client);
  if (r != 0)
    return r;
  relock__hold_id_t hold = relock__lock_hold(obj(s), owner);
  int64_t ms = relock__hold_validity_ms(&obj(s)->client->ledger, &hold);
  if (ms == INT64_MAX) /* kept for release-on-close: a permit without a lease (permit_semaphore.h) */
    ms = RELOCK_ENOTOWNER;
  relock__exec_leave(obj(s)->exec);
  return ms;
}

relock_future_t *relock_permit_semaphore_validate_async(relock_permit_semaphore_t *s, const char *id) {
  CHECK(s);
  char permit[PERMIT_BYTES];
  uint64_t owner;
  if (id == NULL || permit_bytes(id, permit) != 0)
    return bad_id(obj(s), id);
  if (!owner_of(obj(s), id, &owner))
    return relock__future_failed(obj(s)->client->exec, RELOCK_ENOTOWNER,
                                 "permit %s of semaphore %s was not taken by this client", id, obj(s)->name);
  relock_future_t *f;
  if (relock__client_enter(obj(s)->client, &f) != 0)
    return f;
  relock__hold_id_t hold = relock__lock_hold(obj(s), owner);
  f = relock__renewal_validate(&obj(s)->client->renewal, &hold);
  relock__exec_leave(obj(s)->exec);
  return f;
}

relock_future_t *relock_permit_semaphore_try_set_permits_async(relock_permit_semaphore_t *s, int64_t permits) {
  CHECK(s);
  if (permits < 0)
    return relock__future_failed(obj(s)->client->exec, RELOCK_EINVAL, "permits must be >= 0 (got %lld)",
                                 (long long)permits);
  return update(s, "set", permits, 1, NULL);
}

relock_future_t *relock_permit_semaphore_add_permits_async(relock_permit_semaphore_t *s, int64_t permits) {
  CHECK(s);
  return update(s, "add", permits, 0, NULL);
}

relock_future_t *relock_permit_semaphore_available_async(relock_permit_semaphore_t *s) {
  CHECK(s);
  return update(s, "available", 0, 0, NULL);
}

/* -- blocking ----------------------------------------------------------------*/

int relock_permit_semaphore_acquire(relock_permit_semaphore_t *s, int64_t wait_ms, int64_t lease_ms,
                                    char id[RELOCK_PERMIT_ID_SIZE]) {
  int r = relock__sync_would_block(obj(s));
  if (r != 0) {
    if (id != NULL)
      id[0] = '\0';
    return r;
  }
  return relock__sync_wait_string(relock_permit_semaphore_acquire_async(s, wait_ms, lease_ms), id,
                                  id != NULL ? RELOCK_PERMIT_ID_SIZE : 0);
}

int relock_permit_semaphore_release(relock_permit_semaphore_t *s, const char *id, int *released) {
  int r = relock__sync_would_block(obj(s));
  return r != 0 ? r : relock__sync_wait_flag(relock_permit_semaphore_release_async(s, id), released);
}

int relock_permit_semaphore_try_set_permits(relock_permit_semaphore_t *s, int64_t permits, int *set) {
  int r = relock__sync_would_block(obj(s));
  return r != 0 ? r : relock__sync_wait_flag(relock_permit_semaphore_try_set_permits_async(s, permits), set);
}

int relock_permit_semaphore_available(relock_permit_semaphore_t *s, int64_t *available) {
  int r = relock__sync_would_block(obj(s));
  return r != 0 ? r : relock__sync_wait_value(relock_permit_semaphore_available_async(s), available);
}

int relock_permit_semaphore_add_permits(relock_permit_semaphore_t *s, int64_t permits, int64_t *available) {
  int r = relock__sync_would_block(obj(s));
  return r != 0 ? r : relock__sync_wait_value(relock_permit_semaphore_add_permits_async(s, permits), available);
}
