/* The hash of the library's tables: SipHash-1-3 under a key drawn at random
 * once per process, so that names an attacker chooses (lock names come from
 * requests in a server) cannot be made to collide in a table and turn its
 * O(1) look-ups into walks of one long chain. */
#include <config.h>

#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "base/hashtab.h"

static uint64_t key0, key1;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void draw_key(void) {
  uint64_t k[2];
  if (getrandom(k, sizeof k, GRND_NONBLOCK) != (ssize_t)sizeof k) {
    /* Early boot without entropy yet: unpredictable enough to spread an
     * attacker's guesses, which is all a table key needs. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    k[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15u ^ (uint64_t)getpid();
    k[1] = (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&ts;
  }
  key0 = k[0];
  key1 = k[1];
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                        \
  do {                                                                                  \
    v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                           \
    v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                              \
    v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                              \
    v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                           \
  } while (0)

static uint64_t load_le64(const unsigned char *p) {
  uint64_t x = 0;
  for (int i = 7; i >= 0; i--)
    x = x << 8 | p[i];
  return x;
}

uint64_t relock__hash_bytes(uint64_t h, const void *data, size_t len) {
  pthread_once(&key_once, draw_key);
  /* Chaining (h from an earlier call) folds h into the key. */
  const uint64_t k0 = key0, k1 = key1 ^ h;
  uint64_t v0 = k0 ^ 0x736f6d6570736575u, v1 = k1 ^ 0x646f72616e646f6du;
  uint64_t v2 = k0 ^ 0x6c7967656e657261u, v3 = k1 ^ 0x7465646279746573u;
  const unsigned char *p = data, *end = p + (len & ~(size_t)7);
  for (; p != end; p += 8) {
    uint64_t m = load_le64(p);
    v3 ^= m;
    SIPROUND;
    v0 ^= m;
  }
  uint64_t b = (uint64_t)len << 56;
  for (size_t i = 0; i < (len & 7); i++)
    b |= (uint64_t)p[i] << (8 * i);
  v3 ^= b;
  SIPROUND;
  v0 ^= b;
  v2 ^= 0xff;
  SIPROUND;
  SIPROUND;
  SIPROUND;
  return v0 ^ v1 ^ v2 ^ v3;
}
