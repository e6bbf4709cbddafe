/* A hashed-wheel timer driven by one libev ev_timer (private to the library).
 *
 * It serves every timeout of the library: lease renewals, command timeouts,
 * retry and reconnect back-off, wait deadlines. Timers are embedded in the
 * caller's structures (no allocation per timer); schedule and cancel are
 * O(1). Deadlines are absolute ticks on the monotonic clock, so a loop that
 * stalled catches up correctly, and a timer never fires before its timeout
 * has passed (it may fire up to one tick, plus loop latency, after).
 *
 * The ev_timer is armed only while a timer is pending, and for the next
 * deadline that can be due, not for every tick: an idle wheel never wakes
 * its loop.
 *
 * Timers with the same deadline tick fire in the order they were scheduled;
 * timers fire in deadline-tick order. A callback may schedule and cancel any
 * timer, itself included. */
#ifndef RELOCK__LOOP_WHEEL_H
#define RELOCK__LOOP_WHEEL_H

#include <stddef.h>
#include <stdint.h>

#include <ev.h>

#include "base/list.h"

typedef struct relock__wheel relock__wheel_t;
typedef struct relock__timer relock__timer_t;

/* status: 0 when the timer expired; RELOCK_ECANCELED when the wheel was
 * closed with the timer still pending. Explicit relock__timer_stop never
 * calls back. */
typedef void (*relock__timer_cb)(relock__timer_t *timer, int status, void *arg);

struct relock__timer {
  relock__link_t link;      /* in its slot, or in the list being fired */
  relock__wheel_t *wheel;   /* NULL while not pending */
  uint64_t deadline;        /* absolute tick */
  relock__timer_cb cb;
  void *arg;
};

struct relock__wheel {
  struct ev_loop *loop;
  ev_timer watcher;
  uint64_t origin_ns;       /* monotonic time of tick 0 */
  uint64_t tick_ns;
  uint64_t current;         /* last tick processed */
  uint64_t armed_tick;      /* tick the watcher is armed for (UINT64_MAX: not armed) */
  size_t mask;              /* nslots - 1 */
  relock__link_t *slots;    /* nslots list heads */
  uint64_t *min_deadline;   /* per slot: lower bound of its deadlines */
  uint64_t *occupied;       /* bitmap of non-empty slots */
  relock__link_t firing;    /* timers due, detached while their callbacks run */
  size_t count;             /* pending timers, firing ones included */
  int closing;
};

#define RELOCK__WHEEL_DEFAULT_TICK_MS 10
#define RELOCK__WHEEL_DEFAULT_SLOTS 512

/* tick_ms in 1 .. 86 400 000 (a day); nslots >= 1 is rounded up to a power
 * of two. Returns 0, RELOCK_EINVAL or RELOCK_ENOMEM (nothing allocated). */
int relock__wheel_init(relock__wheel_t *wheel, struct ev_loop *loop, int64_t tick_ms, size_t nslots);

/* Calls back every pending timer with RELOCK_ECANCELED, stops the ev_timer
 * and frees the slots. While it runs (and after), relock__timer_start returns
 * RELOCK_ECLOSED; the callbacks may stop other timers, which are then not
 * called back. The wheel can then be discarded or initialised again; a
 * second close is a no-op, as is a close after a failed init. A timer
 * callback may close its own wheel, provided the wheel's memory stays valid
 * until that callback returns (and it is not initialised again there). */
void relock__wheel_close(relock__wheel_t *wheel);

void relock__timer_init(relock__timer_t *timer, relock__timer_cb cb, void *arg);

/* (Re)schedules timer to fire timeout_ms (>= 0) from now; a timer pending
 * elsewhere (on this or another wheel, or about to fire) is moved. Timeouts
 * beyond 2^40 ms (~34 years) count as 2^40 ms. Returns 0, RELOCK_EINVAL, or
 * RELOCK_ECLOSED once the wheel is being closed. */
int relock__timer_start(relock__wheel_t *wheel, relock__timer_t *timer, int64_t timeout_ms);

/* Stops a pending timer without calling it back; no-op if not pending. */
void relock__timer_stop(relock__timer_t *timer);

static inline int relock__timer_pending(const relock__timer_t *timer) { return timer->wheel != NULL; }

/* Pending timers, for tests and statistics. */
static inline size_t relock__wheel_count(const relock__wheel_t *wheel) { return wheel->count; }

#endif /* RELOCK__LOOP_WHEEL_H */
