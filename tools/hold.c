/* Redisson's lock hash, as relock(1) reads it (hold.h). */
#include <string.h>

#include "hold.h"

int hold_count(const relock_reply_t *v, int64_t *count) {
  if (v->type != RELOCK_REPLY_STRING || v->len == 0 || v->len > 18 || v->str[0] == '0')
    return -1;
  int64_t n = 0;
  for (size_t i = 0; i < v->len; i++) {
    if (v->str[i] < '0' || v->str[i] > '9')
      return -1;
    n = n * 10 + (v->str[i] - '0');
  }
  *count = n;
  return 0;
}

size_t owner_at(const relock_reply_t *field) {
  if (field->type != RELOCK_REPLY_STRING)
    return 0;
  size_t i = field->len;
  while (i > 0 && field->str[i - 1] != ':')
    i--;
  return i > 1 && i < field->len ? i : 0;
}

int is_string(const relock_reply_t *v, const char *s) {
  return v->type == RELOCK_REPLY_STRING && v->len == strlen(s) && memcmp(v->str, s, v->len) == 0;
}

int is_mode(const relock_reply_t *fields, size_t i) {
  const relock_reply_t *v = fields->element[i + 1];
  return is_string(fields->element[i], "mode") && (is_string(v, "read") || is_string(v, "write"));
}

const relock_reply_t *bad_field(const relock_reply_t *fields) {
  int64_t count;
  for (size_t i = 0; i + 1 < fields->elements; i += 2)
    if (!is_mode(fields, i) && (owner_at(fields->element[i]) == 0 || hold_count(fields->element[i + 1], &count) != 0))
      return fields->element[i];
  return fields->elements % 2 == 0 ? NULL : fields->element[fields->elements - 1];
}

const char *rw_mode(const relock_reply_t *fields) {
  for (size_t i = 0; i + 1 < fields->elements; i += 2)
    if (is_mode(fields, i))
      return is_string(fields->element[i + 1], "read") ? "read" : "write";
  return NULL;
}
