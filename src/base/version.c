/* The version of the loaded library, for programs that check at run time. */
#include <relock/version.h>

#define RELOCK_STR_(x) #x
#define RELOCK_STR(x) RELOCK_STR_(x)

const char *relock_version_string(void) {
  return RELOCK_STR(RELOCK_VERSION_MAJOR) "." RELOCK_STR(RELOCK_VERSION_MINOR) "." RELOCK_STR(
      RELOCK_VERSION_PATCH);
}

unsigned relock_version(void) { return RELOCK_VERSION_HEX; }
