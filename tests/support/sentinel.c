/* A Sentinel topology of private redis-servers for the tests (sentinel.h).
 *
 * Everything is asked over the servers' unix sockets with
 * relock_test_redis_cmd, never through the library under test: ROLE on the
 * data nodes, SENTINEL GET-MASTER-ADDR-BY-NAME / MASTER / REPLICAS on the
 * sentinels. Waits poll every 10 ms up to a deadline; nothing sleeps for a
 * fixed time in the hope that something happened meanwhile. */
#define _GNU_SOURCE

#include "support/sentinel.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_NODES 8
#define MAX_SENTINELS 8
#define MAX_TOKENS 512
#define POLL_MS 10

struct relock_test_sentinel {
  relock_test_sentinel_opts_t o;
  char name[64];
  char password[128], sentinel_password[128], tls_dir[160];
  int n_nodes, n_sentinels;
  relock_test_redis_t *node[MAX_NODES];
  relock_test_redis_t *sentinel[MAX_SENTINELS];
  char addrs[MAX_SENTINELS * 24];
  int master; /* as last agreed; -1 */
  int64_t last_start_ms;
};

/* -- time ------------------------------------------------------------------ */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(int ms) {
  struct timespec ts = {0, (long)ms * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* -- replies --------------------------------------------------------------- */

/* The scalar values of a raw RESP reply, in order, arrays flattened (their
 * headers dropped): bulk and simple strings and integers, each copied into
 * store as a NUL-terminated string. A nil is "". Returns how many, or -1
 * when the reply is an error or malformed. */
typedef struct {
  int n;
  char *tok[MAX_TOKENS];
  char store[16384];
} tokens_t;

static int tokenize(const char *buf, tokens_t *t) {
  const char *p = buf;
  size_t used = 0;
  t->n = 0;
  if (*p == '-') return -1;
  while (*p != '\0') {
    const char *eol = strstr(p, "\r\n");
    const char *val;
    size_t len;
    if (eol == NULL) return -1;
    switch (*p) {
    case '*': case '%': case '~': case '>':
      p = eol + 2;
      continue;
    case '$': {
      long n = strtol(p + 1, NULL, 10);
      val = eol + 2;
      len = n < 0 ? 0 : (size_t)n;
      if (n >= 0 && strlen(val) < len + 2) return -1;
      p = n < 0 ? eol + 2 : val + len + 2;
      break;
    }
    case '+': case ':': case '_':
      val = p + 1;
      len = (size_t)(eol - val);
      p = eol + 2;
      break;
    default:
      return -1;
    }
    if (t->n == MAX_TOKENS || used + len + 1 > sizeof t->store) return -1;
    memcpy(t->store + used, val, len);
    t->store[used + len] = '\0';
    t->tok[t->n++] = t->store + used;
    used += len + 1;
  }
  return t->n;
}

/* A command whose reply is tokenized; -1 when it failed or was an error. */
static int ask(relock_test_redis_t *r, tokens_t *t, const char *arg0, ...) {
  static char buf[65536];
  const char *argv[8];
  int argc = 0;
  va_list ap;
  va_start(ap, arg0);
  for (const char *a = arg0; a != NULL && argc < 8; a = va_arg(ap, const char *)) argv[argc++] = a;
  va_end(ap);
  if (relock_test_redis_cmdv(r, buf, sizeof buf, argc, argv, NULL) != 0) return -1;
  return tokenize(buf, t);
}

/* The value after key in a flat list of pairs (SENTINEL MASTER), or NULL. */
static const char *field(const tokens_t *t, int from, int to, const char *key) {
  for (int i = from; i + 1 < to; i += 2) {
    if (strcmp(t->tok[i], key) == 0) return t->tok[i + 1];
  }
  return NULL;
}

/* -- accessors ------------------------------------------------------------- */

int relock_test_sentinel_nodes(const relock_test_sentinel_t *t) { return t->n_nodes; }
int relock_test_sentinel_sentinels(const relock_test_sentinel_t *t) { return t->n_sentinels; }

relock_test_redis_t *relock_test_sentinel_node(relock_test_sentinel_t *t, int i) {
  return i >= 0 && i < t->n_nodes ? t->node[i] : NULL;
}

relock_test_redis_t *relock_test_sentinel_sentinel(relock_test_sentinel_t *t, int i) {
  return i >= 0 && i < t->n_sentinels ? t->sentinel[i] : NULL;
}

int relock_test_sentinel_node_by_port(const relock_test_sentinel_t *t, int port) {
  for (int i = 0; i < t->n_nodes; i++) {
    if (relock_test_redis_port(t->node[i]) == port) return i;
  }
  return -1;
}

const char *relock_test_sentinel_master_name(const relock_test_sentinel_t *t) { return t->name; }
const char *relock_test_sentinel_addrs(const relock_test_sentinel_t *t) { return t->addrs; }
int relock_test_sentinel_master(const relock_test_sentinel_t *t) { return t->master; }

relock_test_redis_t *relock_test_sentinel_master_node(relock_test_sentinel_t *t) {
  return t->master >= 0 ? t->node[t->master] : NULL;
}

/* -- what the servers say -------------------------------------------------- */

/* The port sentinel s gives for the master, 0 if it names none. */
static int sentinel_master_port(relock_test_sentinel_t *t, int s) {
  tokens_t tk;
  if (ask(t->sentinel[s], &tk, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", t->name, NULL) != 2) return 0;
  return atoi(tk.tok[1]);
}

enum { ROLE_UNKNOWN, ROLE_MASTER, ROLE_REPLICA };

/* ROLE of data node i; for a replica, its master's port and whether its
 * link is up ("connected"). */
static int node_role(relock_test_sentinel_t *t, int i, int *master_port, int *link_up) {
  tokens_t tk;
  *master_port = 0;
  *link_up = 0;
  if (ask(t->node[i], &tk, "ROLE", NULL) < 1) return ROLE_UNKNOWN;
  if (strcmp(tk.tok[0], "master") == 0) return ROLE_MASTER;
  if (strcmp(tk.tok[0], "slave") == 0 && tk.n >= 4) {
    *master_port = atoi(tk.tok[2]);
    *link_up = strcmp(tk.tok[3], "connected") == 0;
    return ROLE_REPLICA;
  }
  return ROLE_UNKNOWN;
}

int relock_test_sentinel_agree_now(relock_test_sentinel_t *t) {
  int port = 0, m, mp, up, asked = 0;
  for (int s = 0; s < t->n_sentinels; s++) {
    int p;
    if (!relock_test_redis_running(t->sentinel[s])) continue;
    p = sentinel_master_port(t, s);
    if (p == 0 || (port != 0 && p != port)) return -1;
    port = p;
    asked++;
  }
  if (asked == 0 || (m = relock_test_sentinel_node_by_port(t, port)) < 0) return -1;
  if (!relock_test_redis_running(t->node[m]) || node_role(t, m, &mp, &up) != ROLE_MASTER) return -1;
  return m;
}

/* Says what each sentinel names as the master, on stderr. */
static void report_views(relock_test_sentinel_t *t, const char *what) {
  fprintf(stderr, "# relock_test_sentinel: %s; the sentinels say:", what);
  for (int s = 0; s < t->n_sentinels; s++) {
    if (relock_test_redis_running(t->sentinel[s]))
      fprintf(stderr, " %d", sentinel_master_port(t, s));
    else
      fprintf(stderr, " (down)");
  }
  fprintf(stderr, "; nodes:");
  for (int i = 0; i < t->n_nodes; i++) {
    int mp, up, role = relock_test_redis_running(t->node[i]) ? node_role(t, i, &mp, &up) : -1;
    fprintf(stderr, " %d=%s", relock_test_redis_port(t->node[i]),
            role < 0 ? "down" : role == ROLE_MASTER ? "master" : role == ROLE_REPLICA ? (up ? "replica" : "replica(link down)") : "?");
  }
  fprintf(stderr, "\n");
}

int relock_test_sentinel_agree(relock_test_sentinel_t *t, int timeout_ms) {
  int64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    int m = relock_test_sentinel_agree_now(t);
    if (m >= 0) return t->master = m;
    if (now_ms() >= deadline) {
      t->master = -1;
      report_views(t, "no agreement on the master");
      return -1;
    }
    pause_ms(POLL_MS);
  }
}

/* One look at the whole topology (see settle); why it is not whole yet
 * goes to why. */
static int settled_now(relock_test_sentinel_t *t, char *why, size_t whylen) {
  int m = relock_test_sentinel_agree_now(t), mport;
  char mport_str[16];
  tokens_t tk;
  if (m < 0) {
    snprintf(why, whylen, "the sentinels do not agree on a running master");
    return -1;
  }
  mport = relock_test_redis_port(t->node[m]);
  snprintf(mport_str, sizeof mport_str, "%d", mport);
  for (int i = 0; i < t->n_nodes; i++) {
    int mp, up, role;
    if (i == m || !relock_test_redis_running(t->node[i])) continue;
    role = node_role(t, i, &mp, &up);
    if (role == ROLE_MASTER || (role == ROLE_REPLICA && mp != mport)) {
      /* What Sentinel's +convert-to-slave does, ~10 s later. */
      relock_test_redis_cmd(t->node[i], NULL, 0, "REPLICAOF", "127.0.0.1", mport_str, NULL);
      snprintf(why, whylen, "node %d was no replica of %d: made one", relock_test_redis_port(t->node[i]), mport);
      return -1;
    }
    if (role != ROLE_REPLICA || !up) {
      snprintf(why, whylen, "node %d: replication link not up", relock_test_redis_port(t->node[i]));
      return -1;
    }
  }
  for (int s = 0; s < t->n_sentinels; s++) {
    const char *flags, *others;
    int n;
    if (!relock_test_redis_running(t->sentinel[s])) continue;
    n = ask(t->sentinel[s], &tk, "SENTINEL", "MASTER", t->name, NULL);
    flags = n > 0 ? field(&tk, 0, n, "flags") : NULL;
    others = n > 0 ? field(&tk, 0, n, "num-other-sentinels") : NULL;
    if (flags == NULL || strcmp(flags, "master") != 0 || others == NULL || atoi(others) != t->n_sentinels - 1) {
      snprintf(why, whylen, "sentinel %d: master flags %s, %s other sentinels known",
               relock_test_redis_port(t->sentinel[s]), flags ? flags : "?", others ? others : "?");
      return -1;
    }
    n = ask(t->sentinel[s], &tk, "SENTINEL", "REPLICAS", t->name, NULL);
    if (n < 0) {
      snprintf(why, whylen, "sentinel %d: SENTINEL REPLICAS failed", relock_test_redis_port(t->sentinel[s]));
      return -1;
    }
    for (int i = 0; i < t->n_nodes; i++) {
      int found = 0;
      if (i == m || !relock_test_redis_running(t->node[i])) continue;
      /* Each replica is a run of pairs starting at "name". */
      for (int k = 0; k < n; k++) {
        int end = k + 1;
        const char *port, *fl;
        if (strcmp(tk.tok[k], "name") != 0 || k % 2 != 0) continue;
        while (end < n && !(strcmp(tk.tok[end], "name") == 0 && end % 2 == 0)) end++;
        port = field(&tk, k, end, "port");
        fl = field(&tk, k, end, "flags");
        if (port != NULL && atoi(port) == relock_test_redis_port(t->node[i]) && fl != NULL && strcmp(fl, "slave") == 0)
          found = 1;
      }
      if (!found) {
        snprintf(why, whylen, "sentinel %d does not list replica %d as a healthy slave",
                 relock_test_redis_port(t->sentinel[s]), relock_test_redis_port(t->node[i]));
        return -1;
      }
    }
  }
  return m;
}

int relock_test_sentinel_settle(relock_test_sentinel_t *t, int timeout_ms) {
  int64_t deadline = now_ms() + timeout_ms;
  char why[256] = "";
  for (;;) {
    int m = settled_now(t, why, sizeof why);
    if (m >= 0) return t->master = m;
    if (now_ms() >= deadline) {
      fprintf(stderr, "# relock_test_sentinel: not settled within %d ms: %s\n", timeout_ms, why);
      report_views(t, "not settled");
      return -1;
    }
    pause_ms(POLL_MS);
  }
}

/* -- failovers ------------------------------------------------------------- */

typedef struct {
  int fd[MAX_SENTINELS];
  int n;
} watch_t;

/* Subscribes to +switch-master on every running sentinel. */
static void watch_open(relock_test_sentinel_t *t, watch_t *w) {
  w->n = 0;
  for (int s = 0; s < t->n_sentinels; s++) {
    int fd;
    if (!relock_test_redis_running(t->sentinel[s])) continue;
    if ((fd = relock_test_redis_subscribe(t->sentinel[s], "+switch-master")) >= 0) w->fd[w->n++] = fd;
  }
}

/* Whether a +switch-master has arrived on any of them (does not wait). */
static int watch_heard(watch_t *w) {
  struct pollfd p[MAX_SENTINELS];
  for (int i = 0; i < w->n; i++) {
    p[i].fd = w->fd[i];
    p[i].events = POLLIN;
    p[i].revents = 0;
  }
  if (w->n == 0 || poll(p, (nfds_t)w->n, 0) <= 0) return 0;
  for (int i = 0; i < w->n; i++) {
    char buf[512];
    if ((p[i].revents & POLLIN) && relock_test_redis_read(w->fd[i], buf, sizeof buf, 100) == 0 &&
        strstr(buf, "+switch-master") != NULL)
      return 1;
  }
  return 0;
}

static void watch_close(watch_t *w) {
  for (int i = 0; i < w->n; i++) close(w->fd[i]);
  w->n = 0;
}

/* After t0: waits for agreement on a master other than old. */
static int64_t wait_new_master(relock_test_sentinel_t *t, watch_t *w, int old, int64_t t0, int timeout_ms,
                               int64_t *switch_ms) {
  int64_t deadline = t0 + timeout_ms, sw = -1;
  for (;;) {
    int m;
    if (sw < 0 && watch_heard(w)) sw = now_ms() - t0;
    m = relock_test_sentinel_agree_now(t);
    if (m >= 0 && m != old) {
      int64_t took = now_ms() - t0;
      /* The publication and the agreement can come in one poll interval. */
      if (sw < 0 && watch_heard(w)) sw = now_ms() - t0;
      t->master = m;
      if (switch_ms != NULL) *switch_ms = sw;
      return took;
    }
    if (now_ms() >= deadline) {
      report_views(t, "no new master agreed");
      t->master = -1;
      if (switch_ms != NULL) *switch_ms = sw;
      return -1;
    }
    pause_ms(POLL_MS);
  }
}

int64_t relock_test_sentinel_failover(relock_test_sentinel_t *t, int timeout_ms, int64_t *switch_ms) {
  char reply[256];
  int old = relock_test_sentinel_agree_now(t), s = 0;
  watch_t w;
  int64_t t0, took;
  if (switch_ms != NULL) *switch_ms = -1;
  if (old < 0) {
    report_views(t, "failover: no agreed master to start from");
    return -1;
  }
  while (s < t->n_sentinels && !relock_test_redis_running(t->sentinel[s])) s++;
  if (s == t->n_sentinels) return -1;
  watch_open(t, &w);
  t->last_start_ms = t0 = now_ms();
  if (relock_test_redis_cmd(t->sentinel[s], reply, sizeof reply, "SENTINEL", "FAILOVER", t->name, NULL) != 0 ||
      strncmp(reply, "+OK", 3) != 0) {
    fprintf(stderr, "# relock_test_sentinel: SENTINEL FAILOVER %s: %.200s\n", t->name, reply);
    watch_close(&w);
    return -1;
  }
  took = wait_new_master(t, &w, old, t0, timeout_ms, switch_ms);
  watch_close(&w);
  return took;
}

int64_t relock_test_sentinel_kill_master(relock_test_sentinel_t *t, int timeout_ms, int64_t *switch_ms) {
  int old = relock_test_sentinel_agree_now(t);
  watch_t w;
  int64_t t0, took;
  if (switch_ms != NULL) *switch_ms = -1;
  if (old < 0) {
    report_views(t, "kill_master: no agreed master to start from");
    return -1;
  }
  watch_open(t, &w);
  t->last_start_ms = t0 = now_ms();
  relock_test_redis_kill9(t->node[old]);
  took = wait_new_master(t, &w, old, t0, timeout_ms, switch_ms);
  watch_close(&w);
  return took;
}

int64_t relock_test_sentinel_last_start_ms(const relock_test_sentinel_t *t) { return t->last_start_ms; }

int relock_test_sentinel_restart_node(relock_test_sentinel_t *t, int i) {
  char port[16];
  int m;
  if (i < 0 || i >= t->n_nodes || relock_test_redis_restart(t->node[i]) != 0) return -1;
  m = relock_test_sentinel_agree_now(t);
  if (m < 0 || m == i) return 0;
  snprintf(port, sizeof port, "%d", relock_test_redis_port(t->node[m]));
  return relock_test_redis_cmd(t->node[i], NULL, 0, "REPLICAOF", "127.0.0.1", port, NULL) == 0 ? 0 : -1;
}

/* -- start and free -------------------------------------------------------- */

static relock_test_redis_t *start_node(relock_test_sentinel_t *t, int master_port) {
  char port[16];
  const char *args[16];
  int n = 0;
  snprintf(port, sizeof port, "%d", master_port);
  /* A full sync starts at once instead of after diskless sync's 5 s. */
  args[n++] = "--repl-diskless-sync-delay";
  args[n++] = "0";
  if (master_port > 0) {
    args[n++] = "--replicaof";
    args[n++] = "127.0.0.1";
    args[n++] = port;
  }
  if (t->password[0] != '\0') {
    args[n++] = "--masterauth";
    args[n++] = t->password;
  }
  if (t->tls_dir[0] != '\0') {
    args[n++] = "--tls-replication";
    args[n++] = "yes";
  }
  args[n] = NULL;
  relock_test_redis_opts_t o = {
      .password = t->password[0] != '\0' ? t->password : NULL,
      .tls_dir = t->tls_dir[0] != '\0' ? t->tls_dir : NULL,
      .extra_args = args,
  };
  return relock_test_redis_start(&o);
}

static relock_test_redis_t *start_sentinel(relock_test_sentinel_t *t, int master_port) {
  char conf[1024];
  int len;
  const char *args[] = {"--tls-replication", "yes", NULL};
  len = snprintf(conf, sizeof conf,
                 "sentinel monitor %s 127.0.0.1 %d %d\n"
                 "sentinel down-after-milliseconds %s %d\n"
                 "sentinel failover-timeout %s %d\n"
                 "sentinel parallel-syncs %s 1\n",
                 t->name, master_port, t->o.quorum, t->name, t->o.down_after_ms, t->name, t->o.failover_timeout_ms,
                 t->name);
  if (t->password[0] != '\0')
    len += snprintf(conf + len, sizeof conf - (size_t)len, "sentinel auth-pass %s %s\n", t->name, t->password);
  /* sentinel-pass is 6.2's; before, a sentinel with a requirepass uses it
   * with the other sentinels (theirs must be the same) */
  if (t->sentinel_password[0] != '\0' && relock_test_redis_version(t->node[0]) >= 60200)
    snprintf(conf + len, sizeof conf - (size_t)len, "sentinel sentinel-pass %s\n", t->sentinel_password);
  relock_test_redis_opts_t o = {
      .password = t->sentinel_password[0] != '\0' ? t->sentinel_password : NULL,
      .tls_dir = t->tls_dir[0] != '\0' ? t->tls_dir : NULL,
      .extra_args = t->tls_dir[0] != '\0' ? args : NULL,
      .config_text = conf,
      .sentinel = 1,
  };
  return relock_test_redis_start(&o);
}

relock_test_sentinel_t *relock_test_sentinel_start(const relock_test_sentinel_opts_t *opts) {
  static const relock_test_sentinel_opts_t defaults;
  relock_test_sentinel_t *t = calloc(1, sizeof *t);
  size_t len = 0;
  if (t == NULL) return NULL;
  if (opts == NULL) opts = &defaults;
  t->o = *opts;
  t->master = -1;
  t->n_nodes = 1 + (opts->replicas < 0 ? 0 : opts->replicas == 0 ? 2 : opts->replicas);
  t->n_sentinels = opts->sentinels > 0 ? opts->sentinels : 3;
  if (t->n_nodes > MAX_NODES || t->n_sentinels > MAX_SENTINELS) {
    fprintf(stderr, "# relock_test_sentinel: at most %d data nodes and %d sentinels\n", MAX_NODES, MAX_SENTINELS);
    free(t);
    return NULL;
  }
  if (t->o.quorum <= 0) t->o.quorum = t->n_sentinels / 2 + 1;
  if (t->o.down_after_ms <= 0) t->o.down_after_ms = 1000;
  if (t->o.failover_timeout_ms <= 0) t->o.failover_timeout_ms = 3000;
  if (t->o.ready_timeout_ms <= 0) t->o.ready_timeout_ms = 30000;
  snprintf(t->name, sizeof t->name, "%s", opts->master_name != NULL ? opts->master_name : "mymaster");
  snprintf(t->password, sizeof t->password, "%s", opts->password != NULL ? opts->password : "");
  snprintf(t->sentinel_password, sizeof t->sentinel_password, "%s",
           opts->sentinel_password != NULL ? opts->sentinel_password : "");
  snprintf(t->tls_dir, sizeof t->tls_dir, "%s", opts->tls_dir != NULL ? opts->tls_dir : "");

  for (int i = 0; i < t->n_nodes; i++) {
    if ((t->node[i] = start_node(t, i == 0 ? 0 : relock_test_redis_port(t->node[0]))) == NULL) goto fail;
  }
  for (int s = 0; s < t->n_sentinels; s++) {
    if ((t->sentinel[s] = start_sentinel(t, relock_test_redis_port(t->node[0]))) == NULL) goto fail;
    len += (size_t)snprintf(t->addrs + len, sizeof t->addrs - len, "%s127.0.0.1:%d", s > 0 ? "," : "",
                            relock_test_redis_port(t->sentinel[s]));
  }
  if (relock_test_sentinel_settle(t, t->o.ready_timeout_ms) < 0) goto fail;
  return t;
fail:
  fprintf(stderr, "# relock_test_sentinel: the topology did not start\n");
  relock_test_sentinel_free(t);
  return NULL;
}

void relock_test_sentinel_free(relock_test_sentinel_t *t) {
  if (t == NULL) return;
  /* Sentinels first: they would otherwise fail over while the data nodes
   * stop. */
  for (int s = 0; s < t->n_sentinels; s++) relock_test_redis_free(t->sentinel[s]);
  for (int i = 0; i < t->n_nodes; i++) relock_test_redis_free(t->node[i]);
  free(t);
}
