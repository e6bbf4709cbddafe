/* A Redis Cluster of private redis-servers for the tests (cluster.h).
 *
 * Everything is asked over the nodes' unix sockets with
 * relock_test_redis_cmd, never through the library under test: ROLE,
 * CLUSTER INFO / SLOTS / NODES, read with the small RESP reader below
 * (sentinel.c's tokenizer flattens arrays, and CLUSTER SLOTS needs their
 * shape). Nodes are told apart by the cluster ids CLUSTER MYID gave at
 * start: CLUSTER SLOTS and NODES name every node by id, and a node keeps
 * its id across restarts (nodes.conf). Waits poll every 10 ms up to a
 * deadline; nothing sleeps for a fixed time in the hope that something
 * happened. */
#define _GNU_SOURCE

#include "support/cluster.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#define SLOTS RELOCK_TEST_CLUSTER_SLOTS
#define MAX_NODES 16
#define MAX_ARGS 24          /* of ask() and order() */
#define MAX_OWN_ARGS 24      /* the redis-server arguments start_node adds */
#define MAX_EXTRA 64         /* and the caller's extra_args */
#define MAX_ID 41            /* 40 hex digits */
#define POLL_MS 10
#define REPLY_MAX 65536      /* CLUSTER SLOTS and NODES outgrow 4 KiB */
#define MIGRATE_BATCH 100    /* keys per GETKEYSINSLOT / MIGRATE */
#define MIGRATE_TIMEOUT "5000"
#define PORT_ATTEMPTS 5
#define LOG "# relock_test_cluster: "

struct relock_test_cluster {
  relock_test_cluster_opts_t o; /* defaults filled in; its strings are not kept */
  char password[128];
  int tls;
  char tls_client_cert[200], tls_client_key[200];
  int n, masters, replicas;
  relock_test_redis_t *node[MAX_NODES];
  char id[MAX_NODES][MAX_ID];
  char seeds[MAX_NODES * 24];
  /* set_down's state: the slot taken away (-1: none), its owner, and
   * whether every node dropped it or the owner alone. */
  int down_slot, down_owner, down_all;
  int64_t last_kill_ms; /* when kill_master last sent SIGKILL (now_ms) */
  int cand[MAX_NODES], n_cand; /* the killed master's replicas, one to be promoted */
  signed char view[2][SLOTS]; /* slot owners as two nodes see them */
  char reply[REPLY_MAX];      /* the last reply (ask) */
  char keys[REPLY_MAX];       /* GETKEYSINSLOT's reply, while MIGRATE runs */
};

/* -- time ------------------------------------------------------------------ */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* -- a RESP2 reader over one raw reply --------------------------------------- */

typedef struct {
  const char *p, *end;
  int bad; /* set at the first thing that is not what was asked for */
} resp_t;

static void resp_init(resp_t *r, const char *buf) {
  r->p = buf;
  r->end = buf + strlen(buf);
  r->bad = 0;
}

/* The line at r->p, "<type><text>\r\n": returns the type byte and moves
 * past it; 0 (and bad) at the end. */
static int resp_line(resp_t *r, const char **text, size_t *len) {
  const char *eol;
  int type;
  if (r->bad || r->p >= r->end || (eol = memmem(r->p, (size_t)(r->end - r->p), "\r\n", 2)) == NULL) {
    r->bad = 1;
    return 0;
  }
  type = *r->p;
  *text = r->p + 1;
  *len = (size_t)(eol - *text);
  r->p = eol + 2;
  return type;
}

/* An array's length; -1 for a nil array or anything else (then bad). */
static long resp_array(resp_t *r) {
  const char *s;
  size_t len;
  if (resp_line(r, &s, &len) != '*') {
    r->bad = 1;
    return -1;
  }
  return strtol(s, NULL, 10);
}

/* A bulk or simple string or an integer, in place (not NUL-terminated); a
 * nil is "". Returns 0, or -1 (and bad). */
static int resp_scalar(resp_t *r, const char **s, size_t *len) {
  long n;
  switch (resp_line(r, s, len)) {
  case '+': case ':':
    return 0;
  case '$':
    n = strtol(*s, NULL, 10);
    *s = r->p;
    *len = n < 0 ? 0 : (size_t)n;
    if (n < 0) return 0;
    if (r->end - r->p < n + 2) break;
    r->p += n + 2;
    return 0;
  default:
    break;
  }
  r->bad = 1;
  return -1;
}

/* The same copied into out as a C string, cut to fit. */
static void resp_string(resp_t *r, char *out, size_t cap) {
  const char *s = "";
  size_t len;
  if (resp_scalar(r, &s, &len) != 0) len = 0;
  if (len >= cap) len = cap - 1;
  memcpy(out, s, len);
  out[len] = '\0';
}

static long long resp_int(resp_t *r) {
  char buf[32];
  resp_string(r, buf, sizeof buf);
  return strtoll(buf, NULL, 10);
}

/* Skips one whole value, arrays with what they hold. */
static void resp_skip(resp_t *r, int depth) {
  const char *s;
  size_t len;
  if (r->bad || depth > 8 || r->p >= r->end) {
    r->bad = 1;
    return;
  }
  if (*r->p == '*') {
    long n = resp_array(r);
    for (long i = 0; i < n && !r->bad; i++) resp_skip(r, depth + 1);
  } else {
    resp_scalar(r, &s, &len);
  }
}

/* -- commands -------------------------------------------------------------- */

static const char *askv(relock_test_cluster_t *t, int i, int argc, const char *const *argv, const size_t *lens) {
  if (relock_test_redis_cmdv(t->node[i], t->reply, sizeof t->reply, argc, argv, lens) != 0) return NULL;
  return t->reply;
}

static int collect(const char **argv, const char *arg0, va_list ap) {
  int argc = 0;
  for (const char *a = arg0; a != NULL && argc < MAX_ARGS; a = va_arg(ap, const char *)) argv[argc++] = a;
  return argc;
}

/* Node i's raw reply to a command (in t->reply, until the next command),
 * an error reply too; NULL when no whole reply came. */
static const char *ask(relock_test_cluster_t *t, int i, const char *arg0, ...) {
  const char *argv[MAX_ARGS];
  int argc;
  va_list ap;
  va_start(ap, arg0);
  argc = collect(argv, arg0, ap);
  va_end(ap);
  return askv(t, i, argc, argv, NULL);
}

/* A command that must not fail: 0, or -1 with it and the reply on stderr. */
static int order(relock_test_cluster_t *t, int i, const char *arg0, ...) {
  const char *argv[MAX_ARGS], *reply;
  int argc;
  va_list ap;
  va_start(ap, arg0);
  argc = collect(argv, arg0, ap);
  va_end(ap);
  reply = askv(t, i, argc, argv, NULL);
  if (reply != NULL && reply[0] != '-') return 0;
  fprintf(stderr, LOG "node %d (port %d):", i, relock_test_redis_port(t->node[i]));
  for (int a = 0; a < argc; a++) fprintf(stderr, " %s", argv[a]);
  fprintf(stderr, ": %.300s\n", reply != NULL ? reply : "no reply");
  return -1;
}

static int running(const relock_test_cluster_t *t, int i) {
  return i >= 0 && i < t->n && relock_test_redis_running(t->node[i]);
}

/* The first running node, the one asked for the cluster's view; -1. */
static int first_running(const relock_test_cluster_t *t) {
  for (int i = 0; i < t->n; i++) {
    if (running(t, i)) return i;
  }
  return -1;
}

static int node_by_id(const relock_test_cluster_t *t, const char *id, size_t len) {
  for (int i = 0; i < t->n; i++) {
    if (strlen(t->id[i]) == len && memcmp(t->id[i], id, len) == 0) return i;
  }
  return -1;
}

/* -- what the nodes say ---------------------------------------------------- */

enum { ROLE_UNKNOWN, ROLE_MASTER, ROLE_REPLICA };

/* ROLE of node i; for a replica, its master's index (by port: ROLE gives
 * the replication address, the TLS port with TLS) and whether the link is
 * up. */
static int node_role(relock_test_cluster_t *t, int i, int *master, int *link_up) {
  const char *reply = ask(t, i, "ROLE", NULL);
  char role[16], state[32];
  resp_t r;
  *master = -1;
  *link_up = 0;
  if (reply == NULL || reply[0] != '*') return ROLE_UNKNOWN;
  resp_init(&r, reply);
  resp_array(&r);
  resp_string(&r, role, sizeof role);
  if (strcmp(role, "master") == 0) return r.bad ? ROLE_UNKNOWN : ROLE_MASTER;
  if (strcmp(role, "slave") != 0) return ROLE_UNKNOWN;
  resp_skip(&r, 0); /* host */
  *master = relock_test_cluster_node_by_port(t, (int)resp_int(&r));
  resp_string(&r, state, sizeof state);
  *link_up = strcmp(state, "connected") == 0;
  return r.bad ? ROLE_UNKNOWN : ROLE_REPLICA;
}

static int is_master(relock_test_cluster_t *t, int i) {
  int m, up;
  return running(t, i) && node_role(t, i, &m, &up) == ROLE_MASTER;
}

/* Node i's slot map from its CLUSTER SLOTS: map[slot] = the owner's index,
 * -1 unassigned. 0, or -1 (no answer, or an owner that is none of ours). */
static int read_slots(relock_test_cluster_t *t, int i, signed char *map) {
  const char *reply = ask(t, i, "CLUSTER", "SLOTS", NULL);
  resp_t r;
  long ranges;
  memset(map, -1, SLOTS);
  if (reply == NULL || reply[0] != '*') return -1;
  resp_init(&r, reply);
  ranges = resp_array(&r);
  for (long k = 0; k < ranges && !r.bad; k++) {
    /* [first, last, [ip, port, id, ...] (the master), replicas...] */
    long fields = resp_array(&r), node_fields;
    long long first = resp_int(&r), last = resp_int(&r);
    const char *id = "";
    size_t id_len = 0;
    int owner;
    node_fields = resp_array(&r);
    resp_skip(&r, 0);
    resp_skip(&r, 0);
    resp_scalar(&r, &id, &id_len);
    for (long f = 3; f < node_fields; f++) resp_skip(&r, 0);
    for (long f = 3; f < fields; f++) resp_skip(&r, 0);
    if (r.bad) return -1;
    owner = node_by_id(t, id, id_len);
    if (owner < 0 || first < 0 || last >= SLOTS || first > last) return -1;
    memset(map + first, owner, (size_t)(last - first + 1));
  }
  return r.bad ? -1 : 0;
}

static int state_ok(relock_test_cluster_t *t, int i) {
  const char *reply = ask(t, i, "CLUSTER", "INFO", NULL);
  return reply != NULL && strstr(reply, "cluster_state:ok") != NULL;
}

/* The running node that node i's CLUSTER NODES flags fail or fail?
 * ("fail?" holds "fail"), -1 if none; -2 when it did not answer. */
static int flags_a_running_node_failed(relock_test_cluster_t *t, int i) {
  const char *reply = ask(t, i, "CLUSTER", "NODES", NULL), *line, *nl;
  if (reply == NULL || reply[0] != '$' || (line = strstr(reply, "\r\n")) == NULL) return -2;
  /* One line per node: "<id> <ip:port@bus> <flags> <master> ...". */
  for (line += 2; line != NULL && *line != '\0'; line = (nl = strchr(line, '\n')) != NULL ? nl + 1 : NULL) {
    char id[MAX_ID], flags[128];
    int j;
    if (sscanf(line, "%40s %*s %127s", id, flags) != 2) continue;
    j = node_by_id(t, id, strlen(id));
    if (running(t, j) && strstr(flags, "fail") != NULL) return j;
  }
  return -1;
}

/* Whether node i's slot map has every slot served by a running node and,
 * when there is a reference map (the first node's), the same one. */
static int view_agrees(const relock_test_cluster_t *t, int i, const signed char *map, const signed char *ref,
                       char *why, size_t whylen) {
  for (int s = 0; s < SLOTS; s++) {
    if (ref != NULL && map[s] != ref[s]) {
      snprintf(why, whylen, "node %d says slot %d is node %d's, node %d says node %d's", i, s, map[s],
               first_running(t), ref[s]);
      return 0;
    }
    if (!running(t, map[s])) {
      snprintf(why, whylen, "node %d: slot %d is served by node %d, %s", i, s, map[s],
               map[s] < 0 ? "no node" : "not running");
      return 0;
    }
  }
  return 1;
}

/* One look at the whole cluster (see wait_ok); why not, into why. The
 * first running node's slot map stays in t->view[0]. */
static int ok_now(relock_test_cluster_t *t, char *why, size_t whylen) {
  int seen = 0;
  for (int i = 0; i < t->n; i++) {
    int m, up, failed;
    if (!running(t, i)) continue;
    if (!state_ok(t, i)) {
      snprintf(why, whylen, "node %d: cluster_state is not ok", i);
      return -1;
    }
    if (read_slots(t, i, t->view[seen]) != 0) {
      snprintf(why, whylen, "node %d: CLUSTER SLOTS unreadable", i);
      return -1;
    }
    if (!view_agrees(t, i, t->view[seen], seen ? t->view[0] : NULL, why, whylen)) return -1;
    seen = 1;
    if ((failed = flags_a_running_node_failed(t, i)) != -1) {
      snprintf(why, whylen, failed == -2 ? "node %d: CLUSTER NODES unreadable" : "node %d flags running node %d fail",
               i, failed);
      return -1;
    }
    if (node_role(t, i, &m, &up) == ROLE_REPLICA && !up) {
      snprintf(why, whylen, "replica %d: its link to master %d is not up", i, m);
      return -1;
    }
  }
  if (!seen) snprintf(why, whylen, "no node is running");
  return seen ? 0 : -1;
}

/* Each node's role and state, on stderr. */
static void report(relock_test_cluster_t *t, const char *what) {
  fprintf(stderr, LOG "%s; nodes:", what);
  for (int i = 0; i < t->n; i++) {
    int m, up, role;
    if (!running(t, i)) {
      fprintf(stderr, " %d=down", i);
      continue;
    }
    role = node_role(t, i, &m, &up);
    if (role == ROLE_MASTER)
      fprintf(stderr, " %d=master", i);
    else if (role == ROLE_REPLICA)
      fprintf(stderr, " %d=replica-of-%d%s", i, m, up ? "" : "(link down)");
    else
      fprintf(stderr, " %d=?", i);
    fprintf(stderr, "%s", state_ok(t, i) ? "" : "(cluster_state not ok)");
  }
  fprintf(stderr, "\n");
}

/* Polls ok_now and, when want_slot >= 0, that the agreed owner of want_slot
 * is want_owner; 0 or -1 with why on stderr. */
static int wait_whole(relock_test_cluster_t *t, int timeout_ms, int want_slot, int want_owner) {
  int64_t deadline = now_ms() + timeout_ms;
  char why[256] = "";
  for (;;) {
    if (ok_now(t, why, sizeof why) == 0) {
      if (want_slot < 0 || t->view[0][want_slot] == want_owner) return 0;
      snprintf(why, sizeof why, "slot %d is still node %d's, not node %d's", want_slot, t->view[0][want_slot],
               want_owner);
    }
    if (now_ms() >= deadline) {
      fprintf(stderr, LOG "not ok within %d ms: %s\n", timeout_ms, why);
      report(t, "not ok");
      return -1;
    }
    pause_ms(POLL_MS);
  }
}

int relock_test_cluster_wait_ok(relock_test_cluster_t *t, int timeout_ms) {
  return wait_whole(t, timeout_ms, -1, -1);
}

/* -- accessors and queries ------------------------------------------------- */

int relock_test_cluster_nodes(const relock_test_cluster_t *t) { return t->n; }

relock_test_redis_t *relock_test_cluster_node(relock_test_cluster_t *t, int i) {
  return i >= 0 && i < t->n ? t->node[i] : NULL;
}

int relock_test_cluster_node_by_port(const relock_test_cluster_t *t, int port) {
  for (int i = 0; i < t->n; i++) {
    if (relock_test_redis_port(t->node[i]) == port) return i;
  }
  return -1;
}

const char *relock_test_cluster_seeds(const relock_test_cluster_t *t) { return t->seeds; }

const char *relock_test_cluster_node_id(const relock_test_cluster_t *t, int i) {
  return i >= 0 && i < t->n ? t->id[i] : NULL;
}

int relock_test_cluster_keyslot(relock_test_cluster_t *t, const char *key, size_t len) {
  const char *argv[3] = {"CLUSTER", "KEYSLOT", key};
  size_t lens[3] = {7, 7, len};
  int i = first_running(t);
  const char *reply = i >= 0 ? askv(t, i, 3, argv, lens) : NULL;
  return reply != NULL && reply[0] == ':' ? atoi(reply + 1) : -1;
}

int relock_test_cluster_owner(relock_test_cluster_t *t, int slot) {
  if (slot < 0 || slot >= SLOTS) return -1;
  for (int i = 0; i < t->n; i++) {
    if (running(t, i) && read_slots(t, i, t->view[0]) == 0) return t->view[0][slot];
  }
  return -1;
}

int relock_test_cluster_replica_of(relock_test_cluster_t *t, int master) {
  int found = -1;
  for (int i = 0; i < t->n; i++) {
    int m, up;
    if (i == master || !running(t, i) || node_role(t, i, &m, &up) != ROLE_REPLICA || m != master) continue;
    if (up) return i;
    if (found < 0) found = i;
  }
  return found;
}

int relock_test_cluster_other_master(relock_test_cluster_t *t, int m) {
  for (int i = 0; i < t->n; i++) {
    if (i != m && is_master(t, i)) return i;
  }
  return -1;
}

/* -- failovers ------------------------------------------------------------- */

int relock_test_cluster_failover(relock_test_cluster_t *t, int master, int timeout_ms) {
  int64_t deadline = now_ms() + timeout_ms;
  int r = relock_test_cluster_replica_of(t, master), m, up;
  if (r < 0) {
    report(t, "failover: that master has no running replica");
    return -1;
  }
  if (order(t, r, "CLUSTER", "FAILOVER", NULL) != 0) return -1;
  while (node_role(t, r, &m, &up) != ROLE_MASTER) {
    if (now_ms() >= deadline) {
      report(t, "failover: the replica was not promoted");
      return -1;
    }
    pause_ms(POLL_MS);
  }
  return wait_whole(t, (int)(deadline - now_ms()), -1, -1) == 0 ? r : -1;
}

/* The first of nodes[] that ROLE calls a master, -1 if none. */
static int first_master(relock_test_cluster_t *t, const int *nodes, int n) {
  for (int k = 0; k < n; k++) {
    if (is_master(t, nodes[k])) return nodes[k];
  }
  return -1;
}

int relock_test_cluster_kill9_master(relock_test_cluster_t *t, int master) {
  t->n_cand = 0;
  if (!is_master(t, master)) {
    report(t, "kill_master: not a running master");
    return -1;
  }
  for (int i = 0; i < t->n; i++) {
    int m, up;
    if (running(t, i) && node_role(t, i, &m, &up) == ROLE_REPLICA && m == master) t->cand[t->n_cand++] = i;
  }
  if (t->n_cand == 0) {
    report(t, "kill_master: no replica could take over: nothing killed");
    return -1;
  }
  t->last_kill_ms = now_ms();
  relock_test_redis_kill9(t->node[master]);
  return 0;
}

int relock_test_cluster_await_promotion(relock_test_cluster_t *t, int timeout_ms, int *promotion_ms) {
  int promoted;
  int64_t deadline = now_ms() + timeout_ms;
  if (promotion_ms != NULL) *promotion_ms = -1;
  if (t->n_cand == 0) return -1;
  while ((promoted = first_master(t, t->cand, t->n_cand)) < 0) {
    if (now_ms() >= deadline) {
      report(t, "kill_master: no replica was promoted");
      return -1;
    }
    pause_ms(POLL_MS);
  }
  if (promotion_ms != NULL) *promotion_ms = (int)(now_ms() - t->last_kill_ms);
  return wait_whole(t, (int)(deadline - now_ms()), -1, -1) == 0 ? promoted : -1;
}

int relock_test_cluster_kill_master(relock_test_cluster_t *t, int master, int timeout_ms, int *promotion_ms) {
  if (promotion_ms != NULL) *promotion_ms = -1;
  if (relock_test_cluster_kill9_master(t, master) != 0) return -1;
  return relock_test_cluster_await_promotion(t, timeout_ms, promotion_ms);
}

int64_t relock_test_cluster_last_kill_ms(const relock_test_cluster_t *t) { return t->last_kill_ms; }

int relock_test_cluster_restart(relock_test_cluster_t *t, int node, int timeout_ms) {
  if (node < 0 || node >= t->n || relock_test_redis_restart(t->node[node]) != 0) return -1;
  return relock_test_cluster_wait_ok(t, timeout_ms);
}

/* -- resharding ------------------------------------------------------------ */

/* The node that node i's CLUSTER NODES says it migrates slot to: its own
 * line holds "[slot->-<id>]". -1 if it migrates nothing there. */
static int migrating_to(relock_test_cluster_t *t, int i, int slot) {
  const char *reply = ask(t, i, "CLUSTER", "NODES", NULL), *mark, *id;
  char needle[32];
  if (reply == NULL || reply[0] != '$') return -1;
  snprintf(needle, sizeof needle, "[%d->-", slot);
  if ((mark = strstr(reply, needle)) == NULL) return -1;
  id = mark + strlen(needle);
  return node_by_id(t, id, strcspn(id, "]"));
}

int relock_test_cluster_migrate_begin(relock_test_cluster_t *t, int slot, int to) {
  int from = relock_test_cluster_owner(t, slot);
  char s[16];
  if (from < 0 || !is_master(t, to) || from == to) {
    fprintf(stderr, LOG "migrate_begin: slot %d is node %d's, cannot move it to node %d\n", slot, from, to);
    return -1;
  }
  snprintf(s, sizeof s, "%d", slot);
  if (order(t, to, "CLUSTER", "SETSLOT", s, "IMPORTING", t->id[from], NULL) != 0) return -1;
  return order(t, from, "CLUSTER", "SETSLOT", s, "MIGRATING", t->id[to], NULL);
}

/* MIGRATEs one batch of keys (the raw GETKEYSINSLOT reply in t->keys) from
 * node `from` to node `to`. */
static int migrate_batch(relock_test_cluster_t *t, int from, int to, long n, resp_t *r) {
  const char *argv[12 + MIGRATE_BATCH];
  size_t lens[12 + MIGRATE_BATCH];
  char port[16];
  int argc = 0;
  const char *reply;
  snprintf(port, sizeof port, "%d", relock_test_redis_port(t->node[to]));
  argv[argc++] = "MIGRATE";
  argv[argc++] = relock_test_redis_host(t->node[to]);
  argv[argc++] = port;
  argv[argc++] = ""; /* with KEYS, the key argument stays empty */
  argv[argc++] = "0";
  argv[argc++] = MIGRATE_TIMEOUT;
  if (t->password[0] != '\0') {
    argv[argc++] = "AUTH";
    argv[argc++] = t->password;
  }
  argv[argc++] = "KEYS";
  for (int a = 0; a < argc; a++) lens[a] = strlen(argv[a]);
  for (long k = 0; k < n && k < MIGRATE_BATCH; k++, argc++) {
    if (resp_scalar(r, &argv[argc], &lens[argc]) != 0) return -1;
  }
  reply = askv(t, from, argc, argv, lens);
  if (reply != NULL && reply[0] == '+') return 0;
  fprintf(stderr, LOG "MIGRATE from node %d to node %d: %.300s\n", from, to, reply != NULL ? reply : "no reply");
  return -1;
}

/* Keys are read back from GETKEYSINSLOT's raw reply as C text: a key
 * holding a NUL byte would end it early. */
int relock_test_cluster_migrate_keys(relock_test_cluster_t *t, int slot) {
  int from = relock_test_cluster_owner(t, slot), to;
  char s[16], count[16];
  if (from < 0 || (to = migrating_to(t, from, slot)) < 0) {
    fprintf(stderr, LOG "migrate_keys: node %d migrates slot %d nowhere (migrate_begin first)\n", from, slot);
    return -1;
  }
  snprintf(s, sizeof s, "%d", slot);
  snprintf(count, sizeof count, "%d", MIGRATE_BATCH);
  for (;;) {
    const char *reply = ask(t, from, "CLUSTER", "GETKEYSINSLOT", s, count, NULL);
    resp_t r;
    long n;
    if (reply == NULL || reply[0] != '*') {
      fprintf(stderr, LOG "GETKEYSINSLOT %s on node %d: %.300s\n", s, from, reply != NULL ? reply : "no reply");
      return -1;
    }
    memcpy(t->keys, reply, strlen(reply) + 1); /* MIGRATE's reply reuses t->reply */
    resp_init(&r, t->keys);
    if ((n = resp_array(&r)) <= 0) return r.bad ? -1 : 0;
    if (migrate_batch(t, from, to, n, &r) != 0) return -1;
  }
}

int relock_test_cluster_migrate_end(relock_test_cluster_t *t, int slot, int to) {
  int from = relock_test_cluster_owner(t, slot);
  char s[16];
  if (from < 0 || !is_master(t, to)) {
    fprintf(stderr, LOG "migrate_end: slot %d is node %d's, cannot give it to node %d\n", slot, from, to);
    return -1;
  }
  snprintf(s, sizeof s, "%d", slot);
  /* The target first: it bumps its config epoch, so its claim wins
   * everywhere gossip takes it; then the source, which stops serving. */
  if (order(t, to, "CLUSTER", "SETSLOT", s, "NODE", t->id[to], NULL) != 0) return -1;
  if (from != to && order(t, from, "CLUSTER", "SETSLOT", s, "NODE", t->id[to], NULL) != 0) return -1;
  for (int i = 0; i < t->n; i++) {
    if (i != to && i != from && is_master(t, i) &&
        order(t, i, "CLUSTER", "SETSLOT", s, "NODE", t->id[to], NULL) != 0)
      return -1;
  }
  /* Replicas learn the new owner by gossip, and only from a claim with a
   * greater config epoch than the one they hold for the slot. Redis 6.0,
   * on a loaded machine, was seen to leave a replica with the previous
   * owner after two moves in a row (30 s, no change): past a few seconds,
   * CLUSTER BUMPEPOCH on the new owner gives its claim an epoch that wins
   * everywhere, as an operator would. */
  char why[256];
  for (int64_t nudge = now_ms() + 5000; now_ms() < nudge; pause_ms(POLL_MS))
    if (ok_now(t, why, sizeof why) == 0 && t->view[0][slot] == to) return 0;
  fprintf(stderr, LOG "slot %d to node %d: not agreed after 5 s (%s): CLUSTER BUMPEPOCH on node %d\n", slot, to, why,
          to);
  if (ask(t, to, "CLUSTER", "BUMPEPOCH", NULL) == NULL) return -1;
  return wait_whole(t, t->o.ready_timeout_ms, slot, to);
}

int relock_test_cluster_migrate_slot(relock_test_cluster_t *t, int slot, int to) {
  if (relock_test_cluster_migrate_begin(t, slot, to) != 0 || relock_test_cluster_migrate_keys(t, slot) != 0)
    return -1;
  return relock_test_cluster_migrate_end(t, slot, to);
}

/* -- CLUSTERDOWN ----------------------------------------------------------- */

/* Waits until every node concerned (one, or all running when node < 0)
 * reports cluster_state:fail. */
static int wait_down(relock_test_cluster_t *t, int node) {
  int64_t deadline = now_ms() + t->o.ready_timeout_ms;
  for (;;) {
    int up = -1;
    for (int i = 0; i < t->n && up < 0; i++) {
      if ((node < 0 || i == node) && running(t, i) && state_ok(t, i)) up = i;
    }
    if (up < 0) return 0;
    if (now_ms() >= deadline) {
      report(t, "set_down: a node still says cluster_state:ok");
      return -1;
    }
    pause_ms(POLL_MS);
  }
}

static int go_down(relock_test_cluster_t *t, int node) {
  int owner, slot = 0;
  char s[16];
  if (node >= 0) {
    if (!is_master(t, node) || read_slots(t, node, t->view[0]) != 0) {
      fprintf(stderr, LOG "set_down: node %d is no running master\n", node);
      return -1;
    }
    while (slot < SLOTS && t->view[0][slot] != node) slot++;
    if (slot == SLOTS) {
      fprintf(stderr, LOG "set_down: node %d serves no slot\n", node);
      return -1;
    }
    owner = node;
  } else if ((owner = relock_test_cluster_owner(t, slot)) < 0) {
    fprintf(stderr, LOG "set_down: slot 0 has no owner\n");
    return -1;
  }
  snprintf(s, sizeof s, "%d", slot);
  t->down_slot = slot;
  t->down_owner = owner;
  t->down_all = node < 0;
  /* The owner first: once it stops claiming the slot, nobody gossips it
   * back to the others. */
  if (order(t, owner, "CLUSTER", "DELSLOTS", s, NULL) != 0) return -1;
  for (int i = 0; i < t->n && node < 0; i++) {
    if (i != owner && running(t, i) && order(t, i, "CLUSTER", "DELSLOTS", s, NULL) != 0) return -1;
  }
  return wait_down(t, node);
}

static int come_back(relock_test_cluster_t *t) {
  char s[16];
  int owner = t->down_owner;
  if (t->down_slot < 0) return relock_test_cluster_wait_ok(t, t->o.ready_timeout_ms);
  snprintf(s, sizeof s, "%d", t->down_slot);
  t->down_slot = -1;
  if (order(t, owner, "CLUSTER", "ADDSLOTS", s, NULL) != 0) return -1;
  /* Gossip would spread the owner's claim too; this is at once. Masters
   * only: replicas refuse SETSLOT and follow their masters' gossip. */
  for (int i = 0; i < t->n && t->down_all; i++) {
    if (i != owner && is_master(t, i) && order(t, i, "CLUSTER", "SETSLOT", s, "NODE", t->id[owner], NULL) != 0)
      return -1;
  }
  return relock_test_cluster_wait_ok(t, t->o.ready_timeout_ms);
}

int relock_test_cluster_set_down(relock_test_cluster_t *t, int node, int on) {
  if (!on) return come_back(t);
  if (t->down_slot >= 0) {
    fprintf(stderr, LOG "set_down: already down (slot %d)\n", t->down_slot);
    return -1;
  }
  return go_down(t, node);
}

/* -- redis-cli ------------------------------------------------------------- */

static int is_executable(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* $REDIS_CLI; else the redis-cli beside a $REDIS_SERVER given as a path
 * (a custom build's pair); else "redis-cli" on $PATH. */
static const char *cli_path(char *buf, size_t cap) {
  const char *p = getenv("REDIS_CLI"), *server = relock_test_redis_server_path(), *slash;
  if (p != NULL && *p != '\0') return p;
  if ((slash = strrchr(server, '/')) != NULL) {
    snprintf(buf, cap, "%.*s/redis-cli", (int)(slash - server), server);
    if (is_executable(buf)) return buf;
  }
  return "redis-cli";
}

/* Runs argv (fork + exec; stdin /dev/null, stdout and stderr into out, cut
 * to fit) for at most timeout_ms. Its exit status, or -1 when it could not
 * run or ran out of time (then it is killed by its pid). */
static int run(const char *const argv[], char *out, size_t cap, int timeout_ms) {
  int pfd[2], status = 0;
  size_t len = 0;
  int64_t deadline = now_ms() + timeout_ms;
  pid_t pid, parent = getpid(); /* for the child's check */
  if (pipe2(pfd, O_CLOEXEC) != 0) return -1;
  if ((pid = fork()) < 0) {
    close(pfd[0]);
    close(pfd[1]);
    return -1;
  }
  if (pid == 0) {
    int null_fd = open("/dev/null", O_RDONLY);
#if defined(__linux__)
    /* Dies with the test, however it dies; the test may be gone already. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
#else
    (void)parent;
#endif
    if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(pfd[1], 1) < 0 || dup2(pfd[1], 2) < 0) _exit(127);
    execvp(argv[0], (char *const *)(uintptr_t)argv); /* changes nothing */
    _exit(127);
  }
  close(pfd[1]);
  for (;;) {
    struct pollfd p = {pfd[0], POLLIN, 0};
    char chunk[1024];
    ssize_t n;
    int left = (int)(deadline - now_ms());
    if (left <= 0) break;
    if (poll(&p, 1, left) < 0 && errno != EINTR) break;
    if ((n = read(pfd[0], chunk, sizeof chunk)) == 0) break;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      break;
    }
    if (len + 1 < cap) {
      size_t take = (size_t)n < cap - 1 - len ? (size_t)n : cap - 1 - len;
      memcpy(out + len, chunk, take);
      len += take;
    }
  }
  out[len] = '\0';
  close(pfd[0]);
  if (now_ms() >= deadline) {
    fprintf(stderr, LOG "%s ran out of %d ms: killed\n", argv[0], timeout_ms);
    kill(pid, SIGKILL);
  }
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFSIGNALED(status)) return -1;
  return WEXITSTATUS(status);
}

/* Drops the terminal colour sequences (ESC [ ... m) redis-cli's cluster
 * manager prints even into a pipe, so its output reads on stderr. */
static void strip_colours(char *s) {
  char *out = s;
  while (*s != '\0') {
    if (s[0] == '\033' && s[1] == '[') {
      s += 2 + strspn(s + 2, "0123456789;");
      if (*s == 'm') s++;
      continue;
    }
    *out++ = *s++;
  }
  *out = '\0';
}

/* redis-cli --cluster create with every node: the first `masters` become
 * masters (redis-cli picks masters in the order given when all share one
 * host), the rest their replicas. */
static int create(relock_test_cluster_t *t) {
  char cli[512], replicas[16], cacert[200], addr[MAX_NODES][24], out[16384];
  const char *argv[16 + MAX_NODES];
  int argc = 0, rc;
  argv[argc++] = cli_path(cli, sizeof cli);
  if (t->password[0] != '\0') {
    argv[argc++] = "-a";
    argv[argc++] = t->password;
    argv[argc++] = "--no-auth-warning";
  }
  if (t->tls) {
    snprintf(cacert, sizeof cacert, "%s/ca.crt", t->o.tls_dir);
    argv[argc++] = "--tls";
    argv[argc++] = "--cacert";
    argv[argc++] = cacert;
  }
  argv[argc++] = "--cluster";
  argv[argc++] = "create";
  for (int i = 0; i < t->n; i++) {
    snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d", relock_test_redis_port(t->node[i]));
    argv[argc++] = addr[i];
  }
  snprintf(replicas, sizeof replicas, "%d", t->replicas);
  argv[argc++] = "--cluster-replicas";
  argv[argc++] = replicas;
  argv[argc++] = "--cluster-yes";
  argv[argc] = NULL;
  rc = run(argv, out, sizeof out, t->o.ready_timeout_ms);
  if (rc == 0) return 0;
  strip_colours(out);
  fprintf(stderr, LOG "%s --cluster create failed (%s %d); it said:\n%s\n", argv[0], rc < 0 ? "rc" : "exit status",
          rc, out);
  return -1;
}

/* -- start and free -------------------------------------------------------- */

/* Whether 127.0.0.1:port can be bound now (no SO_REUSEADDR: a port in
 * TIME_WAIT counts as taken, to be safe). */
static int port_free(int port) {
  struct sockaddr_in sa;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;
  if (fd < 0) return 0;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons((uint16_t)port);
  ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
  close(fd);
  return ok;
}

/* A port whose cluster bus port, port + 10000, is free too. Both are taken
 * from 12000-31999, below Linux's ephemeral range (32768-60999 by
 * default): the kernel never hands them out to bind(0) or to outgoing
 * connections, so the servers of redis_server.c (which bind(0)) and the
 * tests' clients cannot take them between this check and the node's
 * bind. Another program doing the same can; start then fails and the
 * caller tries a new pair. */
static int pick_port_pair(void) {
  static unsigned seed;
  if (seed == 0) seed = (unsigned)getpid() ^ (unsigned)now_ms();
  for (int attempt = 0; attempt < 1000; attempt++) {
    int port = 12000 + (int)(rand_r(&seed) % 10000);
    if (port_free(port) && port_free(port + 10000)) return port;
  }
  return -1;
}

static relock_test_redis_t *start_node(relock_test_cluster_t *t) {
  char timeout[16];
  const char *args[MAX_OWN_ARGS + MAX_EXTRA + 1];
  int n = 0;
  snprintf(timeout, sizeof timeout, "%d", t->o.node_timeout_ms);
  args[n++] = "--cluster-enabled";
  args[n++] = "yes";
  args[n++] = "--cluster-config-file";
  args[n++] = "nodes.conf"; /* in the node's dir: restart finds it again */
  args[n++] = "--cluster-node-timeout";
  args[n++] = timeout;
  /* A full sync starts at once instead of after diskless sync's 5 s. */
  args[n++] = "--repl-diskless-sync-delay";
  args[n++] = "0";
  if (t->password[0] != '\0') {
    args[n++] = "--masterauth";
    args[n++] = t->password;
  }
  if (t->tls) {
    /* The bus always asks for a client certificate (tls-auth-clients
     * does not apply to it), and server.crt is good for serverAuth only.
     * Before 6.2 (no tls-client-cert-file) a node shows the bus its own
     * certificate: node.crt, good for both (given after server.crt's
     * options, it replaces them). */
    int own_client_cert = relock_test_redis_server_version() >= 60200;
    args[n++] = own_client_cert ? "--tls-client-cert-file" : "--tls-cert-file";
    args[n++] = t->tls_client_cert;
    args[n++] = own_client_cert ? "--tls-client-key-file" : "--tls-key-file";
    args[n++] = t->tls_client_key;
    args[n++] = "--tls-cluster";
    args[n++] = "yes";
    args[n++] = "--tls-replication";
    args[n++] = "yes";
  }
  for (int e = 0; t->o.extra_args != NULL && t->o.extra_args[e] != NULL; e++) {
    if (n == MAX_EXTRA + MAX_OWN_ARGS) {
      fprintf(stderr, LOG "more than %d extra_args\n", MAX_EXTRA);
      return NULL;
    }
    args[n++] = t->o.extra_args[e];
  }
  args[n] = NULL;
  for (int attempt = 1; attempt <= PORT_ATTEMPTS; attempt++) {
    relock_test_redis_t *r;
    relock_test_redis_opts_t o = {
        .password = t->password[0] != '\0' ? t->password : NULL,
        .tls_dir = t->o.tls_dir,
        .extra_args = args,
        .port = pick_port_pair(),
    };
    if (o.port < 0) {
      fprintf(stderr, LOG "no free port pair (port, port + 10000) found\n");
      return NULL;
    }
    if ((r = relock_test_redis_start(&o)) != NULL) return r;
    fprintf(stderr, LOG "node on port %d did not start (attempt %d of %d)\n", o.port, attempt, PORT_ATTEMPTS);
  }
  return NULL;
}

/* The nodes, their ids and the seeds string. */
static int start_nodes(relock_test_cluster_t *t) {
  size_t len = 0;
  for (int i = 0; i < t->n; i++) {
    const char *reply;
    if ((t->node[i] = start_node(t)) == NULL) return -1;
    reply = ask(t, i, "CLUSTER", "MYID", NULL);
    if (reply == NULL || sscanf(reply, "$40\r\n%40[0-9a-f]", t->id[i]) != 1) {
      fprintf(stderr, LOG "node %d: CLUSTER MYID: %.200s\n", i, reply != NULL ? reply : "no reply");
      return -1;
    }
    len += (size_t)snprintf(t->seeds + len, sizeof t->seeds - len, "%s127.0.0.1:%d", i > 0 ? "," : "",
                            relock_test_redis_port(t->node[i]));
  }
  return 0;
}

relock_test_cluster_t *relock_test_cluster_start(const relock_test_cluster_opts_t *opts) {
  static const relock_test_cluster_opts_t defaults;
  relock_test_cluster_t *t = calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  if (opts == NULL) opts = &defaults;
  t->o = *opts;
  t->down_slot = -1;
  t->masters = opts->masters > 0 ? opts->masters : 3;
  t->replicas = opts->replicas < 0 ? 0 : opts->replicas == 0 ? 1 : opts->replicas;
  t->n = t->masters * (1 + t->replicas);
  if (t->masters < 3 || t->n > MAX_NODES) {
    fprintf(stderr, LOG "3 masters at least (redis-cli's minimum), %d nodes at most\n", MAX_NODES);
    free(t);
    return NULL;
  }
  if (t->o.node_timeout_ms <= 0) t->o.node_timeout_ms = 1000;
  if (t->o.ready_timeout_ms <= 0) t->o.ready_timeout_ms = 30000;
  snprintf(t->password, sizeof t->password, "%s", opts->password != NULL ? opts->password : "");
  t->tls = opts->tls_dir != NULL;
  if (t->tls) {
    /* the bus's client certificate: node.crt before 6.2 (see start_node) */
    const char *cert = relock_test_redis_server_version() >= 60200 ? "client" : "node";
    snprintf(t->tls_client_cert, sizeof t->tls_client_cert, "%s/%s.crt", opts->tls_dir, cert);
    snprintf(t->tls_client_key, sizeof t->tls_client_key, "%s/%s.key", opts->tls_dir, cert);
  }
  if (start_nodes(t) != 0 || create(t) != 0 || relock_test_cluster_wait_ok(t, t->o.ready_timeout_ms) != 0) {
    fprintf(stderr, LOG "the cluster did not start\n");
    relock_test_cluster_free(t);
    return NULL;
  }
  /* tls_dir and extra_args were used by start and are copied by
   * redis_server.c for restarts; the caller's copies may go now. */
  t->o.tls_dir = NULL;
  t->o.extra_args = NULL;
  t->o.password = NULL;
  return t;
}

void relock_test_cluster_free(relock_test_cluster_t *t) {
  if (t == NULL) return;
  for (int i = 0; i < t->n; i++) relock_test_redis_free(t->node[i]);
  free(t);
}
