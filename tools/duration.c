/* Command-line durations (duration.h). */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"

#define MAX_MS (366.0 * 24 * 3600 * 1000)

int parse_duration(const char *text, int64_t *ms) {
  if (text == NULL || !isdigit((unsigned char)text[0]))
    return -1; /* no sign, no space, no empty string */
  char *end;
  double value = strtod(text, &end);
  if (end == text || !isfinite(value))
    return -1;
  double scale;
  if (strcmp(end, "") == 0 || strcmp(end, "s") == 0)
    scale = 1000;
  else if (strcmp(end, "ms") == 0)
    scale = 1;
  else if (strcmp(end, "m") == 0)
    scale = 60 * 1000;
  else if (strcmp(end, "h") == 0)
    scale = 3600 * 1000;
  else
    return -1;
  double total = ceil(value * scale);
  if (total > MAX_MS)
    return -1;
  *ms = (int64_t)total;
  return 0;
}
