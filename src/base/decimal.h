/* Integers written in decimal, without printf: a lock operation writes a
 * few (leases, latch lifetimes, owners, key counts), and snprintf's format
 * parsing cost more than the rest of formatting the command (issue 20,
 * bench part 1's callgrind row). Not NUL-terminated unless asked. */
#ifndef RELOCK__BASE_DECIMAL_H
#define RELOCK__BASE_DECIMAL_H

#include <stddef.h>
#include <stdint.h>

/* The longest: "-9223372036854775808" and "18446744073709551615" are 20. */
#define RELOCK__DECIMAL_MAX 20

/* Writes v in decimal at out; returns how many characters. */
static inline size_t relock__udecimal(char *out, uint64_t v) {
  char tmp[RELOCK__DECIMAL_MAX];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (size_t i = 0; i < n; i++)
    out[i] = tmp[n - 1 - i];
  return n;
}

static inline size_t relock__decimal(char *out, int64_t v) {
  if (v >= 0)
    return relock__udecimal(out, (uint64_t)v);
  out[0] = '-';
  return 1 + relock__udecimal(out + 1, (uint64_t)0 - (uint64_t)v);
}

#endif /* RELOCK__BASE_DECIMAL_H */
