/* Pub/sub with shared, reference-counted channel subscriptions (pubsub.h). */
#include <config.h>

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <hiredis/hiredis.h>

#include <relock/error.h>

#include "future/promise.h"
#include "redis/pubsub.h"

struct relock__channel {
  relock__hnode_t node; /* in ps->channels, by name */
  relock__pubsub_t *ps;
  relock__link_t listeners;
  size_t nlisteners;
  int sent_subscribed;  /* the last command sent for it was SUBSCRIBE */
  int replies_due;      /* confirmations of sent commands still to come */
  int confirmed;        /* Redis's state matches sent_subscribed = 1 */
  int gap;              /* resubscribing after a drop: tell listeners */
  int walking;          /* a walk over the listeners is in progress */
  int sharded;          /* SSUBSCRIBE rather than SUBSCRIBE */
  int routed;           /* placed by the router: relock__pubsub_rehome may move it */
  size_t len;
  char name[];
};

/* -- the channel table ------------------------------------------------------*/

static relock__channel_t *find(relock__pubsub_t *ps, const char *name, size_t len) {
  uint64_t h = relock__hash_bytes(RELOCK__HASH_SEED, name, len);
  relock__hnode_t *n;
  for (RELOCK__HTAB_EACH(&ps->channels, h, n)) {
    relock__channel_t *ch = relock__container_of(n, relock__channel_t, node);
    if (n->hash == h && ch->len == len && memcmp(ch->name, name, len) == 0)
      return ch;
  }
  return NULL;
}

static relock__channel_t *add(relock__pubsub_t *ps, const char *name, size_t len, int routed) {
  relock__channel_t *ch = calloc(1, sizeof(*ch) + len + 1);
  if (ch == NULL)
    return NULL;
  ch->ps = ps;
  relock__list_init(&ch->listeners);
  ch->routed = routed;
  ch->sharded = routed && ps->sharded;
  ch->len = len;
  memcpy(ch->name, name, len);
  relock__htab_insert(&ps->channels, &ch->node, relock__hash_bytes(RELOCK__HASH_SEED, name, len));
  return ch;
}

/* A channel nobody wants and Redis no longer has goes away. */
static void maybe_free(relock__channel_t *ch) {
  if (ch->nlisteners > 0 || ch->sent_subscribed || ch->replies_due > 0 || ch->walking)
    return;
  relock__htab_remove(&ch->ps->channels, &ch->node);
  free(ch);
}

/* Visits the listeners present when the walk starts, in order. A visit may
 * remove any listener (itself included) or add new ones (not visited). Two
 * marker listeners with fn == NULL keep the walk's place in the list. */
static void walk(relock__channel_t *ch, void (*visit)(relock__listener_t *l, void *ctx), void *ctx) {
  relock__listener_t cursor = {0}, end = {0};
  relock__list_push_back(&ch->listeners, &end.link);
  relock__link_t *head = &ch->listeners;
  cursor.link.next = head->next; /* insert the cursor first */
  cursor.link.prev = head;
  head->next->prev = &cursor.link;
  head->next = &cursor.link;
  ch->walking++;
  while (cursor.link.next != &end.link) {
    relock__link_t *n = cursor.link.next;
    relock__list_remove(&cursor.link); /* step over n before visiting it */
    cursor.link.next = n->next;
    cursor.link.prev = n;
    n->next->prev = &cursor.link;
    n->next = &cursor.link;
    relock__listener_t *l = relock__container_of(n, relock__listener_t, link);
    if (l->fn != NULL)
      visit(l, ctx);
  }
  relock__list_remove(&cursor.link);
  relock__list_remove(&end.link);
  ch->walking--;
  maybe_free(ch);
}

/* -- talking to Redis -------------------------------------------------------*/

/* Remembers that ch's command awaits an answer: answers come in order, and
 * an error answer names no channel. 0, or -1 when out of memory. */
static int push_sent(relock__pubsub_t *ps, relock__channel_t *ch) {
  if (ps->nsent == ps->sent_cap) {
    size_t cap = ps->sent_cap ? 2 * ps->sent_cap : 16;
    relock__channel_t **sent = realloc(ps->sent, cap * sizeof(*sent));
    if (sent == NULL)
      return -1;
    ps->sent = sent;
    ps->sent_cap = cap;
  }
  ps->sent[ps->nsent++] = ch;
  return 0;
}

/* The channel whose command the next answer is for (NULL: none awaited). */
static relock__channel_t *pop_sent(relock__pubsub_t *ps) {
  if (ps->nsent == 0)
    return NULL;
  relock__channel_t *ch = ps->sent[0];
  memmove(ps->sent, ps->sent + 1, --ps->nsent * sizeof(*ps->sent));
  return ch;
}

static void send_command(relock__channel_t *ch, int subscribe) {
  relock__pubsub_t *ps = ch->ps;
  const char *cmd = subscribe ? (ch->sharded ? "SSUBSCRIBE" : "SUBSCRIBE")
                              : (ch->sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE");
  const char *argv[2] = {cmd, ch->name};
  size_t lens[2] = {strlen(cmd), ch->len};
  if (push_sent(ps, ch) != 0)
    return; /* out of memory: a later sync tries again */
  if (relock__conn_write_raw(&ps->conn, 2, argv, lens) != 0) {
    ps->nsent--;
    return; /* the context is going away; the reconnect resubscribes */
  }
  ch->sent_subscribed = subscribe;
  ch->replies_due++;
  ch->confirmed = 0; /* until Redis answers this command */
}

/* Brings Redis in line with whether the channel has listeners. */
static void sync_channel(relock__channel_t *ch) {
  relock__pubsub_t *ps = ch->ps;
  if (ps->conn.state == RELOCK__CONN_READY) {
    if (ch->nlisteners > 0 && !ch->sent_subscribed)
      send_command(ch, 1);
    else if (ch->nlisteners == 0 && ch->sent_subscribed)
      send_command(ch, 0);
  } else if (ch->nlisteners > 0) {
    relock__conn_start(&ps->conn);
  }
  maybe_free(ch);
}

/* Completes l's pending confirmation: err 0 succeeds, else fails with a
 * printf-style message. */
static void settle_confirm(relock__listener_t *l, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void settle_confirm(relock__listener_t *l, int err, const char *fmt, ...) {
  relock_future_t *f = l->confirm;
  if (f == NULL)
    return;
  l->confirm = NULL;
  relock__timer_stop(&l->timer);
  relock__future_set_cancel(f, NULL, NULL);
  if (err == 0) {
    relock__future_succeed(f);
  } else {
    va_list ap;
    va_start(ap, fmt);
    relock__future_vfail(f, err, fmt, ap);
    va_end(ap);
  }
  relock_future_release(f);
}

static void tell_gap(relock__listener_t *l, void *ctx) {
  (void)ctx;
  if (l->confirmed)
    l->fn(l, NULL, 0, l->arg);
}

static void confirm(relock__listener_t *l, void *ctx) {
  (void)ctx;
  l->confirmed = 1;
  settle_confirm(l, 0, NULL);
}

typedef struct {
  const char *payload;
  size_t len;
} message_t;

static void deliver(relock__listener_t *l, void *ctx) {
  message_t *m = ctx;
  l->fn(l, m->payload, m->len, l->arg);
}

static int is_kind(const redisReply *r, const char *kind) {
  return r->type == REDIS_REPLY_STRING && strcasecmp(r->str, kind) == 0;
}

static int is_string(const redisReply *r) { return r->type == REDIS_REPLY_STRING; }

/* Redis no longer has ch subscribed (a refused command, or its slot moved
 * away): its listeners stay and wait for a new subscription, told of the
 * gap once it is confirmed. */
static void lapsed(relock__channel_t *ch) {
  if (ch->confirmed || ch->gap)
    ch->gap = 1;
  ch->sent_subscribed = 0;
  ch->confirmed = 0;
}

/* A Cluster answer to a (un)subscribe: the slot is elsewhere (MOVED, ASK)
 * or the cluster is down (CLUSTERDOWN, TRYAGAIN). The cluster is told; it
 * re-homes or re-subscribes the channel (relock__pubsub_rehome). */
static const char *redirected(relock__pubsub_t *ps, const redisReply *reply) {
  relock__channel_t *ch = pop_sent(ps);
  if (ch == NULL || ch->replies_due == 0)
    return "an error answer to no command sent";
  ch->replies_due--;
  if (ch->replies_due == 0)
    lapsed(ch);
  maybe_free(ch);
  if (ps->on_redirect != NULL)
    ps->on_redirect(ps, reply->str, reply->len, ps->redirect_arg);
  return NULL;
}

/* Every reply the subscriber connection reads (PING answers aside): a
 * message, the confirmation of a command we sent, or a Cluster error
 * answer to one. Anything else, or a confirmation or message for a channel
 * we never subscribed, is a protocol error (the connection is replaced):
 * returns why. */
static const char *on_push(relock__conn_t *c, const redisReply *reply, void *arg) {
  (void)c;
  relock__pubsub_t *ps = arg;
  if (reply->type == REDIS_REPLY_ERROR)
    return redirected(ps, reply);
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 || !is_string(reply->element[0]) ||
      !is_string(reply->element[1]))
    return "a reply that is not a pub/sub message or confirmation";
  const redisReply *kind = reply->element[0];
  relock__channel_t *ch = find(ps, reply->element[1]->str, reply->element[1]->len);
  if (is_kind(kind, "message") || is_kind(kind, "smessage")) {
    if (!is_string(reply->element[2]))
      return "a message whose payload is not a string";
    if (ch == NULL || (is_kind(kind, "smessage") != (ch->sharded != 0)))
      return "a message for a channel not subscribed";
    message_t m = {reply->element[2]->str, reply->element[2]->len};
    walk(ch, deliver, &m);
    return NULL;
  }
  int subscribed = is_kind(kind, "subscribe") || is_kind(kind, "ssubscribe");
  if (!subscribed && !is_kind(kind, "unsubscribe") && !is_kind(kind, "sunsubscribe"))
    return "an unknown pub/sub message kind";
  if (reply->element[2]->type != REDIS_REPLY_INTEGER)
    return "a subscription count that is not an integer";
  if (ch != NULL && ch->sharded && ch->replies_due == 0 && is_kind(kind, "sunsubscribe") && ch->sent_subscribed) {
    /* Unasked: the channel's slot has left this node (resharding, a
     * failover). Where it went, the cluster finds out. */
    lapsed(ch);
    maybe_free(ch);
    if (ps->on_redirect != NULL)
      ps->on_redirect(ps, "SUNSUBSCRIBE", 12, ps->redirect_arg);
    return NULL;
  }
  if (ch == NULL || ch->replies_due == 0 || pop_sent(ps) != ch)
    return "a confirmation of a command not sent";
  ch->replies_due--;
  /* Only the answer to the last command sent tells Redis's real state. */
  ch->confirmed = ch->replies_due == 0 && ch->sent_subscribed;
  if (ch->confirmed) {
    if (ch->gap) {
      ch->gap = 0;
      walk(ch, tell_gap, NULL);
    }
    walk(ch, confirm, NULL);
  } else {
    maybe_free(ch);
  }
  return NULL;
}

/* -- connection events ------------------------------------------------------*/

/* Calls fn on every channel; fn may free the channel it is given. */
static void each_channel(relock__pubsub_t *ps, void (*fn)(relock__channel_t *ch)) {
  for (size_t i = 0; i < ps->channels.nbuckets; i++) {
    for (relock__hnode_t *n = ps->channels.buckets[i], *next; n != NULL; n = next) {
      next = n->next;
      fn(relock__container_of(n, relock__channel_t, node));
    }
  }
}

static void channel_down(relock__channel_t *ch) {
  if (ch->sent_subscribed && ch->confirmed)
    ch->gap = 1;
  ch->sent_subscribed = 0;
  ch->replies_due = 0;
  ch->confirmed = 0;
  maybe_free(ch);
}

/* Every channel of ps, pinned (walking) so that callbacks cannot free one
 * while the caller goes through them: unpin with unpin_all. NULL with *n 0
 * when there are none or memory ran out. */
static relock__channel_t **pin_all(relock__pubsub_t *ps, size_t *n) {
  size_t count = ps->channels.count, i = 0;
  relock__channel_t **all = count > 0 ? malloc(count * sizeof(*all)) : NULL;
  for (size_t b = 0; all != NULL && b < ps->channels.nbuckets; b++) {
    for (relock__hnode_t *hn = ps->channels.buckets[b]; hn != NULL && i < count; hn = hn->next) {
      all[i] = relock__container_of(hn, relock__channel_t, node);
      all[i++]->walking++;
    }
  }
  *n = i;
  return all;
}

static void unpin_all(relock__channel_t **all, size_t n) {
  for (size_t k = 0; k < n; k++) {
    all[k]->walking--;
    maybe_free(all[k]);
  }
  free(all);
}

static void refuse(relock__listener_t *l, void *ctx) {
  relock__conn_t *c = ctx;
  settle_confirm(l, c->last_err, "subscription to %.*s %s: %s", (int)l->channel->len, l->channel->name,
                 c->last_err == RELOCK_ESERVER || c->last_err == RELOCK_ENOPERM ? "refused" : "not confirmed",
                 c->last_msg);
}

/* Fails every pending confirmation. Their callbacks may subscribe and
 * unsubscribe anything, so the channels are pinned in a snapshot first. */
static void refuse_pending(relock__pubsub_t *ps) {
  size_t n = 0;
  relock__channel_t **all = pin_all(ps, &n); /* out of memory: they time out instead */
  for (size_t k = 0; k < n; k++)
    walk(all[k], refuse, &ps->conn);
  unpin_all(all, n);
}

static void on_down(relock__conn_t *c, void *arg) {
  relock__pubsub_t *ps = arg;
  ps->nsent = 0;
  each_channel(ps, channel_down);
  /* The server refused (a SUBSCRIBE denied by ACL, say): waiting for the
   * confirmation would only end in a timeout. Listeners stay, and are
   * subscribed again after the reconnect. */
  if (c->last_err == RELOCK_ESERVER || c->last_err == RELOCK_ENOPERM || c->last_err == RELOCK_EPROTO)
    refuse_pending(arg);
}

static void on_ready(relock__conn_t *c, void *arg) {
  (void)c;
  each_channel(arg, sync_channel);
}

static void on_conn_closed(relock__conn_t *c, void *arg) {
  (void)c;
  relock__pubsub_t *ps = arg;
  relock__htab_cleanup(&ps->channels);
  free(ps->sent);
  ps->sent = NULL;
  if (ps->on_closed)
    ps->on_closed(ps, ps->closed_arg);
}

int relock__pubsub_init(relock__pubsub_t *ps, relock__exec_t *exec, relock__wheel_t *wheel,
                        const relock__settings_t *settings, uint64_t *rng,
                        void (*on_closed)(relock__pubsub_t *ps, void *arg), void *closed_arg) {
  memset(ps, 0, sizeof(*ps));
  ps->exec = exec;
  relock__list_init(&ps->orphans);
  if (relock__htab_init(&ps->channels, 16) != 0)
    return RELOCK_ENOMEM;
  ps->timeout_ms = settings->opt.command_timeout_ms;
  ps->on_closed = on_closed;
  ps->closed_arg = closed_arg;
  relock__conn_hooks_t hooks = {on_ready, on_down, on_conn_closed, on_push, ps};
  relock__conn_init(&ps->conn, exec->loop, wheel, settings, "subscriber", &hooks, rng);
  return 0;
}

/* -- listeners --------------------------------------------------------------*/

static void on_confirm_timeout(relock__timer_t *t, int status, void *arg) {
  (void)t;
  relock__listener_t *l = arg;
  relock__channel_t *ch = l->channel;
  relock__conn_t *c = &ch->ps->conn;
  if (status != 0)
    settle_confirm(l, RELOCK_ECLOSED, "client closed");
  else if (c->last_err != 0 && c->state != RELOCK__CONN_READY)
    settle_confirm(l, c->last_err, "subscription to %.*s not confirmed: no connection to %s: %s", (int)ch->len,
                   ch->name, c->address, c->last_msg);
  else
    settle_confirm(l, RELOCK_ETIMEDOUT, "subscription to %.*s not confirmed by %s in time", (int)ch->len,
                   ch->name, c->address);
}

static void on_confirm_cancel(relock_future_t *f, void *arg) {
  relock__listener_t *l = arg;
  l->confirm = NULL;
  relock__timer_stop(&l->timer);
  relock_future_release(f);
}

relock_future_t *relock__pubsub_subscribe(relock__pubsub_t *ps, relock__listener_t *l, const char *name,
                                          size_t len, int routed, relock__message_fn fn, void *arg) {
  relock_future_t *f = relock__future_new(ps->exec);
  if (f == NULL)
    return NULL;
  memset(l, 0, sizeof(*l));
  relock__list_init(&l->link);
  relock__timer_init(&l->timer, on_confirm_timeout, l);
  if (ps->closing) {
    relock__future_fail(f, RELOCK_ECLOSED, "client closed");
    return f;
  }
  relock__channel_t *ch = find(ps, name, len);
  if (ch == NULL && (ch = add(ps, name, len, routed)) == NULL) {
    relock_future_release(f);
    return NULL;
  }
  l->channel = ch;
  l->fn = fn;
  l->arg = arg;
  relock__list_push_back(&ch->listeners, &l->link);
  ch->nlisteners++;
  if (ch->confirmed) {
    l->confirmed = 1;
    relock__future_succeed(f);
    return f;
  }
  l->confirm = relock_future_retain(f);
  relock__future_set_cancel(f, on_confirm_cancel, l);
  relock__timer_start(ps->conn.wheel, &l->timer, ps->timeout_ms);
  sync_channel(ch);
  return f;
}

void relock__pubsub_unsubscribe(relock__listener_t *l) {
  relock__channel_t *ch = l->channel;
  if (ch == NULL)
    return;
  l->channel = NULL;
  l->fn = NULL;
  relock__list_remove(&l->link);
  ch->nlisteners--;
  if (l->confirm != NULL)
    relock_future_cancel(l->confirm);
  sync_channel(ch);
}

/* Moves ch's listeners (not a walk's markers) to the channel of the same
 * name in to; returns that channel, pinned, or NULL when out of memory
 * (they stay). */
static relock__channel_t *move_listeners(relock__channel_t *ch, relock__pubsub_t *to) {
  relock__channel_t *dst = find(to, ch->name, ch->len);
  if (dst == NULL && (dst = add(to, ch->name, ch->len, 1)) == NULL)
    return NULL;
  dst->walking++;
  relock__link_t *head = &ch->listeners;
  for (relock__link_t *n = head->next, *next; n != head; n = next) {
    next = n->next;
    relock__listener_t *l = relock__container_of(n, relock__listener_t, link);
    if (l->fn == NULL)
      continue;
    relock__list_remove(n);
    relock__list_push_back(&dst->listeners, n);
    l->channel = dst;
    ch->nlisteners--;
    dst->nlisteners++;
    if (l->confirmed)
      dst->gap = 1; /* whatever was published meanwhile is lost to it */
  }
  return dst;
}

void relock__pubsub_rehome(relock__pubsub_t *ps,
                           relock__pubsub_t *(*dest)(const char *name, size_t len, void *arg), void *arg) {
  size_t n = 0, nmoved = 0;
  relock__channel_t **all = pin_all(ps, &n);
  relock__channel_t **moved = n > 0 ? calloc(n, sizeof(*moved)) : NULL;
  for (size_t k = 0; k < n && moved != NULL; k++) {
    relock__channel_t *ch = all[k];
    relock__pubsub_t *to = ch->routed && ch->nlisteners > 0 ? dest(ch->name, ch->len, arg) : NULL;
    if (to != NULL && to != ps && !to->closing && (moved[nmoved] = move_listeners(ch, to)) != NULL)
      nmoved++;
  }
  for (size_t k = 0; k < n; k++)
    sync_channel(all[k]); /* unsubscribes what was moved, subscribes what lapsed */
  for (size_t k = 0; k < nmoved; k++) {
    relock__channel_t *dst = moved[k];
    if (dst->confirmed) { /* already there for others: no confirmation will come */
      dst->gap = 0;
      walk(dst, tell_gap, NULL);
      walk(dst, confirm, NULL);
    } else {
      sync_channel(dst);
    }
    dst->walking--;
    maybe_free(dst);
  }
  free(moved);
  unpin_all(all, n);
}

/* Takes the channel's listeners off it without running any callback (so the
 * channel table stays still); those awaiting a confirmation are collected to
 * be failed afterwards. */
static void detach_channel(relock__channel_t *ch) {
  relock__link_t *head = &ch->listeners;
  for (relock__link_t *n = head->next, *next; n != head; n = next) {
    next = n->next;
    relock__listener_t *l = relock__container_of(n, relock__listener_t, link);
    if (l->fn == NULL)
      continue; /* a walk's marker: that walk removes it */
    relock__list_remove(n);
    l->channel = NULL;
    ch->nlisteners--;
    if (l->confirm != NULL)
      relock__list_push_back(&ch->ps->orphans, n);
  }
  ch->sent_subscribed = 0; /* the connection closes: nothing to undo in Redis */
  ch->replies_due = 0;
  maybe_free(ch);
}

void relock__pubsub_close(relock__pubsub_t *ps) {
  if (ps->closing)
    return;
  ps->closing = 1;
  ps->nsent = 0; /* detached channels may go: no answer is read any more */
  each_channel(ps, detach_channel);
  while (!relock__list_empty(&ps->orphans)) {
    relock__link_t *n = ps->orphans.next;
    relock__list_remove(n);
    settle_confirm(relock__container_of(n, relock__listener_t, link), RELOCK_ECLOSED, "client closed");
  }
  relock__conn_close(&ps->conn);
}
