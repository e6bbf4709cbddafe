/* Error code names and descriptions: relock_strerror, relock_err_name. */
#include <relock/error.h>

const char *relock_strerror(int err) {
  switch (err) {
  case RELOCK_OK: return "success";
#define XX(name, num, desc) case RELOCK_##name: return desc;
  RELOCK_ERRNO_MAP(XX)
#undef XX
  }
  return "unknown error";
}

const char *relock_err_name(int err) {
  switch (err) {
  case RELOCK_OK: return "RELOCK_OK";
#define XX(name, num, desc) case RELOCK_##name: return "RELOCK_" #name;
  RELOCK_ERRNO_MAP(XX)
#undef XX
  }
  return "RELOCK_EUNKNOWN";
}
