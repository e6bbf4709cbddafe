/* relock_options_from_env: the connection options from RELOCK_URL (as the
 * relock command reads it) or RELOCK_URL_FILE (a file holding the URL, so
 * that a password stays out of the environment).
 *
 * Only on request: no other function reads the environment, so a client is
 * never steered by a variable its program did not ask for. And never
 * silently: a variable that is set but unusable (empty, a bad URL, a file
 * that cannot be read or whose first line is blank) is an error naming the
 * variable, not a fall back to 127.0.0.1. */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <relock/config.h>
#include <relock/error.h>

#include "base/error.h"

/* A URL is short; a longer first line is not one (and not read in part). */
#define URL_LINE_MAX 4096

/* Applies the URL, naming the variable it came from in an error.
 * relock_options_set_url never quotes a password, and neither does this. */
static int apply(relock_options_t *opts, const char *url, const char *from, relock_error_t *err) {
  relock_error_t e;
  int r = relock_options_set_url(opts, url, &e);
  if (r != 0)
    return relock__error_set(err, r, "%s: %s", from, e.message);
  relock__error_set(err, 0, NULL);
  return 1;
}

/* The URL in the first line of path (the rest of the file is ignored, as
 * relock --url-file does), wiped once used: it may hold a password. */
static int from_file(relock_options_t *opts, const char *path, relock_error_t *err) {
  char from[96];
  snprintf(from, sizeof from, "RELOCK_URL_FILE %.64s%s", path, strlen(path) > 64 ? "..." : "");
  FILE *f = fopen(path, "re"); /* close-on-exec: a thread may fork meanwhile */
  if (f == NULL)
    return relock__error_set(err, RELOCK_EIO, "%s: %s", from, strerror(errno));
  char line[URL_LINE_MAX + 2];
  int r;
  if (fgets(line, sizeof line, f) == NULL)
    r = ferror(f) ? relock__error_set(err, RELOCK_EIO, "%s: %s", from, strerror(errno))
                  : relock__error_set(err, RELOCK_EINVAL, "%s is empty: its first line must be the URL", from);
  else {
    size_t len = strcspn(line, "\r\n");
    if (line[len] == '\0' && !feof(f))
      r = relock__error_set(err, RELOCK_EINVAL, "%s: the first line is longer than %d bytes: not a URL", from,
                            URL_LINE_MAX);
    else if ((line[len] = '\0', len == 0))
      r = relock__error_set(err, RELOCK_EINVAL, "%s: the first line is blank: it must be the URL", from);
    else
      r = apply(opts, line, from, err);
  }
  memset(line, 0, sizeof line);
  fclose(f);
  return r;
}

int relock_options_from_env(relock_options_t *opts, relock_error_t *err) {
  if (opts == NULL)
    return relock__error_set(err, RELOCK_EINVAL, "opts is NULL");
  const char *url = getenv("RELOCK_URL");
  const char *file = getenv("RELOCK_URL_FILE");
  if (url != NULL && file != NULL)
    return relock__error_set(err, RELOCK_EINVAL,
                             "both RELOCK_URL and RELOCK_URL_FILE are set: which server is meant? unset one");
  if (url != NULL && url[0] == '\0')
    return relock__error_set(err, RELOCK_EINVAL, "RELOCK_URL is set but empty: set it to a URL, or unset it");
  if (file != NULL && file[0] == '\0')
    return relock__error_set(err, RELOCK_EINVAL, "RELOCK_URL_FILE is set but empty: set it to a file, or unset it");
  if (url != NULL)
    return apply(opts, url, "RELOCK_URL", err);
  if (file != NULL)
    return from_file(opts, file, err);
  relock__error_set(err, 0, NULL);
  return 0;
}
