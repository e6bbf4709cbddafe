/* Durations on the command line: "500ms", "10s", "5m", "1h", or plain
 * (possibly fractional) seconds like flock -w takes. */
#ifndef RELOCK_TOOLS_DURATION_H
#define RELOCK_TOOLS_DURATION_H

#include <stdint.h>

/* Parses text, DIGITS[.DIGITS] with an optional unit ms, s (the default), m
 * or h, into whole milliseconds, rounded up exactly ("0.0001" is 1 ms).
 * Returns 0, or -1 for anything else (signs, spaces, exponents, hex, "1.",
 * other units) or over a year. */
int parse_duration(const char *text, int64_t *ms);

#endif /* RELOCK_TOOLS_DURATION_H */
