/* The builder of a kind's KEYS and ARGV (script_args.h). */
#include <config.h>

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "objects/keys.h"
#include "objects/script_args.h"
#include "redis/call.h"
#include "redis/scripts.h"

void relock__args_init(relock__args_t *a) {
  a->argc = a->nkeys = 0;
  a->failed = 0;
  a->nnumbers = a->nowned = 0;
}

static void add(relock__args_t *a, const char *s, size_t len) {
  assert(a->argc < RELOCK__ARGS_MAX);
  if (a->argc == RELOCK__ARGS_MAX) {
    a->failed = 1;
    return;
  }
  a->argv[a->argc] = s;
  a->lens[a->argc++] = len;
}

void relock__args_key(relock__args_t *a, const char *s, size_t len) {
  assert(a->argc == a->nkeys); /* keys before every argument */
  add(a, s, len);
  a->nkeys = a->argc;
}

void relock__args_lock(relock__args_t *a, const relock_lock_t *lock) { relock__args_key(a, lock->name, lock->len); }

/* Keeps s to free at the send; 0, or -1 (noted) for NULL. */
static int own(relock__args_t *a, char *s) {
  assert(a->nowned < RELOCK__ARGS_OWNED);
  if (s == NULL || a->nowned == RELOCK__ARGS_OWNED) {
    free(s);
    a->failed = 1;
    return -1;
  }
  a->owned[a->nowned++] = s;
  return 0;
}

void relock__args_channel(relock__args_t *a, const relock_lock_t *lock) {
  size_t n = relock__lock_channel_to(lock, a->channel, sizeof(a->channel));
  char *s = a->channel;
  if (n >= sizeof(a->channel)) { /* a long name: rare */
    if (own(a, s = malloc(n + 1)) != 0)
      return;
    relock__lock_channel_to(lock, s, n + 1);
  }
  relock__args_key(a, s, n);
}

void relock__args_derived(relock__args_t *a, const relock_lock_t *lock, const char *prefix) {
  size_t n;
  char *s = relock__derived_name(lock->name, lock->len, prefix, NULL, &n);
  if (own(a, s) == 0)
    relock__args_key(a, s, n);
}

void relock__args_take(relock__args_t *a, char *s) {
  if (own(a, s) == 0)
    relock__args_key(a, s, strlen(s));
}

void relock__args_str(relock__args_t *a, const char *s, size_t len) { add(a, s, len); }

void relock__args_cstr(relock__args_t *a, const char *s) { add(a, s, strlen(s)); }

void relock__args_number(relock__args_t *a, int64_t value) {
  assert(a->nnumbers < RELOCK__ARGS_NUMBERS);
  if (a->nnumbers == RELOCK__ARGS_NUMBERS) {
    a->failed = 1;
    return;
  }
  char *buf = a->numbers[a->nnumbers++];
  add(a, buf, relock__decimal(buf, value));
}

void relock__args_flag(relock__args_t *a, int flag) { add(a, flag ? "1" : "0", 1); }

void relock__args_latch_ttl(relock__args_t *a, const relock__lock_call_t *call, int undo) {
  if (undo)
    relock__args_cstr(a, "undo");
  else
    relock__args_number(a, call->latch_ttl_ms);
}

relock_future_t *relock__args_send(relock__lock_call_t *call, int script, relock__args_t *a) {
  relock_future_t *f = NULL;
  if (!a->failed) {
    call->spec.script = &relock__scripts[script];
    call->spec.nkeys = a->nkeys;
    call->spec.argc = a->argc;
    call->spec.argv = a->argv;
    call->spec.lens = a->lens;
    f = relock__call(&call->lock->client->redis, &call->spec);
  }
  for (int i = 0; i < a->nowned; i++)
    free(a->owned[i]);
  a->nowned = 0;
  return f;
}
