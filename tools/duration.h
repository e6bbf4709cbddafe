/* Durations on the command line: "500ms", "10s", "5m", "1h", or plain
 * (possibly fractional) seconds like flock -w takes. */
#ifndef RELOCK_TOOLS_DURATION_H
#define RELOCK_TOOLS_DURATION_H

#include <stdint.h>

/* Parses text into whole milliseconds (rounded up, so "1us"... is refused:
 * the units are ms, s, m, h). Returns 0, or -1 for anything malformed,
 * negative, or over a year. */
int parse_duration(const char *text, int64_t *ms);

#endif /* RELOCK_TOOLS_DURATION_H */
