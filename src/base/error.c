/* Error code names and descriptions (relock_strerror, relock_err_name), and
 * filling a relock_error_t (base/error.h). */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <relock/error.h>

#include "base/error.h"

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

int relock__error_set(relock_error_t *err, int code, const char *fmt, ...) {
  if (err == NULL)
    return code;
  err->code = code;
  err->message[0] = '\0';
  if (fmt != NULL) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* Per thread, like errno: a blocking call's message outlives its future. */
static _Thread_local char last_error[512];

_Thread_local int relock__callback_depth;

int relock__last_error_set(int code, const char *msg) {
  if (code == 0 || msg == NULL)
    last_error[0] = '\0';
  else
    snprintf(last_error, sizeof last_error, "%s", msg);
  return code;
}

const char *relock_last_error_message(void) { return last_error; }
