/* JSON strings and terminal-safe text of arbitrary bytes (json.h). */
#include "json.h"

/* The length of the valid UTF-8 sequence at p (at most n bytes), or 0 if the
 * byte at p does not begin one: no overlong forms, no surrogates, nothing
 * past U+10FFFF (RFC 3629). */
static size_t utf8_length(const unsigned char *p, size_t n) {
  unsigned char c = p[0];
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF; /* the range of the second byte */
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    len = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0)
      lo = 0xA0; /* overlong */
    if (c == 0xED)
      hi = 0x9F; /* surrogates */
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0)
      lo = 0x90; /* overlong */
    if (c == 0xF4)
      hi = 0x8F; /* past U+10FFFF */
  } else
    return 0;
  if (n < len || p[1] < lo || p[1] > hi)
    return 0;
  for (size_t i = 2; i < len; i++)
    if (p[i] < 0x80 || p[i] > 0xBF)
      return 0;
  return len;
}

/* Writes s escaped: by json for JSON, else for a terminal. */
static void escaped(FILE *out, const char *s, size_t len, int json) {
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0; i < len;) {
    unsigned char c = p[i];
    size_t n = utf8_length(p + i, len - i);
    const char *esc = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
    if (json && (c == '"' || c == '\\'))
      fprintf(out, "\\%c", c);
    else if (esc != NULL)
      fputs(esc, out);
    else if (n == 0 || c < 0x20 || c == 0x7F)
      fprintf(out, json ? "\\u%04x" : "\\x%02x", c);
    else if (n == 2 && !json && c == 0xC2 && p[i + 1] < 0xA0) { /* U+0080..U+009F: C1 controls */
      fprintf(out, "\\x%02x\\x%02x", c, p[i + 1]);
      i += 2;
      continue;
    } else {
      fwrite(p + i, 1, n, out);
      i += n;
      continue;
    }
    i++;
  }
}

void json_string(FILE *out, const char *s, size_t len) {
  fputc('"', out);
  escaped(out, s, len, 1);
  fputc('"', out);
}

void text_string(FILE *out, const char *s, size_t len) { escaped(out, s, len, 0); }
