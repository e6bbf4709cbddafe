/* A truth checker worker that is a real Redisson client: it drives the
 * interop peer (tests/interop Peer.java on Redisson from Maven Central)
 * through its pipes, a few Java threads ("tags") taking, re-entering and
 * releasing the same lock names as the C workers, with Redisson's watchdog
 * and fixed leases, and publishes what each thread believes it holds.
 *
 * Redisson has no validity query and is never told of a loss, so a Java
 * hold's belief lasts until its unlock: the lease less the drift margin
 * for a fixed lease, none for the watchdog. What Redis keeps of a Java
 * hold is Redisson's business: the observer counts a Java belief against
 * relock's holders while Redis has its field (tests/truth/README.md). A break of truth (a DEL, a
 * force release, lost data) exempts the Java beliefs it broke for good
 * (foreign: what Redisson does is not relock's to fix); they still count
 * against relock's holders until then. A Java thread also takes permits of
 * the permit-expirable semaphore, always with a lease (tryAcquire(wait,
 * lease)), one at a time, believed until that lease less the margin: they
 * count against relock's watched and leased permits. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "truth/truth.h"

#define TAGS 3
#define MAX_HOLDS 4

typedef struct tag {
  int busy;             /* a command is out */
  uint64_t sent_ns, bound_ns;
  char thread_id[32];   /* from "jN thread ID" */
  /* what it holds: one kind on one name, count times */
  int kind, name, count, slot;
  int64_t leases[MAX_HOLDS];
  char permit_id[40]; /* a permit's (K_PERMIT: one at a time) */
  /* the command out */
  int op_kind, op_name, op_unlock;
  int64_t op_lease;
  uint64_t idle_until_ns;
} tag_t;

typedef struct jworker {
  truth_shared_t *sh;
  truth_worker_slot_t *slot;
  int id;
  uint64_t rng;
  pid_t pid;
  int in, out;
  char client_id[80];
  char buf[65536];
  size_t len;
  tag_t tags[TAGS];
} jworker_t;

static const char *java_kind(int k) {
  switch (k) {
  case K_REENTRANT: return "lock";
  case K_SPIN: return "spin";
  case K_FENCED: return "fenced";
  case K_FAIR: return "fair";
  case K_READ: return "read";
  case K_WRITE: return "write";
  case K_PERMIT: return "permit";
  default: return "lock";
  }
}

static int below(jworker_t *w, int n) {
  return (int)(truth_rnd(&w->rng) % (uint64_t)n);
}

static void send_line(jworker_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void send_line(jworker_t *w, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  line[n++] = '\n';
  if (write(w->in, line, (size_t)n) != n)
    truth_trace(w->slot, "java: write to the peer failed: %s", strerror(errno));
}

/* -- beliefs ----------------------------------------------------------------*/

static void field_of(jworker_t *w, tag_t *t, int kind, char *out, size_t size) {
  if (snprintf(out, size, "%s:%s%s", w->client_id, t->thread_id, kind == K_WRITE ? ":write" : "") >= (int)size)
    out[0] = '\0'; /* cannot happen: a uuid and a number */
}

/* -- the peer ---------------------------------------------------------------*/

static int start_peer(jworker_t *w, int port) {
  const char *build = getenv("RELOCK_BUILDDIR");
  char out_dir[1024], classpath[2200], url[64], wd[16], err_path[1100];
  snprintf(out_dir, sizeof out_dir, "%s/tests/interop/peer", build != NULL ? build : ".");
  snprintf(classpath, sizeof classpath, "%s/classes:%s/lib/*", out_dir, out_dir);
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
  snprintf(wd, sizeof wd, "%d", TRUTH_WATCHDOG_MS);
  snprintf(err_path, sizeof err_path, "%s/truth-java-%d.err", out_dir, (int)getpid());
  int to[2], from[2];
  if (pipe(to) != 0 || pipe(from) != 0)
    return -1;
  w->pid = fork();
  if (w->pid < 0)
    return -1;
  if (w->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* the peer never outlives its worker */
    dup2(to[0], 0);
    dup2(from[1], 1);
    int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err >= 0)
      dup2(err, 2);
    close(to[1]);
    close(from[0]);
    execlp("java", "java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath, "relock.interop.Peer", url,
           wd, (char *)NULL);
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  w->in = to[1];
  w->out = from[0];
  return 0;
}

/* Reads what the peer said; calls on_line for each whole line. 0 when the
 * peer is gone. */
static int pump(jworker_t *w, int wait_ms, void (*on_line)(jworker_t *, char *)) {
  struct pollfd pfd = {w->out, POLLIN, 0};
  if (poll(&pfd, 1, wait_ms) <= 0)
    return 1;
  ssize_t n = read(w->out, w->buf + w->len, sizeof w->buf - 1 - w->len);
  if (n <= 0)
    return 0;
  w->len += (size_t)n;
  char *nl;
  while ((nl = memchr(w->buf, '\n', w->len)) != NULL) {
    *nl = '\0';
    on_line(w, w->buf);
    size_t used = (size_t)(nl - w->buf) + 1;
    memmove(w->buf, nl + 1, w->len - used);
    w->len -= used;
  }
  return 1;
}

static void on_ready(jworker_t *w, char *line) {
  if (strncmp(line, "ready ", 6) == 0)
    snprintf(w->client_id, sizeof w->client_id, "%s", line + 6);
}

/* A permit tryAcquire's answer: its id, or "null". A Redisson permit is
 * believed until its lease (less the drift margin) from the send: it counts
 * against relock's permits until then, unless a break of truth came first
 * (foreign: never told of a loss). */
static void got_permit(jworker_t *w, tag_t *t, const char *result) {
  int got = strcmp(result, "null") != 0;
  truth_trace(w->slot, "j%d pestry %s: %s", (int)(t - w->tags), truth_names[t->op_name], got ? result : "none");
  if (!got)
    return;
  atomic_fetch_add(&w->slot->acquired, 1);
  atomic_fetch_add(&w->sh->acquired_by_kind[K_PERMIT], 1);
  t->kind = K_PERMIT;
  t->name = t->op_name;
  t->count = 1;
  snprintf(t->permit_id, sizeof t->permit_id, "%s", result);
  truth_belief_t b = {.name = t->name, .kind = K_PERMIT, .count = 1, .foreign = 1, .fixed = 1};
  b.since_ns = b.latest_ns = t->sent_ns;
  b.deadline_ns = t->sent_ns + (uint64_t)(t->op_lease - t->op_lease / 100 - 2) * 1000000u;
  b.lease_ms = t->op_lease;
  truth_belief_t old;
  truth_belief_read(&w->slot->beliefs[t->slot], &old);
  b.epoch = old.epoch + 1;
  snprintf(b.field, sizeof b.field, "%s", result);
  truth_belief_write(&w->slot->beliefs[t->slot], &b);
}

/* "jN OP RESULT NANOTIME" or "jN thread ID". */
static void on_answer(jworker_t *w, char *line) {
  if (line[0] != 'j' || line[1] < '0' || line[1] >= '0' + TAGS || line[2] != ' ')
    return;
  tag_t *t = &w->tags[line[1] - '0'];
  char op[32] = "", result[256] = "";
  if (sscanf(line + 3, "%31s %255s", op, result) < 2)
    return;
  if (strcmp(op, "thread") == 0) {
    snprintf(t->thread_id, sizeof t->thread_id, "%s", result);
    return;
  }
  t->busy = 0;
  atomic_fetch_add(&w->slot->ops, 1);
  if (strncmp(op, "pes", 3) == 0)
    atomic_fetch_sub(&w->sh->sem_inflight, 1); /* from its send */
  if (strcmp(result, "error") == 0) {
    atomic_fetch_add(&w->slot->errors, 1);
    truth_trace(w->slot, "j%d %s %s %s: %s", (int)(t - w->tags), op, java_kind(t->op_kind), truth_names[t->op_name],
                line + 3);
    return;
  }
  if (strcmp(op, "pestry") == 0) {
    got_permit(w, t, result);
    return;
  }
  if (strcmp(op, "trylock") != 0)
    return;
  int got = strcmp(result, "false") != 0;
  truth_trace(w->slot, "j%d trylock %s %s: %s", (int)(t - w->tags), java_kind(t->op_kind), truth_names[t->op_name],
              got ? "acquired" : "not acquired");
  if (!got)
    return;
  atomic_fetch_add(&w->slot->acquired, 1);
  atomic_fetch_add(&w->sh->acquired_by_kind[t->op_kind], 1);
  if (t->count == 0) {
    t->kind = t->op_kind;
    t->name = t->op_name;
  }
  if (t->count < MAX_HOLDS)
    t->leases[t->count] = t->op_lease;
  t->count++;
  truth_belief_t b = {.name = t->name, .kind = t->kind, .count = t->count, .foreign = 1};
  truth_belief_t old;
  truth_belief_read(&w->slot->beliefs[t->slot], &old);
  b.since_ns = old.name == t->name ? old.since_ns : t->sent_ns;
  b.latest_ns = t->sent_ns;
  b.epoch = old.epoch + 1;
  b.fixed = t->op_lease > 0;
  /* a fixed lease from its send, less the margin; the watchdog: open */
  uint64_t deadline = t->op_lease > 0 ? t->sent_ns + (uint64_t)(t->op_lease - t->op_lease / 100 - 2) * 1000000u
                                      : UINT64_MAX;
  b.deadline_ns = old.name == t->name && old.deadline_ns > deadline ? old.deadline_ns : deadline;
  field_of(w, t, t->kind, b.field, sizeof b.field);
  truth_belief_write(&w->slot->beliefs[t->slot], &b);
}

/* -- choosing ---------------------------------------------------------------*/

static const int java_kinds[] = {K_REENTRANT, K_SPIN, K_FENCED, K_FAIR, K_READ, K_WRITE, K_PERMIT};
#define JAVA_KINDS ((int)(sizeof java_kinds / sizeof java_kinds[0]))

/* Redisson may touch name until then (an acquisition or unlock in flight,
 * whose hold its watchdog may still renew while the worker states no
 * belief): the observer tolerates a TTL it cuts meanwhile. */
static void foreign_busy(jworker_t *w, int name, uint64_t until_ns) {
  uint64_t was = atomic_load(&w->sh->foreign_trying_ns[name]);
  while (was < until_ns && !atomic_compare_exchange_weak(&w->sh->foreign_trying_ns[name], &was, until_ns))
    ;
}

static void next(jworker_t *w, tag_t *t) {
  uint64_t now = truth_now_ns();
  if (t->busy || now < t->idle_until_ns || t->thread_id[0] == '\0')
    return;
  int ti = (int)(t - w->tags);
  int r = below(w, 100);
  if (t->count > 0 && (r < 45 || atomic_load(&w->sh->stop))) {
    /* withdraw the belief, then unlock */
    t->count--;
    if (t->count == 0) {
      truth_belief_t empty = {.name = -1}, was;
      truth_belief_read(&w->slot->beliefs[t->slot], &was);
      empty.epoch = was.epoch + 1; /* a belief made anew differs from this one */
      truth_belief_write(&w->slot->beliefs[t->slot], &empty);
    } else {
      truth_belief_t b;
      truth_belief_read(&w->slot->beliefs[t->slot], &b);
      b.count = t->count;
      b.epoch++;
      truth_belief_write(&w->slot->beliefs[t->slot], &b);
    }
    t->op_kind = t->kind;
    t->op_name = t->name;
    t->busy = 1;
    t->sent_ns = now;
    t->bound_ns = now + 10000000000ull;
    if (t->kind == K_PERMIT) {
      atomic_fetch_add(&w->sh->sem_inflight, 1); /* until its answer */
      truth_trace(w->slot, "j%d pesrelease %s %s", ti, truth_names[t->name], t->permit_id);
      send_line(w, "j%d pesrelease %s %s", ti, truth_names[t->name], t->permit_id);
      return;
    }
    foreign_busy(w, t->name, now + 1000000000u);
    truth_trace(w->slot, "j%d unlock %s %s", ti, java_kind(t->kind), truth_names[t->name]);
    send_line(w, "j%d unlock %s %s", ti, java_kind(t->kind), truth_names[t->name]);
    return;
  }
  if (atomic_load(&w->sh->stop))
    return;
  if (t->count > 0 && (r >= 60 || t->count >= MAX_HOLDS || t->kind == K_PERMIT)) {
    t->idle_until_ns = now + (uint64_t)below(w, 80) * 1000000u; /* hold on */
    return;
  }
  int kind = t->count > 0 ? t->kind : java_kinds[below(w, JAVA_KINDS)];
  if (!(w->sh->kinds & (1u << kind)) || (kind == K_PERMIT && atomic_load(&w->sh->sem_paused))) {
    t->idle_until_ns = now + 20000000u;
    return;
  }
  int name = t->count > 0 ? t->name : truth_kind_first_name(kind) + below(w, truth_kind_name_count(kind));
  static const int64_t waits[] = {0, 50, 300, 1000};
  int64_t wait = waits[below(w, 4)];
  int64_t lease = below(w, 2) ? -1 : 300 + below(w, TRUTH_MAX_FIXED_LEASE_MS - 300);
  t->op_kind = kind;
  t->op_name = name;
  t->op_lease = lease;
  t->busy = 1;
  t->sent_ns = now;
  t->bound_ns = now + (uint64_t)(wait + 10000) * 1000000u;
  if (kind == K_PERMIT) {
    /* always a lease: a permit Redisson took while its answer was lost
     * (an error here) is nobody's, and must run out by itself */
    t->op_lease = lease = 300 + below(w, TRUTH_MAX_FIXED_LEASE_MS - 300);
    atomic_fetch_add(&w->sh->sem_inflight, 1); /* until its answer */
    truth_trace(w->slot, "j%d pestry %s wait %lld lease %lld", ti, truth_names[name], (long long)wait,
                (long long)lease);
    send_line(w, "j%d pestry %s %lld %lld", ti, truth_names[name], (long long)wait, (long long)lease);
    return;
  }
  foreign_busy(w, name, now + (uint64_t)(wait + 1000) * 1000000u);
  truth_trace(w->slot, "j%d trylock %s %s wait %lld lease %lld", ti, java_kind(kind), truth_names[name],
              (long long)wait, (long long)lease);
  send_line(w, "j%d trylock %s %s %lld %lld", ti, java_kind(kind), truth_names[name], (long long)wait,
            (long long)lease);
}

int truth_java_worker_main(truth_shared_t *sh, int id, int port, uint64_t seed) {
  static jworker_t w;
  w.sh = sh;
  w.slot = &sh->w[id];
  w.id = id;
  w.rng = seed | 1;
  for (int s = 0; s < TRUTH_SLOTS; s++) {
    truth_belief_t empty = {.name = -1};
    truth_belief_write(&w.slot->beliefs[s], &empty);
  }
  signal(SIGPIPE, SIG_IGN);
  if (start_peer(&w, port) != 0)
    return 2;
  uint64_t end = truth_now_ns() + 60000000000ull;
  while (w.client_id[0] == '\0' && truth_now_ns() < end)
    if (!pump(&w, 100, on_ready))
      return 3;
  if (w.client_id[0] == '\0')
    return 3;
  truth_trace(w.slot, "java worker %d: Redisson client %s", id, w.client_id);
  atomic_store(&w.slot->ready, 1);
  for (int i = 0; i < TAGS; i++) {
    w.tags[i].slot = i;
    send_line(&w, "j%d sleep 1", i); /* makes its thread: "jN thread ID" */
    w.tags[i].busy = 1;
    w.tags[i].bound_ns = truth_now_ns() + 30000000000ull;
  }
  for (;;) {
    int busy = 0;
    uint64_t now = truth_now_ns();
    for (int i = 0; i < TAGS; i++) {
      next(&w, &w.tags[i]);
      busy += w.tags[i].busy || w.tags[i].count > 0;
      if (w.tags[i].busy && now > w.tags[i].bound_ns) {
        atomic_fetch_add(&w.slot->foreign_slow, 1);
        truth_trace(w.slot, "j%d: took longer than its bound (no answer)", i);
        fprintf(stderr, "# java worker %d: j%d's %s on %s got no answer within its bound\n", id, i,
                java_kind(w.tags[i].op_kind), truth_names[w.tags[i].op_name]);
        w.tags[i].bound_ns = UINT64_MAX;
      }
    }
    if (atomic_load(&sh->stop) && busy == 0)
      break;
    if (!pump(&w, 5, on_answer))
      return 4;
  }
  send_line(&w, "quit");
  int status = 0;
  for (int i = 0; i < 200 && waitpid(w.pid, &status, WNOHANG) == 0; i++)
    usleep(50000);
  kill(w.pid, SIGKILL);
  waitpid(w.pid, &status, 0);
  atomic_store(&w.slot->done, 1);
  return 0;
}
