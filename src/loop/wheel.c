/* The hashed-wheel timer: every timeout of the library, on one libev ev_timer.
 *
 * A timer with deadline tick d lives in slot d & mask, appended in the order
 * it was scheduled. Each slot keeps a lower bound of its deadlines and a bit
 * in the `occupied` bitmap, so the next tick that can hold a due timer is
 * found without walking the timers, and the ev_timer is armed for that tick
 * only. Processing tick t fires the timers of slot t & mask whose deadline
 * has come (<= t); the others wait for a later rotation.
 *
 * Invariants, relied on throughout:
 *   - a slot's bit is set iff its list is not empty;
 *   - every deadline in slot s is congruent to s and > current, and
 *     min_deadline[s] is <= each of them (exact right after a scan);
 *   - count is the number of timers in the slots plus those in `firing`;
 *   - armed_tick != UINT64_MAX iff the watcher is active. */
#include "loop/wheel.h"

#include <stdlib.h>

#include <relock/error.h>

#include "base/clock.h"
#include "loop/exec.h"

#define NS_PER_MS UINT64_C(1000000)
#define BITS 64

/* Longer timeouts are treated as this long (~34 years): the deadline in
 * nanoseconds must not overflow. Nothing in the library waits that long. */
#define MAX_TIMEOUT_MS (INT64_C(1) << 40)

/* Keeps tick_ns * deadline arithmetic and the slot arrays' size in range. */
#define MAX_TICK_MS INT64_C(86400000)
#define MAX_SLOTS ((size_t)1 << (sizeof(size_t) * 8 - 6))

static size_t slot_count(const relock__wheel_t *w) { return w->mask + 1; }

static size_t bitmap_words(size_t nslots) { return (nslots + BITS - 1) / BITS; }

static void set_occupied(relock__wheel_t *w, size_t s) {
  w->occupied[s / BITS] |= UINT64_C(1) << (s % BITS);
}

static void clear_occupied(relock__wheel_t *w, size_t s) {
  w->occupied[s / BITS] &= ~(UINT64_C(1) << (s % BITS));
}

/* The tick the monotonic clock is in now: every tick up to it has begun. */
static uint64_t now_tick(const relock__wheel_t *w) {
  return (relock__now_ns() - w->origin_ns) / w->tick_ns;
}

/* Circular distance from slot pos to the next occupied slot (0 when pos
 * itself is occupied), or the number of slots when none is. Walks the bitmap
 * a word at a time, so a sparse wheel is skipped over quickly. */
static size_t distance_to_occupied(const relock__wheel_t *w, size_t pos) {
  const size_t nslots = slot_count(w), nwords = bitmap_words(nslots);
  size_t i = pos / BITS;
  uint64_t word = w->occupied[i] & (~UINT64_C(0) << (pos % BITS));
  /* nwords + 1 words: the first one again at the end, for the bits below
   * pos that the mask above hid. */
  for (size_t k = 0; k <= nwords; k++) {
    if (word != 0) {
      size_t s = i * BITS + (size_t)__builtin_ctzll(word);
      return (s + nslots - pos) & w->mask;
    }
    i = (i + 1) % nwords;
    word = w->occupied[i];
  }
  return nslots;
}

/* The earliest tick after `current` that can hold a due timer, or UINT64_MAX
 * when no slot holds a timer. Slots are visited in the order their next
 * tick comes; the search stops once that tick is no earlier than the best
 * candidate, so with timers due within a rotation it ends at the first
 * occupied slot. */
static uint64_t earliest_due(const relock__wheel_t *w) {
  const uint64_t from = w->current + 1;
  const size_t nslots = slot_count(w), start = (size_t)(from & w->mask);
  uint64_t best = UINT64_MAX;
  for (size_t d = distance_to_occupied(w, start); d < nslots;
       d += 1 + distance_to_occupied(w, (start + d + 1) & w->mask)) {
    if (from + d >= best)
      break;
    /* min_deadline > current and congruent to the slot, so it is never
     * earlier than the slot's next tick (from + d). */
    uint64_t candidate = w->min_deadline[(start + d) & w->mask];
    if (candidate < best)
      best = candidate;
  }
  return best;
}

/* Arms the one-shot watcher for the start of tick t. libev measures `after`
 * from its cached monotonic time, which lags the clock while callbacks run:
 * ev_now_update() brings it up to a reading taken after ours, so the watcher
 * cannot wake before the tick (and if it did, the callback would just arm
 * it again). Only monotonic readings go into `after`: ev_time() and ev_now()
 * are wall-clock times, and their difference jumps with every step of the
 * wall clock (an hour's step armed the watcher an hour out, or made it spin
 * until libev noticed). */
static void arm(relock__wheel_t *w, uint64_t t) {
  uint64_t at_ns = w->origin_ns + t * w->tick_ns, now_ns = relock__now_ns();
  ev_now_update(w->loop);
  double after = at_ns > now_ns ? (double)(at_ns - now_ns) / 1e9 : 0.0;
  ev_timer_stop(w->loop, &w->watcher);
  ev_timer_set(&w->watcher, after, 0.0);
  ev_timer_start(w->loop, &w->watcher);
  relock__exec_changed(); /* armed from another thread's call: the loop must look */
  w->armed_tick = t;
}

static void disarm(relock__wheel_t *w) {
  ev_timer_stop(w->loop, &w->watcher);
  w->armed_tick = UINT64_MAX;
}

/* After a batch of ticks: arm for the next candidate, or go idle. */
static void rearm(relock__wheel_t *w) {
  uint64_t t = w->count > 0 ? earliest_due(w) : UINT64_MAX;
  if (t == UINT64_MAX)
    disarm(w);
  else if (t != w->armed_tick)
    arm(w, t);
}

/* Moves the timers of tick t's slot that are due to the firing list, in
 * slot order (scheduling order among equal deadlines), and makes the slot's
 * lower bound exact again from the timers that stay. */
static void collect(relock__wheel_t *w, uint64_t t) {
  const size_t s = (size_t)(t & w->mask);
  relock__link_t *head = &w->slots[s], *link, *next;
  uint64_t min = UINT64_MAX;
  for (link = head->next; link != head; link = next) {
    relock__timer_t *timer = relock__container_of(link, relock__timer_t, link);
    next = link->next;
    if (timer->deadline <= t) {
      relock__list_remove(link);
      relock__list_push_back(&w->firing, link);
    } else if (timer->deadline < min) {
      min = timer->deadline;
    }
  }
  w->min_deadline[s] = min;
  if (relock__list_empty(head))
    clear_occupied(w, s);
}

/* Calls the firing timers back one at a time. Each is detached and marked
 * not pending first, so its callback may start it again, and any callback
 * may stop a timer still waiting in the list (which unlinks it). A callback
 * that closes the wheel empties the list: close calls the rest back. */
static void fire(relock__wheel_t *w, int status) {
  while (!relock__list_empty(&w->firing)) {
    relock__link_t *link = w->firing.next;
    relock__timer_t *timer = relock__container_of(link, relock__timer_t, link);
    relock__list_remove(link);
    timer->wheel = NULL;
    w->count--;
    timer->cb(timer, status, timer->arg);
  }
}

/* Processes every tick up to target in order, jumping from one candidate
 * tick to the next, so a loop that stalled for many rotations fires each
 * timer once, in deadline order, at the cost of the occupied slots only. */
static void advance(relock__wheel_t *w, uint64_t target) {
  while (!w->closing) {
    uint64_t t = earliest_due(w);
    if (t > target)
      break;
    /* No slot holds a due timer between current and t. */
    w->current = t;
    collect(w, t);
    fire(w, 0);
  }
  /* Every remaining deadline is > target (earliest_due said so), which
   * keeps the invariant deadline > current. */
  if (!w->closing && w->current < target)
    w->current = target;
}

static void on_watcher(struct ev_loop *loop, ev_timer *watcher, int revents) {
  relock__wheel_t *w = watcher->data;
  (void)loop;
  (void)revents;
  w->armed_tick = UINT64_MAX; /* one-shot: libev has stopped it */
  advance(w, now_tick(w));
  if (!w->closing)
    rearm(w);
}

int relock__wheel_init(relock__wheel_t *wheel, struct ev_loop *loop, int64_t tick_ms, size_t nslots) {
  if (wheel == NULL)
    return RELOCK_EINVAL;
  /* Until ready: a close after a failed init is a no-op. */
  wheel->slots = NULL;
  wheel->closing = 1;
  if (loop == NULL || tick_ms < 1 || tick_ms > MAX_TICK_MS || nslots < 1 || nslots > MAX_SLOTS)
    return RELOCK_EINVAL;
  size_t n = 1;
  while (n < nslots)
    n <<= 1;

  /* One block for the three arrays: a failure leaves nothing to undo, and
   * the per-slot data stays close together. */
  const size_t nwords = bitmap_words(n);
  relock__link_t *slots =
      malloc(n * sizeof(relock__link_t) + n * sizeof(uint64_t) + nwords * sizeof(uint64_t));
  if (slots == NULL)
    return RELOCK_ENOMEM;
  wheel->min_deadline = (uint64_t *)(slots + n);
  wheel->occupied = wheel->min_deadline + n;
  for (size_t s = 0; s < n; s++) {
    relock__list_init(&slots[s]);
    wheel->min_deadline[s] = UINT64_MAX;
  }
  for (size_t i = 0; i < nwords; i++)
    wheel->occupied[i] = 0;

  wheel->slots = slots;
  wheel->loop = loop;
  ev_timer_init(&wheel->watcher, on_watcher, 0.0, 0.0);
  wheel->watcher.data = wheel;
  wheel->origin_ns = relock__now_ns();
  wheel->tick_ns = (uint64_t)tick_ms * NS_PER_MS;
  wheel->current = 0;
  wheel->armed_tick = UINT64_MAX;
  wheel->mask = n - 1;
  relock__list_init(&wheel->firing);
  wheel->count = 0;
  wheel->closing = 0;
  return 0;
}

/* Moves every timer in the slots to the firing list, starting with the slot
 * of the next tick, so cancellations come roughly in deadline order. */
static void collect_all(relock__wheel_t *w) {
  const size_t nslots = slot_count(w), start = (size_t)((w->current + 1) & w->mask);
  for (size_t d = 0; d < nslots; d++) {
    relock__link_t *head = &w->slots[(start + d) & w->mask];
    while (!relock__list_empty(head)) {
      relock__link_t *link = head->next;
      relock__list_remove(link);
      relock__list_push_back(&w->firing, link);
    }
  }
  for (size_t i = 0; i < bitmap_words(nslots); i++)
    w->occupied[i] = 0;
}

void relock__wheel_close(relock__wheel_t *wheel) {
  if (wheel == NULL || wheel->closing)
    return;
  wheel->closing = 1;
  disarm(wheel);
  /* Callbacks cannot start timers now, but a loop costs nothing and keeps
   * the promise that none is left behind. */
  while (wheel->count > 0) {
    collect_all(wheel);
    fire(wheel, RELOCK_ECANCELED);
  }
  free(wheel->slots);
  wheel->slots = NULL;
  wheel->min_deadline = NULL;
  wheel->occupied = NULL;
}

void relock__timer_init(relock__timer_t *timer, relock__timer_cb cb, void *arg) {
  relock__list_init(&timer->link);
  timer->wheel = NULL;
  timer->deadline = 0;
  timer->cb = cb;
  timer->arg = arg;
}

/* The first tick at whose start timeout_ms has passed since now: rounding
 * up is what keeps a timer from firing early. */
static uint64_t deadline_for(const relock__wheel_t *w, int64_t timeout_ms) {
  if (timeout_ms > MAX_TIMEOUT_MS)
    timeout_ms = MAX_TIMEOUT_MS;
  /* The precise clock, not the coarse one: the coarse clock's lag behind it
   * is not bounded by its resolution (the tick that advances it can come
   * late: measured 5.5 ms against a 4 ms resolution on a VM), and a "now"
   * that lags makes a deadline early. */
  uint64_t due_ns = relock__now_ns() - w->origin_ns + (uint64_t)timeout_ms * NS_PER_MS;
  uint64_t deadline = (due_ns + w->tick_ns - 1) / w->tick_ns;
  /* A tick already processed will not be looked at again. */
  return deadline > w->current ? deadline : w->current + 1;
}

/* Takes a pending timer out of its slot (or the firing list), leaving the
 * watcher alone. Its slot's lower bound may go stale (too low), which costs
 * at most one early wake-up, never a missed timer. */
static void detach(relock__wheel_t *w, relock__timer_t *timer) {
  relock__list_remove(&timer->link);
  timer->wheel = NULL;
  const size_t s = (size_t)(timer->deadline & w->mask);
  if (relock__list_empty(&w->slots[s]))
    clear_occupied(w, s);
  w->count--;
}

int relock__timer_start(relock__wheel_t *wheel, relock__timer_t *timer, int64_t timeout_ms) {
  if (wheel == NULL || timer == NULL || timer->cb == NULL || timeout_ms < 0)
    return RELOCK_EINVAL;
  if (wheel->closing)
    return RELOCK_ECLOSED;
  relock__wheel_t *old = timer->wheel;
  if (old != NULL) {
    /* Moving the only timer of this wheel keeps the watcher: re-arming it
     * for every restart would cost more than one spare wake-up. */
    detach(old, timer);
    if (old != wheel && old->count == 0)
      disarm(old);
  }

  const uint64_t deadline = deadline_for(wheel, timeout_ms);
  const size_t s = (size_t)(deadline & wheel->mask);
  if (relock__list_empty(&wheel->slots[s])) {
    set_occupied(wheel, s);
    wheel->min_deadline[s] = deadline;
  } else if (deadline < wheel->min_deadline[s]) {
    wheel->min_deadline[s] = deadline;
  }
  relock__list_push_back(&wheel->slots[s], &timer->link);
  timer->deadline = deadline;
  timer->wheel = wheel;
  wheel->count++;
  /* Later deadlines need nothing: the watcher wakes for an earlier one and
   * then arms for the next. */
  if (deadline < wheel->armed_tick)
    arm(wheel, deadline);
  return 0;
}

void relock__timer_stop(relock__timer_t *timer) {
  relock__wheel_t *w = timer->wheel;
  if (w == NULL)
    return;
  detach(w, timer);
  if (w->count == 0)
    disarm(w);
}
