/* The relock partition worker: one process taking and releasing one lock
 * over and over, touching a checked resource inside each critical section,
 * while a nemesis partitions the network and pauses or kills servers and
 * workers. Its command line, its output lines and the resource's protocol
 * are the contract in tests/partition/README.md, shared with the Redisson
 * worker (tests/interop/src/main/java/relock/interop/PartitionWorker.java)
 * and relock the command's (cli_worker.py), so that the supervisor and the
 * checker treat them alike.
 *
 * It uses only relock's public API, as a user would: a threaded client (the
 * lost callbacks run on its loop thread while the worker thread sleeps in
 * its critical section), the blocking try-lock calls with a watchdog lease,
 * and relock_lock_validity_ms before each write, the check a careful user
 * makes before an irreversible side effect.
 *
 * END counts the acquisitions (ACQ lines) and the writes the resource
 * accepted (WROTE ok lines).
 *
 * Redis errors are normal here (the nemesis makes them): they are printed
 * and the loop goes on. The process exits non-zero only for a bad command
 * line (64) or an unreachable resource (2). */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <relock/client.h>
#include <relock/config.h>
#include <relock/lock.h>
#include <relock/multi_lock.h>

#define EXIT_USAGE 64
#define EXIT_RESOURCE 2
#define REDLOCK_MASTERS 5
#define MAX_NODES 16
#define VALIDITY_FLOOR_MS 100
#define RESOURCE_TIMEOUT_S 2
#define RETRY_PAUSE_MS 50
#define AFTER_RELEASE_MAX_MS 30
#define CONNECT_WAIT_MS 10000
#define LINE_MAX_BYTES 512

/* In the order of their words on the command line; UNSET: not given. */
typedef enum { OBJ_UNSET = -1, OBJ_LOCK, OBJ_FENCED, OBJ_REDLOCK } object_kind_t;
typedef enum { TOPO_UNSET = -1, TOPO_SINGLE, TOPO_SENTINEL, TOPO_CLUSTER, TOPO_REDLOCK } topology_t;

typedef struct {
  const char *id, *resource, *res, *name, *nodes, *master_name;
  object_kind_t object;
  topology_t topology;
  int synced, seeded;
  int64_t lease_ms, wait_ms, hold_min_ms, hold_max_ms, seconds;
  uint64_t seed;
} args_t;

/* The checked resource: one persistent connection, reconnected when cut. */
typedef struct {
  char host[256], port[16];
  const char *id, *res;
  int fd;
} resource_t;

typedef struct {
  relock_client_t *clients[REDLOCK_MASTERS];
  size_t n_clients;
  relock_lock_t *lock;       /* lock and fenced */
  relock_multi_lock_t *group; /* redlock */
} redis_t;

/* -- output: one line per event, whole lines only, whatever thread --------- */

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Prints "EVENT <t> rest" ("EVENT <t>" when rest is empty): the time is
 * taken under the mutex, so the lines of both threads are in the order of
 * their times. */
static void emit(const char *event, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(const char *event, const char *fmt, ...) {
  char rest[LINE_MAX_BYTES * 2];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rest, sizeof rest, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&out_mu);
  printf("%s %" PRIu64 "%s%s\n", event, now_ns(), rest[0] != '\0' ? " " : "", rest);
  fflush(stdout);
  pthread_mutex_unlock(&out_mu);
}

/* text on one line, into buf: a line of output must never be split. */
static const char *one_line(const char *text, char *buf, size_t size) {
  snprintf(buf, size, "%s", text != NULL ? text : "");
  for (char *p = buf; *p != '\0'; p++)
    if (*p == '\n' || *p == '\r')
      *p = ' ';
  return buf;
}

/* "RELOCK_ECONNLOST connection lost: <the call's message>", for ERR and REL
 * lines; read right after the blocking call that failed, on its thread. */
static const char *error_text(int rc, char *buf, size_t size) {
  char msg[LINE_MAX_BYTES];
  const char *last = relock_last_error_message();
  if (last[0] == '\0')
    snprintf(buf, size, "%s %s", relock_err_name(rc), relock_strerror(rc));
  else
    snprintf(buf, size, "%s %s: %s", relock_err_name(rc), relock_strerror(rc), one_line(last, msg, sizeof msg));
  return buf;
}

/* -- time and chance -------------------------------------------------------- */

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* splitmix64: the worker's own generator, so a seed replays the same hold
 * times whatever the C library's rand() does. */
static uint64_t rng_state;

static uint64_t rng_next(void) {
  uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static int64_t rng_between(int64_t lo, int64_t hi) {
  return hi <= lo ? lo : lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1));
}

/* -- the command line --------------------------------------------------------- */

/* Says what is wrong (fmt NULL: nothing) and how to call it, and exits 64. */
static void usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage(const char *fmt, ...) {
  va_list ap;
  if (fmt != NULL) {
    fputs("worker: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
  }
  fprintf(stderr,
          "usage: worker --id ID --resource HOST:PORT --res NAME --object lock|fenced|redlock\n"
          "              --name LOCKNAME --topology single|sentinel|cluster|redlock --nodes A,B,...\n"
          "              --seconds S --seed N [--master-name NAME] [--synced N] [--lease-ms MS]\n"
          "              [--wait-ms MS] [--hold-min-ms A] [--hold-max-ms B]\n"
          "(tests/partition/README.md)\n");
  exit(EXIT_USAGE);
}

/* A decimal number in [min, max], or a usage error naming the option. */
static int64_t parse_number(const char *option, const char *text, int64_t min, int64_t max) {
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > max) {
    usage("--%s: not a number in [%" PRId64 ", %" PRId64 "]: %s", option, min, max, text);
  }
  return (int64_t)v;
}

static int parse_word(const char *option, const char *text, const char *const *words) {
  for (int i = 0; words[i] != NULL; i++)
    if (strcmp(text, words[i]) == 0)
      return i;
  usage("--%s: unknown value: %s", option, text);
  return -1;
}

static const char *const object_words[] = {"lock", "fenced", "redlock", NULL};
static const char *const topology_words[] = {"single", "sentinel", "cluster", "redlock", NULL};

enum {
  OPT_ID = 1, OPT_RESOURCE, OPT_RES, OPT_OBJECT, OPT_NAME, OPT_TOPOLOGY, OPT_NODES, OPT_MASTER_NAME,
  OPT_SYNCED, OPT_LEASE, OPT_WAIT, OPT_HOLD_MIN, OPT_HOLD_MAX, OPT_SECONDS, OPT_SEED
};

static const struct option long_options[] = {
    {"id", required_argument, NULL, OPT_ID},
    {"resource", required_argument, NULL, OPT_RESOURCE},
    {"res", required_argument, NULL, OPT_RES},
    {"object", required_argument, NULL, OPT_OBJECT},
    {"name", required_argument, NULL, OPT_NAME},
    {"topology", required_argument, NULL, OPT_TOPOLOGY},
    {"nodes", required_argument, NULL, OPT_NODES},
    {"master-name", required_argument, NULL, OPT_MASTER_NAME},
    {"synced", required_argument, NULL, OPT_SYNCED},
    {"lease-ms", required_argument, NULL, OPT_LEASE},
    {"wait-ms", required_argument, NULL, OPT_WAIT},
    {"hold-min-ms", required_argument, NULL, OPT_HOLD_MIN},
    {"hold-max-ms", required_argument, NULL, OPT_HOLD_MAX},
    {"seconds", required_argument, NULL, OPT_SECONDS},
    {"seed", required_argument, NULL, OPT_SEED},
    {NULL, 0, NULL, 0},
};

static void set_option(args_t *a, int opt, const char *v) {
  switch (opt) {
  case OPT_ID: a->id = v; break;
  case OPT_RESOURCE: a->resource = v; break;
  case OPT_RES: a->res = v; break;
  case OPT_OBJECT: a->object = (object_kind_t)parse_word("object", v, object_words); break;
  case OPT_NAME: a->name = v; break;
  case OPT_TOPOLOGY: a->topology = (topology_t)parse_word("topology", v, topology_words); break;
  case OPT_NODES: a->nodes = v; break;
  case OPT_MASTER_NAME: a->master_name = v; break;
  case OPT_SYNCED: a->synced = (int)parse_number("synced", v, 0, 100); break;
  case OPT_LEASE: a->lease_ms = parse_number("lease-ms", v, RELOCK_MIN_LEASE_MS, INT32_MAX); break;
  case OPT_WAIT: a->wait_ms = parse_number("wait-ms", v, 0, INT32_MAX); break;
  case OPT_HOLD_MIN: a->hold_min_ms = parse_number("hold-min-ms", v, 0, INT32_MAX); break;
  case OPT_HOLD_MAX: a->hold_max_ms = parse_number("hold-max-ms", v, 0, INT32_MAX); break;
  case OPT_SECONDS: a->seconds = parse_number("seconds", v, 0, INT32_MAX); break;
  case OPT_SEED:
    a->seed = (uint64_t)parse_number("seed", v, INT64_MIN, INT64_MAX);
    a->seeded = 1;
    break;
  default: usage(NULL);
  }
}

/* The rules between options, and the required ones. */
static void check_args(const args_t *a) {
  if (a->id == NULL || a->resource == NULL || a->res == NULL || a->name == NULL || a->nodes == NULL ||
      a->object == OBJ_UNSET || a->topology == TOPO_UNSET || a->seconds < 0 || !a->seeded)
    usage("--id, --resource, --res, --object, --name, --topology, --nodes, --seconds and --seed are required");
  if ((a->object == OBJ_REDLOCK) != (a->topology == TOPO_REDLOCK))
    usage("--object redlock goes with --topology redlock, and only with it");
  if (a->hold_max_ms < a->hold_min_ms)
    usage("--hold-max-ms is less than --hold-min-ms");
}

static void parse_args(int argc, char **argv, args_t *a) {
  int opt;
  *a = (args_t){.master_name = "mymaster", .object = OBJ_UNSET, .topology = TOPO_UNSET,
                .lease_ms = 3000, .wait_ms = 5000, .hold_min_ms = 20, .hold_max_ms = 300, .seconds = -1};
  while ((opt = getopt_long(argc, argv, "", long_options, NULL)) != -1)
    set_option(a, opt, optarg);
  if (optind < argc)
    usage("unexpected argument");
  check_args(a);
}

/* "host:port" (the host possibly "[v6]") into its parts; 0 or -1. */
static int split_address(const char *addr, char *host, size_t host_size, char *port, size_t port_size) {
  const char *colon = strrchr(addr, ':');
  if (colon == NULL || colon == addr || colon[1] == '\0')
    return -1;
  const char *h = addr;
  size_t len = (size_t)(colon - addr);
  if (h[0] == '[' && len >= 2 && h[len - 1] == ']') {
    h++;
    len -= 2;
  }
  if (len >= host_size || strlen(colon + 1) >= port_size)
    return -1;
  memcpy(host, h, len);
  host[len] = '\0';
  snprintf(port, port_size, "%s", colon + 1);
  return 0;
}

/* -- the checked resource --------------------------------------------------------- */

static void resource_close(resource_t *r) {
  if (r->fd >= 0)
    close(r->fd);
  r->fd = -1;
}

/* A blocking connection whose reads give up after RESOURCE_TIMEOUT_S, so
 * that a resource that stopped answering is found and reconnected. */
static int resource_connect(resource_t *r) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res, *ai;
  int rc = getaddrinfo(r->host, r->port, &hints, &res);
  if (rc != 0) {
    fprintf(stderr, "worker: resource %s:%s: %s\n", r->host, r->port, gai_strerror(rc));
    return -1;
  }
  for (ai = res; ai != NULL && r->fd < 0; ai = ai->ai_next) {
    r->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (r->fd >= 0 && connect(r->fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      fprintf(stderr, "worker: resource %s:%s: %s\n", r->host, r->port, strerror(errno));
      resource_close(r);
    }
  }
  freeaddrinfo(res);
  if (r->fd < 0)
    return -1;
  struct timeval tv = {RESOURCE_TIMEOUT_S, 0};
  setsockopt(r->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(r->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return 0;
}

static int send_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

/* One reply line, without its "\n". A request has one reply and nothing
 * comes unasked, so reading a byte at a time never reads past it. */
static int recv_line(int fd, char *buf, size_t size) {
  size_t len = 0;
  for (;;) {
    char c;
    ssize_t n = recv(fd, &c, 1, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1; /* closed, cut, or no answer in RESOURCE_TIMEOUT_S */
    if (c == '\n')
      break;
    if (len + 1 >= size)
      return -1;
    buf[len++] = c;
  }
  buf[len] = '\0';
  return 0;
}

static int resource_try(resource_t *r, const char *request, char *reply, size_t size) {
  errno = 0; /* a reply cut short sets none: "closed" */
  if (r->fd < 0 && resource_connect(r) != 0)
    return -1;
  if (send_all(r->fd, request, strlen(request)) == 0 && recv_line(r->fd, reply, size) == 0)
    return 0;
  fprintf(stderr, "worker: resource %s:%s: %s\n", r->host, r->port, errno != 0 ? strerror(errno) : "closed");
  resource_close(r);
  return -1;
}

/* Sends request and reads its reply, on a new connection once if the first
 * try fails (a WRITE repeated sets the same value). The resource is never
 * partitioned from the workers: failing twice, it is gone, and so is the
 * test. */
static void resource_call(resource_t *r, const char *request, char *reply, size_t size) {
  if (resource_try(r, request, reply, size) == 0 || resource_try(r, request, reply, size) == 0)
    return;
  fprintf(stderr, "worker: the resource %s:%s is unreachable\n", r->host, r->port);
  exit(EXIT_RESOURCE);
}

/* READ: 1 with *value, 0 refused (a newer token was seen). */
static int resource_read(resource_t *r, int64_t token, int64_t *value) {
  char req[LINE_MAX_BYTES], reply[LINE_MAX_BYTES];
  snprintf(req, sizeof req, "READ %s %s %" PRId64 "\n", r->res, r->id, token);
  resource_call(r, req, reply, sizeof reply);
  if (sscanf(reply, "OK %" SCNd64, value) == 1)
    return 1;
  if (strncmp(reply, "REFUSED", 7) == 0)
    return 0;
  fprintf(stderr, "worker: the resource answered READ with: %s\n", reply);
  exit(EXIT_RESOURCE);
}

/* WRITE: 1 written, 0 refused. */
static int resource_write(resource_t *r, int64_t token, int64_t value) {
  char req[LINE_MAX_BYTES], reply[LINE_MAX_BYTES];
  snprintf(req, sizeof req, "WRITE %s %s %" PRId64 " %" PRId64 "\n", r->res, r->id, token, value);
  resource_call(r, req, reply, sizeof reply);
  if (strcmp(reply, "OK") == 0)
    return 1;
  if (strncmp(reply, "REFUSED", 7) == 0)
    return 0;
  fprintf(stderr, "worker: the resource answered WRITE with: %s\n", reply);
  exit(EXIT_RESOURCE);
}

static void resource_abort(resource_t *r) {
  char req[LINE_MAX_BYTES], reply[LINE_MAX_BYTES];
  snprintf(req, sizeof req, "ABORT %s %s\n", r->res, r->id);
  resource_call(r, req, reply, sizeof reply);
}

static void resource_open(resource_t *r, const args_t *a) {
  *r = (resource_t){.id = a->id, .res = a->res, .fd = -1};
  if (split_address(a->resource, r->host, sizeof r->host, r->port, sizeof r->port) != 0)
    usage("--resource: not HOST:PORT");
  if (resource_connect(r) != 0) {
    fprintf(stderr, "worker: the resource %s is unreachable\n", a->resource);
    exit(EXIT_RESOURCE);
  }
}

/* -- Redis -------------------------------------------------------------------------- */

/* Sets one option by name from text; a refusal is the command line's fault. */
static void set_opt(relock_options_t *opts, const char *name, const char *value) {
  relock_error_t err;
  if (relock_options_set(opts, name, value, &err) != 0) {
    usage("option %s=%s: %s", name, value, err.message);
  }
}

static void set_opt_ms(relock_options_t *opts, const char *name, int64_t ms) {
  relock_error_t err;
  if (relock_options_set_ms(opts, name, ms, &err) != 0) {
    usage("option %s=%" PRId64 ": %s", name, ms, err.message);
  }
}

/* The settings every client of the contract shares, whatever the topology. */
static relock_options_t *common_options(const args_t *a) {
  relock_options_t *opts = relock_options_new(NULL);
  if (opts == NULL) {
    fprintf(stderr, "worker: out of memory\n");
    exit(EXIT_FAILURE);
  }
  set_opt_ms(opts, RELOCK_OPT_CONNECT_TIMEOUT, 1000);
  set_opt_ms(opts, RELOCK_OPT_COMMAND_TIMEOUT, 1000);
  set_opt_ms(opts, RELOCK_OPT_WATCHDOG_TIMEOUT, a->lease_ms);
  if (a->synced > 0) {
    char n[16];
    snprintf(n, sizeof n, "%d", a->synced);
    set_opt(opts, RELOCK_OPT_MIN_REPLICAS_ACKED, n);
    set_opt_ms(opts, RELOCK_OPT_MIN_REPLICAS_TIMEOUT, 500);
  }
  return opts;
}

static void set_address(relock_options_t *opts, const char *addr) {
  char host[256], port[16];
  if (split_address(addr, host, sizeof host, port, sizeof port) != 0)
    usage("--nodes: an address is not HOST:PORT");
  set_opt(opts, RELOCK_OPT_HOST, host);
  set_opt(opts, RELOCK_OPT_PORT, port);
}

static relock_client_t *make_client(relock_client_t *peer, relock_options_t *opts) {
  relock_error_t err;
  relock_client_t *c = peer == NULL ? relock_client_new(NULL, opts, &err) : relock_client_new_beside(peer, opts, &err);
  relock_options_free(opts);
  if (c == NULL) {
    usage("client: %s %s", relock_err_name(err.code), err.message);
  }
  return c;
}

/* The one threaded client of single, sentinel and cluster. */
static relock_client_t *connect_one(const args_t *a) {
  relock_options_t *opts = common_options(a);
  switch (a->topology) {
  case TOPO_SINGLE: set_address(opts, a->nodes); break;
  case TOPO_SENTINEL:
    set_opt(opts, RELOCK_OPT_SENTINELS, a->nodes);
    set_opt(opts, RELOCK_OPT_SENTINEL_MASTER, a->master_name);
    break;
  case TOPO_CLUSTER: set_opt(opts, RELOCK_OPT_CLUSTER_NODES, a->nodes); break;
  case TOPO_REDLOCK:
  case TOPO_UNSET: break;
  }
  return make_client(NULL, opts);
}

/* RedLock's five clients: the first threaded, the others on its loop, as
 * relock_redlock_new needs them. */
static void connect_masters(const args_t *a, redis_t *r) {
  char list[4096];
  char *save, *addr;
  snprintf(list, sizeof list, "%s", a->nodes);
  for (addr = strtok_r(list, ",", &save); addr != NULL; addr = strtok_r(NULL, ",", &save)) {
    if (r->n_clients == REDLOCK_MASTERS)
      usage("--nodes: RedLock takes exactly 5 masters");
    relock_options_t *opts = common_options(a);
    set_address(opts, addr);
    r->clients[r->n_clients] = make_client(r->n_clients == 0 ? NULL : r->clients[0], opts);
    r->n_clients++;
  }
  if (r->n_clients != REDLOCK_MASTERS)
    usage("--nodes: RedLock takes exactly 5 masters");
}

/* Waits (a while, not for ever) until the client answers a PING, so START
 * means the connections were made; a Redis still down then is the
 * nemesis's business, and the loop's ERR lines will say so. */
static void await_connection(relock_client_t *c, int64_t deadline_ns) {
  for (;;) {
    relock_future_t *f = relock_client_commandf_async(c, "PING");
    int rc = f == NULL ? RELOCK_ENOMEM : relock_future_wait(f, RELOCK_INFINITE);
    if (rc != 0)
      fprintf(stderr, "worker: PING: %s %s\n", relock_err_name(rc), f != NULL ? relock_future_message(f) : "");
    relock_future_release(f);
    if (rc == 0 || (int64_t)now_ns() >= deadline_ns)
      return;
    sleep_ms(200);
  }
}

static const char *reason_name(int reason) {
  switch (reason) {
  case RELOCK_ELOST: return "lost";
  case RELOCK_ETIMEDOUT: return "expired";
  default: return relock_err_name(reason);
  }
}

/* On the client's loop thread, possibly while the worker thread sleeps in
 * its critical section: it only prints. The worker decides by polling
 * (relock_lock_validity_ms before the write); the checker judges the
 * library by this line: a LOST belongs to the hold whose ACQ came last
 * before it (a loss is told at the latest by the hold's release, whose
 * answer comes before the next acquisition), and a hold another worker
 * acquired the lock during must have one within the library's bound
 * (tests/partition/README.md). */
static void on_lost(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg) {
  char msg[LINE_MAX_BYTES];
  (void)lock, (void)owner, (void)arg;
  emit("LOST", "%s %s", reason_name(reason), one_line(message, msg, sizeof msg));
}

static void on_group_lost(relock_multi_lock_t *m, uint64_t owner, int reason, const char *message, void *arg) {
  on_lost(NULL, owner, reason, message, arg);
  (void)m;
}

static relock_lock_t *make_lock(relock_client_t *c, const args_t *a) {
  relock_error_t err;
  relock_lock_t *lock = a->object == OBJ_FENCED ? relock_fenced_lock_new(c, a->name, &err)
                                                : relock_lock_new(c, a->name, &err);
  if (lock == NULL) {
    usage("--name: %s", err.message);
  }
  return lock;
}

/* The lock (or group) with its lost callback, set before any acquisition
 * so that no loss goes unreported. */
static void make_objects(const args_t *a, redis_t *r) {
  int rc;
  if (a->object != OBJ_REDLOCK) {
    r->lock = make_lock(r->clients[0], a);
    rc = relock_lock_on_lost(r->lock, on_lost, NULL);
  } else {
    relock_lock_t *locks[REDLOCK_MASTERS];
    relock_error_t err;
    for (size_t i = 0; i < r->n_clients; i++)
      locks[i] = make_lock(r->clients[i], a);
    r->group = relock_redlock_new(locks, r->n_clients, &err);
    if (r->group == NULL)
      usage("%s", err.message);
    rc = relock_multi_lock_on_lost(r->group, on_group_lost, NULL);
  }
  if (rc != 0)
    usage("%s", relock_strerror(rc));
}

static void redis_open(const args_t *a, redis_t *r) {
  *r = (redis_t){0};
  if (a->topology == TOPO_REDLOCK) {
    connect_masters(a, r);
  } else {
    r->clients[0] = connect_one(a);
    r->n_clients = 1;
  }
  int64_t deadline_ns = (int64_t)now_ns() + (int64_t)CONNECT_WAIT_MS * 1000000;
  for (size_t i = 0; i < r->n_clients; i++)
    await_connection(r->clients[i], deadline_ns);
  make_objects(a, r);
}

static void redis_close(redis_t *r) {
  if (r->group != NULL)
    relock_multi_lock_free(r->group); /* and its locks */
  relock_lock_free(r->lock);
  for (size_t i = 0; i < r->n_clients; i++)
    relock_client_free(r->clients[i]);
}

/* -- the loop ----------------------------------------------------------------------- */

typedef struct {
  const args_t *a;
  redis_t *redis;
  resource_t *res;
  uint64_t acquisitions, writes;
} worker_t;

/* One try within --wait-ms: 0 with *acquired and *token, or an error. */
static int acquire(worker_t *w, int *acquired, int64_t *token) {
  int rc;
  *token = 0;
  switch (w->a->object) {
  case OBJ_FENCED:
    rc = relock_fenced_lock_try_lock(w->redis->lock, w->a->wait_ms, RELOCK_INFINITE, token);
    *acquired = rc == 0 && *token > 0;
    return rc;
  case OBJ_LOCK: return relock_lock_try_lock(w->redis->lock, w->a->wait_ms, RELOCK_INFINITE, acquired);
  default: return relock_multi_lock_try_lock(w->redis->group, w->a->wait_ms, RELOCK_INFINITE, acquired);
  }
}

static int64_t validity_ms(worker_t *w) {
  if (w->redis->group != NULL)
    return relock_multi_lock_validity_ms(w->redis->group, relock_thread_owner());
  return relock_lock_validity_ms(w->redis->lock, relock_thread_owner());
}

static void release(worker_t *w) {
  char text[LINE_MAX_BYTES * 2];
  int rc = w->redis->group != NULL ? relock_multi_lock_unlock(w->redis->group) : relock_lock_unlock(w->redis->lock);
  if (rc == 0)
    emit("REL", "ok");
  else
    emit("REL", "error %s", error_text(rc, text, sizeof text));
}

/* Inside the lock: read, hold, check the lock is still ours, write. Every
 * way out of it ends in the release. */
static void critical_section(worker_t *w, int64_t token) {
  int64_t value, v;
  if (!resource_read(w->res, token, &value)) {
    emit("ABANDON", "refused-read");
    return;
  }
  sleep_ms(rng_between(w->a->hold_min_ms, w->a->hold_max_ms));
  v = validity_ms(w);
  if (v < VALIDITY_FLOOR_MS) {
    resource_abort(w->res);
    emit("ABANDON", "validity=%" PRId64, v);
    return;
  }
  emit("VALID", "%" PRId64, v); /* right before the write: nothing between them but a pause */
  int ok = resource_write(w->res, token, value + 1);
  w->writes += (uint64_t)ok;
  emit("WROTE", "%s", ok ? "ok" : "refused");
}

/* One round: acquire, and if that worked the section and the release. */
static void round_once(worker_t *w) {
  char text[LINE_MAX_BYTES * 2];
  int acquired = 0;
  int64_t token;
  int rc = acquire(w, &acquired, &token);
  if (rc != 0 || !acquired) {
    if (rc != 0)
      emit("ERR", "%s", error_text(rc, text, sizeof text));
    else
      emit("TIMEOUT", "%s", "");
    sleep_ms(RETRY_PAUSE_MS);
    return;
  }
  w->acquisitions++;
  emit("ACQ", "%" PRId64, token);
  critical_section(w, token);
  release(w);
  sleep_ms(rng_between(0, AFTER_RELEASE_MAX_MS));
}

static void run(worker_t *w) {
  uint64_t end_ns = now_ns() + (uint64_t)w->a->seconds * 1000000000u;
  while (now_ns() < end_ns)
    round_once(w);
}

int main(int argc, char **argv) {
  args_t a;
  resource_t res;
  redis_t redis;
  parse_args(argc, argv, &a);
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN); /* a cut connection is an error to handle, not a death */
  rng_state = a.seed;
  resource_open(&res, &a);
  redis_open(&a, &redis);
  emit("START", "%s %s", a.id, object_words[a.object]);
  worker_t w = {.a = &a, .redis = &redis, .res = &res};
  run(&w);
  emit("END", "%" PRIu64 " %" PRIu64, w.acquisitions, w.writes);
  redis_close(&redis);
  resource_close(&res);
  return 0;
}
