/* Redisson's naming: fields, derived names, request ids, latch TTL (keys.h). */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/decimal.h"
#include "base/random.h"
#include "objects/keys.h"

size_t relock__field(const char *client_id, uint64_t owner, char field[RELOCK__FIELD_MAX]) {
  size_t n = strnlen(client_id, RELOCK__FIELD_MAX - 2 - RELOCK__DECIMAL_MAX); /* an id is at most 64 */
  memcpy(field, client_id, n);
  field[n++] = ':';
  n += relock__udecimal(field + n, owner);
  field[n] = '\0';
  return n;
}

/* Redisson: a name with a hash tag already keeps it; otherwise the whole
 * name becomes the tag, which is the slot the object's key hashes to. */
static int tagged(const char *name, size_t len) { return memchr(name, '{', len) != NULL; }

/* Writes "prefix:{name}" (or, has_tag, "prefix:name") and suffix into out,
 * which has room for n bytes and a NUL. */
static void write_derived(char *out, size_t n, const char *name, size_t len, int has_tag, const char *prefix,
                          size_t plen, const char *suffix, size_t slen) {
  char *p = out;
  memcpy(p, prefix, plen);
  p += plen;
  *p++ = ':';
  if (!has_tag)
    *p++ = '{';
  memcpy(p, name, len);
  p += len;
  if (!has_tag)
    *p++ = '}';
  if (slen > 0)
    memcpy(p, suffix, slen);
  out[n] = '\0';
}

char *relock__derived_name(const char *name, size_t len, const char *prefix, const char *suffix, size_t *out_len) {
  int t = tagged(name, len);
  size_t plen = strlen(prefix), slen = suffix != NULL ? strlen(suffix) : 0;
  size_t n = plen + 1 + len + (t ? 0 : 2) + slen;
  char *s = malloc(n + 1);
  if (s == NULL)
    return NULL;
  write_derived(s, n, name, len, t, prefix, plen, suffix, slen);
  if (out_len != NULL)
    *out_len = n;
  return s;
}

size_t relock__derived_name_to(char *out, size_t size, const char *name, size_t len, const char *prefix) {
  int t = tagged(name, len);
  size_t plen = strlen(prefix), n = plen + 1 + len + (t ? 0 : 2);
  if (n < size)
    write_derived(out, n, name, len, t, prefix, plen, NULL, 0);
  return n;
}

static void write_braced(char *out, size_t n, const char *prefix, size_t plen, const char *name, size_t len) {
  memcpy(out, prefix, plen);
  out[plen] = '{';
  memcpy(out + plen + 1, name, len);
  out[n - 1] = '}';
  out[n] = '\0';
}

char *relock__braced_name(const char *prefix, const char *name, size_t len, size_t *out_len) {
  size_t plen = strlen(prefix), n = plen + len + 2;
  char *s = malloc(n + 1);
  if (s == NULL)
    return NULL;
  write_braced(s, n, prefix, plen, name, len);
  if (out_len != NULL)
    *out_len = n;
  return s;
}

size_t relock__braced_name_to(char *out, size_t size, const char *prefix, const char *name, size_t len) {
  size_t plen = strlen(prefix), n = plen + len + 2;
  if (n < size)
    write_braced(out, n, prefix, plen, name, len);
  return n;
}

char *relock__lock_channel_name(const char *name, size_t len, size_t *out_len) {
  return relock__derived_name(name, len, "redisson_lock__channel", NULL, out_len);
}

char *relock__lock_waiters_name(const char *name, size_t len, size_t *out_len) {
  return relock__derived_name(name, len, "relock_lock_latch", ":waiters", out_len);
}

static char *latch_name(const char *name, size_t len, const char *prefix, const char *id, size_t *out_len) {
  char suffix[RELOCK__REQUEST_ID_SIZE + 1];
  suffix[0] = ':';
  memcpy(suffix + 1, id, RELOCK__REQUEST_ID_SIZE); /* its NUL included */
  return relock__derived_name(name, len, prefix, suffix, out_len);
}

char *relock__unlock_latch_name(const char *name, size_t len, const char *id, size_t *out_len) {
  return latch_name(name, len, "redisson_unlock_latch", id, out_len);
}

char *relock__acquire_latch_name(const char *name, size_t len, const char *id, size_t *out_len) {
  return latch_name(name, len, "relock_lock_latch", id, out_len);
}

void relock__request_id_of(const uint64_t bits[2], char id[RELOCK__REQUEST_ID_SIZE]) {
  static const char hex[] = "0123456789abcdef";
  for (int half = 0; half < 2; half++)
    for (int i = 0; i < 16; i++)
      id[half * 16 + i] = hex[(bits[half] >> (i * 4)) & 15];
  id[32] = '\0';
}

void relock__request_id(uint64_t *rng, char id[RELOCK__REQUEST_ID_SIZE]) {
  uint64_t bits[2];
  bits[0] = relock__random(rng);
  bits[1] = relock__random(rng);
  relock__request_id_of(bits, id);
}

void relock__waker_id(uint64_t *rng, char id[RELOCK__WAKER_ID_SIZE]) {
  uint64_t x = relock__random(rng);
  id[0] = (char)('1' + x % 9);
  x /= 9;
  for (int i = 1; i < RELOCK__WAKER_ID_SIZE - 1; i++, x /= 10)
    id[i] = (char)('0' + x % 10);
  id[RELOCK__WAKER_ID_SIZE - 1] = '\0';
}

int64_t relock__latch_ttl_ms(const relock__settings_t *s) {
  /* A latch must outlive every retry of the request it answers for. */
  return (int64_t)(s->opt.retry_attempts + 1) * (s->opt.command_timeout_ms + s->opt.retry_interval_ms) + s->opt.command_timeout_ms;
}
