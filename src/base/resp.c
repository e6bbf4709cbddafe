/* RESP command formatting (resp.h). */
#include <config.h>

#include <stdio.h>
#include <string.h>

#include "base/resp.h"

static size_t digits(size_t n) {
  size_t d = 1;
  while (n >= 10) {
    n /= 10;
    d++;
  }
  return d;
}

size_t relock__resp_size(int argc, const size_t *lens) {
  size_t size = 1 + digits((size_t)argc) + 2; /* *<argc>\r\n */
  for (int i = 0; i < argc; i++)
    size += 1 + digits(lens[i]) + 2 + lens[i] + 2; /* $<len>\r\n<bytes>\r\n */
  return size;
}

static char *put_header(char *p, char type, size_t n) {
  *p++ = type;
  size_t d = digits(n);
  for (size_t i = d; i > 0; i--) {
    p[i - 1] = (char)('0' + n % 10);
    n /= 10;
  }
  p += d;
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

size_t relock__resp_write(char *dst, int argc, const char *const *argv, const size_t *lens) {
  char *p = put_header(dst, '*', (size_t)argc);
  for (int i = 0; i < argc; i++) {
    p = put_header(p, '$', lens[i]);
    if (lens[i] > 0)
      memcpy(p, argv[i], lens[i]);
    p += lens[i];
    *p++ = '\r';
    *p++ = '\n';
  }
  return (size_t)(p - dst);
}
