/* Redis Sentinel: finding the master and following it (sentinel.h). */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include <relock/error.h>

#include "base/random.h"
#include "future/promise.h"
#include "redis/sentinel.h"
#include "stats/stats.h"

/* Sentinels known at most: the configured ones and those they tell of. */
#define KNOWN_MAX 32
#define POLL_MS 1000
#define STEERED_MAX 2
#define WATCH_MAX 3

struct relock__sentinel {
  relock__exec_t *exec;
  relock__wheel_t *wheel;
  const relock__settings_t *settings;
  const char *name; /* the master's */
  uint64_t *rng;
  relock__conn_t *steered[STEERED_MAX];
  int nsteered;

  relock__hostport_t known[KNOWN_MAX];
  int nknown;

  relock__conn_t query; /* SENTINEL commands, to one sentinel at a time */
  int asked;            /* the sentinel query points at; -1: none yet */
  /* Subscribed to +switch-master, each on another sentinel: the one that
   * led the failover says so first, the others only once its hello
   * messages reach them (up to 2 s later). */
  relock__conn_t watch[WATCH_MAX];
  int watched[WATCH_MAX]; /* the sentinel each watches; -1: none (yet) */

  /* The round under way: who is asked in which order, and what each said. */
  int discovering;
  int order[KNOWN_MAX];
  int norder, next;
  relock_future_t *pending; /* the question in flight */
  int answered;             /* some sentinel answered (it knew no such master) */
  int round_err;            /* every sentinel failed with this code; 0: mixed */
  int all_definitive;       /* every failure will repeat: refused, unknown name */
  char tried[960];          /* "a:1 (Connection refused), b:2 (knows no master \"m\")" */

  /* The master, once a round found it. */
  char master_host[256];
  int master_port;
  int has_master;
  int told_by; /* the sentinel whose answer it is */
  int suspect; /* a sentinel that named a node that was no master; -1: none */
  int replicas_up; /* as the sentinel last asked sees them; -1: not known */

  relock__timer_t poll;

  int closing, open;
  void (*on_closed)(relock__sentinel_t *s, void *arg);
  void *closed_arg;
};

static void round_start(relock__sentinel_t *s);
static void ask_next(relock__sentinel_t *s);

static const char *addr(const relock__hostport_t *h, char *buf, size_t size) {
  snprintf(buf, size, strchr(h->host, ':') != NULL ? "[%s]:%d" : "%s:%d", h->host, h->port);
  return buf;
}

/* Adds what sentinel i said (err: its code) to the round's account. */
static void note(relock__sentinel_t *s, int i, int err, const char *what) {
  char a[300];
  s->round_err = s->tried[0] == '\0' || s->round_err == err ? err : 0;
  size_t used = strlen(s->tried);
  snprintf(s->tried + used, sizeof s->tried - used, "%s%s (%s)", used > 0 ? ", " : "", addr(&s->known[i], a, sizeof a),
           what);
}

static int find_known(const relock__sentinel_t *s, const char *host, int port) {
  for (int i = 0; i < s->nknown; i++)
    if (s->known[i].port == port && strcmp(s->known[i].host, host) == 0)
      return i;
  return -1;
}

static void learn(relock__sentinel_t *s, const char *host, size_t hlen, int port) {
  if (s->nknown == KNOWN_MAX || hlen == 0 || hlen >= sizeof s->known[0].host || port < 1 || port > 65535)
    return;
  char h[sizeof s->known[0].host];
  memcpy(h, host, hlen);
  h[hlen] = '\0';
  if (find_known(s, h, port) >= 0)
    return;
  memcpy(s->known[s->nknown].host, h, hlen + 1);
  s->known[s->nknown++].port = port;
}

/* -- the master ---------------------------------------------------------------*/

static void steer(relock__sentinel_t *s, const char *host, int port, int told_by) {
  if (s->has_master && s->master_port == port && strcmp(s->master_host, host) == 0) {
    s->told_by = told_by;
    return;
  }
  if (s->has_master) { /* not its discovery: the master moved */
    char address[300], msg[800];
    snprintf(address, sizeof address, "%s:%d", host, port);
    snprintf(msg, sizeof msg, "master %s moved from %s:%d to %s (told by sentinel %s:%d)", s->name, s->master_host,
             s->master_port, address, s->known[told_by].host, s->known[told_by].port);
    relock__stats_failover(s->settings->stats, address, msg);
  }
  snprintf(s->master_host, sizeof s->master_host, "%s", host);
  s->master_port = port;
  s->has_master = 1;
  s->told_by = told_by;
  for (int i = 0; i < s->nsteered; i++)
    relock__conn_set_target(s->steered[i], host, port, 1);
}

/* -- +switch-master -----------------------------------------------------------*/

static int watching(const relock__sentinel_t *s, int i) {
  for (int w = 0; w < WATCH_MAX; w++)
    if (s->watched[w] == i)
      return 1;
  return 0;
}

/* Points watch w at the next sentinel no other watch has (after the
 * connection's back-off when now is 0: no busy loop when all are down). */
static void watch_next(relock__sentinel_t *s, int w, int now) {
  for (int k = 1; k <= s->nknown; k++) {
    int i = (s->watched[w] + k) % s->nknown;
    if (!watching(s, i) || k == s->nknown) {
      s->watched[w] = i;
      relock__conn_set_target(&s->watch[w], s->known[i].host, s->known[i].port, now);
      relock__conn_start(&s->watch[w]);
      return;
    }
  }
}

/* Once the master is known (every round that finds it): each idle watch
 * gets a sentinel no other watch has, the one that answered first; the
 * sentinels learned since fill the watches left idle. */
static void watch_start(relock__sentinel_t *s, int answered) {
  for (int w = 0; w < WATCH_MAX; w++) {
    if (s->watched[w] >= 0)
      continue;
    for (int k = 0; k < s->nknown; k++) {
      int i = (answered + k) % s->nknown;
      if (!watching(s, i)) {
        s->watched[w] = i;
        relock__conn_set_target(&s->watch[w], s->known[i].host, s->known[i].port, 1);
        relock__conn_start(&s->watch[w]);
        break;
      }
    }
  }
}

static int watch_index(relock__sentinel_t *s, const relock__conn_t *c) {
  for (int w = 0; w < WATCH_MAX; w++)
    if (c == &s->watch[w])
      return w;
  return -1;
}

static void on_watch_ready(relock__conn_t *c, void *arg) {
  (void)arg;
  const char *argv[] = {"SUBSCRIBE", "+switch-master"};
  const size_t lens[] = {9, 14};
  if (relock__conn_write_raw(c, 2, argv, lens) != 0)
    return; /* out of memory: the poll still follows the master */
}

/* "<name> <old-ip> <old-port> <new-ip> <new-port>" from sentinel i;
 * another master's switch is none of ours. */
static const char *on_switch(relock__sentinel_t *s, int i, const char *msg, size_t len) {
  char name[256], old_host[256], new_host[256];
  int old_port, new_port;
  char text[1024];
  if (len >= sizeof text)
    return "a +switch-master message too long";
  memcpy(text, msg, len);
  text[len] = '\0';
  if (sscanf(text, "%255s %255s %d %255s %d", name, old_host, &old_port, new_host, &new_port) != 5 || new_port < 1 ||
      new_port > 65535)
    return "a malformed +switch-master message";
  if (strcmp(name, s->name) == 0)
    steer(s, new_host, new_port, i);
  return NULL;
}

static const char *on_watch_push(relock__conn_t *c, const redisReply *r, void *arg) {
  relock__sentinel_t *s = arg;
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 || r->element[0]->type != REDIS_REPLY_STRING)
    return "an unexpected reply on the +switch-master subscription";
  const redisReply *kind = r->element[0];
  if (strcmp(kind->str, "subscribe") == 0)
    return NULL;
  if (strcmp(kind->str, "message") != 0 || r->element[2]->type != REDIS_REPLY_STRING)
    return "an unexpected reply on the +switch-master subscription";
  return on_switch(s, s->watched[watch_index(s, c)], r->element[2]->str, r->element[2]->len);
}

/* -- asking the sentinels -----------------------------------------------------*/

/* A string element of an array reply, or NULL. */
static const relock_reply_t *string_at(const relock_reply_t *r, size_t i) {
  if (r == NULL || r->type != RELOCK_REPLY_ARRAY || i >= r->elements)
    return NULL;
  const relock_reply_t *e = r->element[i];
  return e->type == RELOCK_REPLY_STRING || e->type == RELOCK_REPLY_STATUS ? e : NULL;
}

static int parse_port(const relock_reply_t *r) {
  if (r == NULL || r->len == 0 || r->len > 5)
    return -1;
  int port = 0;
  for (size_t i = 0; i < r->len; i++) {
    if (r->str[i] < '0' || r->str[i] > '9')
      return -1;
    port = port * 10 + (r->str[i] - '0');
  }
  return port >= 1 && port <= 65535 ? port : -1;
}

/* The value of field name in a flat field/value array (SENTINEL sentinels
 * and SENTINEL replicas give one per instance), or NULL. */
static const relock_reply_t *field(const relock_reply_t *fields, const char *name) {
  for (size_t j = 0; fields->type == RELOCK_REPLY_ARRAY && j + 1 < fields->elements; j += 2) {
    const relock_reply_t *k = string_at(fields, j);
    if (k != NULL && strcmp(k->str, name) == 0)
      return string_at(fields, j + 1);
  }
  return NULL;
}

/* The array of a succeeded SENTINEL sentinels / replicas, or NULL. */
static const relock_reply_t *instances(relock__sentinel_t *s, relock_future_t *f) {
  const relock_reply_t *r = relock_future_error(f) == 0 ? relock_future_ptr(f) : NULL;
  return r != NULL && r->type == RELOCK_REPLY_ARRAY && !s->closing ? r : NULL;
}

/* SENTINEL sentinels: the other sentinels join the list. */
static void on_sentinels(relock_future_t *f, void *arg) {
  relock__sentinel_t *s = arg;
  const relock_reply_t *r = instances(s, f);
  for (size_t i = 0; r != NULL && i < r->elements; i++) {
    const relock_reply_t *ip = field(r->element[i], "ip");
    if (ip != NULL)
      learn(s, ip->str, ip->len, parse_port(field(r->element[i], "port")));
  }
  relock_future_release(f);
}

/* SENTINEL replicas: how many replicas the sentinel sees up, for the
 * message of a synced acquisition that too few acknowledged (a
 * min-replicas-acked higher than that cannot be met). */
static void on_replicas(relock_future_t *f, void *arg) {
  relock__sentinel_t *s = arg;
  const relock_reply_t *r = instances(s, f);
  if (r != NULL) {
    int up = 0;
    for (size_t i = 0; i < r->elements; i++) {
      const relock_reply_t *flags = field(r->element[i], "flags");
      up += flags != NULL && strstr(flags->str, "down") == NULL && strstr(flags->str, "disconnected") == NULL;
    }
    s->replicas_up = up;
  }
  relock_future_release(f);
}

static relock_future_t *ask(relock__sentinel_t *s, const char *sub, int64_t timeout_ms) {
  relock_future_t *f = relock__future_new(s->exec);
  const char *argv[] = {"SENTINEL", sub, s->name};
  const size_t lens[] = {8, strlen(sub), strlen(s->name)};
  relock__request_t *req = f != NULL ? relock__request_argv(relock_future_retain(f), 3, argv, lens) : NULL;
  if (req == NULL) {
    if (f != NULL) {
      relock_future_release(f);
      relock_future_release(f);
    }
    return NULL;
  }
  relock__conn_send(&s->query, req, timeout_ms);
  return f;
}

static void round_end(relock__sentinel_t *s) {
  s->discovering = 0;
  if (s->has_master)
    return; /* the master found before stays: the sentinels may be the ones down */
  /* One reason for all (every sentinel refused the password, or knew no
   * such master) is the reason; mixed ones are as bad as their best. */
  int err = s->round_err != 0 ? s->round_err : s->answered ? RELOCK_ENOMASTER : RELOCK_ECONNREFUSED;
  char msg[1024];
  snprintf(msg, sizeof msg, "no sentinel gave the address of master \"%s\": tried %s", s->name, s->tried);
  for (int i = 0; i < s->nsteered; i++)
    relock__conn_no_target(s->steered[i], err, msg, s->all_definitive);
}

static void on_master_addr(relock_future_t *f, void *arg) {
  relock__sentinel_t *s = arg;
  if (f != s->pending) { /* given up on (the connection failed first), or closing */
    relock_future_release(f);
    return;
  }
  s->pending = NULL;
  int i = s->asked, err = relock_future_error(f);
  const relock_reply_t *r = err == 0 ? relock_future_ptr(f) : NULL;
  const relock_reply_t *host = string_at(r, 0);
  int port = parse_port(string_at(r, 1));
  if (err != 0) {
    /* The connection's own account is shorter than the request's "not sent: ...". */
    int conn_failed = err != RELOCK_ESERVER && err != RELOCK_ENOPERM && s->query.last_msg[0] != '\0';
    note(s, i, err, conn_failed ? s->query.last_msg : relock_future_message(f));
    if (err == RELOCK_ESERVER || err == RELOCK_ENOPERM || err == RELOCK_EAUTH)
      s->answered = 1; /* a sentinel that answers, but not with a master */
    else if (err == RELOCK_ETIMEDOUT)
      s->all_definitive = 0;
  } else if (r->type == RELOCK_REPLY_NIL || (r->type == RELOCK_REPLY_ARRAY && r->elements == 0)) {
    char what[300];
    snprintf(what, sizeof what, "knows no master \"%s\"", s->name);
    note(s, i, RELOCK_ENOMASTER, what);
    s->answered = 1;
  } else if (host == NULL || host->len == 0 || host->len >= sizeof s->master_host || port < 0) {
    note(s, i, RELOCK_EPROTO, "an unexpected answer to SENTINEL get-master-addr-by-name");
    s->answered = 1;
  } else {
    relock_future_release(f);
    f = NULL;
    /* Learn the other sentinels and the replicas (the replies come later;
     * nobody waits for them). */
    relock_future_t *peers = ask(s, "sentinels", s->settings->opt.command_timeout_ms);
    if (peers != NULL)
      relock_future_on_done(peers, on_sentinels, s);
    relock_future_t *replicas = ask(s, "replicas", s->settings->opt.command_timeout_ms);
    if (replicas != NULL)
      relock_future_on_done(replicas, on_replicas, s);
    char h[sizeof s->master_host];
    memcpy(h, host->str, host->len + 1);
    s->discovering = 0;
    steer(s, h, port, i);
    watch_start(s, i);
    return;
  }
  relock_future_release(f);
  ask_next(s);
}

static void ask_next(relock__sentinel_t *s) {
  if (s->closing)
    return;
  if (s->next == s->norder) {
    round_end(s);
    return;
  }
  int i = s->order[s->next++];
  s->asked = i;
  relock__conn_set_target(&s->query, s->known[i].host, s->known[i].port, 1);
  relock__conn_start(&s->query);
  const relock__settings_t *st = s->settings;
  s->pending = ask(s, "get-master-addr-by-name", st->opt.connect_timeout_ms + st->opt.command_timeout_ms);
  if (s->pending == NULL) {
    note(s, i, RELOCK_ENOMEM, "out of memory");
    s->all_definitive = 0;
    ask_next(s);
    return;
  }
  relock_future_on_done(s->pending, on_master_addr, s);
}

/* Asks the sentinel asked last first (its connection is open), then the
 * others in random order, and the suspect one last. */
static void round_start(relock__sentinel_t *s) {
  if (s->discovering || s->closing)
    return;
  s->discovering = 1;
  s->norder = s->next = 0;
  s->answered = 0;
  s->all_definitive = 1;
  s->tried[0] = '\0';
  int first = s->asked >= 0 && s->asked != s->suspect ? s->asked : -1;
  if (first >= 0)
    s->order[s->norder++] = first;
  for (int i = 0; i < s->nknown; i++)
    if (i != first && i != s->suspect)
      s->order[s->norder++] = i;
  int from = first >= 0 ? 1 : 0;
  for (int i = s->norder - 1; i > from; i--) { /* Fisher-Yates over the rest */
    int j = from + (int)(relock__random(s->rng) % (uint64_t)(i - from + 1));
    int t = s->order[i];
    s->order[i] = s->order[j];
    s->order[j] = t;
  }
  if (s->suspect >= 0 && s->suspect < s->nknown)
    s->order[s->norder++] = s->suspect;
  ask_next(s);
}

/* -- what the connections say -------------------------------------------------*/

static void on_relocate(relock__conn_t *c, relock__relocate_why why, void *arg) {
  relock__sentinel_t *s = arg;
  if (s->closing)
    return;
  if (c == &s->query) {
    if (!s->discovering || s->pending == NULL || why == RELOCK__RELOCATE_READONLY)
      return;
    /* This sentinel cannot be reached: the question waiting for it is given
     * up, and the next one asked. */
    relock_future_t *f = s->pending;
    s->pending = NULL;
    note(s, s->asked, c->last_err != 0 ? c->last_err : RELOCK_ECONNREFUSED,
         c->last_msg[0] != '\0' ? c->last_msg : "connection failed");
    if (!c->definitive)
      s->all_definitive = 0;
    relock_future_cancel(f);
    ask_next(s);
    return;
  }
  int w = watch_index(s, c);
  if (w >= 0) {
    if (why == RELOCK__RELOCATE_FAILED || why == RELOCK__RELOCATE_DOWN)
      watch_next(s, w, 0);
    return;
  }
  if (why == RELOCK__RELOCATE_NOT_MASTER)
    s->suspect = s->told_by; /* asked last from now on */
  round_start(s);
}

static void on_poll(relock__timer_t *t, int status, void *arg) {
  relock__sentinel_t *s = arg;
  if (status != 0 || s->closing)
    return;
  round_start(s);
  relock__timer_start(s->wheel, t, POLL_MS);
}

/* -- life -------------------------------------------------------------------*/

static void on_conn_closed(relock__conn_t *c, void *arg) {
  (void)c;
  relock__sentinel_t *s = arg;
  if (--s->open > 0)
    return;
  if (s->on_closed != NULL)
    s->on_closed(s, s->closed_arg);
  free(s);
}

relock__sentinel_t *relock__sentinel_new(relock__exec_t *exec, relock__wheel_t *wheel,
                                         const relock__settings_t *settings, relock__tls_t *tls, uint64_t *rng,
                                         relock__conn_t *const *steered, int nsteered,
                                         void (*on_closed)(relock__sentinel_t *s, void *arg), void *closed_arg) {
  relock__sentinel_t *s = calloc(1, sizeof(*s));
  if (s == NULL || nsteered > STEERED_MAX) {
    free(s);
    return NULL;
  }
  s->exec = exec;
  struct ev_loop *loop = exec->loop;
  s->wheel = wheel;
  s->settings = settings;
  s->name = settings->opt.sentinel_master;
  s->rng = rng;
  s->on_closed = on_closed;
  s->closed_arg = closed_arg;
  s->asked = s->suspect = s->replicas_up = -1;
  for (int i = 0; i < settings->nsentinels; i++)
    learn(s, settings->sentinels[i].host, strlen(settings->sentinels[i].host), settings->sentinels[i].port);

  relock__conn_locator_t locator = {.relocate = on_relocate, .arg = s};
  relock__conn_auth_t auth = {.username = settings->opt.sentinel_username,
                              .password = settings->opt.sentinel_password};
  relock__conn_hooks_t qhooks = {.on_closed = on_conn_closed, .arg = s};
  relock__conn_init(&s->query, loop, wheel, settings, "sentinel", &qhooks, rng);
  relock__conn_hooks_t whooks = {
      .on_ready = on_watch_ready, .on_push = on_watch_push, .on_closed = on_conn_closed, .arg = s};
  for (int w = 0; w < WATCH_MAX; w++) {
    relock__conn_init(&s->watch[w], loop, wheel, settings, "sentinel subscriber", &whooks, rng);
    s->watched[w] = -1;
  }
  relock__conn_t *own[1 + WATCH_MAX] = {&s->query};
  for (int w = 0; w < WATCH_MAX; w++)
    own[1 + w] = &s->watch[w];
  for (int i = 0; i < 1 + WATCH_MAX; i++) {
    own[i]->locator = locator;
    own[i]->auth = auth;
    own[i]->tls = tls;
  }
  for (int i = 0; i < nsteered; i++)
    s->steered[i] = steered[i];
  s->nsteered = nsteered;
  relock__timer_init(&s->poll, on_poll, s);
  return s;
}

void relock__sentinel_start(relock__sentinel_t *s) {
  relock__conn_locator_t locator = {.relocate = on_relocate, .arg = s};
  for (int i = 0; i < s->nsteered; i++) {
    s->steered[i]->locator = locator;
    s->steered[i]->auth.check_master = 1;
  }
  relock__timer_start(s->wheel, &s->poll, POLL_MS);
  round_start(s);
}

void relock__sentinel_close(relock__sentinel_t *s) {
  if (s->closing)
    return;
  s->closing = 1;
  s->open = 1 + WATCH_MAX;
  relock__timer_stop(&s->poll);
  for (int i = 0; i < s->nsteered; i++)
    if (s->steered[i]->locator.arg == s)
      s->steered[i]->locator.relocate = NULL;
  relock_future_t *f = s->pending;
  s->pending = NULL;
  if (f != NULL)
    relock_future_cancel(f);
  for (int w = 0; w < WATCH_MAX; w++)
    relock__conn_close(&s->watch[w]);
  relock__conn_close(&s->query);
}

int relock__sentinel_replicas_up(const relock__sentinel_t *s) { return s != NULL ? s->replicas_up : -1; }
