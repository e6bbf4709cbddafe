/* The watchdog: holds, renewal in batches, lost-lock detection (renewal.h). */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <relock/error.h>

#include "base/decimal.h"
#include "base/clock.h"
#include "future/promise.h"
#include "redis/call.h"
#include "redis/reply.h"
#include "redis/router.h"
#include "redis/scripts.h"
#include "stats/stats.h"
#include "watchdog/renewal.h"

static void on_cycle(relock__timer_t *t, int status, void *arg);
static void on_check(relock__timer_t *t, int status, void *arg);
static void forget(relock__renewal_t *r, relock__hold_t *hold);
static void declare_lost(relock__renewal_t *r, relock__hold_t *hold, int reason);
static void count_end(relock__renewal_t *r, relock__hold_t *hold, int loss, const char *msg);
struct batch;
static void send_spec(relock__renewal_t *r, struct batch *b, const relock__call_spec_t *spec);

/* -- holds ------------------------------------------------------------------*/

static uint64_t hold_hash(const relock__hold_id_t *id) {
  uint64_t h = relock__hash_bytes(RELOCK__HASH_SEED, id->key, id->key_len);
  return relock__hash_bytes(h, &id->owner, sizeof id->owner) + (uint64_t)id->role;
}

static const char *hold_key(const relock__hold_t *hold, size_t *len) {
  return hold->holder->ops->key(hold->holder, len);
}

static size_t hold_field(const relock__hold_t *hold, char field[RELOCK__HOLD_FIELD_MAX]) {
  return hold->holder->ops->field(hold->holder, hold->owner, field);
}

relock__hold_t *relock__renewal_find(relock__renewal_t *r, const relock__hold_id_t *id) {
  if (r->closing) /* the table is gone with the client's close */
    return NULL;
  uint64_t h = hold_hash(id);
  relock__hnode_t *n;
  for (RELOCK__HTAB_EACH(&r->holds, h, n)) {
    relock__hold_t *hold = relock__container_of(n, relock__hold_t, node);
    if (n->hash != h || hold->owner != id->owner || hold->role != id->role)
      continue;
    size_t len;
    const char *key = hold_key(hold, &len);
    if (len == id->key_len && memcmp(key, id->key, len) == 0)
      return hold;
  }
  return NULL;
}

static void hold_unref(relock__hold_t *hold) {
  if (--hold->refs > 0)
    return;
  hold->holder->ops->drop(hold->holder);
  free(hold);
}

/* -- a hold's states (renewal.h): renewed, fixed lease, lost -----------------*/

static relock__hold_t *hold_at(relock__link_t *l) { return relock__container_of(l, relock__hold_t, link); }

static relock__hold_t *fixed_at(relock__link_t *l) {
  return relock__container_of(l, relock__hold_lease_t, link)->hold;
}

/* The cycle runs while some hold is renewed or checked: an idle client
 * never wakes. */
static void need_cycle(relock__renewal_t *r) {
  if (!relock__timer_pending(&r->cycle))
    relock__timer_start(r->wheel, &r->cycle, r->watchdog_ms / 3);
}

static void maybe_stop_cycle(relock__renewal_t *r) {
  if (r->nrenewing == 0 && r->nfixed == 0)
    relock__timer_stop(&r->cycle);
}

/* A fixed lease's validity is over: its hold is forgotten, Redis letting
 * it expire - or lost, when someone else cut the key's expiry below the
 * lease (kept_for): the holder did not get the lease it asked for. */
static void lease_over(relock__renewal_t *r, relock__hold_t *hold) {
  if (hold->cut) {
    declare_lost(r, hold, RELOCK_ELOST);
  } else {
    count_end(r, hold, RELOCK_LOSS_LEASE_ENDED, NULL);
    forget(r, hold);
  }
}

static void on_lease_end(relock__timer_t *t, int status, void *arg) {
  if (status != 0) /* the client is closing: renewal_close forgets it */
    return;
  lease_over(arg, relock__container_of(t, relock__hold_lease_t, end)->hold);
}

static relock__hold_lease_t *lease_new(relock__renewal_t *r, relock__hold_t *hold) {
  relock__hold_lease_t *fixed = malloc(sizeof(*fixed));
  if (fixed == NULL)
    return NULL;
  relock__timer_init(&fixed->end, on_lease_end, r);
  fixed->hold = hold;
  fixed->lease_ms = 0;
  relock__list_push_back(&r->fixed, &fixed->link);
  r->nfixed++;
  need_cycle(r);
  return fixed;
}

/* The fixed lease's end goes (the hold is renewed, lost or forgotten), and
 * its checks with it. */
static void lease_free(relock__renewal_t *r, relock__hold_t *hold) {
  relock__timer_stop(&hold->fixed->end);
  relock__list_remove(&hold->fixed->link);
  r->nfixed--;
  maybe_stop_cycle(r);
  free(hold->fixed);
  relock__list_init(&hold->link); /* in place of fixed: in no list */
}

/* The hold is renewed from now on (a new one, or one with a fixed lease,
 * whose end no longer matters). */
static void start_renewing(relock__renewal_t *r, relock__hold_t *hold) {
  if (hold->fixed != NULL)
    lease_free(r, hold);
  hold->watchdog = 1;
  relock__list_push_back(&r->renewing, &hold->link);
  r->nrenewing++;
  need_cycle(r);
}

static void stop_renewing(relock__renewal_t *r, relock__hold_t *hold) {
  relock__list_remove(&hold->link);
  if (--r->nrenewing == 0)
    relock__timer_stop(&r->check);
  maybe_stop_cycle(r);
}

/* Puts a lost hold in r->lost_holds, to be forgotten lost_kept_ms from now.
 * The list stays in forget_ns order (lost_kept_ms rarely changes: the
 * place is found from the back at once), and the timer is for its head. */
static void keep_lost(relock__renewal_t *r, relock__hold_t *hold) {
  uint64_t now = relock__now_ns();
  hold->forget_ns = relock__deadline_after(now, r->lost_kept_ms);
  relock__link_t *after = r->lost_holds.prev;
  while (after != &r->lost_holds && hold_at(after)->forget_ns > hold->forget_ns)
    after = after->prev;
  relock__list_push_back(after->next, &hold->link); /* right behind after */
  if (after == &r->lost_holds)
    relock__timer_start(r->wheel, &r->forget, r->lost_kept_ms);
}

/* Lost holds remembered long enough are forgotten. */
static void on_forget(relock__timer_t *t, int status, void *arg) {
  (void)t;
  relock__renewal_t *r = arg;
  if (status != 0) /* the client is closing: renewal_close forgets them */
    return;
  uint64_t now = relock__now_ns();
  while (!relock__list_empty(&r->lost_holds)) {
    relock__hold_t *hold = hold_at(r->lost_holds.next);
    if (hold->forget_ns > now) {
      relock__timer_start(r->wheel, &r->forget, relock__ms_until(hold->forget_ns, now));
      return;
    }
    forget(r, hold);
  }
}

static void unkeep_lost(relock__renewal_t *r, relock__hold_t *hold) {
  relock__list_remove(&hold->link);
  if (relock__list_empty(&r->lost_holds)) /* an idle client never wakes */
    relock__timer_stop(&r->forget);
}

/* Takes the hold out of the state it is in (renewal.h), to be lost or
 * forgotten. One being told of its loss stays in check_deadlines' list,
 * which lets go of it. */
static void leave_state(relock__renewal_t *r, relock__hold_t *hold) {
  if (hold->lost && !hold->telling)
    unkeep_lost(r, hold);
  else if (!hold->lost && hold->watchdog)
    stop_renewing(r, hold);
  else if (!hold->lost)
    lease_free(r, hold);
}

static void forget(relock__renewal_t *r, relock__hold_t *hold) {
  leave_state(r, hold);
  relock__htab_remove(&r->holds, &hold->node);
  hold->removed = 1;
  hold_unref(hold);
}

/* Marks a hold lost. It stays in the table for a while, to tell a later
 * release, and is forgotten after that. */
static void mark_lost(relock__renewal_t *r, relock__hold_t *hold) {
  leave_state(r, hold);
  hold->lost = 1;
  r->lost++;
  keep_lost(r, hold);
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
static void count_end(relock__renewal_t *r, relock__hold_t *hold, int loss, const char *msg) {
  relock__stats_t *st = r->redis->settings->stats;
  if (hold->ended || (!st->on && !relock__stats_observed(st)))
    return;
  hold->ended = 1;
  uint32_t held_ms = (uint32_t)(relock__now_ns() / RELOCK__NS_PER_MS) - hold->since_ms; /* modulo 2^32 */
  size_t len;
  const char *key = hold_key(hold, &len);
  relock__stats_hold_end(st, (relock_kind_t)hold->kind, loss, (uint64_t)held_ms * RELOCK__NS_PER_MS, key, len,
                         hold->owner, msg);
}

/* Tells the hold's holder. Its callback may do anything, closing the
 * client included: callers hold a reference on the hold (and so on its
 * holder's arg) and walk no list. */
static void notify_lost(relock__renewal_t *r, relock__hold_t *hold, int reason) {
  char msg[512], name[RELOCK__HOLD_FIELD_MAX];
  size_t key_len;
  const char *key = hold_key(hold, &key_len);
  const char *what = hold->holder->ops->what;
  hold->holder->ops->name(hold->holder, hold->owner, name);
  int n = key_len > sizeof msg ? (int)sizeof msg : (int)key_len;
  if (reason == RELOCK_ELOST && hold->cut)
    snprintf(msg, sizeof msg, "%s %.*s lost: another client cut its expiry in Redis below its lease (holder %s)", what,
             n, key, name);
  else if (reason == RELOCK_ELOST)
    snprintf(msg, sizeof msg, "%s %.*s lost: its holder %s is gone from Redis (deleted, or expired)", what, n, key,
             name);
  else if (hold->unsynced)
    snprintf(msg, sizeof msg,
             "%s %.*s lost: its lease ran out while its renewals were not acknowledged by enough replicas "
             "(holder %s)", what, n, key, name);
  else
    snprintf(msg, sizeof msg,
             "%s %.*s lost: its lease ran out while Redis could not be reached to renew it (holder %s)", what, n, key,
             name);
  count_end(r, hold, loss_of(hold, reason), msg);
  hold->holder->ops->on_lost(hold->holder, hold->owner, reason, msg);
}

static void declare_lost(relock__renewal_t *r, relock__hold_t *hold, int reason) {
  hold->refs++;
  mark_lost(r, hold);
  notify_lost(r, hold, reason);
  hold_unref(hold);
}

/* Redis answered (now) that the hold's field is gone: was it taken away?
 * A renewed hold was. So was a fixed-lease hold still within its validity:
 * the answer was produced before now, and the deadline comes before
 * Redis's own expiry (renewal.h), so Redis did not let it expire - it was
 * deleted, force-released or lost in a failover. Past its deadline a fixed
 * lease may simply have run out - unless someone cut it shorter. */
static int taken_away(const relock__hold_t *hold) {
  return hold->watchdog || hold->cut || relock__now_ns() < hold->deadline_ns;
}

/* The hold's field is gone: lost, or (a fixed lease run out) forgotten, as
 * its end would. */
static void found_gone(relock__renewal_t *r, relock__hold_t *hold) {
  if (taken_away(hold)) {
    declare_lost(r, hold, RELOCK_ELOST);
  } else {
    count_end(r, hold, RELOCK_LOSS_LEASE_ENDED, NULL);
    forget(r, hold);
  }
}

/* A new hold, renewed or with a fixed lease; NULL when out of memory. */
static relock__hold_t *hold_new(relock__renewal_t *r, const relock__hold_id_t *id, relock__holder_t *holder,
                                int watchdog) {
  relock__hold_t *hold = calloc(1, sizeof(*hold));
  if (hold == NULL)
    return NULL;
  if (watchdog) {
    start_renewing(r, hold);
  } else if ((hold->fixed = lease_new(r, hold)) == NULL) {
    free(hold);
    return NULL;
  }
  hold->holder = holder;
  hold->owner = id->owner;
  hold->role = id->role;
  hold->kind = id->kind;
  hold->since_ms = (uint32_t)(relock__now_ns() / RELOCK__NS_PER_MS);
  hold->refs = 1;
  relock__htab_insert(&r->holds, &hold->node, hold_hash(id));
  return hold;
}

/* Arms the end of a fixed lease at its deadline: once it has surely passed
 * for a lease that runs out (a release until then still finds the hold);
 * for one cut shorter (kept_for), a tick before it, as the wheel may fire
 * a tick late: its loss is told by the deadline, before Redis lets the key
 * go (the drift margin of a short expiry is not much more than a tick). */
static void arm_lease_end(relock__renewal_t *r, relock__hold_t *hold) {
  int64_t until = relock__ms_until(hold->deadline_ns, relock__now_ns());
  int64_t tick_ms = (int64_t)(r->wheel->tick_ns / RELOCK__NS_PER_MS);
  if (!hold->cut)
    until += 1;
  else
    until = until > tick_ms ? until - tick_ms : 0;
  relock__timer_start(r->wheel, &hold->fixed->end, until);
}

/* A fixed lease taken (again): the hold keeps the longest, and is forgotten
 * once its deadline has surely passed. */
static void extend_lease(relock__renewal_t *r, relock__hold_t *hold, int64_t lease_ms) {
  if (lease_ms > hold->fixed->lease_ms)
    hold->fixed->lease_ms = lease_ms;
  arm_lease_end(r, hold);
}

/* Redis counts count holds of the owner now, this acquisition's included:
 * no more than the owner had before it, the earlier ones are gone - the
 * key vanished (deleted, force released, lost in a failover) and this
 * acquisition made the field afresh. Counting on from them would let the
 * owner's next release free the lock under the hold it still believes
 * in. They are lost (told, as any loss); 1 if so. */
static int earlier_holds_gone(relock__renewal_t *r, relock__hold_t *hold, int64_t count) {
  if (hold == NULL || hold->lost || count <= 0 || count > hold->count)
    return 0;
  declare_lost(r, hold, RELOCK_ELOST);
  return 1;
}

void relock__renewal_pass_release_id(relock__renewal_t *r, const relock__hold_id_t *id, const uint64_t bits[2]) {
  relock__hold_t *hold = relock__renewal_find(r, id);
  if (hold != NULL && !hold->lost)
    memcpy(hold->release_id, bits, sizeof(hold->release_id));
}

int relock__renewal_take_release_id(relock__renewal_t *r, const relock__hold_id_t *id, uint64_t bits[2]) {
  relock__hold_t *hold = relock__renewal_find(r, id);
  if (hold == NULL || (hold->release_id[0] == 0 && hold->release_id[1] == 0))
    return 0;
  memcpy(bits, hold->release_id, sizeof(hold->release_id));
  memset(hold->release_id, 0, sizeof(hold->release_id));
  return 1;
}

int relock__renewal_acquired(relock__renewal_t *r, const relock__hold_id_t *id, relock__holder_t *holder,
                             int watchdog, int64_t lease_ms, uint64_t sent_ns, int64_t count) {
  if (r->closing) {
    holder->ops->drop(holder);
    return RELOCK_ECLOSED;
  }
  relock__hold_t *hold = relock__renewal_find(r, id);
  if (hold != NULL && !hold->lost && hold->deadline_ns <= relock__now_ns()) {
    /* Past its validity the earlier hold may have expired before this
     * acquisition ran, which then started a count of its own: counting on
     * from the old one would let an inner release free the lock under the
     * outer holder. The old hold is lost; the new one starts afresh. */
    declare_lost(r, hold, RELOCK_ETIMEDOUT);
    if (r->closing) {
      holder->ops->drop(holder);
      return RELOCK_ECLOSED;
    }
    hold = relock__renewal_find(r, id);
  }
  int afresh = earlier_holds_gone(r, hold, count);
  if (afresh) {
    if (r->closing) { /* by the lost callback */
      holder->ops->drop(holder);
      return RELOCK_ECLOSED;
    }
    hold = relock__renewal_find(r, id);
  }
  if (hold != NULL && hold->lost) { /* a fresh hold after a lost one */
    forget(r, hold);
    hold = NULL;
  }
  if (hold != NULL) {
    holder->ops->drop(holder); /* the hold has its reference already */
  } else if ((hold = hold_new(r, id, holder, watchdog)) == NULL) {
    holder->ops->drop(holder);
    return RELOCK_ENOMEM;
  }
  hold->count = afresh ? count : hold->count + 1; /* afresh: what Redis counts */
  /* Re-entry never shortens a lease (lua/lock_acquire.lua keeps the longer
   * one): a renewed hold keeps the watchdog's, a fixed one the longest.
   * Nor do renewals and partial releases (they only extend), so the
   * furthest deadline of all is one Redis keeps: a belief never outlasts
   * the key, whatever mix of leases the holds have. */
  if (watchdog)
    lease_ms = r->watchdog_ms;
  uint64_t deadline = relock__deadline_after(sent_ns, lease_ms - relock__validity_margin_ms(lease_ms));
  if (deadline > hold->deadline_ns) {
    hold->deadline_ns = deadline;
    hold->cut = 0; /* Redis keeps the key this long again */
  }
  if (watchdog && !hold->watchdog)
    start_renewing(r, hold);
  if (!hold->watchdog)
    extend_lease(r, hold, lease_ms);
  return 0;
}

void relock__renewal_release_started(relock__renewal_t *r, const relock__hold_id_t *id) {
  relock__hold_t *hold = relock__renewal_find(r, id);
  if (hold != NULL)
    hold->releases_in_flight++;
}

int relock__renewal_release_done(relock__renewal_t *r, const relock__hold_id_t *id,
                                 relock__release_outcome_t outcome) {
  relock__hold_t *hold = relock__renewal_find(r, id);
  if (hold == NULL)
    return 0;
  hold->releases_in_flight--;
  int lost = hold->lost;
  switch (outcome) {
  case RELOCK__RELEASE_FAILED: /* nothing is known: the deadline decides */
    if (hold->watchdog && !lost && hold->releases_in_flight == 0 && !r->closing)
      relock__timer_start(r->wheel, &r->check, relock__ms_until(hold->deadline_ns, relock__now_ns()) + 1);
    break;
  case RELOCK__RELEASE_REMAINS:
    if (lost)
      forget(r, hold);
    else if (hold->count > 1)
      hold->count--;
    break;
  case RELOCK__RELEASE_FREED:
    count_end(r, hold, -1, NULL);
    forget(r, hold);
    break;
  case RELOCK__RELEASE_NOT_OWNER:
    /* A hold Redis no longer has is a loss nobody had seen yet, unless it
     * was a fixed lease that ran out (found_gone). */
    hold->refs++; /* the lost callback may do anything, close the client included */
    if (!lost && taken_away(hold)) {
      declare_lost(r, hold, RELOCK_ELOST);
      lost = 1;
    } else if (!lost) {
      count_end(r, hold, RELOCK_LOSS_LEASE_ENDED, NULL); /* released after its lease ran out */
    }
    if (!hold->removed)
      forget(r, hold);
    hold_unref(hold);
    break;
  }
  return lost;
}

int relock__renewal_release_lost(relock__renewal_t *r, const relock__hold_id_t *id) {
  relock__hold_t *hold = relock__renewal_find(r, id);
  if (hold == NULL || !hold->lost)
    return 0;
  if (--hold->count <= 0 && hold->releases_in_flight == 0)
    forget(r, hold);
  return 1;
}

int64_t relock__renewal_lease_for(relock__renewal_t *r, const relock__hold_id_t *id) {
  relock__hold_t *hold = relock__renewal_find(r, id);
  /* a lost hold's release is answered without Redis (release_lost) */
  return hold != NULL && !hold->watchdog && !hold->lost ? hold->fixed->lease_ms : r->watchdog_ms;
}

int64_t relock__renewal_validity_ms(relock__renewal_t *r, const relock__hold_id_t *id) {
  relock__hold_t *hold = relock__renewal_find(r, id);
  if (hold == NULL)
    return RELOCK_ENOTOWNER;
  if (hold->lost)
    return RELOCK_ELOST;
  return relock__ms_until(hold->deadline_ns, relock__now_ns());
}

/* -- renewal ----------------------------------------------------------------*/

/* One script call for up to RELOCK__RENEW_BATCH holds on one node: a
 * renewal (lua/lock_renew.lua) of renewed holds, or a check
 * (lua/lock_check.lua) of fixed-lease ones. */
typedef struct batch {
  relock__renewal_t *r;
  relock_future_t *out;       /* a validation's future, or NULL */
  uint64_t sent_ns;
  int check;                  /* a check: extends nothing */
  int gone;                   /* Redis answered that holds[0] is gone (what a validation answers) */
  size_t n;
  relock__hold_t *holds[RELOCK__RENEW_BATCH];
} batch_t;

/* Whether answer i says that holds[i]'s field is gone: a renewal answers 1
 * (renewed) or 0, a check how long Redis keeps the hold, -2 if not at all. */
static int answered_gone(const batch_t *b, const relock_reply_t *reply, size_t i) {
  long long v = reply->element[i]->integer;
  return b->check ? v == -2 : v != 1;
}

/* A check answered (lua/lock_check.lua) that Redis keeps the fixed-lease
 * hold kept_ms more: a belief is never longer than what Redis keeps, so its
 * validity comes down to that, counted from the check's send time (Redis
 * ran it later), less the drift margin - never up, as a fixed lease is
 * never renewed; -1 (no expiry) changes nothing. A foreign client can cut
 * a key's expiry below the lease (Redisson's read-lock renewal is a plain
 * PEXPIRE to its own lease). When Redis lets the key go before the hold's
 * validity would have ended even counted from now (so not a slow answer,
 * nor the margin taken anew: a lease left alone always outlasts it), the
 * hold was cut: the end of its validity is then a loss, told to its holder,
 * not a lease run out. */
static void kept_for(relock__renewal_t *r, relock__hold_t *hold, uint64_t sent_ns, int64_t kept_ms) {
  if (kept_ms < 0)
    return;
  int64_t valid_ms = kept_ms - relock__validity_margin_ms(kept_ms);
  uint64_t deadline = valid_ms > 0 ? relock__deadline_after(sent_ns, valid_ms) : sent_ns;
  if (deadline >= hold->deadline_ns)
    return;
  uint64_t now = relock__now_ns();
  if (relock__deadline_after(now, kept_ms) < hold->deadline_ns)
    hold->cut = 1;
  hold->deadline_ns = deadline;
  if (deadline <= now)
    lease_over(r, hold);
  else
    arm_lease_end(r, hold);
}

static void on_batch_reply(relock_future_t *f, const relock_reply_t *reply, void *arg) {
  batch_t *b = arg;
  relock__renewal_t *r = b->r;
  if (reply->type == RELOCK_REPLY_ERROR) {
    relock__reply_fail(f, reply->str, reply->len);
    return;
  }
  if (reply->type != RELOCK_REPLY_ARRAY || reply->elements != b->n) {
    relock__future_fail(f, RELOCK_EPROTO, "renewal answered with an unexpected reply");
    return;
  }
  b->gone = answered_gone(b, reply, 0);
  for (size_t i = 0; i < b->n; i++) {
    relock__hold_t *hold = b->holds[i];
    if (hold->removed || hold->lost)
      continue;
    if (answered_gone(b, reply, i)) {
      if (hold->releases_in_flight == 0)
        found_gone(r, hold);
    } else if (b->check) {
      /* a hold re-entered with the watchdog meanwhile is renewed instead */
      if (!hold->watchdog)
        kept_for(r, hold, b->sent_ns, reply->element[i]->integer);
    } else {
      hold->unsynced = 0;
      uint64_t deadline =
          relock__deadline_after(b->sent_ns, r->watchdog_ms - relock__validity_margin_ms(r->watchdog_ms));
      if (deadline > hold->deadline_ns)
        hold->deadline_ns = deadline;
      r->renewed++;
      RELOCK__STATS_COUNT(r->redis->settings->stats, renewals, 1);
    }
  }
  relock__future_succeed(f);
}

static void on_batch_done(relock_future_t *f, void *arg) {
  batch_t *b = arg;
  /* A failed batch changes nothing: the next cycle tries again, and the
   * deadline check catches a hold that cannot be renewed in time. One too
   * few replicas acknowledged is no better than one that never arrived:
   * Redis extended the lease on the master, but a failover would lose it. */
  int err = relock_future_error(f);
  if (err != 0 && !b->check)
    RELOCK__STATS_COUNT(b->r->redis->settings->stats, renewal_failures, 1);
  if (err == RELOCK_ENOTREPLICATED) {
    b->r->unsynced++;
    for (size_t i = 0; i < b->n; i++)
      b->holds[i]->unsynced = 1;
  }
  if (b->out != NULL) {
    if (err != 0)
      relock__future_fail(b->out, err, "%s", relock_future_message(f));
    else
      relock__future_succeed_bool(b->out, !b->gone && !b->holds[0]->lost && !b->holds[0]->removed);
    relock_future_release(b->out);
  }
  for (size_t i = 0; i < b->n; i++)
    hold_unref(b->holds[i]);
  free(b);
  relock_future_release(f);
}

/* Whether a renewal's answer extended anything (that the replicas must then
 * have): one that only says "gone" is believed without WAIT. */
static int renewed_any(const relock_reply_t *reply) {
  if (reply->type != RELOCK_REPLY_ARRAY)
    return 1; /* on_batch_reply says what is wrong with it */
  for (size_t i = 0; i < reply->elements; i++)
    if (reply->element[i]->type != RELOCK_REPLY_INTEGER || reply->element[i]->integer != 0)
      return 1;
  return 0;
}

/* The roles of b's holds, one character each, as the scripts take them:
 * 'r' for a read hold (whose timeout keys count too), 'p' for a permit (in
 * the key's timeout zset), '-' for any other. */
static void batch_roles(const batch_t *b, char roles[RELOCK__RENEW_BATCH]) {
  for (size_t i = 0; i < b->n; i++)
    roles[i] = b->holds[i]->role == RELOCK__ROLE_READ     ? 'r'
               : b->holds[i]->role == RELOCK__ROLE_PERMIT ? 'p'
                                                          : '-';
}

/* A check of fixed-lease holds: KEYS = the keys, ARGV = their roles, then
 * their fields. No WAIT: a check extends nothing that the replicas would
 * have to keep. */
static void send_check(relock__renewal_t *r, batch_t *b) {
  const char *argv[2 * RELOCK__RENEW_BATCH + 1];
  size_t lens[2 * RELOCK__RENEW_BATCH + 1];
  char roles[RELOCK__RENEW_BATCH], fields[RELOCK__RENEW_BATCH][RELOCK__HOLD_FIELD_MAX];
  size_t n = b->n;
  batch_roles(b, roles);
  argv[n] = roles;
  lens[n] = n;
  for (size_t i = 0; i < n; i++) {
    argv[i] = hold_key(b->holds[i], &lens[i]);
    argv[n + 1 + i] = fields[i];
    lens[n + 1 + i] = hold_field(b->holds[i], fields[i]);
  }
  relock__call_spec_t spec = {.script = &relock__scripts[RELOCK__SCRIPT_LOCK_CHECK],
                              .nkeys = (int)n,
                              .argc = (int)(2 * n + 1),
                              .argv = argv,
                              .lens = lens,
                              .on_reply = on_batch_reply,
                              .arg = b,
                              .retry_safe = 1};
  send_spec(r, b, &spec);
}

static void send_batch(relock__renewal_t *r, batch_t *b) {
  if (b->check) {
    send_check(r, b);
    return;
  }
  const char *argv[2 * RELOCK__RENEW_BATCH + 2];
  size_t lens[2 * RELOCK__RENEW_BATCH + 2];
  char lease[24], roles[RELOCK__RENEW_BATCH], fields[RELOCK__RENEW_BATCH][RELOCK__HOLD_FIELD_MAX];
  size_t n = b->n;
  batch_roles(b, roles);
  for (size_t i = 0; i < n; i++) {
    relock__hold_t *hold = b->holds[i];
    argv[i] = hold_key(hold, &lens[i]);
    argv[n + 2 + i] = fields[i];
    lens[n + 2 + i] = hold_field(hold, fields[i]);
  }
  lens[n] = relock__decimal(lease, r->watchdog_ms);
  argv[n] = lease;
  argv[n + 1] = roles;
  lens[n + 1] = n;
  relock__call_spec_t spec = {.script = &relock__scripts[RELOCK__SCRIPT_LOCK_RENEW],
                              .nkeys = (int)n,
                              .argc = (int)(2 * n + 2),
                              .argv = argv,
                              .lens = lens,
                              .on_reply = on_batch_reply,
                              .arg = b,
                              .retry_safe = 1,
                              /* a renewal extends holds: believed once on enough replicas */
                              .wait_replicas = r->redis->settings->opt.min_replicas_acked,
                              .wait_timeout_ms = r->redis->settings->opt.min_replicas_timeout_ms,
                              .wrote = renewed_any};
  send_spec(r, b, &spec);
}

/* Sends b's script call, and sees to its answer. */
static void send_spec(relock__renewal_t *r, batch_t *b, const relock__call_spec_t *spec) {
  size_t n = b->n;
  b->sent_ns = relock__now_ns();
  relock_future_t *f = relock__call(r->redis, spec);
  if (f == NULL) { /* out of memory: the next cycle tries again */
    for (size_t i = 0; i < n; i++)
      hold_unref(b->holds[i]);
    if (b->out != NULL) {
      relock__future_fail(b->out, RELOCK_ENOMEM, "out of memory renewing a lock");
      relock_future_release(b->out);
    }
    free(b);
    return;
  }
  if (b->check)
    r->checks++;
  else
    r->batches++;
  relock_future_on_done(f, on_batch_done, b);
}

/* Declares lost every hold whose deadline has passed; returns the earliest
 * deadline left (UINT64_MAX: none). The lost holds are collected first and
 * told afterwards, so their callbacks cannot disturb the walk; each joins
 * the lost holds (to be forgotten) as it is told, unless a callback forgot
 * it meanwhile. */
static uint64_t check_deadlines(relock__renewal_t *r, uint64_t now) {
  uint64_t earliest = UINT64_MAX;
  relock__link_t dying;
  relock__list_init(&dying);
  relock__link_t *head = &r->renewing;
  for (relock__link_t *l = head->next, *next; l != head; l = next) {
    next = l->next;
    relock__hold_t *hold = hold_at(l);
    if (hold->releases_in_flight > 0) {
      continue; /* its release decides (and re-arms the check if it fails) */
    } else if (hold->deadline_ns <= now) {
      hold->refs++;
      leave_state(r, hold);
      hold->lost = 1;
      hold->telling = 1;
      r->lost++;
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
      keep_lost(r, hold);
    notify_lost(r, hold, RELOCK_ETIMEDOUT);
    hold_unref(hold);
  }
  return earliest;
}

/* Arms the deadline check if a deadline comes before the next cycle. */
static void arm_check(relock__renewal_t *r, uint64_t now, uint64_t earliest) {
  if (earliest == UINT64_MAX || r->nrenewing == 0)
    return;
  int64_t until = relock__ms_until(earliest, now);
  if (until < r->watchdog_ms / 3)
    relock__timer_start(r->wheel, &r->check, until + 1);
}

static void on_check(relock__timer_t *t, int status, void *arg) {
  (void)t;
  relock__renewal_t *r = arg;
  if (status != 0)
    return;
  uint64_t now = relock__now_ns();
  arm_check(r, now, check_deadlines(r, now));
}

typedef struct slotted {
  int slot;
  relock__hold_t *hold;
} slotted_t;

static int by_slot(const void *a, const void *b) {
  int x = ((const slotted_t *)a)->slot, y = ((const slotted_t *)b)->slot;
  return (x > y) - (x < y);
}

/* Renews every watchdog hold (check: checks every fixed-lease hold), in
 * batches whose keys share a cluster slot (one script's keys must:
 * CROSSSLOT otherwise), so on one node; off a cluster every key has slot 0
 * and batches are simply full. */
static void send_all(relock__renewal_t *r, int check) {
  size_t n = 0, count = check ? r->nfixed : r->nrenewing;
  slotted_t *all = count > 0 ? malloc(count * sizeof(*all)) : NULL;
  if (all == NULL)
    return; /* out of memory: the next cycle tries again */
  relock__link_t *head = check ? &r->fixed : &r->renewing;
  for (relock__link_t *l = head->next; l != head && n < count; l = l->next) {
    relock__hold_t *hold = check ? fixed_at(l) : hold_at(l);
    size_t len;
    const char *key = hold_key(hold, &len);
    all[n].slot = relock__route_slot(r->redis, key, len);
    all[n++].hold = hold;
  }
  qsort(all, n, sizeof(*all), by_slot);
  batch_t *b = NULL;
  for (size_t i = 0; i < n; i++) {
    if (b != NULL && (b->n == RELOCK__RENEW_BATCH || all[i].slot != all[i - 1].slot)) {
      send_batch(r, b);
      b = NULL;
    }
    if (b == NULL) {
      if ((b = malloc(sizeof(*b))) == NULL)
        break;
      b->r = r;
      b->out = NULL;
      b->check = check;
      b->gone = 0;
      b->n = 0;
    }
    all[i].hold->refs++;
    b->holds[b->n++] = all[i].hold;
  }
  if (b != NULL)
    send_batch(r, b);
  free(all);
}

static void on_cycle(relock__timer_t *t, int status, void *arg) {
  (void)t;
  relock__renewal_t *r = arg;
  if (status != 0 || r->closing)
    return;
  r->cycles++;
  uint64_t now = relock__now_ns();
  uint64_t earliest = check_deadlines(r, now);
  /* The callbacks above may have released holds: batch what is left. */
  send_all(r, 0);
  send_all(r, 1);
  if (r->nrenewing > 0 || r->nfixed > 0)
    relock__timer_start(r->wheel, &r->cycle, r->watchdog_ms / 3);
  arm_check(r, now, earliest);
}

/* -- validation -------------------------------------------------------------*/

relock_future_t *relock__renewal_validate(relock__renewal_t *r, const relock__hold_id_t *id) {
  relock_future_t *out = relock__future_new(r->redis->exec);
  if (out == NULL)
    return NULL;
  relock__hold_t *hold = relock__renewal_find(r, id);
  if (hold == NULL || hold->lost) { /* nothing valid to check */
    relock__future_succeed_bool(out, 0);
    return out;
  }
  /* This hold alone, now: a renewal, or a check (a fixed lease is not
   * extended by asking). */
  batch_t *b = malloc(sizeof(*b));
  if (b == NULL) {
    relock_future_release(out);
    return NULL;
  }
  b->r = r;
  b->out = relock_future_retain(out);
  b->check = !hold->watchdog;
  b->gone = 0;
  b->n = 1;
  b->holds[0] = hold;
  hold->refs++;
  send_batch(r, b);
  return out;
}

int relock__renewal_init(relock__renewal_t *r, relock__redis_t *redis, relock__wheel_t *wheel, int64_t watchdog_ms) {
  memset(r, 0, sizeof(*r));
  if (relock__htab_init(&r->holds, 64) != 0)
    return RELOCK_ENOMEM;
  r->redis = redis;
  r->wheel = wheel;
  r->watchdog_ms = watchdog_ms;
  r->lost_kept_ms = RELOCK__LOST_KEPT_MS;
  relock__list_init(&r->renewing);
  relock__list_init(&r->fixed);
  relock__list_init(&r->lost_holds);
  relock__timer_init(&r->cycle, on_cycle, r);
  relock__timer_init(&r->check, on_check, r);
  relock__timer_init(&r->forget, on_forget, r);
  return 0;
}

/* One hold's releases on close: it counts as released when every one of
 * them was answered. pending holds one more while they are being sent. */
typedef struct close_release {
  relock__renewal_t *r;
  int64_t pending;
  int failed;
} close_release_t;

static void close_release_settle(close_release_t *x) {
  if (--x->pending > 0)
    return;
  if (x->failed)
    x->r->close_unreleased++;
  else
    x->r->close_released++;
  free(x);
}

static void on_close_release(relock_future_t *f, void *arg) {
  close_release_t *x = arg;
  int not_held = relock_future_value_type(f) == RELOCK_VALUE_BOOL ? !relock_future_bool(f) : relock_future_int(f) < 0;
  if (relock_future_error(f) != 0 || not_held)
    x->failed = 1;
  relock_future_release(f);
  close_release_settle(x);
}

void relock__renewal_release_all(relock__renewal_t *r) {
  for (size_t i = 0; i < r->holds.nbuckets; i++)
    for (relock__hnode_t *n = r->holds.buckets[i]; n != NULL; n = n->next) {
      relock__hold_t *hold = relock__container_of(n, relock__hold_t, node);
      if (hold->lost || hold->removed || hold->count <= 0)
        continue;
      close_release_t *x = malloc(sizeof(*x));
      if (x == NULL) {
        r->close_unreleased++;
        continue;
      }
      *x = (close_release_t){.r = r, .pending = hold->count + 1};
      int64_t lease = hold->watchdog ? r->watchdog_ms : hold->fixed->lease_ms;
      for (int64_t k = 0; k < hold->count; k++) {
        relock_future_t *f = hold->holder->ops->release(hold->holder, hold->owner, lease);
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

void relock__renewal_close(relock__renewal_t *r) {
  if (r->closing)
    return;
  r->closing = 1;
  relock__timer_stop(&r->cycle);
  relock__timer_stop(&r->check);
  relock__timer_stop(&r->forget);
  for (size_t i = 0; i < r->holds.nbuckets; i++)
    while (r->holds.buckets[i] != NULL)
      forget(r, relock__container_of(r->holds.buckets[i], relock__hold_t, node));
  relock__htab_cleanup(&r->holds);
}
