/* The watchdog's renewal engine: the cycle, batches by slot, the renew and
 * check scripts and their answers (renewal.h); what a hold is and what an
 * answer means for it is the ledger's (hold.h). */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include <relock/error.h>

#include "base/clock.h"
#include "base/decimal.h"
#include "future/promise.h"
#include "redis/call.h"
#include "redis/reply.h"
#include "redis/router.h"
#include "redis/scripts.h"
#include "stats/stats.h"
#include "watchdog/renewal.h"

struct batch;
static void send_spec(relock__renewal_t *r, struct batch *b, const relock__call_spec_t *spec);

static relock__hold_t *hold_at(relock__link_t *l) { return relock__container_of(l, relock__hold_t, link); }

static relock__hold_t *fixed_at(relock__link_t *l) {
  return relock__container_of(l, relock__hold_lease_t, link)->hold;
}

/* The cycle runs while some hold is renewed or checked: an idle client
 * never wakes. The ledger tells when what it renews or checks changes. */
static void holds_changed(void *arg) {
  relock__renewal_t *r = arg;
  if (r->ledger->nrenewing == 0 && r->ledger->nfixed == 0)
    relock__timer_stop(&r->cycle);
  else if (!r->closing && !relock__timer_pending(&r->cycle))
    relock__timer_start(r->wheel, &r->cycle, r->ledger->watchdog_ms / 3);
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
  int again;                  /* a check sent again at once, after an answer that came late */
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

static void send_batch(relock__renewal_t *r, batch_t *b);

/* An answer that came late brought a fixed lease's deadline nearer: the
 * hold alone is checked once more at once, and an answer in time gives
 * the lease back (relock__hold_kept_for). Once: a way that stays slow
 * is left to the cycle's checks, and the lease ends told. */
static void check_again(relock__renewal_t *r, relock__hold_t *hold) {
  if (r->closing) /* by a lost callback */
    return;
  batch_t *b = malloc(sizeof(*b));
  if (b == NULL) /* the cycle's next check will do */
    return;
  *b = (batch_t){.r = r, .check = 1, .again = 1, .n = 1};
  b->holds[0] = hold;
  relock__hold_ref(hold);
  send_batch(r, b);
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
    if (!relock__hold_held(hold)) /* let go, lost or forgotten meanwhile: its answer changes nothing */
      continue;
    if (answered_gone(b, reply, i)) {
      relock__hold_gone(r->ledger, hold);
    } else if (b->check) {
      if (relock__hold_kept_for(r->ledger, hold, b->sent_ns, reply->element[i]->integer) && !b->again)
        check_again(r, hold);
    } else {
      relock__hold_renewed(r->ledger, hold, b->sent_ns);
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
      relock__future_succeed_bool(b->out, !b->gone && relock__hold_held(b->holds[0]));
    relock_future_release(b->out);
  }
  for (size_t i = 0; i < b->n; i++)
    relock__hold_unref(b->holds[i]);
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
    argv[i] = relock__hold_key(b->holds[i], &lens[i]);
    argv[n + 1 + i] = fields[i];
    lens[n + 1 + i] = relock__hold_field(b->holds[i], fields[i]);
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
    argv[i] = relock__hold_key(hold, &lens[i]);
    argv[n + 2 + i] = fields[i];
    lens[n + 2 + i] = relock__hold_field(hold, fields[i]);
  }
  lens[n] = relock__decimal(lease, r->ledger->watchdog_ms);
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
      relock__hold_unref(b->holds[i]);
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
  relock__ledger_t *ledger = r->ledger;
  size_t n = 0, count = check ? ledger->nfixed : ledger->nrenewing;
  slotted_t *all = count > 0 ? malloc(count * sizeof(*all)) : NULL;
  if (all == NULL)
    return; /* out of memory: the next cycle tries again */
  relock__link_t *head = check ? &ledger->fixed : &ledger->renewing;
  for (relock__link_t *l = head->next; l != head && n < count; l = l->next) {
    relock__hold_t *hold = check ? fixed_at(l) : hold_at(l);
    size_t len;
    const char *key = relock__hold_key(hold, &len);
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
      b->again = 0;
      b->n = 0;
    }
    relock__hold_ref(all[i].hold);
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
  relock__ledger_t *l = r->ledger;
  uint64_t earliest = relock__ledger_check_deadlines(l, now);
  if (r->closing) /* by a lost callback */
    return;
  /* The callbacks above may have released holds: batch what is left. */
  send_all(r, 0);
  send_all(r, 1);
  if (l->nrenewing > 0 || l->nfixed > 0)
    relock__timer_start(r->wheel, &r->cycle, l->watchdog_ms / 3);
  relock__ledger_arm_check(l, now, earliest);
}

/* -- validation -------------------------------------------------------------*/

relock_future_t *relock__renewal_validate(relock__renewal_t *r, const relock__hold_id_t *id) {
  relock_future_t *out = relock__future_new(r->redis->exec);
  if (out == NULL)
    return NULL;
  relock__hold_t *hold = relock__hold_find(r->ledger, id);
  if (hold == NULL || !relock__hold_held(hold) || hold->kept) { /* nothing valid to check */
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
  b->again = 0;
  b->n = 1;
  b->holds[0] = hold;
  relock__hold_ref(hold);
  send_batch(r, b);
  return out;
}

void relock__renewal_init(relock__renewal_t *r, relock__redis_t *redis, relock__wheel_t *wheel, relock__ledger_t *ledger) {
  memset(r, 0, sizeof(*r));
  r->redis = redis;
  r->wheel = wheel;
  r->ledger = ledger;
  relock__timer_init(&r->cycle, on_cycle, r);
  ledger->changed = holds_changed;
  ledger->changed_arg = r;
}

void relock__renewal_close(relock__renewal_t *r) {
  r->closing = 1;
  relock__timer_stop(&r->cycle);
}
