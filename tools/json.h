/* How relock(1) writes names, which are any bytes but NUL: as JSON strings
 * for --json, and escaped for a terminal otherwise. */
#ifndef RELOCK_TOOLS_JSON_H
#define RELOCK_TOOLS_JSON_H

#include <stddef.h>
#include <stdio.h>

/* Writes s (len bytes) as a quoted JSON string: '"', '\' and control
 * characters escaped, valid UTF-8 as it is, and each byte that is not part of
 * valid UTF-8 as \u00XX (the Latin-1 character of that value, so such a name
 * reads back exactly only where it is valid UTF-8). */
void json_string(FILE *out, const char *s, size_t len);

/* Writes s (len bytes) for a human: as it is, but control characters and
 * bytes that are not valid UTF-8 as \n, \t, \xXX, so that a name can neither
 * break a line nor send escape sequences to the terminal. */
void text_string(FILE *out, const char *s, size_t len);

#endif /* RELOCK_TOOLS_JSON_H */
