/* A client's statistics and events: recording (stats.h), and the names
 * and bounds the public header promises. */
#include <config.h>

#include <string.h>

#include "base/clock.h"
#include "stats/stats.h"

/* Upper bounds of the duration buckets, in microseconds (the last bucket,
 * unbounded, is not listed): from a loopback round trip to an hour. */
static const int64_t bounds_us[RELOCK_STATS_BUCKETS - 1] = {
    50,       100,       250,       500,       1000,      2500,      5000,       10000,
    25000,    50000,     100000,    250000,    500000,    1000000,   2500000,    5000000,
    10000000, 30000000,  60000000,  300000000, 900000000, 3600000000};

static const int64_t try_bounds[RELOCK_STATS_TRY_BUCKETS - 1] = {1, 2, 3, 4, 6, 8, 16, 32, 64};

int64_t relock_stats_bound_us(int i) {
  if (i < 0 || i >= RELOCK_STATS_BUCKETS)
    return -1;
  return i < RELOCK_STATS_BUCKETS - 1 ? bounds_us[i] : INT64_MAX;
}

int64_t relock_stats_try_bound(int i) {
  if (i < 0 || i >= RELOCK_STATS_TRY_BUCKETS)
    return -1;
  return i < RELOCK_STATS_TRY_BUCKETS - 1 ? try_bounds[i] : INT64_MAX;
}

const char *relock_kind_name(relock_kind_t kind) {
  static const char *const names[RELOCK_KINDS] = {"lock",      "fair_lock", "read_lock",
                                                  "write_lock", "fenced_lock", "spin_lock",
                                                  "semaphore", "permit_semaphore", "latch"};
  return (unsigned)kind < RELOCK_KINDS ? names[kind] : "?";
}

const char *relock_outcome_name(relock_outcome_t outcome) {
  static const char *const names[RELOCK_OUTCOMES] = {"acquired", "busy", "timed_out", "cancelled", "failed"};
  return (unsigned)outcome < RELOCK_OUTCOMES ? names[outcome] : "?";
}

const char *relock_loss_name(relock_loss_t loss) {
  static const char *const names[RELOCK_LOSSES] = {"deleted", "cut", "unreachable", "unreplicated", "lease_ended"};
  return (unsigned)loss < RELOCK_LOSSES ? names[loss] : "?";
}

void relock__stats_init(relock__stats_t *st, relock_client_t *client, int on) {
  memset(st, 0, sizeof(*st));
  st->s.kinds = RELOCK_KINDS;
  st->on = on;
  st->born_ns = relock__now_ns();
  st->client = client;
}

/* The bucket of a value: a binary search of the bounds (5 comparisons). */
void relock__histogram_add(relock_histogram_t *h, uint64_t ns) {
  int64_t us = (int64_t)(ns / 1000);
  int lo = 0, hi = RELOCK_STATS_BUCKETS - 1; /* the answer is in [lo, hi] */
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (us <= bounds_us[mid])
      hi = mid;
    else
      lo = mid + 1;
  }
  h->bucket[lo]++;
  h->count++;
  h->sum_ns += ns;
}

static int try_bucket(uint32_t tries) {
  int i = 0;
  while (i < RELOCK_STATS_TRY_BUCKETS - 1 && (int64_t)tries > try_bounds[i])
    i++;
  return i;
}

static relock_event_t lock_event(relock_event_type_t type, relock_kind_t kind, const char *name, size_t len,
                                 uint64_t owner) {
  return (relock_event_t){.type = type, .kind = kind, .name = name, .name_len = len, .owner = owner};
}

void relock__stats_acquire_start(relock__stats_t *st, relock_kind_t kind, const char *name, size_t len,
                                 uint64_t owner) {
  if (st->on)
    st->s.kind[kind].started++;
  if (relock__stats_observed(st)) {
    relock_event_t ev = lock_event(RELOCK_EVENT_ACQUIRE_START, kind, name, len, owner);
    relock__stats_emit(st, &ev);
  }
}

void relock__stats_wait_start(relock__stats_t *st, relock_kind_t kind, const char *name, size_t len,
                              uint64_t owner) {
  if (relock__stats_observed(st)) {
    relock_event_t ev = lock_event(RELOCK_EVENT_WAIT_START, kind, name, len, owner);
    relock__stats_emit(st, &ev);
  }
}

void relock__stats_acquire_end(relock__stats_t *st, const relock__acquire_end_t *end) {
  if (!st->on && !relock__stats_observed(st))
    return;
  uint64_t now = relock__now_ns();
  if (st->on) {
    relock_kind_stats_t *k = &st->s.kind[end->kind];
    k->outcome[end->outcome]++;
    k->waited += end->wait_ns != 0;
    k->tries += end->tries;
    k->tries_bucket[try_bucket(end->tries)]++;
    if (end->outcome == RELOCK_OUTCOME_ACQUIRED)
      relock__histogram_add(&k->wait, relock__ns_between(now, end->start_ns));
  }
  if (relock__stats_observed(st)) {
    relock_event_t ev = lock_event(RELOCK_EVENT_WAIT_END, end->kind, end->name, end->len, end->owner);
    if (end->wait_ns != 0) {
      ev.duration_ns = (int64_t)relock__ns_between(now, end->wait_ns);
      relock__stats_emit(st, &ev);
    }
    ev.type = RELOCK_EVENT_ACQUIRE_END;
    ev.outcome = (int)end->outcome;
    ev.error = end->err;
    ev.message = end->err != 0 ? end->msg : NULL;
    ev.duration_ns = (int64_t)relock__ns_between(now, end->start_ns);
    relock__stats_emit(st, &ev);
  }
}

void relock__stats_hold_end(relock__stats_t *st, relock_kind_t kind, int loss, uint64_t held_ns, const char *name,
                            size_t len, uint64_t owner, const char *msg) {
  if (st->on) {
    relock_kind_stats_t *k = &st->s.kind[kind];
    if (loss < 0)
      k->released++;
    else
      k->lost[loss]++;
    relock__histogram_add(&k->hold, held_ns);
  }
  if (relock__stats_observed(st)) {
    relock_event_t ev = lock_event(loss < 0 ? RELOCK_EVENT_RELEASE : RELOCK_EVENT_LOSS, kind, name, len, owner);
    ev.outcome = loss < 0 ? 0 : loss;
    ev.duration_ns = (int64_t)held_ns;
    ev.message = msg;
    relock__stats_emit(st, &ev);
  }
}

void relock__stats_reconnect(relock__stats_t *st, const char *address) {
  RELOCK__STATS_COUNT(st, reconnects, 1);
  if (relock__stats_observed(st)) {
    relock_event_t ev = {.type = RELOCK_EVENT_RECONNECT, .address = address};
    relock__stats_emit(st, &ev);
  }
}

void relock__stats_failover(relock__stats_t *st, const char *address, const char *msg) {
  RELOCK__STATS_COUNT(st, failovers, 1);
  if (relock__stats_observed(st)) {
    relock_event_t ev = {.type = RELOCK_EVENT_FAILOVER, .address = address, .message = msg};
    relock__stats_emit(st, &ev);
  }
}
