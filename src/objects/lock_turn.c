/* One owner's count-changing requests on a lock, one at a time
 * (lock_turn.h). */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include <relock/error.h>

#include "base/hashtab.h"
#include "objects/lock_turn.h"

struct relock__turn {
  relock__hnode_t node;     /* in client->turns, by name and field */
  relock_client_t *client;
  relock__link_t queue;     /* the requests waiting, first come first */
  int busy;                 /* a request holds it */
  size_t name_len;
  size_t field_len;
  char key[];               /* the name, then the field */
};

static uint64_t turn_hash(const char *name, size_t name_len, const char *field, size_t field_len) {
  return relock__hash_bytes(relock__hash_bytes(RELOCK__HASH_SEED, name, name_len), field, field_len);
}

static relock__turn_t *find(relock_client_t *c, uint64_t h, const char *name, size_t name_len, const char *field,
                            size_t field_len) {
  relock__hnode_t *n;
  for (RELOCK__HTAB_EACH(&c->turns, h, n)) {
    relock__turn_t *t = relock__container_of(n, relock__turn_t, node);
    if (n->hash == h && t->name_len == name_len && t->field_len == field_len &&
        memcmp(t->key, name, name_len) == 0 && memcmp(t->key + name_len, field, field_len) == 0)
      return t;
  }
  return NULL;
}

/* The turn of lock's owner, made if there is none; NULL when out of memory. */
static relock__turn_t *turn_of(relock_lock_t *lock, uint64_t owner) {
  relock_client_t *c = lock->client;
  char field[RELOCK__FIELD_MAX];
  size_t field_len = relock__lock_field(lock, owner, field);
  uint64_t h = turn_hash(lock->name, lock->len, field, field_len);
  relock__turn_t *t = find(c, h, lock->name, lock->len, field, field_len);
  if (t != NULL)
    return t;
  if ((t = malloc(sizeof(*t) + lock->len + field_len)) == NULL)
    return NULL;
  t->client = c;
  relock__list_init(&t->queue);
  t->busy = 0;
  t->name_len = lock->len;
  t->field_len = field_len;
  memcpy(t->key, lock->name, lock->len);
  memcpy(t->key + lock->len, field, field_len);
  relock__htab_insert(&c->turns, &t->node, h);
  return t;
}

/* Nobody holds or waits for it: it goes. */
static void maybe_free(relock__turn_t *t) {
  if (t->busy || !relock__list_empty(&t->queue))
    return;
  relock__htab_remove(&t->client->turns, &t->node);
  free(t);
}

/* The turn did not come in time, or the client closes. */
static void on_late(relock__timer_t *timer, int status, void *arg) {
  (void)timer;
  relock__turn_wait_t *w = arg;
  relock__turn_t *t = w->turn;
  w->turn = NULL;
  relock__list_remove(&w->link);
  maybe_free(t);
  w->go(w, status != 0 ? RELOCK_ECLOSED : RELOCK_ETIMEDOUT);
}

/* As long as a call could take (each attempt's command timeout, a retry
 * interval before each retry), and one attempt more: a give-back past its
 * budget tries again every retry interval, so one held up by a passing
 * fault is answered within that once Redis answers again. */
static int64_t longest_wait_ms(const relock_client_t *c) {
  const relock_options_t *o = &c->settings.opt;
  return o->command_timeout_ms * (2 + o->retry_attempts) + o->retry_interval_ms * (1 + o->retry_attempts);
}

int relock__turn_ask(relock_lock_t *lock, uint64_t owner, relock__turn_wait_t *w) {
  relock__turn_t *t = turn_of(lock, owner);
  if (t == NULL)
    return -1;
  w->turn = t;
  if (!t->busy) {
    t->busy = 1;
    w->holds = 1;
    return 1;
  }
  w->holds = 0;
  relock__list_push_back(&t->queue, &w->link);
  relock__timer_init(&w->late, on_late, w);
  relock__timer_start(&lock->client->wheel, &w->late, longest_wait_ms(lock->client)); /* closing: the holder ends */
  return 0;
}

void relock__turn_pass(relock__turn_t *t) {
  if (t == NULL)
    return;
  if (relock__list_empty(&t->queue)) {
    t->busy = 0;
    maybe_free(t);
    return;
  }
  relock__turn_wait_t *next = relock__container_of(t->queue.next, relock__turn_wait_t, link);
  relock__list_remove(&next->link);
  relock__timer_stop(&next->late);
  next->holds = 1; /* busy still: it is next's now */
  next->go(next, 0);
}

relock__turn_t *relock__turn_take(relock__turn_wait_t *w) {
  relock__turn_t *t = w->holds ? w->turn : NULL;
  if (t != NULL) {
    w->turn = NULL;
    w->holds = 0;
  }
  return t;
}

void relock__turn_leave(relock__turn_wait_t *w) {
  relock__turn_t *t = w->turn;
  if (t == NULL)
    return;
  w->turn = NULL;
  if (w->holds) {
    w->holds = 0;
    relock__turn_pass(t);
  } else {
    relock__timer_stop(&w->late);
    relock__list_remove(&w->link);
    maybe_free(t);
  }
}

relock_client_t *relock__turn_client(const relock__turn_t *turn) { return turn->client; }
