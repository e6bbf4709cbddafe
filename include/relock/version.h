/* relock version numbers. configure.ac reads the three numbers below, so this
 * file is the single place a release changes them. */
#ifndef RELOCK_VERSION_H
#define RELOCK_VERSION_H

#include <relock/common.h>

#define RELOCK_VERSION_MAJOR 0
#define RELOCK_VERSION_MINOR 1
#define RELOCK_VERSION_PATCH 0

#define RELOCK_VERSION_HEX \
  ((RELOCK_VERSION_MAJOR << 16) | (RELOCK_VERSION_MINOR << 8) | RELOCK_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library actually loaded, as "MAJOR.MINOR.PATCH", which can
 * differ from the header a program was compiled against. */
RELOCK_EXTERN const char *relock_version_string(void);

/* The same as RELOCK_VERSION_HEX, for the loaded library. */
RELOCK_EXTERN unsigned relock_version(void);

#ifdef __cplusplus
}
#endif
#endif /* RELOCK_VERSION_H */
