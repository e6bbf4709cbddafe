/* The watchdog: holds, renewal in batches, lost-lock detection (renewal.h). */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include <relock/error.h>

#include "call.h"
#include "clock.h"
#include "lock_impl.h"
#include "promise.h"
#include "renewal.h"
#include "scripts.h"

#define NS_PER_MS 1000000u

static void on_cycle(relock__timer_t *t, int status, void *arg);
static void on_check(relock__timer_t *t, int status, void *arg);

/* -- holds ------------------------------------------------------------------*/

static uint64_t hold_hash(const relock_lock_t *lock, uint64_t owner) {
  return relock__hash_bytes(relock__hash_bytes(RELOCK__HASH_SEED, lock->name, lock->len), &owner, sizeof owner);
}

relock__hold_t *relock__renewal_find(relock__renewal_t *r, relock_lock_t *lock, uint64_t owner) {
  if (r->closing) /* the table is gone with the client's close */
    return NULL;
  uint64_t h = hold_hash(lock, owner);
  relock__hnode_t *n;
  for (RELOCK__HTAB_EACH(&r->holds, h, n)) {
    relock__hold_t *hold = relock__container_of(n, relock__hold_t, node);
    if (n->hash == h && hold->owner == owner && hold->lock->len == lock->len &&
        memcmp(hold->lock->name, lock->name, lock->len) == 0)
      return hold;
  }
  return NULL;
}

static void hold_unref(relock__hold_t *hold) {
  if (--hold->refs > 0)
    return;
  relock__lock_release(hold->lock);
  free(hold);
}

static void stop_renewing(relock__renewal_t *r, relock__hold_t *hold) {
  if (!hold->watchdog || hold->lost || hold->removed)
    return;
  relock__list_remove(&hold->renew_link);
  if (--r->nrenewing == 0) {
    relock__timer_stop(&r->cycle);
    relock__timer_stop(&r->check);
  }
}

static void forget(relock__renewal_t *r, relock__hold_t *hold) {
  stop_renewing(r, hold);
  relock__htab_remove(&r->holds, &hold->node);
  hold->removed = 1;
  hold_unref(hold);
}

/* Marks a hold lost (it stays in the table, to tell a later release). */
static void mark_lost(relock__renewal_t *r, relock__hold_t *hold) {
  stop_renewing(r, hold);
  hold->lost = 1;
  r->lost++;
}

/* Tells the hold's lock object. Its callback may do anything, closing the
 * client included: callers hold a reference on the hold and walk no list. */
static void notify_lost(relock__hold_t *hold, int reason) {
  char field[RELOCK__FIELD_MAX];
  relock_lock_t *lock = relock__lock_retain(hold->lock);
  relock__lock_field(lock, hold->owner, field);
  if (reason == RELOCK_ELOST)
    relock__lock_notify_lost(lock, hold->owner, reason,
                             "lock %s lost: its holder %s is gone from Redis (deleted, or expired)", lock->name,
                             field);
  else
    relock__lock_notify_lost(lock, hold->owner, reason,
                             "lock %s lost: its lease ran out while Redis could not be reached to renew it "
                             "(holder %s)",
                             lock->name, field);
  relock__lock_release(lock);
}

static void declare_lost(relock__renewal_t *r, relock__hold_t *hold, int reason) {
  hold->refs++;
  mark_lost(r, hold);
  notify_lost(hold, reason);
  hold_unref(hold);
}

int relock__renewal_acquired(relock__renewal_t *r, relock_lock_t *lock, uint64_t owner, int watchdog,
                             int64_t lease_ms, uint64_t sent_ns) {
  if (r->closing)
    return RELOCK_ECLOSED;
  relock__hold_t *hold = relock__renewal_find(r, lock, owner);
  if (hold != NULL && hold->lost) { /* a fresh hold after a lost one */
    forget(r, hold);
    hold = NULL;
  }
  if (hold == NULL) {
    if ((hold = calloc(1, sizeof(*hold))) == NULL)
      return RELOCK_ENOMEM;
    hold->lock = relock__lock_retain(lock);
    hold->owner = owner;
    hold->refs = 1;
    relock__list_init(&hold->renew_link);
    relock__htab_insert(&r->holds, &hold->node, hold_hash(lock, owner));
  }
  hold->count++;
  hold->lease_ms = watchdog ? r->watchdog_ms : lease_ms;
  uint64_t deadline = sent_ns + (uint64_t)hold->lease_ms * NS_PER_MS;
  if (watchdog && !hold->watchdog) {
    hold->watchdog = 1;
    relock__list_push_back(&r->renewing, &hold->renew_link);
    if (r->nrenewing++ == 0)
      relock__timer_start(&r->client->wheel, &r->cycle, r->watchdog_ms / 3);
  }
  if (hold->watchdog && deadline > hold->deadline_ns)
    hold->deadline_ns = deadline;
  return 0;
}

void relock__renewal_release_started(relock__renewal_t *r, relock_lock_t *lock, uint64_t owner) {
  relock__hold_t *hold = relock__renewal_find(r, lock, owner);
  if (hold != NULL)
    hold->releases_in_flight++;
}

int relock__renewal_release_done(relock__renewal_t *r, relock_lock_t *lock, uint64_t owner,
                                 relock__release_outcome_t outcome) {
  relock__hold_t *hold = relock__renewal_find(r, lock, owner);
  if (hold == NULL)
    return 0;
  hold->releases_in_flight--;
  int lost = hold->lost;
  switch (outcome) {
  case RELOCK__RELEASE_FAILED: /* nothing is known */
    break;
  case RELOCK__RELEASE_REMAINS:
    if (lost)
      forget(r, hold);
    else if (hold->count > 1)
      hold->count--;
    break;
  case RELOCK__RELEASE_FREED:
    forget(r, hold);
    break;
  case RELOCK__RELEASE_NOT_OWNER:
    /* A watchdog hold Redis no longer has is a loss nobody had seen yet; a
     * fixed lease simply ran out. */
    if (!lost && hold->watchdog) {
      declare_lost(r, hold, RELOCK_ELOST);
      lost = 1;
    }
    forget(r, hold);
    break;
  }
  return lost;
}

int64_t relock__renewal_lease_for(relock__renewal_t *r, relock_lock_t *lock, uint64_t owner) {
  relock__hold_t *hold = relock__renewal_find(r, lock, owner);
  return hold != NULL && hold->lease_ms > 0 ? hold->lease_ms : r->watchdog_ms;
}

/* -- renewal ----------------------------------------------------------------*/

typedef struct batch {
  relock__renewal_t *r;
  uint64_t sent_ns;
  size_t n;
  relock__hold_t *holds[RELOCK__RENEW_BATCH];
} batch_t;

static void on_batch_reply(relock_future_t *f, redisReply *reply, void *arg) {
  batch_t *b = arg;
  relock__renewal_t *r = b->r;
  if (reply->type == REDIS_REPLY_ERROR) {
    relock__future_fail(f, RELOCK_ESERVER, "%.*s", (int)reply->len, reply->str);
    return;
  }
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != b->n) {
    relock__future_fail(f, RELOCK_EPROTO, "renewal answered with an unexpected reply");
    return;
  }
  for (size_t i = 0; i < b->n; i++) {
    relock__hold_t *hold = b->holds[i];
    if (hold->removed || hold->lost)
      continue;
    if (reply->element[i]->integer == 1) {
      uint64_t deadline = b->sent_ns + (uint64_t)r->watchdog_ms * NS_PER_MS;
      if (deadline > hold->deadline_ns)
        hold->deadline_ns = deadline;
      r->renewed++;
    } else if (hold->releases_in_flight == 0) {
      declare_lost(r, hold, RELOCK_ELOST);
    }
  }
  relock__future_succeed(f);
}

static void on_batch_done(relock_future_t *f, void *arg) {
  batch_t *b = arg;
  /* A failed batch changes nothing: the next cycle tries again, and the
   * deadline check catches a hold that cannot be renewed in time. */
  for (size_t i = 0; i < b->n; i++)
    hold_unref(b->holds[i]);
  free(b);
  relock_future_release(f);
}

static void send_batch(relock__renewal_t *r, batch_t *b) {
  const char *argv[2 * RELOCK__RENEW_BATCH + 1];
  size_t lens[2 * RELOCK__RENEW_BATCH + 1];
  char fields[RELOCK__RENEW_BATCH][RELOCK__FIELD_MAX];
  char lease[24];
  size_t n = b->n;
  for (size_t i = 0; i < n; i++) {
    relock__hold_t *hold = b->holds[i];
    argv[i] = hold->lock->name;
    lens[i] = hold->lock->len;
    lens[n + 1 + i] = relock__lock_field(hold->lock, hold->owner, fields[i]);
    argv[n + 1 + i] = fields[i];
  }
  lens[n] = (size_t)snprintf(lease, sizeof lease, "%lld", (long long)r->watchdog_ms);
  argv[n] = lease;
  relock__call_spec_t spec = {.script = &relock__scripts[RELOCK__SCRIPT_LOCK_RENEW],
                              .nkeys = (int)n,
                              .argc = (int)(2 * n + 1),
                              .argv = argv,
                              .lens = lens,
                              .on_reply = on_batch_reply,
                              .arg = b,
                              .retry_safe = 1};
  b->sent_ns = relock__now_ns();
  relock_future_t *f = relock__call(r->client, &spec);
  if (f == NULL) { /* out of memory: the next cycle tries again */
    for (size_t i = 0; i < n; i++)
      hold_unref(b->holds[i]);
    free(b);
    return;
  }
  r->batches++;
  relock_future_on_done(f, on_batch_done, b);
}

/* Declares lost every hold whose deadline has passed; returns the earliest
 * deadline left (UINT64_MAX: none). The lost holds are collected first and
 * told afterwards, so their callbacks cannot disturb the walk. */
static uint64_t check_deadlines(relock__renewal_t *r, uint64_t now) {
  uint64_t earliest = UINT64_MAX;
  relock__link_t dying;
  relock__list_init(&dying);
  relock__link_t *head = &r->renewing;
  for (relock__link_t *l = head->next, *next; l != head; l = next) {
    next = l->next;
    relock__hold_t *hold = relock__container_of(l, relock__hold_t, renew_link);
    if (hold->deadline_ns <= now && hold->releases_in_flight == 0) {
      hold->refs++;
      mark_lost(r, hold);
      relock__list_push_back(&dying, &hold->renew_link);
    } else if (hold->deadline_ns < earliest) {
      earliest = hold->deadline_ns;
    }
  }
  while (!relock__list_empty(&dying)) {
    relock__hold_t *hold = relock__container_of(dying.next, relock__hold_t, renew_link);
    relock__list_remove(&hold->renew_link);
    notify_lost(hold, RELOCK_ETIMEDOUT);
    hold_unref(hold);
  }
  return earliest;
}

/* Arms the deadline check if a deadline comes before the next cycle. */
static void arm_check(relock__renewal_t *r, uint64_t now, uint64_t earliest) {
  uint64_t next_cycle = now + (uint64_t)(r->watchdog_ms / 3) * NS_PER_MS;
  if (earliest < next_cycle && r->nrenewing > 0)
    relock__timer_start(&r->client->wheel, &r->check, (int64_t)((earliest - now) / NS_PER_MS) + 1);
}

static void on_check(relock__timer_t *t, int status, void *arg) {
  (void)t;
  relock__renewal_t *r = arg;
  if (status != 0)
    return;
  uint64_t now = relock__now_ns();
  arm_check(r, now, check_deadlines(r, now));
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
  batch_t *b = NULL;
  relock__link_t *head = &r->renewing;
  for (relock__link_t *l = head->next; l != head; l = l->next) {
    if (b == NULL) {
      if ((b = malloc(sizeof(*b))) == NULL)
        break;
      b->r = r;
      b->n = 0;
    }
    relock__hold_t *hold = relock__container_of(l, relock__hold_t, renew_link);
    hold->refs++;
    b->holds[b->n++] = hold;
    if (b->n == RELOCK__RENEW_BATCH) {
      send_batch(r, b);
      b = NULL;
    }
  }
  if (b != NULL && b->n > 0)
    send_batch(r, b);
  else
    free(b);
  if (r->nrenewing > 0) {
    relock__timer_start(&r->client->wheel, &r->cycle, r->watchdog_ms / 3);
    arm_check(r, now, earliest);
  }
}

int relock__renewal_init(relock__renewal_t *r, relock_client_t *client) {
  memset(r, 0, sizeof(*r));
  if (relock__htab_init(&r->holds, 64) != 0)
    return RELOCK_ENOMEM;
  r->client = client;
  r->watchdog_ms = client->settings.watchdog_timeout_ms;
  relock__list_init(&r->renewing);
  relock__timer_init(&r->cycle, on_cycle, r);
  relock__timer_init(&r->check, on_check, r);
  return 0;
}

void relock__renewal_close(relock__renewal_t *r) {
  if (r->closing)
    return;
  r->closing = 1;
  relock__timer_stop(&r->cycle);
  relock__timer_stop(&r->check);
  for (size_t i = 0; i < r->holds.nbuckets; i++) {
    relock__link_t *head = &r->holds.buckets[i];
    while (!relock__list_empty(head)) {
      relock__hnode_t *n = relock__container_of(head->next, relock__hnode_t, link);
      forget(r, relock__container_of(n, relock__hold_t, node));
    }
  }
  relock__htab_cleanup(&r->holds);
}
