/* The hold ledger: a hold's states, its release, its loss (hold.h). */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <relock/error.h>

#include "base/clock.h"
#include "base/random.h"
#include "future/promise.h"
#include "redis/call.h"
#include "stats/stats.h"
#include "watchdog/hold.h"

static void forget(relock__ledger_t *l, relock__hold_t *hold);
static void declare_lost(relock__ledger_t *l, relock__hold_t *hold, int reason);
static void count_end(relock__ledger_t *l, relock__hold_t *hold, int loss, const char *msg);

/* -- the table ----------------------------------------------------------------*/

static uint64_t hold_hash(const relock__hold_id_t *id) {
  uint64_t h = relock__hash_bytes(RELOCK__HASH_SEED, id->key, id->key_len);
  return relock__hash_bytes(h, &id->owner, sizeof id->owner) + (uint64_t)id->role;
}

const char *relock__hold_key(const relock__hold_t *hold, size_t *len) {
  return hold->holder->ops->key(hold->holder, len);
}

size_t relock__hold_field(const relock__hold_t *hold, char field[RELOCK__HOLD_FIELD_MAX]) {
  return hold->holder->ops->field(hold->holder, hold->owner, field);
}

relock__hold_t *relock__hold_find(relock__ledger_t *l, const relock__hold_id_t *id) {
  if (l->closing) /* the table is gone with the client's close */
    return NULL;
  uint64_t h = hold_hash(id);
  relock__hnode_t *n;
  for (RELOCK__HTAB_EACH(&l->holds, h, n)) {
    relock__hold_t *hold = relock__container_of(n, relock__hold_t, node);
    if (n->hash != h || hold->owner != id->owner || hold->role != id->role)
      continue;
    size_t len;
    const char *key = relock__hold_key(hold, &len);
    if (len == id->key_len && memcmp(key, id->key, len) == 0)
      return hold;
  }
  return NULL;
}

void relock__hold_ref(relock__hold_t *hold) { hold->refs++; }

/* What messages call the holder's holds. */
static const char *what_of(const relock__holder_t *h) {
  return h->ops->kind_what != NULL ? h->ops->kind_what(h) : h->ops->what;
}

void relock__hold_unref(relock__hold_t *hold) {
  if (--hold->refs > 0)
    return;
  hold->holder->ops->drop(hold->holder);
  free(hold);
}

/* -- a hold's states (hold.h) ---------------------------------------------------*/

static relock__hold_t *hold_at(relock__link_t *link) { return relock__container_of(link, relock__hold_t, link); }

static void changed(relock__ledger_t *l) {
  if (l->changed != NULL)
    l->changed(l->changed_arg);
}

/* Whether a fixed lease's deadline, brought nearer by a check answered
 * late, comes before what its acquisitions promised by more than a tick of
 * the wheel (by which any lease's end may fire late): then its end is not
 * the lease running out but the library no longer able to vouch for it. */
static int unconfirmed(const relock__ledger_t *l, const relock__hold_t *hold) {
  return hold->deadline_ns + l->wheel->tick_ns < hold->fixed->promised_ns;
}

/* A fixed lease's validity is over: its hold is forgotten, Redis letting
 * it expire - or lost, when someone else cut the key's expiry below the
 * lease (kept_for): the holder did not get the lease it asked for. */
static void lease_over(relock__ledger_t *l, relock__hold_t *hold) {
  if (hold->cut) {
    declare_lost(l, hold, RELOCK_ELOST);
  } else if (unconfirmed(l, hold)) {
    declare_lost(l, hold, RELOCK_ETIMEDOUT);
  } else {
    count_end(l, hold, RELOCK_LOSS_LEASE_ENDED, NULL);
    forget(l, hold);
  }
}

static void on_lease_end(relock__timer_t *t, int status, void *arg) {
  if (status != 0) /* the client is closing: the ledger's close forgets it */
    return;
  lease_over(arg, relock__container_of(t, relock__hold_lease_t, end)->hold);
}

static relock__hold_lease_t *lease_new(relock__ledger_t *l, relock__hold_t *hold) {
  relock__hold_lease_t *fixed = malloc(sizeof(*fixed));
  if (fixed == NULL)
    return NULL;
  relock__timer_init(&fixed->end, on_lease_end, l);
  fixed->hold = hold;
  fixed->lease_ms = 0;
  fixed->promised_ns = 0;
  relock__list_push_back(&l->fixed, &fixed->link);
  l->nfixed++;
  changed(l);
  return fixed;
}

/* The fixed lease's end goes (the hold is renewed, let go, lost or
 * forgotten), and its checks with it. */
static void lease_free(relock__ledger_t *l, relock__hold_t *hold) {
  relock__timer_stop(&hold->fixed->end);
  relock__list_remove(&hold->fixed->link);
  l->nfixed--;
  changed(l);
  free(hold->fixed);
  relock__list_init(&hold->link); /* in place of fixed: in no list */
}

/* The hold is renewed from now on (a new one, or one with a fixed lease or
 * none, whose end no longer matters). */
static void start_renewing(relock__ledger_t *l, relock__hold_t *hold) {
  if (hold->fixed != NULL && !hold->watchdog && !hold->kept)
    lease_free(l, hold);
  hold->watchdog = 1;
  hold->kept = 0;
  relock__list_push_back(&l->renewing, &hold->link);
  l->nrenewing++;
  changed(l);
}

static void stop_renewing(relock__ledger_t *l, relock__hold_t *hold) {
  relock__list_remove(&hold->link);
  if (--l->nrenewing == 0)
    relock__timer_stop(&l->check);
  changed(l);
}

/* Puts a lost hold in l->lost_holds, to be forgotten lost_kept_ms from now.
 * The list stays in forget_ns order (lost_kept_ms rarely changes: the
 * place is found from the back at once), and the timer is for its head. */
static void keep_lost(relock__ledger_t *l, relock__hold_t *hold) {
  uint64_t now = relock__now_ns();
  hold->forget_ns = relock__deadline_after(now, l->lost_kept_ms);
  relock__link_t *after = l->lost_holds.prev;
  while (after != &l->lost_holds && hold_at(after)->forget_ns > hold->forget_ns)
    after = after->prev;
  relock__list_push_back(after->next, &hold->link); /* right behind after */
  if (after == &l->lost_holds)
    relock__timer_start(l->wheel, &l->forget, l->lost_kept_ms);
}

/* Lost holds remembered long enough are forgotten. */
static void on_forget(relock__timer_t *t, int status, void *arg) {
  (void)t;
  relock__ledger_t *l = arg;
  if (status != 0) /* the client is closing: the ledger's close forgets them */
    return;
  uint64_t now = relock__now_ns();
  while (!relock__list_empty(&l->lost_holds)) {
    relock__hold_t *hold = hold_at(l->lost_holds.next);
    if (hold->forget_ns > now) {
      relock__timer_start(l->wheel, &l->forget, relock__ms_until(hold->forget_ns, now));
      return;
    }
    forget(l, hold);
  }
}

static void unkeep_lost(relock__ledger_t *l, relock__hold_t *hold) {
  relock__list_remove(&hold->link);
  if (relock__list_empty(&l->lost_holds)) /* an idle client never wakes */
    relock__timer_stop(&l->forget);
}

/* Takes the hold out of the state it is in (hold.h), for another. One
 * being told of its loss stays in the deadline check's list, which lets go
 * of it; one kept or letting go is in no list. */
static void leave_state(relock__ledger_t *l, relock__hold_t *hold) {
  if (hold->lost && !hold->telling)
    unkeep_lost(l, hold);
  else if (hold->lost || hold->letting_go || hold->kept)
    return;
  else if (hold->watchdog)
    stop_renewing(l, hold);
  else
    lease_free(l, hold);
}

static void forget(relock__ledger_t *l, relock__hold_t *hold) {
  leave_state(l, hold);
  relock__htab_remove(&l->holds, &hold->node);
  hold->removed = 1;
  relock__hold_unref(hold);
}

/* Marks a hold lost. It stays in the table for a while, to tell a later
 * release, and is forgotten after that. */
static void mark_lost(relock__ledger_t *l, relock__hold_t *hold) {
  leave_state(l, hold);
  hold->lost = 1;
  l->lost++;
  keep_lost(l, hold);
}

/* The owner asked to release its last hold: nothing renews or checks it
 * again, whatever the answer. */
static void let_go(relock__ledger_t *l, relock__hold_t *hold) {
  leave_state(l, hold);
  hold->letting_go = 1;
  relock__list_init(&hold->link);
}

/* -- statistics (stats/stats.h) ---------------------------------------------*/

/* The cause of a loss told with reason (notify_lost's cases). */
static relock_loss_t loss_of(const relock__hold_t *hold, int reason) {
  if (reason == RELOCK_ELOST)
    return hold->cut ? RELOCK_LOSS_CUT : RELOCK_LOSS_DELETED;
  return hold->unsynced ? RELOCK_LOSS_UNREPLICATED : RELOCK_LOSS_UNREACHABLE;
}

/* A hold ended: released by its holder (loss < 0), lost, or its lease
 * ran out. Counted once, whatever follows (a lost hold is forgotten
 * later, or released without Redis). */
static void count_end(relock__ledger_t *l, relock__hold_t *hold, int loss, const char *msg) {
  relock__stats_t *st = l->redis->settings->stats;
  if (hold->ended || (!st->on && !relock__stats_observed(st)))
    return;
  hold->ended = 1;
  uint32_t held_ms = (uint32_t)(relock__now_ns() / RELOCK__NS_PER_MS) - hold->since_ms; /* modulo 2^32 */
  size_t len;
  const char *key = relock__hold_key(hold, &len);
  relock__stats_hold_end(st, (relock_kind_t)hold->kind, loss, (uint64_t)held_ms * RELOCK__NS_PER_MS, key, len,
                         hold->owner, msg);
}

/* Tells the hold's holder. Its callback may do anything, closing the
 * client included: callers hold a reference on the hold (and so on its
 * holder's arg) and walk no list. */
static void notify_lost(relock__ledger_t *l, relock__hold_t *hold, int reason) {
  char msg[512], name[RELOCK__HOLD_FIELD_MAX];
  size_t key_len;
  const char *key = relock__hold_key(hold, &key_len);
  const char *what = hold->holder->ops->what;
  hold->holder->ops->name(hold->holder, hold->owner, name);
  int n = key_len > sizeof msg ? (int)sizeof msg : (int)key_len;
  if (reason == RELOCK_ELOST && hold->cut)
    snprintf(msg, sizeof msg, "%s %.*s lost: another client cut its expiry in Redis below its lease (holder %s)", what,
             n, key, name);
  else if (reason == RELOCK_ELOST)
    snprintf(msg, sizeof msg, "%s %.*s lost: its holder %s is gone from Redis (deleted, or expired)", what, n, key,
             name);
  else if (!hold->watchdog && !hold->kept) /* a fixed lease (unconfirmed) */
    snprintf(msg, sizeof msg,
             "%s %.*s lost: its lease could not be confirmed to its end (a check of it was answered late, and "
             "none since in time) (holder %s)", what, n, key, name);
  else if (hold->unsynced)
    snprintf(msg, sizeof msg,
             "%s %.*s lost: its lease ran out while its renewals were not acknowledged by enough replicas "
             "(holder %s)", what, n, key, name);
  else
    snprintf(msg, sizeof msg,
             "%s %.*s lost: its lease ran out while Redis could not be reached to renew it (holder %s)", what, n, key,
             name);
  count_end(l, hold, loss_of(hold, reason), msg);
  hold->holder->ops->on_lost(hold->holder, hold->owner, reason, msg);
}

static void declare_lost(relock__ledger_t *l, relock__hold_t *hold, int reason) {
  hold->refs++;
  mark_lost(l, hold);
  notify_lost(l, hold, reason);
  relock__hold_unref(hold);
}

/* Redis answered (now) that the hold's field is gone: was it taken away?
 * A renewed hold was. So was a fixed-lease hold still within its validity:
 * the answer was produced before now, and the deadline comes before
 * Redis's own expiry (hold.h), so Redis did not let it expire - it was
 * deleted, force-released or lost in a failover. Past its deadline a fixed
 * lease may simply have run out - unless someone cut it shorter. A kept
 * hold (no lease) never runs out. */
static int taken_away(const relock__hold_t *hold) {
  return hold->watchdog || hold->kept || hold->cut || relock__now_ns() < hold->deadline_ns;
}

void relock__hold_gone(relock__ledger_t *l, relock__hold_t *hold) {
  if (!relock__hold_held(hold) || hold->releases_in_flight > 0)
    return; /* a release in flight may be what made it go: its answer decides */
  if (taken_away(hold)) {
    declare_lost(l, hold, RELOCK_ELOST);
  } else {
    count_end(l, hold, RELOCK_LOSS_LEASE_ENDED, NULL);
    forget(l, hold);
  }
}

void relock__hold_renewed(relock__ledger_t *l, relock__hold_t *hold, uint64_t sent_ns) {
  hold->unsynced = 0;
  uint64_t deadline = relock__deadline_after(sent_ns, l->watchdog_ms - relock__validity_margin_ms(l->watchdog_ms));
  if (deadline > hold->deadline_ns)
    hold->deadline_ns = deadline;
}

/* A new hold; NULL when out of memory. */
static relock__hold_t *hold_new(relock__ledger_t *l, const relock__hold_id_t *id, relock__holder_t *holder,
                                relock__lease_kind_t lease) {
  relock__hold_t *hold = calloc(1, sizeof(*hold));
  if (hold == NULL)
    return NULL;
  if (lease == RELOCK__LEASE_RENEWED) {
    start_renewing(l, hold);
  } else if (lease == RELOCK__LEASE_KEPT) {
    hold->kept = 1;
    hold->deadline_ns = UINT64_MAX;
    relock__list_init(&hold->link);
  } else if ((hold->fixed = lease_new(l, hold)) == NULL) {
    free(hold);
    return NULL;
  }
  hold->holder = holder;
  hold->owner = id->owner;
  hold->role = id->role;
  hold->kind = id->kind;
  hold->since_ms = (uint32_t)(relock__now_ns() / RELOCK__NS_PER_MS);
  hold->refs = 1;
  relock__htab_insert(&l->holds, &hold->node, hold_hash(id));
  return hold;
}

/* Arms the end of a fixed lease at its deadline: once it has surely passed
 * for a lease that runs out (a release until then still finds the hold);
 * for one cut shorter (kept_for), a tick before it, as the wheel may fire
 * a tick late: its loss is told by the deadline, before Redis lets the key
 * go (the drift margin of a short expiry is not much more than a tick). */
static void arm_lease_end(relock__ledger_t *l, relock__hold_t *hold) {
  int64_t until = relock__ms_until(hold->deadline_ns, relock__now_ns());
  int64_t tick_ms = (int64_t)(l->wheel->tick_ns / RELOCK__NS_PER_MS);
  if (!hold->cut)
    until += 1;
  else
    until = until > tick_ms ? until - tick_ms : 0;
  relock__timer_start(l->wheel, &hold->fixed->end, until);
}

/* A fixed lease taken (again), valid until deadline: the hold keeps the
 * longest, and is forgotten once its deadline has surely passed. */
static void extend_lease(relock__ledger_t *l, relock__hold_t *hold, int64_t lease_ms, uint64_t deadline) {
  if (lease_ms > hold->fixed->lease_ms)
    hold->fixed->lease_ms = lease_ms;
  if (deadline > hold->fixed->promised_ns)
    hold->fixed->promised_ns = deadline;
  arm_lease_end(l, hold);
}

int relock__hold_kept_for(relock__ledger_t *l, relock__hold_t *hold, uint64_t sent_ns, int64_t kept_ms) {
  /* a hold re-entered with the watchdog meanwhile is renewed instead */
  if (kept_ms < 0 || !relock__hold_held(hold) || hold->watchdog || hold->kept)
    return 0;
  int64_t valid_ms = kept_ms - relock__validity_margin_ms(kept_ms);
  uint64_t deadline = valid_ms > 0 ? relock__deadline_after(sent_ns, valid_ms) : sent_ns;
  if (deadline >= hold->deadline_ns) {
    /* Redis keeps it at least until deadline: one an answer that came
     * late brought nearer comes back, as far as was promised (never
     * further: a check extends nothing). */
    uint64_t promised = hold->fixed->promised_ns;
    if (!hold->cut && hold->deadline_ns < promised) {
      hold->deadline_ns = deadline < promised ? deadline : promised;
      arm_lease_end(l, hold);
    }
    return 0;
  }
  /* Redis keeps the key kept_ms from some moment between the send and
   * now: from now, shorter than believed, someone cut it; otherwise the
   * answer may just have come late, and only the earliest is sure. */
  uint64_t now = relock__now_ns();
  if (relock__deadline_after(now, kept_ms) < hold->deadline_ns)
    hold->cut = 1;
  hold->deadline_ns = deadline;
  if (deadline <= now) {
    lease_over(l, hold);
    return 0;
  }
  arm_lease_end(l, hold);
  return !hold->cut;
}

/* Redis counts count holds of the owner now, this acquisition's included:
 * no more than the owner had before it, the earlier ones are gone - the
 * key vanished (deleted, force released, lost in a failover) and this
 * acquisition made the field afresh. Counting on from them would let the
 * owner's next release free the lock under the hold it still believes
 * in. They are lost (told, as any loss); 1 if so. */
static int earlier_holds_gone(relock__ledger_t *l, relock__hold_t *hold, int64_t count) {
  if (hold == NULL || !relock__hold_held(hold) || count <= 0 || count > hold->count)
    return 0;
  declare_lost(l, hold, RELOCK_ELOST);
  return 1;
}

/* Drops holder (an acquisition that keeps no hold) and says why. */
static int refuse(relock__holder_t *holder, int err) {
  holder->ops->drop(holder);
  return err;
}

int relock__hold_acquired(relock__ledger_t *l, const relock__hold_id_t *id, relock__holder_t *holder,
                          relock__lease_kind_t lease, int64_t lease_ms, uint64_t sent_ns, int64_t count,
                          const uint64_t *release_id, int64_t *surplus) {
  *surplus = 0;
  if (l->closing)
    return refuse(holder, RELOCK_ECLOSED);
  relock__hold_t *hold = relock__hold_find(l, id);
  if (hold != NULL && relock__hold_held(hold) && hold->deadline_ns <= relock__now_ns()) {
    /* Past its validity the earlier hold may have expired before this
     * acquisition ran, which then started a count of its own: counting on
     * from the old one would let an inner release free the lock under the
     * outer holder. The old hold ends (a fixed lease as its end's timer
     * would end it, a tick early); the new one starts afresh. */
    if (hold->watchdog || hold->kept)
      declare_lost(l, hold, RELOCK_ETIMEDOUT);
    else
      lease_over(l, hold);
    if (l->closing)
      return refuse(holder, RELOCK_ECLOSED);
    hold = relock__hold_find(l, id);
  }
  int afresh = earlier_holds_gone(l, hold, count);
  if (afresh) {
    if (l->closing) /* by the lost callback */
      return refuse(holder, RELOCK_ECLOSED);
    hold = relock__hold_find(l, id);
  }
  if (hold != NULL && !relock__hold_held(hold)) {
    /* Lost or let go: the owner believes in it no more, and never picks it
     * up again. A release of it still in flight keeps the old one until
     * answered (its count is not this one's); this one starts afresh, one
     * hold - what Redis may count on top (the old one, not yet gone) is a
     * surplus its last release gives back. */
    if (hold->letting_go && hold->releases_in_flight > 0) {
      relock__htab_remove(&l->holds, &hold->node);
      hold->removed = 1;
      relock__hold_unref(hold);
    } else {
      forget(l, hold);
    }
    hold = NULL;
  }
  if (hold != NULL) {
    holder->ops->drop(holder); /* the hold has its reference already */
    hold->count++;
  } else if ((hold = hold_new(l, id, holder, lease)) == NULL) {
    return refuse(holder, RELOCK_ENOMEM);
  } else {
    /* Afresh after earlier holds were found gone: what Redis counts. Else
     * one hold, what the owner believes: more in Redis (a field left from
     * a hold let go or forgotten, within its drift margin) is a surplus
     * that the last release gives back (relock__hold_release). */
    hold->count = afresh ? count : 1;
  }
  if (release_id != NULL)
    memcpy(hold->release_id, release_id, sizeof(hold->release_id));
  if (count > hold->count)
    *surplus = count - hold->count; /* Redis counts holds nobody believes in: given back (relock__hold_give_back) */
  if (lease == RELOCK__LEASE_KEPT)
    return 0;
  if (hold->kept) { /* a lease now where there was none: its deadline starts from this one */
    hold->kept = 0;
    hold->deadline_ns = 0;
    if ((hold->fixed = lease_new(l, hold)) == NULL) {
      declare_lost(l, hold, RELOCK_ELOST); /* out of memory: nothing would track its lease */
      return RELOCK_ENOMEM;
    }
  }
  /* Re-entry never shortens a lease (lua/lock_acquire.lua keeps the longer
   * one): a renewed hold keeps the watchdog's, a fixed one the longest.
   * Nor do renewals and partial releases (they only extend), so the
   * furthest deadline of all is one Redis keeps: a belief never outlasts
   * the key, whatever mix of leases the holds have. */
  if (lease == RELOCK__LEASE_RENEWED)
    lease_ms = l->watchdog_ms;
  uint64_t deadline = relock__deadline_after(sent_ns, lease_ms - relock__validity_margin_ms(lease_ms));
  if (deadline > hold->deadline_ns) {
    hold->deadline_ns = deadline;
    hold->cut = 0; /* Redis keeps the key this long again */
  }
  if (lease == RELOCK__LEASE_RENEWED && !hold->watchdog)
    start_renewing(l, hold);
  if (!hold->watchdog)
    extend_lease(l, hold, lease_ms, deadline);
  return 0;
}

int64_t relock__hold_validity_ms(relock__ledger_t *l, const relock__hold_id_t *id) {
  relock__hold_t *hold = relock__hold_find(l, id);
  if (hold == NULL || hold->letting_go)
    return RELOCK_ENOTOWNER;
  if (hold->lost)
    return RELOCK_ELOST;
  if (hold->kept)
    return INT64_MAX;
  return relock__ms_until(hold->deadline_ns, relock__now_ns());
}

/* -- the deadline check -------------------------------------------------------*/

uint64_t relock__ledger_check_deadlines(relock__ledger_t *l, uint64_t now) {
  /* The lost holds are collected first and told afterwards, so their
   * callbacks cannot disturb the walk; each joins the lost holds (to be
   * forgotten) as it is told, unless a callback forgot it meanwhile. */
  uint64_t earliest = UINT64_MAX;
  relock__link_t dying;
  relock__list_init(&dying);
  relock__link_t *head = &l->renewing;
  for (relock__link_t *link = head->next, *next; link != head; link = next) {
    next = link->next;
    relock__hold_t *hold = hold_at(link);
    /* A hold still listed here is still believed in (a last release lets
     * go of it first): a partial release or a give-back in flight, retried
     * perhaps for a whole lease, does not make its deadline any later. */
    if (hold->deadline_ns <= now) {
      hold->refs++;
      leave_state(l, hold);
      hold->lost = 1;
      hold->telling = 1;
      l->lost++;
      relock__list_push_back(&dying, &hold->link);
    } else if (hold->deadline_ns < earliest) {
      earliest = hold->deadline_ns;
    }
  }
  while (!relock__list_empty(&dying)) {
    relock__hold_t *hold = hold_at(dying.next);
    relock__list_remove(&hold->link);
    hold->telling = 0;
    if (!hold->removed)
      keep_lost(l, hold);
    notify_lost(l, hold, RELOCK_ETIMEDOUT);
    relock__hold_unref(hold);
  }
  return earliest;
}

void relock__ledger_arm_check(relock__ledger_t *l, uint64_t now, uint64_t earliest) {
  if (earliest == UINT64_MAX || l->nrenewing == 0)
    return;
  int64_t until = relock__ms_until(earliest, now);
  if (until < l->watchdog_ms / 3)
    relock__timer_start(l->wheel, &l->check, until + 1);
}

static void on_check(relock__timer_t *t, int status, void *arg) {
  (void)t;
  relock__ledger_t *l = arg;
  if (status != 0)
    return;
  uint64_t now = relock__now_ns();
  relock__ledger_arm_check(l, now, relock__ledger_check_deadlines(l, now));
}

/* -- the release ----------------------------------------------------------------
 * One release of one hold, from the ask to its last answer: sent once in
 * the caller's time; if that gets no answer and a hold was let go (or is
 * partly released: the count Redis keeps is unknown), once more in the
 * background, same request id, until Redis answers or the lease has
 * surely ended. */

typedef enum release_outcome {
  RELEASE_FAILED = 0, /* no answer: nothing is known */
  RELEASE_FREED,      /* the lock is free now */
  RELEASE_REMAINS,    /* owner still holds it */
  RELEASE_NOT_HELD    /* Redis says owner does not hold it */
} release_outcome_t;

typedef struct release {
  relock__ledger_t *l;
  relock__holder_t *holder;   /* a reference while the release lives */
  relock__hold_t *hold;       /* a reference, or NULL: a release of nothing the ledger knows */
  relock_future_t *out;       /* the caller's; NULL once told */
  relock__release_req_t req;
  uint64_t owner;
  int last;                   /* it lets go of the hold's last hold */
  int surplus;                /* releases sent again for holds Redis counted that the owner did not */
  void (*settled)(void *arg);
  void *arg;
} release_t;

static void release_end(release_t *op) {
  if (op->hold != NULL) {
    if (op->hold->releases_in_flight > 0)
      op->hold->releases_in_flight--;
    if (op->last && !op->hold->removed)
      forget(op->l, op->hold);
    relock__hold_unref(op->hold);
  }
  if (op->out != NULL)
    relock_future_release(op->out);
  void (*settled)(void *) = op->settled;
  void *arg = op->arg;
  op->holder->ops->drop(op->holder);
  free(op);
  if (settled != NULL)
    settled(arg);
}

static release_outcome_t outcome_of(relock_future_t *f) {
  if (relock_future_error(f) != 0)
    return RELEASE_FAILED;
  if (relock_future_value_type(f) == RELOCK_VALUE_BOOL)
    return relock_future_bool(f) ? RELEASE_FREED : RELEASE_NOT_HELD;
  int64_t v = relock_future_int(f);
  return v == 1 ? RELEASE_FREED : v == 0 ? RELEASE_REMAINS : RELEASE_NOT_HELD;
}

/* What Redis answered changes what the ledger knows: Redis wins. Returns 1
 * if the owner's hold had been lost (or is found lost by this answer), so
 * that the release reports RELOCK_ELOST rather than "not held". */
static int learn(release_t *op, release_outcome_t outcome) {
  relock__hold_t *hold = op->hold;
  if (op->surplus > 0 && outcome == RELEASE_NOT_HELD)
    outcome = RELEASE_FREED; /* an earlier round freed it */
  if (hold == NULL || hold->removed)
    return 0;
  int lost = hold->lost;
  if (outcome == RELEASE_FREED) {
    if (!op->last && relock__hold_held(hold)) { /* it freed more than the owner let go of */
      declare_lost(op->l, hold, RELOCK_ELOST);
      lost = 1;
    } else {
      count_end(op->l, hold, -1, NULL);
    }
  } else if (outcome == RELEASE_NOT_HELD) {
    /* A hold Redis no longer has is a loss nobody had seen yet, unless it
     * was a fixed lease that ran out. In the background (the caller was
     * told already) it only ends what was let go: a permit's repeated
     * release finds nothing, its first having landed. */
    if (!lost && op->out != NULL && taken_away(hold)) {
      declare_lost(op->l, hold, RELOCK_ELOST);
      lost = 1;
    } else if (!lost) {
      count_end(op->l, hold, RELOCK_LOSS_LEASE_ENDED, NULL); /* released after its lease ran out */
    }
    op->last = 1; /* nothing of it is left in Redis: forgotten at the end */
  }
  return lost;
}

/* Redis answered that holds remain after the owner's last one: a surplus
 * nobody believes in (a field left within its drift margin, a duplicate
 * count), given back like an orphan - released again, with a new id, until
 * Redis says freed or not held (bounded: a count is not that large).
 * Returns 1 if a release went again (done is called with its answer). */
static int give_back_surplus(release_t *op, release_outcome_t outcome, relock_future_cb done) {
  if (outcome != RELEASE_REMAINS || !op->last || op->surplus >= 1000)
    return 0;
  op->surplus++;
  op->req.id[0] = relock__random(op->l->redis->rng);
  op->req.id[1] = relock__random(op->l->redis->rng);
  relock_future_t *f = op->holder->ops->release(op->holder, op->owner, &op->req);
  if (f == NULL)
    return 0;
  relock_future_on_done(f, done, op);
  return 1;
}

static void on_background_done(relock_future_t *f, void *arg) {
  release_t *op = arg;
  relock__stats_t *st = op->l->redis->settings->stats;
  release_outcome_t outcome = outcome_of(f);
  relock_future_release(f);
  if (give_back_surplus(op, outcome, on_background_done))
    return;
  op->l->letting_go--;
  if (outcome == RELEASE_FAILED) {
    if (op->l->closing || op->l->redis->closing)
      op->l->close_unreleased++;
    else
      RELOCK__STATS_COUNT(st, releases_expired, 1); /* Redis lets the key expire: nobody renews it */
    if (op->hold != NULL && op->last)
      count_end(op->l, op->hold, -1, NULL);
  } else {
    RELOCK__STATS_COUNT(st, releases_settled, 1);
    if (op->l->closing || op->l->redis->closing)
      op->l->close_released++;
    learn(op, outcome);
  }
  release_end(op);
}

/* The lock is free at the latest once Redis has let the key expire: a
 * lease from a renewal or acquisition that may still be in flight. */
static int64_t free_by_ms(const release_t *op) {
  return op->req.lease_ms + op->l->redis->settings->opt.command_timeout_ms;
}

/* The release got no answer: retried in the background, the caller told.
 * Everything of the ledger's is done before the caller's callbacks and the
 * event run: either may close the client. */
static void retry_in_background(release_t *op, int err, const char *why) {
  relock__ledger_t *l = op->l;
  int64_t by_ms = free_by_ms(op);
  op->req.answer_by_ns = relock__deadline_after(relock__now_ns(), by_ms);
  char name[RELOCK__HOLD_FIELD_MAX], msg[768];
  size_t key_len;
  const char *key = op->holder->ops->key(op->holder, &key_len);
  op->holder->ops->name(op->holder, op->owner, name);
  snprintf(msg, sizeof msg,
           "%s %.*s: the release by %s did not go through (%s); %s, and the release is retried in the "
           "background: the lock is free in %lld ms at the latest",
           what_of(op->holder), (int)key_len, key, name, why,
           op->last ? "it is not renewed any more" : "the holds that remain are kept", (long long)by_ms);
  relock_event_t ev = {.type = RELOCK_EVENT_RELEASE_RETRIED, .kind = (relock_kind_t)op->hold->kind,
                       .owner = op->owner, .duration_ns = by_ms * (int64_t)RELOCK__NS_PER_MS, .message = why};
  char *event_name = relock__stats_observed(l->redis->settings->stats) ? strndup(key, key_len) : NULL;
  relock_future_t *out = op->out;
  op->out = NULL;
  relock__stats_t *st = l->redis->settings->stats;
  RELOCK__STATS_COUNT(st, release_retries, 1);
  relock_future_t *f = op->holder->ops->release(op->holder, op->owner, &op->req);
  if (f == NULL) { /* out of memory: nothing more to do; the lease ends it */
    RELOCK__STATS_COUNT(st, releases_expired, 1);
    release_end(op);
  } else {
    l->letting_go++;
    relock_future_on_done(f, on_background_done, op);
  }
  if (event_name != NULL) { /* a copy: the background call's answer may come (and free the holder) in here */
    ev.name = event_name;
    ev.name_len = key_len;
    relock__stats_emit(st, &ev); /* a close from in here waits for the loop (client.c) */
    free(event_name);
  }
  relock__future_fail(out, err, "%s", msg); /* last: its callbacks may free the client */
  relock_future_release(out);
}

static void on_release_done(relock_future_t *f, void *arg) {
  release_t *op = arg;
  release_outcome_t outcome = outcome_of(f);
  if (outcome == RELEASE_FAILED) {
    int err = relock_future_error(f);
    char why[256];
    snprintf(why, sizeof why, "%s", relock_future_message(f));
    relock_future_release(f);
    if (op->hold != NULL && !op->hold->removed && !op->hold->lost && !op->l->closing &&
        relock__call_may_pass(err, why)) {
      retry_in_background(op, err, why);
      return;
    }
    relock__future_fail(op->out, err, "%s", why);
    if (op->hold != NULL && !op->hold->removed && !op->hold->lost && !op->last) {
      /* refused for good (an error reply: an ACL's, a script's): nothing was
       * released, and the owner still holds what it held */
      op->hold->count++;
    }
    release_end(op);
    return;
  }
  relock_future_release(f);
  if (give_back_surplus(op, outcome, on_release_done))
    return;
  int lost = learn(op, outcome);
  char name[RELOCK__HOLD_FIELD_MAX];
  size_t key_len;
  const char *key = op->holder->ops->key(op->holder, &key_len);
  op->holder->ops->name(op->holder, op->owner, name);
  const char *what = what_of(op->holder);
  if (outcome == RELEASE_NOT_HELD && lost)
    relock__future_fail(op->out, RELOCK_ELOST, "%s %.*s was lost before this release by %s", what, (int)key_len, key,
                        name);
  else if (outcome == RELEASE_NOT_HELD && !op->holder->ops->not_held_false)
    relock__future_fail(op->out, RELOCK_ENOTOWNER, "%s %.*s is not held by %s (never acquired, or its lease expired)",
                        what, (int)key_len, key, name);
  else /* freed, or (a surplus given back) freed by the last of several */
    relock__future_succeed_bool(op->out, outcome == RELEASE_FREED || (op->surplus > 0 && outcome == RELEASE_NOT_HELD));
  release_end(op);
}

/* The lease a partial release keeps for the hold's remaining holds. */
static int64_t lease_for(const relock__ledger_t *l, const relock__hold_t *hold) {
  return hold != NULL && !hold->watchdog && !hold->kept && !hold->letting_go && !hold->lost ? hold->fixed->lease_ms
                                                                                             : l->watchdog_ms;
}

/* A lost hold's release is answered here, without Redis (which may be out
 * of reach, the reason for the loss): one hold of it is let go, the last
 * forgets it. */
static relock_future_t *release_lost(relock__ledger_t *l, relock__hold_t *hold) {
  char name[RELOCK__HOLD_FIELD_MAX];
  size_t key_len;
  const char *key = relock__hold_key(hold, &key_len);
  hold->holder->ops->name(hold->holder, hold->owner, name);
  relock_future_t *f = relock__future_failed(l->redis->exec, RELOCK_ELOST, "%s %.*s was lost before this release by %s",
                                             what_of(hold->holder), (int)key_len, key, name);
  if (--hold->count <= 0 && hold->releases_in_flight == 0)
    forget(l, hold);
  return f;
}

relock_future_t *relock__hold_release(relock__ledger_t *l, const relock__hold_id_t *id, relock__holder_t *holder,
                                      void (*settled)(void *arg), void *arg) {
  relock__hold_t *hold = relock__hold_find(l, id);
  if (hold != NULL && hold->lost) {
    relock_future_t *f = release_lost(l, hold);
    holder->ops->drop(holder);
    if (f != NULL && settled != NULL)
      settled(arg);
    return f;
  }
  if (hold != NULL && hold->letting_go)
    hold = NULL; /* let go already: this release is of nothing the ledger believes in */
  release_t *op = calloc(1, sizeof(*op));
  relock_future_t *out = relock__future_new(l->redis->exec);
  if (op == NULL || out == NULL) {
    free(op);
    relock_future_release(out);
    holder->ops->drop(holder);
    return NULL;
  }
  *op = (release_t){.l = l, .holder = holder, .hold = hold, .out = relock_future_retain(out), .owner = id->owner,
                    .settled = settled, .arg = arg};
  op->req.lease_ms = lease_for(l, hold);
  /* The acquisition's latch, taken over - by a holder whose release
   * scripts take latches over only: another kind's object of the name (the
   * same owner re-entering through it) must not find that latch. */
  if (hold != NULL && holder->ops->takes_latch != NULL && holder->ops->takes_latch(holder) &&
      (hold->release_id[0] != 0 || hold->release_id[1] != 0)) {
    memcpy(op->req.id, hold->release_id, sizeof(op->req.id));
    memset(hold->release_id, 0, sizeof(hold->release_id));
  } else {
    op->req.id[0] = relock__random(l->redis->rng);
    op->req.id[1] = relock__random(l->redis->rng);
  }
  if (hold != NULL) {
    hold->refs++;
    hold->releases_in_flight++;
    if (--hold->count <= 0) { /* the last one: let go, whatever the answer */
      op->last = 1;
      let_go(l, hold);
    }
  }
  relock_future_t *f = holder->ops->release(holder, id->owner, &op->req);
  if (f == NULL) {
    relock__future_fail(out, RELOCK_ENOMEM, "out of memory releasing %s", what_of(holder));
    if (hold != NULL && !op->last)
      hold->count++; /* nothing was sent */
    op->settled = NULL; /* not called when out of memory (hold.h) */
    release_end(op);
    return out;
  }
  relock_future_on_done(f, on_release_done, op);
  return out;
}

/* Giving back a surplus: releases of nothing the owner believes in, one
 * after the other, each with a request id of its own; the hold's count is
 * not touched (it is what the owner was told). */
static void on_surplus_done(relock_future_t *f, void *arg) {
  release_t *op = arg;
  release_outcome_t outcome = outcome_of(f);
  relock_future_release(f);
  relock__hold_t *hold = op->hold;
  if (outcome == RELEASE_REMAINS && --op->surplus > 0 && hold != NULL && relock__hold_held(hold)) {
    op->req.id[0] = relock__random(op->l->redis->rng);
    op->req.id[1] = relock__random(op->l->redis->rng);
    relock_future_t *next = op->holder->ops->release(op->holder, op->owner, &op->req);
    if (next != NULL) {
      relock_future_on_done(next, on_surplus_done, op);
      return;
    }
  } else if (outcome == RELEASE_FREED || outcome == RELEASE_NOT_HELD) {
    /* it freed what the owner believes in: Redis counted fewer than it said */
    if (hold != NULL && relock__hold_held(hold) && hold->releases_in_flight <= 1)
      declare_lost(op->l, hold, RELOCK_ELOST);
  }
  /* An answer missing, or the rest not sent: the owner's last release gives
   * back what is left (give_back_surplus). */
  release_end(op);
}

void relock__hold_give_back(relock__ledger_t *l, const relock__hold_id_t *id, relock__holder_t *holder, int64_t n,
                            void (*settled)(void *arg), void *arg) {
  relock__hold_t *hold = relock__hold_find(l, id);
  release_t *op = calloc(1, sizeof(*op));
  if (op == NULL || hold == NULL || !relock__hold_held(hold) || n <= 0) {
    free(op);
    holder->ops->drop(holder);
    if (settled != NULL)
      settled(arg);
    return;
  }
  *op = (release_t){.l = l, .holder = holder, .hold = hold, .owner = id->owner, .surplus = (int)(n > 1000 ? 1000 : n),
                    .settled = settled, .arg = arg};
  op->req.lease_ms = lease_for(l, hold);
  op->req.id[0] = relock__random(l->redis->rng);
  op->req.id[1] = relock__random(l->redis->rng);
  hold->refs++;
  hold->releases_in_flight++; /* a renewal answering "gone" meanwhile is this one's doing */
  relock_future_t *f = holder->ops->release(holder, id->owner, &op->req);
  if (f == NULL) {
    release_end(op);
    return;
  }
  relock_future_on_done(f, on_surplus_done, op);
}

/* -- the ledger's life ------------------------------------------------------------*/

int relock__ledger_init(relock__ledger_t *l, relock__redis_t *redis, relock__wheel_t *wheel, int64_t watchdog_ms) {
  memset(l, 0, sizeof(*l));
  if (relock__htab_init(&l->holds, 64) != 0)
    return RELOCK_ENOMEM;
  l->redis = redis;
  l->wheel = wheel;
  l->watchdog_ms = watchdog_ms;
  l->lost_kept_ms = RELOCK__LOST_KEPT_MS;
  relock__list_init(&l->renewing);
  relock__list_init(&l->fixed);
  relock__list_init(&l->lost_holds);
  relock__timer_init(&l->check, on_check, l);
  relock__timer_init(&l->forget, on_forget, l);
  return 0;
}

/* One hold's releases on close: it counts as released when every one of
 * them was answered. pending holds one more while they are being sent. */
typedef struct close_release {
  relock__ledger_t *l;
  int64_t pending;
  int failed;
} close_release_t;

static void close_release_settle(close_release_t *x) {
  if (--x->pending > 0)
    return;
  if (x->failed)
    x->l->close_unreleased++;
  else
    x->l->close_released++;
  free(x);
}

static void on_close_release(relock_future_t *f, void *arg) {
  close_release_t *x = arg;
  if (outcome_of(f) == RELEASE_FAILED || outcome_of(f) == RELEASE_NOT_HELD)
    x->failed = 1;
  relock_future_release(f);
  close_release_settle(x);
}

void relock__ledger_release_all(relock__ledger_t *l) {
  for (size_t i = 0; i < l->holds.nbuckets; i++)
    for (relock__hnode_t *n = l->holds.buckets[i]; n != NULL; n = n->next) {
      relock__hold_t *hold = relock__container_of(n, relock__hold_t, node);
      if (!relock__hold_held(hold) || hold->count <= 0)
        continue;
      close_release_t *x = malloc(sizeof(*x));
      if (x == NULL) {
        l->close_unreleased++;
        continue;
      }
      *x = (close_release_t){.l = l, .pending = hold->count + 1};
      relock__release_req_t req = {.lease_ms = lease_for(l, hold), .on_close = 1};
      for (int64_t k = 0; k < hold->count; k++) {
        req.id[0] = relock__random(l->redis->rng);
        req.id[1] = relock__random(l->redis->rng);
        relock_future_t *f = hold->holder->ops->release(hold->holder, hold->owner, &req);
        if (f == NULL) {
          x->failed = 1;
          x->pending--;
        } else {
          relock_future_on_done(f, on_close_release, x);
        }
      }
      close_release_settle(x);
    }
}

void relock__ledger_close(relock__ledger_t *l) {
  if (l->closing)
    return;
  l->closing = 1;
  relock__timer_stop(&l->check);
  relock__timer_stop(&l->forget);
  for (size_t i = 0; i < l->holds.nbuckets; i++)
    while (l->holds.buckets[i] != NULL)
      forget(l, relock__container_of(l->holds.buckets[i], relock__hold_t, node));
  relock__htab_cleanup(&l->holds);
}
