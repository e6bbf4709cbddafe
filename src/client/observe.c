/* Reading a client's statistics and setting its event callback
 * (include/relock/stats.h); what they count is kept by stats/stats.h. */
#include <config.h>

#include <stddef.h>
#include <string.h>

#include <relock/stats.h>

#include "base/clock.h"
#include "base/error.h"
#include "client/client_impl.h"

int relock_client_stats(relock_client_t *c, relock_stats_t *out, size_t size) {
  if (c == NULL || out == NULL)
    return relock__last_error_set(RELOCK_EINVAL, c == NULL ? "client is NULL" : "stats is NULL");
  if (size < offsetof(relock_stats_t, uptime_ns))
    return relock__last_error_set(RELOCK_EINVAL, "size is smaller than a relock_stats_t's first fields");
  relock_error_t err;
  int r = relock__exec_enter(c->exec, &err); /* a closed client still answers: what it did stays useful */
  if (r != 0)
    return relock__last_error_set(r, err.message);
  c->stats.s.uptime_ns = (uint64_t)relock__ns_between(relock__now_ns(), c->stats.born_ns);
  size_t n = size < sizeof(relock_stats_t) ? size : sizeof(relock_stats_t);
  memcpy(out, &c->stats.s, n);
  out->size = (uint32_t)n;
  relock__exec_leave(c->exec);
  return 0;
}

int relock_client_on_event(relock_client_t *c, relock_event_cb cb, void *arg) {
  if (c == NULL)
    return relock__last_error_set(RELOCK_EINVAL, "client is NULL");
  relock_error_t err;
  int r = relock__exec_enter(c->exec, &err);
  if (r != 0)
    return relock__last_error_set(r, err.message);
  c->stats.event_cb = cb;
  c->stats.event_arg = arg;
  relock__exec_leave(c->exec);
  return 0;
}
