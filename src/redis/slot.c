/* Key -> hash slot (slot.h). */
#include <config.h>

#include <string.h>

#include "redis/slot.h"

/* Bitwise rather than a 512-byte table: a lock call hashes one short name
 * (renewals a few), far below what a table would save. */
uint16_t relock__crc16(const char *buf, size_t len) {
  uint16_t crc = 0;
  for (size_t i = 0; i < len; i++) {
    crc ^= (uint16_t)((unsigned char)buf[i] << 8);
    for (int bit = 0; bit < 8; bit++)
      crc = (uint16_t)((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc;
}

int relock__key_slot(const char *key, size_t len) {
  const char *open = memchr(key, '{', len);
  if (open != NULL) {
    const char *tag = open + 1;
    const char *close = memchr(tag, '}', len - (size_t)(tag - key));
    if (close != NULL && close > tag)
      return relock__crc16(tag, (size_t)(close - tag)) & (RELOCK__SLOTS - 1);
  }
  return relock__crc16(key, len) & (RELOCK__SLOTS - 1);
}
