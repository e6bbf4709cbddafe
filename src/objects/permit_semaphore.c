/* The permit-expirable semaphore (Redisson's RPermitExpirableSemaphore,
 * include/relock/permit_semaphore.h): a lock object of a kind whose
 * acquisitions take one permit and no hold, known by the acquisition's
 * request id (no_latch, settle): the permit id, kept in "{name}:timeout" as the
 * 16 bytes its hex digits spell (as Redisson keeps its ids), which also makes a repeated try take nothing more and
 * tells the undo which permit to give back. It waits as the semaphore does,
 * on "redisson_sc:{name}" (RELOCK__WAIT_PERMITS), or until the next permit
 * expires (the try's answer). The handle a caller gets is that lock
 * object's address; struct relock_permit_semaphore is never defined. */
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
#include "redis/scripts.h"

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
    .field_suffix = "",
    .channel_prefix = "redisson_sc",
    .role = RELOCK__ROLE_PLAIN,
    .wait = RELOCK__WAIT_PERMITS,
    .no_hold = 1,
    .no_latch = 1,
    .acquire = acquire,
    .settle = settle,
    .undo = undo,
};

static relock_lock_t *obj(relock_permit_semaphore_t *s) { return (relock_lock_t *)(void *)s; }

relock_permit_semaphore_t *relock_permit_semaphore_new(relock_client_t *client, const char *name,
                                                       relock_error_t *err) {
  return (relock_permit_semaphore_t *)(void *)relock__lock_new(client, name, &permit_semaphore, err);
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
 * PERMIT_BYTES bytes), else NULL; on_close: a release the close waits for. */
static relock_future_t *update_of(relock_lock_t *lock, const char *what, int64_t n, int boolean, const char *permit,
                                  int on_close) {
  size_t timeout_len;
  char *timeout = timeout_name(lock, &timeout_len);
  if (timeout == NULL)
    return NULL;
  relock_future_t *f = relock__counter_update_with(lock, RELOCK__SCRIPT_PERMIT_SEMAPHORE_UPDATE, what, n, boolean,
                                                   timeout, timeout_len, permit, permit != NULL ? PERMIT_BYTES : 0,
                                                   on_close);
  free(timeout);
  return f;
}

static relock_future_t *update(relock_permit_semaphore_t *s, const char *what, int64_t n, int boolean,
                               const char *permit) {
  return update_of(obj(s), what, n, boolean, permit, 0);
}

/* -- release-on-close ----------------------------------------------------------
 * With the option, the permits this client took without a lease are kept
 * in the client's list (they never come back by themselves; one with a
 * lease does), each with a reference on its semaphore, until released
 * here or by the close. A release takes its permit off the list when it
 * is sent (one that then fails stays taken, as without the option). The
 * list is searched linearly: it holds the permits a client has out at
 * once without a lease. */

typedef struct kept_permit {
  relock__link_t link; /* in client->kept_permits */
  relock_lock_t *lock; /* a reference */
  char id[RELOCK_PERMIT_ID_SIZE];
} kept_permit_t;

static void kept_free(kept_permit_t *k) {
  relock__lock_unref(k->lock);
  free(k);
}

static void on_kept_released(relock_future_t *f, void *arg) {
  relock_client_t *c = arg;
  if (relock_future_error(f) != 0)
    c->renewal.close_unreleased++;
  else if (relock_future_bool(f))
    c->renewal.close_released++; /* 0: it was not taken any more (force released, or the key deleted) */
  relock_future_release(f);
}

/* The close: every kept permit's release, sent before the connections close. */
static void release_kept(relock_client_t *c) {
  while (!relock__list_empty(&c->kept_permits)) {
    kept_permit_t *k = relock__container_of(c->kept_permits.next, kept_permit_t, link);
    relock__list_remove(&k->link);
    char permit[PERMIT_BYTES];
    permit_bytes(k->id, permit); /* ours: cannot fail */
    relock_future_t *f = update_of(k->lock, "release", 0, 1, permit, 1);
    if (f == NULL)
      c->renewal.close_unreleased++;
    else
      relock_future_on_done(f, on_kept_released, c);
    kept_free(k);
  }
}

static void on_acquired_keep(relock_future_t *f, void *arg) {
  kept_permit_t *k = arg;
  relock_client_t *c = k->lock->client;
  size_t len = 0;
  const char *id = relock_future_error(f) == 0 && relock_future_value_type(f) == RELOCK_VALUE_STRING
                       ? relock_future_string(f, &len)
                       : NULL;
  if (id == NULL || len != RELOCK_PERMIT_ID_SIZE - 1 || c->closing) { /* none taken, or the close has passed */
    kept_free(k);
    return;
  }
  memcpy(k->id, id, len + 1);
  relock__list_push_back(&c->kept_permits, &k->link);
  c->kept_permits_release = release_kept;
}

/* Keeps the permit f acquires, once it does. */
static void keep_when_acquired(relock_lock_t *lock, relock_future_t *f) {
  relock__exec_t *x = lock->client->exec;
  if (relock__exec_enter(x, NULL) != 0)
    return; /* refused: so was the acquisition */
  kept_permit_t *k = malloc(sizeof(*k));
  if (k != NULL) {
    k->lock = relock__lock_ref(lock);
    if (relock_future_on_done(f, on_acquired_keep, k) != 0)
      kept_free(k);
  }
  relock__exec_leave(x);
}

/* A release of id is sent: it is not kept any more. */
static void unkeep(relock_lock_t *lock, const char *id) {
  relock_client_t *c = lock->client;
  if (relock__exec_enter(c->exec, NULL) != 0)
    return;
  for (relock__link_t *l = c->kept_permits.next; l != &c->kept_permits; l = l->next) {
    kept_permit_t *k = relock__container_of(l, kept_permit_t, link);
    if (k->lock == lock && strncasecmp(k->id, id, RELOCK_PERMIT_ID_SIZE - 1) == 0) {
      relock__list_remove(&k->link);
      kept_free(k);
      break;
    }
  }
  relock__exec_leave(c->exec);
}

relock_future_t *relock_permit_semaphore_acquire_async(relock_permit_semaphore_t *s, int64_t wait_ms,
                                                       int64_t lease_ms) {
  CHECK(s);
  relock_future_t *f = relock__lock_acquire_async(obj(s), 0, 1, wait_ms, lease_ms);
  if (f != NULL && lease_ms == RELOCK_INFINITE && obj(s)->client->settings.opt.release_on_close)
    keep_when_acquired(obj(s), f);
  return f;
}

relock_future_t *relock_permit_semaphore_release_async(relock_permit_semaphore_t *s, const char *id) {
  CHECK(s);
  char permit[PERMIT_BYTES];
  if (id == NULL || permit_bytes(id, permit) != 0)
    return relock__future_failed(obj(s)->client->exec, RELOCK_EINVAL, "id must be a permit id, 32 hex digits (got %s%.40s%s)",
                                 id == NULL ? "NULL" : "\"", id == NULL ? "" : id, id == NULL ? "" : "\"");
  if (obj(s)->client->settings.opt.release_on_close)
    unkeep(obj(s), id);
  return update(s, "release", 0, 1, permit);
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
