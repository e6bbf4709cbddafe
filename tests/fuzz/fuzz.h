/* Shared by the libFuzzer targets in tests/fuzz/: an invariant check that
 * names the file, line and condition, then aborts so that libFuzzer keeps
 * the input as a crash file. */
#ifndef RELOCK_FUZZ_H
#define RELOCK_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond)                                                                                   \
  do {                                                                                                     \
    if (!(cond)) {                                                                                         \
      fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);                        \
      abort();                                                                                             \
    }                                                                                                      \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* RELOCK_FUZZ_H */
