/* Random RFC 4122 version-4 UUIDs, from getrandom() or, where that is
 * missing, /dev/urandom. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <unistd.h>

#ifdef __has_include
#if __has_include(<sys/random.h>)
#include <sys/random.h>
#define RELOCK_HAVE_GETRANDOM_ 1
#endif
#endif

#include <relock/error.h>

#include "base/uuid.h"

/* 0 when buf was filled; -1 when getrandom is missing or failed. */
static int from_getrandom(unsigned char *buf, size_t len) {
#ifdef RELOCK_HAVE_GETRANDOM_
  size_t got = 0;
  while (got < len) {
    ssize_t n = getrandom(buf + got, len - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1; /* ENOSYS on an old kernel: fall back */
    got += (size_t)n;
  }
  return 0;
#else
  (void)buf;
  (void)len;
  return -1;
#endif
}

static int from_urandom(unsigned char *buf, size_t len) {
  int fd;
  do
    fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0)
    return -1;
  size_t got = 0;
  while (got < len) {
    ssize_t n = read(fd, buf + got, len - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  close(fd);
  return got == len ? 0 : -1;
}

int relock__uuid_v4(char out[37]) {
  static const char hex[] = "0123456789abcdef";
  unsigned char b[16];
  if (from_getrandom(b, sizeof b) != 0 && from_urandom(b, sizeof b) != 0) {
    out[0] = '\0';
    return RELOCK_EIO;
  }
  b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
  b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* variant 10xx (RFC 4122) */
  char *p = out;
  for (size_t i = 0; i < sizeof b; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10)
      *p++ = '-';
    *p++ = hex[b[i] >> 4];
    *p++ = hex[b[i] & 0x0f];
  }
  *p = '\0';
  return 0;
}
