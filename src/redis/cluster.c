/* Redis Cluster: the slot map, the masters' connections, following slots
 * as they move (cluster.h). */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <relock/error.h>

#include "base/clock.h"
#include "future/promise.h"
#include "redis/cluster.h"
#include "redis/reply.h"
#include "redis/slot.h"
#include "stats/stats.h"

/* Loads of the map are at least this far apart: a failover sends every
 * connection's signs at once, and a node that stays unreachable is polled
 * at this pace until its slots have a new master. */
#define LOAD_INTERVAL_MS 100

/* A node known from the seeds, a map or a redirection. Nodes are never
 * forgotten while the client lives (requests point at their connections);
 * a node's connections open on first use. */
typedef struct node {
  relock__cluster_t *cl;
  char host[256];
  int port;
  char address[300];        /* "host:port", for messages */
  relock__conn_t cmd;       /* commands for the slots it serves */
  relock__pubsub_t *sub;    /* its sharded subscriber, on first use */
  int slots;                /* how many it serves in the current map */
  int loaded_slots;         /* ... in the last map loaded (statistics: tell_failovers) */
} node_t;

/* A connection the cluster steers from node to node (the "any" connection,
 * the classic subscriber's): which node it tries next, and what the ones
 * tried since it last worked said. */
typedef struct roamer {
  relock__cluster_t *cl;
  relock__conn_t *conn;
  int next;                 /* index into cl->nodes */
  int failed;               /* nodes tried in a row without success */
  int all_definitive;       /* and each of them refused at once */
  uint64_t connects;        /* conn->connects when last seen */
  char tried[768];          /* "host:port: why; ..." */
} roamer_t;

struct relock__cluster {
  relock__exec_t *exec;
  relock__wheel_t *wheel;
  const relock__settings_t *settings;
  relock__tls_t *tls;
  uint64_t *rng;
  relock__pubsub_t *classic;
  roamer_t any, classic_roamer;

  node_t **nodes;
  int nnodes, cap;
  uint16_t owner[RELOCK__SLOTS]; /* node index + 1; 0: no master known */
  int loaded;                    /* a map has been loaded */
  int sharded;                   /* sharded pub/sub: 1, 0, or -1 not known yet */
  int probing;                   /* PUBSUB SHARDNUMSUB in flight */
  relock_future_t **probe_waiters; /* what waits for its answer (relock__cluster_await_probe) */
  int nprobe_waiters, probe_waiters_cap;
  relock_future_t **map_waiters;  /* what waits for a first map (relock__cluster_masters) */
  int nmap_waiters, map_waiters_cap;
  int requests;                  /* loads and probes in flight: the object stays until they are over */
  int use_slots;                 /* CLUSTER SHARDS is unknown here: CLUSTER SLOTS */

  relock__timer_t load_timer;
  int loading;                   /* a load in flight */
  int again;                     /* another one wanted after it */
  int64_t interval_ms;           /* the least time between two loads now */
  int polls;                     /* loads in a row that found a master unreachable */
  uint64_t last_load_ns;
  relock__timer_t rehome_timer;  /* the map changed: move what waits */

  int closing;
  int open;                      /* node connections not yet down after close */
  int busy;                      /* inside a walk that runs callbacks: not freed yet */
  int freed;
  void (*on_closed)(relock__cluster_t *cl, void *arg);
  void *closed_arg;
};

static void schedule_load(relock__cluster_t *cl);
static void part_closed(relock__cluster_t *cl, int parts);

/* -- nodes ------------------------------------------------------------------*/

static void node_relocate(relock__conn_t *c, relock__relocate_why why, void *arg) {
  (void)c;
  (void)why;
  node_t *n = arg;
  schedule_load(n->cl); /* a master failing: is it still one? */
}

static void on_node_conn_closed(relock__conn_t *c, void *arg);

static node_t *find_node(relock__cluster_t *cl, const char *host, int port) {
  for (int i = 0; i < cl->nnodes; i++)
    if (cl->nodes[i]->port == port && strcmp(cl->nodes[i]->host, host) == 0)
      return cl->nodes[i];
  return NULL;
}

/* The node at host:port, made when new. NULL when out of memory or the
 * index would not fit the map. */
static node_t *node_at(relock__cluster_t *cl, const char *host, int port) {
  node_t *n = find_node(cl, host, port);
  if (n != NULL || cl->closing)
    return n;
  if (cl->nnodes == cl->cap) {
    int cap = cl->cap ? 2 * cl->cap : 16;
    node_t **nodes = cap < UINT16_MAX ? realloc(cl->nodes, (size_t)cap * sizeof(*nodes)) : NULL;
    if (nodes == NULL)
      return NULL;
    cl->nodes = nodes;
    cl->cap = cap;
  }
  if ((n = calloc(1, sizeof(*n))) == NULL)
    return NULL;
  n->cl = cl;
  snprintf(n->host, sizeof n->host, "%s", host);
  n->port = port;
  snprintf(n->address, sizeof n->address, strchr(host, ':') != NULL ? "[%s]:%d" : "%s:%d", host, port);
  relock__conn_hooks_t hooks = {.on_closed = on_node_conn_closed, .arg = n};
  relock__conn_init(&n->cmd, cl->exec->loop, cl->wheel, cl->settings, "command", &hooks, cl->rng);
  n->cmd.tls = cl->tls;
  n->cmd.many = 1; /* its slots may have moved: never final news alone */
  n->cmd.locator = (relock__conn_locator_t){node_relocate, n};
  relock__conn_set_target(&n->cmd, host, port, 0);
  cl->nodes[cl->nnodes++] = n;
  return n;
}

static node_t *owner_of(const relock__cluster_t *cl, int slot) {
  return slot >= 0 && slot < RELOCK__SLOTS && cl->owner[slot] != 0 ? cl->nodes[cl->owner[slot] - 1] : NULL;
}

static int node_index(const relock__cluster_t *cl, const node_t *n) {
  for (int i = 0; i < cl->nnodes; i++)
    if (cl->nodes[i] == n)
      return i;
  return -1;
}

/* -- the roaming connections ------------------------------------------------*/

static void roam_to(roamer_t *r, int now) {
  relock__cluster_t *cl = r->cl;
  node_t *n = cl->nodes[r->next % cl->nnodes];
  r->next = (r->next + 1) % cl->nnodes;
  relock__conn_set_target(r->conn, n->host, n->port, now);
}

/* The roamer's connection tells why it needs a node: the next one is
 * tried (at once, unless every node failed since the last success: then
 * after the connection's back-off, and what waits fails if every node
 * refused at once). */
static void roamer_relocate(relock__conn_t *c, relock__relocate_why why, void *arg) {
  roamer_t *r = arg;
  relock__cluster_t *cl = r->cl;
  if (cl->closing || cl->nnodes == 0)
    return;
  if (c->connects != r->connects) { /* it worked since: start afresh */
    r->connects = c->connects;
    r->failed = 0;
  }
  if (why == RELOCK__RELOCATE_DOWN || why == RELOCK__RELOCATE_READONLY)
    schedule_load(cl);
  if (why != RELOCK__RELOCATE_FAILED) {
    roam_to(r, 1);
    return;
  }
  if (r->failed == 0) {
    r->tried[0] = '\0';
    r->all_definitive = 1;
  }
  r->failed++;
  r->all_definitive &= c->definitive;
  size_t used = strlen(r->tried);
  snprintf(r->tried + used, sizeof r->tried - used, "%s%s: %s", used > 0 ? "; " : "", c->address, c->last_msg);
  if (r->failed >= cl->nnodes) {
    char msg[sizeof r->tried + 64];
    snprintf(msg, sizeof msg, "no node of the cluster answers (%s)", r->tried);
    r->failed = 0;
    roam_to(r, 0); /* after the back-off */
    /* Last: what waits fails, and a callback may close the client. */
    relock__conn_no_target(c, c->last_err, msg, r->all_definitive);
  } else {
    roam_to(r, 1);
  }
}

static void roamer_init(roamer_t *r, relock__cluster_t *cl, relock__conn_t *c) {
  r->cl = cl;
  r->conn = c;
  c->many = 1;
  /* The roamers go to the seeds, which the user named: each must prove to
   * be a cluster node before anything is sent to it. The masters' own
   * connections go where a cluster node's map or redirection said. */
  c->auth.check_cluster = 1;
  c->locator = (relock__conn_locator_t){roamer_relocate, r};
}

/* -- the map ----------------------------------------------------------------*/

static int str_is(const relock_reply_t *r, const char *s) {
  return (r->type == RELOCK_REPLY_STRING || r->type == RELOCK_REPLY_STATUS) && r->len == strlen(s) &&
         memcmp(r->str, s, r->len) == 0;
}

/* A node's host as a map gives it: empty or "?" means "the node you
 * asked" (an unknown endpoint). */
static void map_host(const relock_reply_t *h, const relock__conn_t *asked, char *out, size_t size) {
  if (h == NULL || h->type != RELOCK_REPLY_STRING || h->len == 0 || (h->len == 1 && h->str[0] == '?'))
    snprintf(out, size, "%s", asked->host);
  else
    snprintf(out, size, "%.*s", (int)h->len, h->str);
}

static int assign(relock__cluster_t *cl, uint16_t *owner, long long from, long long to, const relock_reply_t *host,
                  long long port) {
  if (from < 0 || to >= RELOCK__SLOTS || from > to || port <= 0 || port > 65535)
    return -1;
  char h[256];
  map_host(host, cl->any.conn, h, sizeof h);
  node_t *n = node_at(cl, h, (int)port);
  if (n == NULL)
    return -1;
  int idx = node_index(cl, n);
  for (long long s = from; s <= to; s++)
    owner[s] = (uint16_t)(idx + 1);
  return 0;
}

/* CLUSTER SLOTS: [[from, to, [host, port, id, ...], replicas...], ...] */
static int parse_slots(relock__cluster_t *cl, const relock_reply_t *reply, uint16_t *owner) {
  for (size_t i = 0; i < reply->elements; i++) {
    const relock_reply_t *range = reply->element[i];
    if (range->type != RELOCK_REPLY_ARRAY || range->elements < 3 || range->element[0]->type != RELOCK_REPLY_INTEGER ||
        range->element[1]->type != RELOCK_REPLY_INTEGER)
      return -1;
    const relock_reply_t *master = range->element[2];
    if (master->type != RELOCK_REPLY_ARRAY || master->elements < 2 ||
        master->element[1]->type != RELOCK_REPLY_INTEGER)
      return -1;
    if (assign(cl, owner, range->element[0]->integer, range->element[1]->integer, master->element[0],
               master->element[1]->integer) != 0)
      return -1;
  }
  return 0;
}

/* The value after key in a flat field/value array (RESP2's maps). */
static const relock_reply_t *field(const relock_reply_t *a, const char *key) {
  for (size_t i = 0; a->type == RELOCK_REPLY_ARRAY && i + 1 < a->elements; i += 2)
    if (str_is(a->element[i], key))
      return a->element[i + 1];
  return NULL;
}

/* The master among a shard's nodes: the one whose health is "online" if
 * there is one, else the first. After a failover Valkey 8 lists the failed
 * master in its old shard still as a master ("health fail"), before the
 * promoted replica: the first master alone would be the dead one, until
 * it came back. A shard whose only master has failed is still served by
 * nothing else until a replica takes over. */
static const relock_reply_t *shard_master(const relock_reply_t *nodes) {
  const relock_reply_t *first = NULL;
  for (size_t k = 0; k < nodes->elements; k++) {
    const relock_reply_t *role = field(nodes->element[k], "role");
    if (role == NULL || !str_is(role, "master"))
      continue;
    const relock_reply_t *health = field(nodes->element[k], "health");
    if (health != NULL && str_is(health, "online"))
      return nodes->element[k];
    if (first == NULL)
      first = nodes->element[k];
  }
  return first;
}

/* CLUSTER SHARDS: [{slots: [from, to, ...], nodes: [{ip, endpoint, port,
 * tls-port, role, health, ...}, ...]}, ...]. Over TLS, the node's TLS
 * port. */
static int parse_shards(relock__cluster_t *cl, const relock_reply_t *reply, uint16_t *owner) {
  for (size_t i = 0; i < reply->elements; i++) {
    const relock_reply_t *slots = field(reply->element[i], "slots");
    const relock_reply_t *nodes = field(reply->element[i], "nodes");
    if (slots == NULL || nodes == NULL || slots->type != RELOCK_REPLY_ARRAY || nodes->type != RELOCK_REPLY_ARRAY)
      return -1;
    const relock_reply_t *master = shard_master(nodes);
    if (master == NULL)
      continue; /* a shard without slots or master (a node being added) */
    const relock_reply_t *port = cl->tls != NULL ? field(master, "tls-port") : NULL;
    if (port == NULL)
      port = field(master, "port");
    const relock_reply_t *host = field(master, "endpoint");
    if (host == NULL || host->len == 0 || (host->len == 1 && host->str[0] == '?'))
      host = field(master, "ip");
    if (port == NULL || port->type != RELOCK_REPLY_INTEGER || slots->elements % 2 != 0)
      return -1;
    for (size_t k = 0; k < slots->elements; k += 2) {
      if (slots->element[k]->type != RELOCK_REPLY_INTEGER || slots->element[k + 1]->type != RELOCK_REPLY_INTEGER)
        return -1;
      if (assign(cl, owner, slots->element[k]->integer, slots->element[k + 1]->integer, host, port->integer) != 0)
        return -1;
    }
  }
  return 0;
}

static void rehome_soon(relock__cluster_t *cl) {
  if (!cl->closing && !relock__timer_pending(&cl->rehome_timer))
    relock__timer_start(cl->wheel, &cl->rehome_timer, 0);
}

static void count_slots(relock__cluster_t *cl) {
  for (int i = 0; i < cl->nnodes; i++)
    cl->nodes[i]->slots = 0;
  for (int s = 0; s < RELOCK__SLOTS; s++)
    if (cl->owner[s] != 0)
      cl->nodes[cl->owner[s] - 1]->slots++;
}

/* Statistics and events: a master serving slots in the last map loaded
 * that serves none in this one (owner), while a node that served none
 * serves exactly as many now, was failed over to it - a replica promoted,
 * after a crash or by CLUSTER FAILOVER. Slots moving between masters that
 * keep serving are a resharding, not counted. The counts are the loaded
 * maps' (n->loaded_slots), not cl->owner's, which MOVED answers change
 * slot by slot in between; a map with slots no master serves (one loaded
 * during the failover) is passed over, so that the old master is compared
 * with the next whole map, not with a gap. */
static void tell_failovers(relock__cluster_t *cl, const uint16_t *owner) {
  int *now = calloc((size_t)cl->nnodes + 1, sizeof(*now));
  if (now == NULL)
    return; /* not counted */
  int unowned = 0;
  for (int s = 0; s < RELOCK__SLOTS; s++)
    if (owner[s] != 0)
      now[owner[s] - 1]++;
    else
      unowned++;
  if (unowned > 0) { /* a map in the middle of a failover: the next whole one tells */
    free(now);
    return;
  }
  for (int i = 0; i < cl->nnodes; i++) {
    const node_t *n = cl->nodes[i];
    if (n->loaded_slots == 0 || now[i] != 0)
      continue;
    for (int j = 0; j < cl->nnodes; j++) {
      const node_t *to = cl->nodes[j];
      if (to->loaded_slots != 0 || now[j] != n->loaded_slots)
        continue;
      char msg[700];
      snprintf(msg, sizeof msg, "the %d slots of %s are served by %s now", n->loaded_slots, n->address, to->address);
      relock__stats_failover(cl->settings->stats, to->address, msg);
      break;
    }
  }
  for (int i = 0; i < cl->nnodes; i++)
    cl->nodes[i]->loaded_slots = now[i];
  free(now);
}

static void on_map_reply(relock_future_t *f, const relock_reply_t *reply, void *arg) {
  relock__cluster_t *cl = arg;
  if (reply->type == RELOCK_REPLY_ERROR) {
    relock__future_fail(f, relock__reply_error_code(reply->str, reply->len), "%.*s", (int)reply->len, reply->str);
    return;
  }
  uint16_t *owner = calloc(RELOCK__SLOTS, sizeof(*owner));
  if (owner == NULL) {
    relock__future_fail(f, RELOCK_ENOMEM, "out of memory loading the slot map");
    return;
  }
  int bad = reply->type != RELOCK_REPLY_ARRAY ||
            (cl->use_slots ? parse_slots(cl, reply, owner) : parse_shards(cl, reply, owner)) != 0;
  if (bad) {
    relock__future_fail(f, RELOCK_EPROTO, "an unexpected answer to CLUSTER %s", cl->use_slots ? "SLOTS" : "SHARDS");
  } else {
    tell_failovers(cl, owner);
    if (memcmp(owner, cl->owner, sizeof cl->owner) != 0) {
      memcpy(cl->owner, owner, sizeof cl->owner);
      count_slots(cl);
    }
    cl->loaded = 1;
    rehome_soon(cl); /* even unchanged: channels refused meanwhile subscribe again */
    relock__future_succeed(f);
  }
  free(owner);
}

/* A master that serves slots and cannot be reached: its slots are about to
 * move (or the cluster is down); the map is polled until they do. */
static int master_unreachable(const relock__cluster_t *cl) {
  for (int i = 0; i < cl->nnodes; i++) {
    const relock__conn_t *c = &cl->nodes[i]->cmd;
    if (cl->nodes[i]->slots > 0 && c->state != RELOCK__CONN_READY && c->last_err != 0)
      return 1;
  }
  return 0;
}

static void send_load(relock__cluster_t *cl);
static void wake_map_waiters(relock__cluster_t *cl, int err, const char *msg);

static void on_map_done(relock_future_t *f, void *arg) {
  relock__cluster_t *cl = arg;
  int err = relock_future_error(f);
  char msg[128];
  snprintf(msg, sizeof msg, "%s", err != 0 ? relock_future_message(f) : "");
  relock_future_release(f);
  cl->requests--;
  if (cl->closing) {
    part_closed(cl, 0);
    return;
  }
  if (err == RELOCK_ESERVER && !cl->use_slots && strstr(msg, "nknown subcommand") != NULL) {
    cl->use_slots = 1; /* Redis before 7.0 */
    send_load(cl);
    return;
  }
  cl->loading = 0;
  if (cl->nmap_waiters > 0) {
    /* Their callbacks may close the client: the object stays until they
     * are over. */
    cl->busy++;
    wake_map_waiters(cl, err, msg);
    cl->busy--;
    if (cl->closing) {
      part_closed(cl, 0);
      return;
    }
  }
  /* Failed loads (no node answers, a server that is no cluster node) back
   * off to 6.4 s apart; a master that stays unreachable is polled for at
   * 100 ms for 5 s (a failover takes about two node timeouts), then each
   * second (a master without a replica stays down). */
  int unreachable = err == 0 && master_unreachable(cl);
  cl->polls = unreachable ? cl->polls + 1 : 0;
  if (err != 0)
    cl->interval_ms = cl->interval_ms < 6400 ? 2 * cl->interval_ms : 6400;
  else
    cl->interval_ms = cl->polls > 50 ? 1000 : LOAD_INTERVAL_MS;
  if (err != 0 || cl->again || unreachable) {
    cl->again = 0;
    schedule_load(cl);
  }
}

static void on_probe_reply(relock_future_t *f, const relock_reply_t *reply, void *arg) {
  relock__cluster_t *cl = arg;
  /* Any answer but an error means the command exists (Redis 7.0+). */
  cl->sharded = reply->type == RELOCK_REPLY_ERROR ? 0 : 1;
  relock__future_succeed(f);
}

/* Completes what waits for the probe: succeeded once the kind of channels
 * is known, else failed with err and msg. Their callbacks may wait again
 * (a new probe, a new list). */
static void wake_probe_waiters(relock__cluster_t *cl, int err, const char *msg) {
  relock_future_t **w = cl->probe_waiters;
  int n = cl->nprobe_waiters;
  cl->probe_waiters = NULL;
  cl->nprobe_waiters = cl->probe_waiters_cap = 0;
  for (int i = 0; i < n; i++) {
    if (cl->sharded >= 0)
      relock__future_succeed(w[i]);
    else
      relock__future_fail(w[i], err, "the cluster has not said whether it has sharded pub/sub: %s", msg);
    relock_future_release(w[i]);
  }
  free(w);
}

static void on_probe_done(relock_future_t *f, void *arg) {
  relock__cluster_t *cl = arg;
  int err = relock_future_error(f);
  char msg[256];
  snprintf(msg, sizeof msg, "%s", err != 0 ? relock_future_message(f) : "");
  relock_future_release(f);
  cl->probing = 0;
  cl->requests--;
  if (cl->closing) {
    part_closed(cl, 0);
    return;
  }
  wake_probe_waiters(cl, err != 0 ? err : RELOCK_EPROTO, err != 0 ? msg : "no answer to PUBSUB SHARDNUMSUB");
}

/* Sends argv on the "any" connection, answered to on_reply; on_done
 * counts it over (cl->requests). -1 when out of memory before anything
 * was counted (on_done does not run). */
static int send_any(relock__cluster_t *cl, int argc, const char *const *argv, relock__reply_fn on_reply,
                    relock_future_cb on_done) {
  size_t lens[4];
  for (int i = 0; i < argc; i++)
    lens[i] = strlen(argv[i]);
  relock_future_t *f = relock__future_new(cl->exec);
  if (f == NULL)
    return -1;
  cl->requests++;
  relock__request_t *req = relock__request_argv(relock_future_retain(f), argc, argv, lens);
  if (req == NULL) {
    relock_future_release(f);
    on_done(f, cl); /* fails as not done: tried again later */
    return 0;
  }
  req->on_reply = on_reply;
  req->arg = cl;
  relock_future_on_done(f, on_done, cl);
  relock__conn_send(cl->any.conn, req, cl->settings->opt.command_timeout_ms);
  return 0;
}

static void send_load(relock__cluster_t *cl) {
  static const char *const shards[] = {"CLUSTER", "SHARDS"};
  static const char *const slots[] = {"CLUSTER", "SLOTS"};
  cl->loading = 1;
  cl->last_load_ns = relock__now_ns();
  if (send_any(cl, 2, cl->use_slots ? slots : shards, on_map_reply, on_map_done) != 0)
    cl->loading = 0; /* out of memory: the next sign of change loads again */
}

/* Asks whether the cluster has sharded pub/sub, unless that is known or
 * being asked. */
static void probe(relock__cluster_t *cl) {
  static const char *const argv[] = {"PUBSUB", "SHARDNUMSUB"};
  if (cl->sharded >= 0 || cl->probing || cl->closing)
    return;
  cl->probing = 1;
  if (send_any(cl, 2, argv, on_probe_reply, on_probe_done) != 0) {
    cl->probing = 0;
    wake_probe_waiters(cl, RELOCK_ENOMEM, "out of memory");
  }
}

static void load(relock__cluster_t *cl) {
  probe(cl); /* first: a lock answered after the map knows its channel's kind */
  send_load(cl);
}

static void on_load_timer(relock__timer_t *t, int status, void *arg) {
  (void)t;
  relock__cluster_t *cl = arg;
  if (status == 0 && !cl->closing && !cl->loading)
    load(cl);
}

static void schedule_load(relock__cluster_t *cl) {
  if (cl->closing)
    return;
  if (cl->loading) {
    cl->again = 1;
    return;
  }
  if (relock__timer_pending(&cl->load_timer))
    return;
  int64_t since = (int64_t)((relock__now_ns() - cl->last_load_ns) / 1000000);
  relock__timer_start(cl->wheel, &cl->load_timer, since >= cl->interval_ms ? 0 : cl->interval_ms - since);
}

/* -- following the slots ----------------------------------------------------*/

static relock__pubsub_t *node_subscriber(node_t *n);

static relock__pubsub_t *channel_home(const char *name, size_t len, void *arg) {
  relock__cluster_t *cl = arg;
  if (cl->sharded != 1)
    return cl->classic;
  node_t *n = owner_of(cl, relock__key_slot(name, len));
  return n != NULL ? node_subscriber(n) : NULL;
}

/* The map changed (or a subscription was refused): requests waiting for a
 * node that is down and serves nothing now go elsewhere, and every lock
 * channel to its slot's subscriber. */
static void on_rehome(relock__timer_t *t, int status, void *arg) {
  (void)t;
  relock__cluster_t *cl = arg;
  if (status != 0 || cl->closing)
    return;
  /* The failed requests' callbacks, and the listeners', may close the
   * client: the object stays until the walk is over. */
  cl->busy++;
  for (int i = 0; i < cl->nnodes && !cl->closing; i++) {
    node_t *n = cl->nodes[i];
    if (n->slots == 0 && n->cmd.state != RELOCK__CONN_READY && n->cmd.nwaiting > 0) {
      char why[400];
      snprintf(why, sizeof why, "%s serves no slot any more", n->address);
      relock__conn_fail_waiting(&n->cmd, RELOCK_ECONNLOST, why);
    }
  }
  if (!cl->closing)
    relock__pubsub_rehome(cl->classic, channel_home, cl);
  for (int i = 0; i < cl->nnodes && !cl->closing; i++)
    if (cl->nodes[i]->sub != NULL)
      relock__pubsub_rehome(cl->nodes[i]->sub, channel_home, cl);
  cl->busy--;
  if (cl->closing)
    part_closed(cl, 0);
}

/* Parses "MOVED 3999 host:port" / "ASK 3999 host:port" (host may be empty:
 * the node that answered). 0, or -1 when malformed. */
static int parse_redirect(const char *err, size_t len, const relock__conn_t *from, int *slot, char *host,
                          size_t hostsize, int *port) {
  char text[320];
  if (len >= sizeof text)
    return -1;
  memcpy(text, err, len);
  text[len] = '\0';
  const char *sp = strchr(text, ' ');
  char *end;
  long s = sp != NULL ? strtol(sp + 1, &end, 10) : -1;
  if (sp == NULL || s < 0 || s >= RELOCK__SLOTS || *end != ' ')
    return -1;
  const char *hp = end + 1;
  const char *colon = strrchr(hp, ':');
  long p = colon != NULL ? strtol(colon + 1, &end, 10) : 0;
  if (colon == NULL || p <= 0 || p > 65535 || *end != '\0')
    return -1;
  size_t hlen = (size_t)(colon - hp);
  if (hlen > 1 && hp[0] == '[' && hp[hlen - 1] == ']') { /* an IPv6 address */
    hp++;
    hlen -= 2;
  }
  if (hlen == 0)
    snprintf(host, hostsize, "%s", from != NULL ? from->host : "");
  else
    snprintf(host, hostsize, "%.*s", (int)hlen, hp);
  *slot = (int)s;
  *port = (int)p;
  return 0;
}

int relock__cluster_redirect(relock__cluster_t *cl, const relock__conn_t *from, const char *err, size_t len,
                             relock__conn_t **to) {
  int ask = len > 4 && strncmp(err, "ASK ", 4) == 0;
  if (!ask && !(len > 6 && strncmp(err, "MOVED ", 6) == 0))
    return 0;
  char host[256];
  int slot, port;
  if (parse_redirect(err, len, from, &slot, host, sizeof host, &port) != 0)
    return -1;
  node_t *n = node_at(cl, host, port);
  if (n == NULL)
    return -1;
  *to = &n->cmd;
  if (ask)
    return 2;
  node_t *was = owner_of(cl, slot);
  if (was != n) {
    if (was != NULL)
      was->slots--;
    n->slots++;
    cl->owner[slot] = (uint16_t)(node_index(cl, n) + 1);
    rehome_soon(cl);
  }
  schedule_load(cl); /* a slot seldom moves alone */
  return 1;
}

/* -- sharded subscribers ----------------------------------------------------*/

static void on_sub_redirect(relock__pubsub_t *ps, const char *err, size_t len, void *arg) {
  node_t *n = arg;
  relock__conn_t *to;
  if (relock__cluster_redirect(n->cl, &ps->conn, err, len, &to) != 1)
    schedule_load(n->cl); /* SUNSUBSCRIBE, CLUSTERDOWN, ASK: the next map says where */
  rehome_soon(n->cl);
}

static void on_sub_closed(relock__pubsub_t *ps, void *arg);

static relock__pubsub_t *node_subscriber(node_t *n) {
  relock__cluster_t *cl = n->cl;
  if (n->sub != NULL || cl->closing)
    return n->sub;
  relock__pubsub_t *ps = malloc(sizeof(*ps));
  if (ps == NULL || relock__pubsub_init(ps, cl->exec, cl->wheel, cl->settings, cl->rng, on_sub_closed, n) != 0) {
    free(ps);
    return NULL;
  }
  ps->sharded = 1;
  ps->on_redirect = on_sub_redirect;
  ps->redirect_arg = n;
  ps->conn.tls = cl->tls;
  ps->conn.many = 1;
  ps->conn.locator = (relock__conn_locator_t){node_relocate, n};
  relock__conn_set_target(&ps->conn, n->host, n->port, 0);
  n->sub = ps;
  return ps;
}

static void on_classic_redirect(relock__pubsub_t *ps, const char *err, size_t len, void *arg) {
  (void)ps;
  (void)err;
  (void)len;
  relock__cluster_t *cl = arg;
  schedule_load(cl); /* CLUSTERDOWN on a classic SUBSCRIBE: tried again after the next load */
}

/* -- the object -------------------------------------------------------------*/

relock__cluster_t *relock__cluster_new(relock__exec_t *exec, relock__wheel_t *wheel,
                                       const relock__settings_t *settings, relock__tls_t *tls, uint64_t *rng,
                                       relock__conn_t *any, relock__pubsub_t *classic,
                                       void (*on_closed)(relock__cluster_t *cl, void *arg), void *closed_arg) {
  relock__cluster_t *cl = calloc(1, sizeof(*cl));
  if (cl == NULL)
    return NULL;
  cl->exec = exec;
  cl->wheel = wheel;
  cl->settings = settings;
  cl->tls = tls;
  cl->rng = rng;
  cl->classic = classic;
  cl->sharded = -1;
  cl->interval_ms = LOAD_INTERVAL_MS;
  cl->on_closed = on_closed;
  cl->closed_arg = closed_arg;
  relock__timer_init(&cl->load_timer, on_load_timer, cl);
  relock__timer_init(&cl->rehome_timer, on_rehome, cl);
  cl->any.conn = any;
  cl->classic_roamer.conn = &classic->conn;
  for (int i = 0; i < settings->ncluster_nodes; i++) {
    if (node_at(cl, settings->cluster_nodes[i].host, settings->cluster_nodes[i].port) == NULL) {
      relock__cluster_close(cl); /* nothing started: gone at once */
      return NULL;
    }
  }
  return cl;
}

void relock__cluster_start(relock__cluster_t *cl) {
  roamer_init(&cl->any, cl, cl->any.conn);
  roamer_init(&cl->classic_roamer, cl, cl->classic_roamer.conn);
  cl->classic->on_redirect = on_classic_redirect;
  cl->classic->redirect_arg = cl;
  /* The subscriber starts on another node than the commands, when there
   * is one: both are busy connections. */
  cl->classic_roamer.next = cl->nnodes > 1 ? 1 : 0;
  load(cl);
}

relock__conn_t *relock__cluster_conn(relock__cluster_t *cl, int slot) {
  node_t *n = owner_of(cl, slot);
  return n != NULL ? &n->cmd : cl->any.conn;
}

int relock__cluster_sharded(const relock__cluster_t *cl) { return cl->sharded == 1; }

int relock__cluster_probed(const relock__cluster_t *cl) { return cl->sharded >= 0; }

relock_future_t *relock__cluster_await_probe(relock__cluster_t *cl) {
  if (cl->closing)
    return relock__future_failed(cl->exec, RELOCK_ECLOSED, "client closed");
  relock_future_t *f = relock__future_new(cl->exec);
  if (f == NULL)
    return NULL;
  if (cl->sharded >= 0) {
    relock__future_succeed(f);
    return f;
  }
  if (cl->nprobe_waiters == cl->probe_waiters_cap) {
    int cap = cl->probe_waiters_cap ? 2 * cl->probe_waiters_cap : 8;
    relock_future_t **w = realloc(cl->probe_waiters, (size_t)cap * sizeof(*w));
    if (w == NULL) {
      relock_future_release(f);
      return NULL;
    }
    cl->probe_waiters = w;
    cl->probe_waiters_cap = cap;
  }
  /* A cancelled waiter stays listed: completing it then changes nothing. */
  cl->probe_waiters[cl->nprobe_waiters++] = relock_future_retain(f);
  probe(cl);
  return f;
}

/* The masters of the current map, in the order of their first slot: an
 * array reply of their addresses. */
static void answer_masters(relock__cluster_t *cl, relock_future_t *f) {
  relock_reply_t *items = calloc((size_t)cl->nnodes + 1, sizeof(*items));
  relock_reply_t **ptrs = calloc((size_t)cl->nnodes + 1, sizeof(*ptrs));
  char *listed = calloc((size_t)cl->nnodes + 1, 1);
  relock_reply_t *copy = NULL;
  if (items != NULL && ptrs != NULL && listed != NULL) {
    size_t n = 0;
    for (int s = 0; s < RELOCK__SLOTS; s++) {
      int i = cl->owner[s] - 1;
      if (i < 0 || listed[i])
        continue;
      listed[i] = 1;
      items[n] = (relock_reply_t){.type = RELOCK_REPLY_STRING, .str = cl->nodes[i]->address,
                                  .len = strlen(cl->nodes[i]->address)};
      ptrs[n] = &items[n];
      n++;
    }
    relock_reply_t array = {.type = RELOCK_REPLY_ARRAY, .element = n > 0 ? ptrs : NULL, .elements = n};
    copy = relock__reply_dup(&array);
  }
  free(items);
  free(ptrs);
  free(listed);
  if (copy == NULL)
    relock__future_fail(f, RELOCK_ENOMEM, "out of memory listing the masters");
  else if (!relock__future_succeed_ptr(f, copy, relock__reply_free))
    relock__reply_free(copy);
}

/* A load is over: what waits for a map gets the masters, or the load's
 * error (err, msg). */
static void wake_map_waiters(relock__cluster_t *cl, int err, const char *msg) {
  relock_future_t **w = cl->map_waiters;
  int n = cl->nmap_waiters;
  cl->map_waiters = NULL;
  cl->nmap_waiters = cl->map_waiters_cap = 0;
  for (int i = 0; i < n; i++) {
    if (err == 0 && cl->loaded)
      answer_masters(cl, w[i]);
    else
      relock__future_fail(w[i], err != 0 ? err : RELOCK_EPROTO, "the cluster's slot map could not be loaded: %s",
                          msg);
    relock_future_release(w[i]);
  }
  free(w);
}

relock_future_t *relock__cluster_masters(relock__cluster_t *cl) {
  if (cl->closing)
    return relock__future_failed(cl->exec, RELOCK_ECLOSED, "client closed");
  relock_future_t *f = relock__future_new(cl->exec);
  if (f == NULL)
    return NULL;
  if (cl->loaded) {
    answer_masters(cl, f);
    return f;
  }
  if (cl->nmap_waiters == cl->map_waiters_cap) {
    int cap = cl->map_waiters_cap ? 2 * cl->map_waiters_cap : 8;
    relock_future_t **w = realloc(cl->map_waiters, (size_t)cap * sizeof(*w));
    if (w == NULL) {
      relock_future_release(f);
      return NULL;
    }
    cl->map_waiters = w;
    cl->map_waiters_cap = cap;
  }
  /* A cancelled waiter stays listed: completing it then changes nothing. */
  cl->map_waiters[cl->nmap_waiters++] = relock_future_retain(f);
  schedule_load(cl); /* one is in flight or due already, unless none was wanted */
  return f;
}

relock__conn_t *relock__cluster_node_conn(relock__cluster_t *cl, const char *address) {
  for (int i = 0; i < cl->nnodes && !cl->closing; i++)
    if (strcmp(cl->nodes[i]->address, address) == 0)
      return &cl->nodes[i]->cmd;
  return NULL;
}

relock__pubsub_t *relock__cluster_subscriber(relock__cluster_t *cl, int slot) {
  node_t *n = cl->sharded == 1 ? owner_of(cl, slot) : NULL;
  return n != NULL ? node_subscriber(n) : cl->classic;
}

/* One part fewer is open (parts 1, or 0 to look again): the object goes
 * when none is and no walk is in progress. */
static void part_closed(relock__cluster_t *cl, int parts) {
  cl->open -= parts;
  if (cl->open > 0 || cl->busy > 0 || cl->requests > 0 || cl->freed)
    return;
  cl->freed = 1;
  for (int i = 0; i < cl->nnodes; i++) {
    free(cl->nodes[i]->sub);
    free(cl->nodes[i]);
  }
  free(cl->nodes);
  void (*done)(relock__cluster_t *, void *) = cl->on_closed;
  void *arg = cl->closed_arg;
  free(cl);
  if (done != NULL)
    done(NULL, arg);
}

static void on_node_conn_closed(relock__conn_t *c, void *arg) {
  (void)c;
  part_closed(((node_t *)arg)->cl, 1);
}

static void on_sub_closed(relock__pubsub_t *ps, void *arg) {
  (void)ps;
  part_closed(((node_t *)arg)->cl, 1);
}

void relock__cluster_close(relock__cluster_t *cl) {
  if (cl->closing)
    return;
  cl->closing = 1;
  relock__timer_stop(&cl->load_timer);
  relock__timer_stop(&cl->rehome_timer);
  wake_probe_waiters(cl, RELOCK_ECLOSED, "client closed");
  wake_map_waiters(cl, RELOCK_ECLOSED, "client closed");
  cl->open = 1; /* held until every close below has started */
  int n = cl->nnodes;
  for (int i = 0; i < n; i++)
    cl->open += 1 + (cl->nodes[i]->sub != NULL);
  for (int i = 0; i < n; i++) {
    node_t *node = cl->nodes[i];
    if (node->sub != NULL)
      relock__pubsub_close(node->sub);
    relock__conn_close(&node->cmd);
  }
  part_closed(cl, 1);
}
