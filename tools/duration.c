/* Command-line durations (duration.h), read as decimal text and rounded up
 * exactly: in integers, since strtod and a multiplication in double made
 * "16.1" 16101 ms, and strtod also took "1e3", "0x10" and "1.". */
#include <stdint.h>
#include <string.h>

#include "duration.h"

#define MAX_MS INT64_C(31622400000) /* 366 days */

static int is_digit(char c) { return c >= '0' && c <= '9'; }

int parse_duration(const char *text, int64_t *ms) {
  if (text == NULL || !is_digit(text[0]))
    return -1; /* no sign, no space, no empty string */
  const char *p = text;
  uint64_t whole = 0;
  for (; is_digit(*p); p++)
    if ((whole = whole * 10 + (uint64_t)(*p - '0')) > (uint64_t)MAX_MS)
      whole = (uint64_t)MAX_MS + 1; /* over a year in any unit; stays so */
  const char *frac = p, *frac_end = p;
  if (*p == '.') {
    frac = ++p;
    while (is_digit(*p))
      p++;
    frac_end = p;
    if (frac == frac_end)
      return -1;
  }
  uint64_t scale;
  if (strcmp(p, "") == 0 || strcmp(p, "s") == 0)
    scale = 1000;
  else if (strcmp(p, "ms") == 0)
    scale = 1;
  else if (strcmp(p, "m") == 0)
    scale = 60 * 1000;
  else if (strcmp(p, "h") == 0)
    scale = 3600 * 1000;
  else
    return -1;
  if (whole > (uint64_t)MAX_MS / scale)
    return -1;
  /* The fraction times scale, digit by digit from the last: what carries out
   * of the first digit is its whole part; any digit left over rounds up. */
  uint64_t part = 0;
  int rest = 0;
  for (const char *d = frac_end; d > frac; d--) {
    uint64_t v = (uint64_t)(d[-1] - '0') * scale + part;
    rest |= v % 10 != 0;
    part = v / 10;
  }
  uint64_t total = whole * scale + part + (rest ? 1 : 0);
  if (total > (uint64_t)MAX_MS)
    return -1;
  *ms = (int64_t)total;
  return 0;
}
