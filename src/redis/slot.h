/* Redis Cluster's key -> hash slot: CRC16 (XMODEM: polynomial 0x1021,
 * initial value 0, no reflection) of the key, or of its hash tag, modulo
 * 16384. The hash tag is what lies between the first '{' and the first '}'
 * after it, when that is not empty; otherwise (no '{', no '}' after it, or
 * "{}") the whole key is hashed. So "{user}.a" and "{user}.b" share a
 * slot, while "a{}b" hashes whole. */
#ifndef RELOCK__REDIS_SLOT_H
#define RELOCK__REDIS_SLOT_H

#include <stddef.h>
#include <stdint.h>

#define RELOCK__SLOTS 16384

uint16_t relock__crc16(const char *buf, size_t len);

/* The slot of key (len bytes), 0..16383. */
int relock__key_slot(const char *key, size_t len);

#endif /* RELOCK__REDIS_SLOT_H */
