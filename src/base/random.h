/* The library's cheap pseudo-random numbers: back-off jitter and request
 * ids. xorshift64 over a per-client state seeded at creation (never 0);
 * nothing here is meant to resist an attacker (the hash tables have their
 * own keyed hash, hash.c). */
#ifndef RELOCK__BASE_RANDOM_H
#define RELOCK__BASE_RANDOM_H

#include <stdint.h>

static inline uint64_t relock__random(uint64_t *state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return x;
}

/* A delay of base_ms with its second half random: base - base/2 plus up to
 * base/2, so that clients that met the same event spread out. */
static inline int64_t relock__jitter_ms(uint64_t *state, int64_t base_ms) {
  int64_t half = base_ms / 2;
  uint64_t x = relock__random(state);
  return base_ms - half + (half > 0 ? (int64_t)(x % (uint64_t)(half + 1)) : 0);
}

#endif /* RELOCK__BASE_RANDOM_H */
