/* Statistics and events (relock/stats.h), against a real redis-server:
 * each counter is driven by the real thing it counts - a lock held by
 * another client, a key deleted under its holder, a server stopped with
 * SIGSTOP, a connection killed with CLIENT KILL, a script cache flushed -
 * and a seeded random run checks that the counters, the events and what
 * the callers saw of their own futures agree. */
#include <config.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <relock/permit_semaphore.h>
#include <relock/stats.h>

#include "base/random.h"
#include "support/client_fixture.h"

typedef fx_pair_t fx_t;

#define WATCHDOG_MS 300

static int setup(void **state) {
  if (fx_pair_server_setup(state) != 0)
    return -1;
  fx_t *fx = *state;
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, WATCHDOG_MS);
  fx_pair_clients(fx);
  return 0;
}

/* -- what the event callback heard -------------------------------------------*/

typedef struct heard {
  uint64_t by_type[RELOCK_EVENT_RELEASE_RETRIED + 1][RELOCK_STATS_KINDS];
  uint64_t ends[RELOCK_STATS_KINDS][RELOCK_OUTCOMES];
  uint64_t losses[RELOCK_STATS_KINDS][RELOCK_LOSSES];
  int negative_durations;
  int unnamed;              /* lock events without a name */
  int64_t open[RELOCK_STATS_KINDS]; /* ACQUIRE_START minus ACQUIRE_END: never below 0 */
  int order_broken;
  char last_message[512];
  char last_address[320];
} heard_t;

static void on_event(relock_client_t *c, const relock_event_t *ev, void *arg) {
  (void)c;
  heard_t *h = arg;
  int kind = ev->type <= RELOCK_EVENT_LOSS ? (int)ev->kind : 0;
  h->by_type[ev->type][kind]++;
  if (ev->duration_ns < 0)
    h->negative_durations++;
  if (ev->type <= RELOCK_EVENT_LOSS && (ev->name == NULL || strlen(ev->name) != ev->name_len))
    h->unnamed++;
  if (ev->type == RELOCK_EVENT_ACQUIRE_START)
    h->open[kind]++;
  if (ev->type == RELOCK_EVENT_ACQUIRE_END) {
    if (--h->open[kind] < 0)
      h->order_broken++;
    h->ends[kind][ev->outcome]++;
  }
  if (ev->type == RELOCK_EVENT_LOSS)
    h->losses[kind][ev->outcome]++;
  if (ev->message != NULL)
    snprintf(h->last_message, sizeof h->last_message, "%s", ev->message);
  if (ev->address != NULL)
    snprintf(h->last_address, sizeof h->last_address, "%s", ev->address);
}

static relock_stats_t stats_of(relock_client_t *c) {
  relock_stats_t st;
  memset(&st, 0xa5, sizeof st);
  assert_int_equal(relock_client_stats(c, &st, sizeof st), 0);
  assert_int_equal(st.size, sizeof st);
  assert_int_equal(st.kinds, RELOCK_KINDS);
  return st;
}

static uint64_t bucket_sum(const uint64_t *b, int n) {
  uint64_t sum = 0;
  for (int i = 0; i < n; i++)
    sum += b[i];
  return sum;
}

/* What holds for any snapshot: every acquisition ended is counted once,
 * in one outcome, one tries bucket; a histogram's buckets add up to its
 * count; a hold's end is a release or a loss. */
static void check_consistent(const relock_stats_t *st) {
  for (int k = 0; k < RELOCK_STATS_KINDS; k++) {
    const relock_kind_stats_t *ks = &st->kind[k];
    uint64_t ended = bucket_sum(ks->outcome, RELOCK_OUTCOMES);
    assert_true(ended <= ks->started);
    assert_int_equal(bucket_sum(ks->tries_bucket, RELOCK_STATS_TRY_BUCKETS), ended);
    assert_true(ks->tries >= ended);
    assert_true(ks->waited <= ended);
    assert_int_equal(ks->wait.count, ks->outcome[RELOCK_OUTCOME_ACQUIRED]);
    assert_int_equal(bucket_sum(ks->wait.bucket, RELOCK_STATS_BUCKETS), ks->wait.count);
    assert_int_equal(bucket_sum(ks->hold.bucket, RELOCK_STATS_BUCKETS), ks->hold.count);
    assert_int_equal(ks->hold.count, ks->released + bucket_sum(ks->lost, RELOCK_LOSSES));
    if (k >= RELOCK_KINDS)
      assert_int_equal(ks->started, 0);
  }
  assert_int_equal(bucket_sum(st->command_time.bucket, RELOCK_STATS_BUCKETS), st->command_time.count);
  assert_int_equal(st->command_time.count, st->commands);
  assert_true(st->command_errors <= st->commands);
}

/* The events heard agree with the counters. */
static void check_events_agree(const heard_t *h, const relock_stats_t *st) {
  assert_int_equal(h->negative_durations, 0);
  assert_int_equal(h->unnamed, 0);
  assert_int_equal(h->order_broken, 0);
  for (int k = 0; k < RELOCK_KINDS; k++) {
    const relock_kind_stats_t *ks = &st->kind[k];
    assert_int_equal(h->by_type[RELOCK_EVENT_ACQUIRE_START][k], ks->started);
    for (int o = 0; o < RELOCK_OUTCOMES; o++)
      assert_int_equal(h->ends[k][o], ks->outcome[o]);
    assert_int_equal(h->by_type[RELOCK_EVENT_WAIT_START][k], ks->waited);
    assert_int_equal(h->by_type[RELOCK_EVENT_WAIT_END][k], ks->waited);
    assert_int_equal(h->by_type[RELOCK_EVENT_RELEASE][k], ks->released);
    for (int l = 0; l < RELOCK_LOSSES; l++)
      assert_int_equal(h->losses[k][l], ks->lost[l]);
  }
}

/* A command that must succeed (its future released). */
static void run_ok(relock_future_t *f) {
  fx_ok(f);
  relock_future_release(f);
}

static relock_lock_t *lock_new(relock_lock_t *(*make)(relock_client_t *, const char *, relock_error_t *),
                               relock_client_t *c, const char *name) {
  relock_error_t err;
  relock_lock_t *l = make(c, name, &err);
  if (l == NULL)
    fail_msg("%s: %s", name, err.message);
  return l;
}

static int held_by(relock_lock_t *l, uint64_t owner, int64_t wait_ms, int64_t lease_ms) {
  return (int)fx_value(relock_lock_lock_async(l, owner, wait_ms, lease_ms));
}

/* Runs the loop until the acquisitions of locks heard of have started
 * waiting n times in all (their first tries found the lock held). */
static int waiting_(void *arg) {
  const void **a = arg;
  const heard_t *h = a[0];
  return h->by_type[RELOCK_EVENT_WAIT_START][RELOCK_KIND_LOCK] >= (uint64_t)(uintptr_t)a[1];
}

static void run_until_waiting(heard_t *h, uint64_t n) {
  const void *arg[2] = {h, (void *)(uintptr_t)n};
  if (!fx_run_until(fx_loop(), waiting_, arg, fx_slack_ms(5000)))
    fail_msg("the acquisition did not start waiting within 5 s");
}

/* -- each outcome, each counter ------------------------------------------------*/

static void test_every_outcome_counted(void **state) {
  fx_t *fx = *state;
  heard_t heard = {0};
  assert_int_equal(relock_client_on_event(fx->a, on_event, &heard), 0);
  relock_lock_t *la = lock_new(relock_lock_new, fx->a, "stats:outcomes");
  relock_lock_t *lb = lock_new(relock_lock_new, fx->b, "stats:outcomes");

  assert_int_equal(held_by(la, 1, 0, RELOCK_INFINITE), 1);              /* acquired */
  assert_int_equal(fx_value(relock_lock_unlock_async(la, 1)), 1);       /* released */
  assert_int_equal(held_by(lb, 9, 0, RELOCK_INFINITE), 1);              /* b holds it now */
  assert_int_equal(held_by(la, 1, 0, RELOCK_INFINITE), 0);              /* busy */
  /* (the times below grow under valgrind, where one round trip can take
   * tens of milliseconds: each wait still sees its first try answered) */
  assert_int_equal(held_by(la, 1, fx_slack_ms(150), RELOCK_INFINITE), 0); /* timed out after waiting */
  relock_future_t *f = relock_lock_lock_async(la, 1, RELOCK_INFINITE, RELOCK_INFINITE);
  run_until_waiting(&heard, 2);
  relock_future_cancel(f);                                              /* cancelled */
  assert_int_equal(fx_error(f, NULL, 0), RELOCK_ECANCELED);
  /* b lets go while a waits: acquired after waiting, more than one try */
  f = relock_lock_lock_async(la, 1, fx_slack_ms(5000), RELOCK_INFINITE);
  run_until_waiting(&heard, 3);
  fx_run_for(fx_loop(), fx_slack_ms(50));
  assert_int_equal(fx_value(relock_lock_unlock_async(lb, 9)), 1);
  assert_int_equal(fx_value(f), 1);
  assert_int_equal(fx_value(relock_lock_unlock_async(la, 1)), 1);
  /* failed: the name is a string in Redis */
  run_ok(FX_CMD(fx->a, "SET", "stats:string", "x"));
  relock_lock_t *wrong = lock_new(relock_lock_new, fx->a, "stats:string");
  assert_int_not_equal(fx_error(relock_lock_lock_async(wrong, 1, 0, RELOCK_INFINITE), NULL, 0), 0);

  relock_stats_t st = stats_of(fx->a);
  check_consistent(&st);
  const relock_kind_stats_t *k = &st.kind[RELOCK_KIND_LOCK];
  assert_int_equal(k->started, 6);
  assert_int_equal(k->outcome[RELOCK_OUTCOME_ACQUIRED], 2);
  assert_int_equal(k->outcome[RELOCK_OUTCOME_BUSY], 1);
  assert_int_equal(k->outcome[RELOCK_OUTCOME_TIMED_OUT], 1);
  assert_int_equal(k->outcome[RELOCK_OUTCOME_CANCELLED], 1);
  assert_int_equal(k->outcome[RELOCK_OUTCOME_FAILED], 1);
  assert_int_equal(k->started - bucket_sum(k->outcome, RELOCK_OUTCOMES), 0);
  assert_int_equal(k->waited, 3); /* found it held: the one that ran out, the cancelled one, the one acquired */
  assert_int_equal(k->released, 2);
  assert_int_equal(k->hold.count, 2);
  assert_true(k->tries >= 8); /* 1+1+>=2+1+>=2+1 */
  /* acquired at once, busy, failed: one try each (so may a wait be that joins a queue already listening) */
  assert_true(k->tries_bucket[0] >= 3);
  /* the acquisition that waited ~50 ms: its wait is in a bucket above 25 ms
   * (the other, acquired at once, below) */
  uint64_t long_waits = 0;
  for (int i = 0; i < RELOCK_STATS_BUCKETS; i++)
    if (relock_stats_bound_us(i) > fx_slack_ms(25) * 1000)
      long_waits += k->wait.bucket[i];
  assert_int_equal(long_waits, 1);
  for (int i = 0; i < RELOCK_KINDS; i++)
    if (i != RELOCK_KIND_LOCK)
      assert_int_equal(st.kind[i].started, 0);
  assert_true(st.commands > 0);
  assert_true(st.uptime_ns > 0);
  check_events_agree(&heard, &st);
  /* b's own statistics are b's alone */
  relock_stats_t sb = stats_of(fx->b);
  assert_int_equal(sb.kind[RELOCK_KIND_LOCK].started, 1);
  assert_int_equal(sb.kind[RELOCK_KIND_LOCK].released, 1);
  relock_lock_free(la);
  relock_lock_free(lb);
  relock_lock_free(wrong);
}

/* waited counts every ended acquisition whose try found the lock held and
 * that went on waiting, a cancelled one too. */
static void test_waited_means_found_held(void **state) {
  fx_t *fx = *state;
  heard_t heard = {0};
  assert_int_equal(relock_client_on_event(fx->a, on_event, &heard), 0);
  relock_lock_t *la = lock_new(relock_lock_new, fx->a, "stats:waited");
  relock_lock_t *lb = lock_new(relock_lock_new, fx->b, "stats:waited");
  assert_int_equal(held_by(lb, 9, 0, RELOCK_INFINITE), 1);
  relock_future_t *f = relock_lock_lock_async(la, 1, RELOCK_INFINITE, RELOCK_INFINITE);
  run_until_waiting(&heard, 1);
  relock_future_cancel(f);
  assert_int_equal(fx_error(f, NULL, 0), RELOCK_ECANCELED);
  relock_stats_t st = stats_of(fx->a);
  assert_int_equal(st.kind[RELOCK_KIND_LOCK].waited, 1);
  assert_int_equal(st.kind[RELOCK_KIND_LOCK].outcome[RELOCK_OUTCOME_CANCELLED], 1);
  relock_lock_free(la);
  relock_lock_free(lb);
}

/* -- losses, by cause ----------------------------------------------------------*/

static int loss_counted_(void *arg) {
  const void **a = arg;
  relock_stats_t st = stats_of((relock_client_t *)a[0]);
  return bucket_sum(st.kind[RELOCK_KIND_LOCK].lost, RELOCK_LOSSES) >= (uint64_t)(uintptr_t)a[1];
}

static void wait_losses(relock_client_t *c, uint64_t n) {
  const void *arg[2] = {c, (void *)(uintptr_t)n};
  if (!fx_run_until(fx_loop(), loss_counted_, arg, fx_slack_ms(5000)))
    fail_msg("no loss counted within 5 s");
}

static int renewal_failed_(void *arg) { return stats_of(arg).renewal_failures >= 1; }
static int renewed_twice_(void *arg) { return stats_of(arg).renewals >= 2; }

static void test_losses_by_cause(void **state) {
  fx_t *fx = *state;
  heard_t heard = {0};
  assert_int_equal(relock_client_on_event(fx->a, on_event, &heard), 0);
  relock_lock_t *l = lock_new(relock_lock_new, fx->a, "stats:loss");

  /* deleted under its holder (a force release) */
  assert_int_equal(held_by(l, 1, 0, RELOCK_INFINITE), 1);
  run_ok(FX_CMD(fx->b, "DEL", "stats:loss"));
  wait_losses(fx->a, 1);
  relock_stats_t st = stats_of(fx->a);
  assert_int_equal(st.kind[RELOCK_KIND_LOCK].lost[RELOCK_LOSS_DELETED], 1);
  assert_non_null(strstr(heard.last_message, "stats:loss"));
  assert_int_equal(fx_error(relock_lock_unlock_async(l, 1), NULL, 0), RELOCK_ELOST);

  /* its expiry cut below its fixed lease by another client */
  assert_int_equal(held_by(l, 2, 0, 10000), 1);
  char cut[32];
  snprintf(cut, sizeof cut, "%lld", (long long)fx_slack_ms(800));
  run_ok(FX_CMD(fx->b, "PEXPIRE", "stats:loss", cut)); /* seen by a check (every 100 ms) before Redis lets it go */
  wait_losses(fx->a, 2);
  st = stats_of(fx->a);
  assert_int_equal(st.kind[RELOCK_KIND_LOCK].lost[RELOCK_LOSS_CUT], 1);
  assert_non_null(strstr(heard.last_message, "cut"));

  /* a fixed lease that ran out before any release (the cut key may
   * still be there: Redis keeps it a little longer than believed) */
  run_ok(FX_CMD(fx->b, "DEL", "stats:loss"));
  assert_int_equal(held_by(l, 3, 0, fx_slack_ms(60)), 1);
  wait_losses(fx->a, 3);
  st = stats_of(fx->a);
  assert_int_equal(st.kind[RELOCK_KIND_LOCK].lost[RELOCK_LOSS_LEASE_ENDED], 1);

  /* Redis out of reach (stopped) past the watchdog's lease (another
   * name: Redis may keep the lease that ran out a moment longer) */
  relock_lock_t *l2 = lock_new(relock_lock_new, fx->a, "stats:loss:2");
  assert_int_equal(held_by(l2, 4, 0, RELOCK_INFINITE), 1);
  if (!fx_run_until(fx_loop(), renewed_twice_, fx->a, fx_slack_ms(5000))) /* renewed while it can be */
    fail_msg("the held lock was not renewed twice within 5 s");
  assert_int_equal(relock_test_redis_pause(fx->redis), 0);
  wait_losses(fx->a, 4);
  /* its renewals get no answer: they failed, once the command timeout is over */
  if (!fx_run_until(fx_loop(), renewal_failed_, fx->a, fx_slack_ms(10000)))
    fail_msg("no renewal failure counted with the server stopped");
  assert_int_equal(relock_test_redis_resume(fx->redis), 0);
  st = stats_of(fx->a);
  assert_int_equal(st.kind[RELOCK_KIND_LOCK].lost[RELOCK_LOSS_UNREACHABLE], 1);
  assert_non_null(strstr(heard.last_message, "could not be reached"));
  assert_true(st.command_failures >= 1);

  assert_int_equal(st.kind[RELOCK_KIND_LOCK].released, 0);
  assert_int_equal(st.kind[RELOCK_KIND_LOCK].hold.count, 4);
  assert_int_equal(bucket_sum(st.kind[RELOCK_KIND_LOCK].lost, RELOCK_LOSSES), 4);
  check_consistent(&st);
  check_events_agree(&heard, &st);
  relock_lock_free(l);
  relock_lock_free(l2);
}

/* -- the connection's side ------------------------------------------------------*/

static int reconnected_(void *arg) { return stats_of(arg).reconnects >= 1; }

static void test_commands_scripts_reconnects(void **state) {
  fx_t *fx = *state;
  heard_t heard = {0};
  assert_int_equal(relock_client_on_event(fx->a, on_event, &heard), 0);
  relock_lock_t *l = lock_new(relock_lock_new, fx->a, "stats:conn");
  assert_int_equal(held_by(l, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(fx_value(relock_lock_unlock_async(l, 1)), 1);
  relock_stats_t before = stats_of(fx->a);
  assert_int_equal(before.script_loads, 2); /* each script's first use on a new server: acquire, release */

  /* a flushed script cache: the next script is sent in full once */
  run_ok(FX_CMD(fx->b, "SCRIPT", "FLUSH"));
  assert_int_equal(held_by(l, 1, 0, RELOCK_INFINITE), 1);
  relock_stats_t st = stats_of(fx->a);
  assert_int_equal(st.script_loads, before.script_loads + 1);
  /* an error answer */
  const char *argv[] = {"NOSUCHCOMMAND"};
  assert_int_equal(fx_error(relock_client_command_async(fx->a, 1, argv, NULL), NULL, 0), RELOCK_ESERVER);
  st = stats_of(fx->a);
  assert_int_equal(st.command_errors, before.command_errors + 1);
  assert_true(st.commands >= before.commands + 2); /* the acquisition (EVALSHA answered NOSCRIPT, then EVAL), the error */

  /* its connections killed: a reconnect, told with the server's address */
  char reply[256];
  relock_test_redis_cmd(fx->redis, reply, sizeof reply, "CLIENT", "KILL", "TYPE", "normal", NULL);
  if (!fx_run_until(fx_loop(), reconnected_, fx->a, fx_slack_ms(5000)))
    fail_msg("no reconnect counted");
  assert_true(heard.by_type[RELOCK_EVENT_RECONNECT][0] >= 1);
  assert_true(heard.last_address[0] != '\0'); /* the server's socket path, or host:port */
  assert_int_equal(fx_value(relock_lock_unlock_async(l, 1)), 1);
  st = stats_of(fx->a);
  check_consistent(&st);
  relock_lock_free(l);
}

/* -- statistics off --------------------------------------------------------------*/

static void test_statistics_off(void **state) {
  fx_t *fx = *state;
  relock_options_t *opts = fx_copy(fx->cfg);
  fx_set_int(opts, RELOCK_OPT_STATISTICS, 0);
  relock_client_t *c = fx_client(opts);
  heard_t heard = {0};
  assert_int_equal(relock_client_on_event(c, on_event, &heard), 0);
  relock_lock_t *l = lock_new(relock_lock_new, c, "stats:off");
  assert_int_equal(held_by(l, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(fx_value(relock_lock_unlock_async(l, 1)), 1);
  relock_stats_t st = stats_of(c);
  relock_stats_t zero;
  memset(&zero, 0, sizeof zero);
  assert_int_equal(st.uptime_ns > 0, 1);
  st.size = 0, st.kinds = 0, st.uptime_ns = 0;
  assert_memory_equal(&st, &zero, sizeof st); /* nothing counted */
  /* events are told all the same */
  assert_int_equal(heard.by_type[RELOCK_EVENT_ACQUIRE_START][RELOCK_KIND_LOCK], 1);
  assert_int_equal(heard.ends[RELOCK_KIND_LOCK][RELOCK_OUTCOME_ACQUIRED], 1);
  assert_int_equal(heard.by_type[RELOCK_EVENT_RELEASE][RELOCK_KIND_LOCK], 1);
  /* and they stop once the callback is unset */
  assert_int_equal(relock_client_on_event(c, NULL, NULL), 0);
  assert_int_equal(held_by(l, 1, 0, RELOCK_INFINITE), 1);
  assert_int_equal(heard.by_type[RELOCK_EVENT_ACQUIRE_START][RELOCK_KIND_LOCK], 1);
  relock_lock_free(l);
  relock_client_free(c);
  relock_options_free(opts);
}

/* -- the snapshot's size: an older caller's smaller struct ----------------------------*/

static void test_snapshot_size(void **state) {
  fx_t *fx = *state;
  relock_lock_t *l = lock_new(relock_lock_new, fx->a, "stats:size");
  assert_int_equal(held_by(l, 1, 0, RELOCK_INFINITE), 1);
  relock_lock_free(l);
  relock_stats_t full = stats_of(fx->a);
  unsigned char buf[sizeof(relock_stats_t) + 64];
  memset(buf, 0x5a, sizeof buf);
  size_t older = offsetof(relock_stats_t, renewals); /* as if built when the struct ended there */
  assert_int_equal(relock_client_stats(fx->a, (relock_stats_t *)buf, older), 0);
  assert_int_equal(((relock_stats_t *)buf)->size, older);
  for (size_t i = older; i < sizeof buf; i++)
    assert_int_equal(buf[i], 0x5a); /* nothing written past it */
  /* formatted, the fields it lacks read as 0 (not as what lies past it) */
  char text[32768];
  size_t n = relock_stats_prometheus((relock_stats_t *)buf, NULL, text, sizeof text);
  assert_true(n < sizeof text);
  assert_non_null(strstr(text, "\nrelock_commands_total 0\n"));
  assert_non_null(strstr(text, "\nrelock_command_seconds_count 0\n"));
  assert_true(full.commands > 0);
  assert_int_equal(relock_client_stats(fx->a, (relock_stats_t *)buf, 4), RELOCK_EINVAL);
  assert_int_equal(relock_client_stats(NULL, (relock_stats_t *)buf, sizeof buf), RELOCK_EINVAL);
  assert_int_equal(relock_client_stats(fx->a, NULL, sizeof buf), RELOCK_EINVAL);
  assert_int_equal(relock_client_on_event(NULL, on_event, NULL), RELOCK_EINVAL);
}

/* -- seeded random operations: counters, events and the callers' own view agree ---------------*/

enum { K_LOCK, K_FAIR, K_READ, K_WRITE, K_FENCED, K_SPIN, K_SEM, NKINDS };
#define NNAMES 2

typedef struct slot {
  relock_lock_t *lock;      /* lock kinds */
  relock_semaphore_t *sem;  /* K_SEM */
  int held;
} slot_t;

static relock_kind_t kind_of(int k) {
  static const relock_kind_t kinds[NKINDS] = {RELOCK_KIND_LOCK,        RELOCK_KIND_FAIR_LOCK,  RELOCK_KIND_READ_LOCK,
                                              RELOCK_KIND_WRITE_LOCK,  RELOCK_KIND_FENCED_LOCK, RELOCK_KIND_SPIN_LOCK,
                                              RELOCK_KIND_SEMAPHORE};
  return kinds[k];
}

static void make_slot(slot_t *s, relock_client_t *c, int k, int n) {
  char name[64];
  snprintf(name, sizeof name, "stats:rand:%s:%d", k == K_READ || k == K_WRITE ? "rw" : relock_kind_name(kind_of(k)),
           n);
  relock_error_t err;
  switch (k) {
  case K_LOCK: s->lock = relock_lock_new(c, name, &err); break;
  case K_FAIR: s->lock = relock_fair_lock_new(c, name, &err); break;
  case K_READ: s->lock = relock_read_lock_new(c, name, &err); break;
  case K_WRITE: s->lock = relock_write_lock_new(c, name, &err); break;
  case K_FENCED: s->lock = relock_fenced_lock_new(c, name, &err); break;
  case K_SPIN: s->lock = relock_spin_lock_new(c, name, &err); break;
  default:
    s->sem = relock_semaphore_new(c, name, &err);
    assert_non_null(s->sem);
    fx_value(relock_semaphore_try_set_permits_async(s->sem, 1));
    return;
  }
  assert_non_null(s->lock);
}

static void free_slot(slot_t *s) {
  relock_lock_free(s->lock);
  relock_semaphore_free(s->sem);
}

/* The outcome of an acquisition as its caller sees it: its future. */
static relock_outcome_t seen_outcome(relock_future_t *f, int64_t wait_ms, int *acquired) {
  int r = relock_future_wait(f, fx_slack_ms(20000));
  assert_int_not_equal(r, RELOCK_EPENDING);
  *acquired = 0;
  relock_outcome_t o;
  if (r == RELOCK_ECANCELED)
    o = RELOCK_OUTCOME_CANCELLED;
  else if (r == RELOCK_ETIMEDOUT)
    o = RELOCK_OUTCOME_TIMED_OUT;
  else if (r != 0)
    o = RELOCK_OUTCOME_FAILED;
  else if ((relock_future_value_type(f) == RELOCK_VALUE_BOOL ? relock_future_bool(f) : relock_future_int(f)) > 0)
    o = RELOCK_OUTCOME_ACQUIRED, *acquired = 1;
  else
    o = wait_ms == 0 ? RELOCK_OUTCOME_BUSY : RELOCK_OUTCOME_TIMED_OUT;
  relock_future_release(f);
  return o;
}

static void test_random_operations_agree(void **state) {
  fx_t *fx = *state;
  uint64_t rng = fx_seed("test_random_operations_agree");
  relock_client_t *clients[2] = {fx->a, fx->b};
  heard_t heard[2];
  memset(heard, 0, sizeof heard);
  uint64_t seen[2][RELOCK_STATS_KINDS][RELOCK_OUTCOMES] = {{{0}}};
  uint64_t releases[2][RELOCK_STATS_KINDS] = {{0}};
  slot_t slots[2][NKINDS][NNAMES];
  memset(slots, 0, sizeof slots);
  for (int c = 0; c < 2; c++) {
    assert_int_equal(relock_client_on_event(clients[c], on_event, &heard[c]), 0);
    for (int k = 0; k < NKINDS; k++)
      for (int n = 0; n < NNAMES; n++)
        make_slot(&slots[c][k][n], clients[c], k, n);
  }
  for (int step = 0; step < 160; step++) {
    int c = (int)(relock__random(&rng) % 2), k = (int)(relock__random(&rng) % NKINDS),
        n = (int)(relock__random(&rng) % NNAMES);
    slot_t *s = &slots[c][k][n];
    uint64_t owner = (uint64_t)c + 1;
    if (s->held) { /* let go */
      relock_future_t *f = s->sem != NULL ? relock_semaphore_release_async(s->sem, 1)
                                          : relock_lock_unlock_async(s->lock, owner);
      fx_value(f);
      s->held = 0;
      if (s->lock != NULL)
        releases[c][kind_of(k)]++;
      continue;
    }
    int mode = (int)(relock__random(&rng) % 3); /* one try, a bounded wait, a wait cancelled */
    int64_t wait_ms = mode == 0 ? 0 : mode == 1 ? 20 + (int64_t)(relock__random(&rng) % 60) : RELOCK_INFINITE;
    relock_future_t *f = s->sem != NULL ? relock_semaphore_acquire_async(s->sem, 1, wait_ms)
                                        : relock_lock_lock_async(s->lock, owner, wait_ms, RELOCK_INFINITE);
    if (mode == 2) {
      fx_run_for(fx_loop(), (int64_t)(relock__random(&rng) % 30));
      relock_future_cancel(f);
    }
    int acquired;
    seen[c][kind_of(k)][seen_outcome(f, wait_ms, &acquired)]++;
    s->held = acquired;
  }
  for (int c = 0; c < 2; c++)
    for (int k = 0; k < NKINDS; k++)
      for (int n = 0; n < NNAMES; n++) {
        slot_t *s = &slots[c][k][n];
        if (s->held) {
          fx_value(s->sem != NULL ? relock_semaphore_release_async(s->sem, 1)
                                  : relock_lock_unlock_async(s->lock, (uint64_t)c + 1));
          if (s->lock != NULL)
            releases[c][kind_of(k)]++;
        }
        free_slot(s);
      }
  for (int c = 0; c < 2; c++) {
    relock_stats_t st = stats_of(clients[c]);
    check_consistent(&st);
    check_events_agree(&heard[c], &st);
    for (int k = 0; k < NKINDS; k++) {
      const relock_kind_stats_t *ks = &st.kind[kind_of(k)];
      for (int o = 0; o < RELOCK_OUTCOMES; o++)
        if (ks->outcome[o] != seen[c][kind_of(k)][o])
          fail_msg("client %d, %s, %s: counted %llu, the callers saw %llu", c, relock_kind_name(kind_of(k)),
                   relock_outcome_name(o), (unsigned long long)ks->outcome[o],
                   (unsigned long long)seen[c][kind_of(k)][o]);
      assert_int_equal(ks->started, bucket_sum(seen[c][kind_of(k)], RELOCK_OUTCOMES));
      if (k != K_SEM) { /* every hold taken was let go: released, none lost */
        assert_int_equal(ks->released, releases[c][kind_of(k)]);
        assert_int_equal(ks->released, ks->outcome[RELOCK_OUTCOME_ACQUIRED]);
        assert_int_equal(bucket_sum(ks->lost, RELOCK_LOSSES), 0);
      } else { /* permits without a lease are no holds */
        assert_int_equal(ks->hold.count, 0);
      }
    }
  }
}

/* -- threaded: read from any thread while the work goes on -------------------------*/

typedef struct worker {
  relock_client_t *c;
  int rounds;
  int failed;
} worker_t;

static void *work(void *arg) {
  worker_t *w = arg;
  relock_lock_t *l = relock_lock_new(w->c, "stats:threads", NULL);
  for (int i = 0; i < w->rounds && l != NULL; i++)
    if (relock_lock_lock(l, RELOCK_INFINITE) != 0 || relock_lock_unlock(l) != 0)
      w->failed++;
  relock_lock_free(l);
  return NULL;
}

static uint64_t thread_events; /* told on the loop thread and the workers', read here: atomic */
static void count_event(relock_client_t *c, const relock_event_t *ev, void *arg) {
  (void)c, (void)ev, (void)arg;
  __atomic_add_fetch(&thread_events, 1, __ATOMIC_RELAXED);
}

static void test_threaded_reads(void **state) {
  fx_t *fx = *state;
  relock_error_t err;
  relock_client_t *c = relock_client_new(NULL, fx->cfg, &err);
  if (c == NULL)
    fail_msg("relock_client_new: %s", err.message);
  __atomic_store_n(&thread_events, 0, __ATOMIC_RELAXED);
  assert_int_equal(relock_client_on_event(c, count_event, NULL), 0);
  enum { WORKERS = 3, ROUNDS = 150 };
  worker_t w[WORKERS];
  pthread_t t[WORKERS];
  for (int i = 0; i < WORKERS; i++) {
    w[i] = (worker_t){.c = c, .rounds = ROUNDS};
    assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
  }
  uint64_t last = 0;
  for (int reads = 0; reads < 200; reads++) { /* while they work: consistent, never going back */
    relock_stats_t st;
    assert_int_equal(relock_client_stats(c, &st, sizeof st), 0);
    check_consistent(&st);
    uint64_t ended = bucket_sum(st.kind[RELOCK_KIND_LOCK].outcome, RELOCK_OUTCOMES);
    assert_true(ended >= last);
    last = ended;
  }
  for (int i = 0; i < WORKERS; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(w[i].failed, 0);
  }
  relock_stats_t st;
  assert_int_equal(relock_client_stats(c, &st, sizeof st), 0);
  const relock_kind_stats_t *k = &st.kind[RELOCK_KIND_LOCK];
  assert_int_equal(k->started, WORKERS * ROUNDS);
  assert_int_equal(k->outcome[RELOCK_OUTCOME_ACQUIRED], WORKERS * ROUNDS);
  assert_int_equal(k->released, WORKERS * ROUNDS);
  /* start, end and release each (a wait's start and end too) */
  assert_int_equal(__atomic_load_n(&thread_events, __ATOMIC_RELAXED), 3 * WORKERS * ROUNDS + 2 * k->waited);
  /* a closed client still answers */
  assert_int_equal(relock_client_close(c, NULL, NULL), 0);
  assert_int_equal(relock_client_stats(c, &st, sizeof st), 0);
  assert_int_equal(st.kind[RELOCK_KIND_LOCK].released, WORKERS * ROUNDS);
  relock_client_free(c);
}

/* -- Prometheus's text format ------------------------------------------------------*/

/* Every line is a comment or "name{labels} value"; every histogram's
 * buckets are cumulative and end at +Inf with its _count. */
static void check_exposition(const char *text) {
  char prev_metric[128] = "";
  uint64_t prev_bucket = 0;
  for (const char *line = text; *line != '\0';) {
    const char *nl = strchr(line, '\n');
    assert_non_null(nl);
    size_t len = (size_t)(nl - line);
    assert_true(len > 0);
    if (line[0] != '#') {
      const char *sp = memchr(line, ' ', len);
      assert_non_null(sp);
      assert_true(sp > line);
      for (const char *p = line; p < sp && *p != '{'; p++)
        assert_true((*p >= 'a' && *p <= 'z') || *p == '_');
      char *end;
      strtod(sp + 1, &end);
      assert_ptr_equal(end, nl);
      const char *brace = memchr(line, '{', (size_t)(sp - line));
      if (brace != NULL)
        assert_int_equal(sp[-1], '}');
      /* buckets of one series are cumulative */
      const char *le = strstr(line, "le=\"");
      if (le != NULL && le < sp) {
        char metric[128];
        snprintf(metric, sizeof metric, "%.*s", (int)(le - line), line);
        uint64_t v = strtoull(sp + 1, NULL, 10);
        if (strcmp(metric, prev_metric) == 0)
          assert_true(v >= prev_bucket);
        snprintf(prev_metric, sizeof prev_metric, "%s", metric);
        prev_bucket = v;
      }
    }
    line = nl + 1;
  }
}

static void test_prometheus_text(void **state) {
  fx_t *fx = *state;
  relock_lock_t *l = lock_new(relock_lock_new, fx->a, "stats:prom");
  relock_lock_t *fair = lock_new(relock_fair_lock_new, fx->a, "stats:prom:fair");
  for (int i = 0; i < 3; i++) {
    assert_int_equal(held_by(l, 1, 0, RELOCK_INFINITE), 1);
    assert_int_equal(fx_value(relock_lock_unlock_async(l, 1)), 1);
  }
  assert_int_equal(held_by(fair, 1, 0, RELOCK_INFINITE), 1);
  relock_stats_t st = stats_of(fx->a);
  size_t need = relock_stats_prometheus(&st, "service=\"test\"", NULL, 0);
  char *text = malloc(need + 1);
  assert_non_null(text);
  assert_int_equal(relock_stats_prometheus(&st, "service=\"test\"", text, need + 1), need);
  assert_int_equal(strlen(text), need);
  check_exposition(text);
  assert_non_null(strstr(text, "relock_acquisitions_total{service=\"test\",kind=\"lock\",outcome=\"acquired\"} 3\n"));
  assert_non_null(
      strstr(text, "relock_acquisitions_total{service=\"test\",kind=\"fair_lock\",outcome=\"acquired\"} 1\n"));
  assert_non_null(strstr(text, "relock_releases_total{service=\"test\",kind=\"lock\"} 3\n"));
  assert_non_null(strstr(text, "relock_hold_seconds_count{service=\"test\",kind=\"lock\"} 3\n"));
  assert_non_null(strstr(text, "relock_hold_seconds_bucket{service=\"test\",kind=\"lock\",le=\"+Inf\"} 3\n"));
  assert_non_null(strstr(text, "relock_acquire_wait_seconds_bucket{service=\"test\",kind=\"lock\",le=\"0.00005\"}"));
  assert_non_null(strstr(text, "# TYPE relock_acquire_wait_seconds histogram\n"));
  assert_null(strstr(text, "kind=\"semaphore\"")); /* never used: left out */
  char cmds[96];
  snprintf(cmds, sizeof cmds, "relock_commands_total{service=\"test\"} %llu\n", (unsigned long long)st.commands);
  assert_non_null(strstr(text, cmds));

  /* without labels */
  size_t bare = relock_stats_prometheus(&st, NULL, NULL, 0);
  char *plain = malloc(bare + 1);
  assert_non_null(plain);
  assert_int_equal(relock_stats_prometheus(&st, "", plain, bare + 1), bare);
  check_exposition(plain);
  assert_non_null(strstr(plain, "relock_acquisitions_total{kind=\"lock\",outcome=\"acquired\"} 3\n"));
  assert_non_null(strstr(plain, "\nrelock_reconnects_total 0\n"));

  /* too small a buffer: whole lines only, and the length it needs */
  for (size_t size = 1; size < need; size += 997) {
    char *small = malloc(size);
    assert_non_null(small);
    assert_int_equal(relock_stats_prometheus(&st, "service=\"test\"", small, size), need);
    size_t kept = strlen(small);
    assert_true(kept < size);
    assert_memory_equal(small, text, kept);
    assert_true(kept == 0 || small[kept - 1] == '\n');
    const char *next = strchr(text + kept, '\n'); /* it stops only at a line that does not fit */
    assert_true((size_t)(next + 1 - text) >= size);
    free(small);
  }
  free(plain);
  free(text);
  assert_int_equal(fx_value(relock_lock_unlock_async(fair, 1)), 1);
  relock_lock_free(l);
  relock_lock_free(fair);
}

static void test_names_and_bounds(void **state) {
  (void)state;
  assert_string_equal(relock_kind_name(RELOCK_KIND_PERMIT_SEMAPHORE), "permit_semaphore");
  assert_string_equal(relock_kind_name((relock_kind_t)RELOCK_KINDS), "?");
  assert_string_equal(relock_outcome_name(RELOCK_OUTCOME_TIMED_OUT), "timed_out");
  assert_string_equal(relock_loss_name(RELOCK_LOSS_LEASE_ENDED), "lease_ended");
  assert_string_equal(relock_loss_name((relock_loss_t)-1), "?");
  assert_int_equal(relock_stats_bound_us(0), 50);
  assert_int_equal(relock_stats_bound_us(RELOCK_STATS_BUCKETS - 2), 3600000000LL);
  assert_int_equal(relock_stats_bound_us(RELOCK_STATS_BUCKETS - 1), INT64_MAX);
  assert_int_equal(relock_stats_bound_us(RELOCK_STATS_BUCKETS), -1);
  for (int i = 1; i < RELOCK_STATS_BUCKETS; i++)
    assert_true(relock_stats_bound_us(i) > relock_stats_bound_us(i - 1));
  for (int i = 1; i < RELOCK_STATS_TRY_BUCKETS; i++)
    assert_true(relock_stats_try_bound(i) > relock_stats_try_bound(i - 1));
  assert_int_equal(relock_stats_try_bound(-1), -1);
}

int main(void) {
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found (./bootstrap --deps installs it)");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names_and_bounds),
      cmocka_unit_test_setup_teardown(test_every_outcome_counted, setup, fx_pair_teardown),
      cmocka_unit_test_setup_teardown(test_waited_means_found_held, setup, fx_pair_teardown),
      cmocka_unit_test_setup_teardown(test_losses_by_cause, setup, fx_pair_teardown),
      cmocka_unit_test_setup_teardown(test_commands_scripts_reconnects, setup, fx_pair_teardown),
      cmocka_unit_test_setup_teardown(test_statistics_off, setup, fx_pair_teardown),
      cmocka_unit_test_setup_teardown(test_snapshot_size, setup, fx_pair_teardown),
      cmocka_unit_test_setup_teardown(test_random_operations_agree, setup, fx_pair_teardown),
      cmocka_unit_test_setup_teardown(test_threaded_reads, setup, fx_pair_teardown),
      cmocka_unit_test_setup_teardown(test_prometheus_text, setup, fx_pair_teardown),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, NULL, NULL);
}
