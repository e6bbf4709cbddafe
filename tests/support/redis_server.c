/* Runs private redis-servers for the integration tests (see redis_server.h).
 *
 * Every server is a child of the test process, known by pid only: nothing
 * here looks processes up by name. A server must never outlive its test
 * program, so three things kill it: an atexit() handler, handlers for the
 * fatal signals (kill() by pid, then the signal goes on as before), and on
 * Linux PR_SET_PDEATHSIG in the child for deaths no handler sees (SIGKILL).
 * A pid is in the registry exactly while it is an unreaped child, so a
 * kill() from here can never hit a stranger that reused the pid.
 *
 * The command helper speaks RESP over plain sockets, not hiredis, so tests
 * can check the server without trusting the library they test. */
#define _GNU_SOURCE

#include "support/redis_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
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
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#define HOST "127.0.0.1"
#define MAX_SERVERS 64          /* live children at once, version probes included */
#define MAX_CMD_ARGS 64         /* relock_test_redis_cmd(); cmdv has no limit */
#define MAX_FIXED_ARGS 48       /* the arguments start() itself passes */
#define START_TIMEOUT_MS 10000
#define CMD_TIMEOUT_MS 5000
#define STOP_TIMEOUT_MS 5000
#define PING_TIMEOUT_MS 250     /* one readiness probe */
#define PORT_ATTEMPTS 5         /* a picked port can be taken before redis binds it */
#define LOG_TAIL_BYTES 3000

typedef struct sockaddr_un sockaddr_un_t;

struct relock_test_redis {
  char dir[96];
  char sock[sizeof(((sockaddr_un_t *)0)->sun_path)];
  char log[128];
  char conf[128];      /* "" without a config file */
  int sentinel;
  char port_str[16];
  pid_t pid;           /* 0 while not running */
  int port;
  int fixed_port;      /* the caller chose the port: never pick another */
  int paused;
  int version;
  int aof;
  char *password;
  char **extra;        /* NULL-terminated copy of opts->extra_args */
  int tls;             /* the port speaks TLS, with these files */
  char tls_cert[160], tls_key[160], tls_ca[160];
  int start_timeout_ms;
  int cmd_timeout_ms;
  relock_test_redis_t *next; /* in g_live, for the exit handler */
};

/* -- the registry and the safety net ------------------------------------ */

static volatile sig_atomic_t g_pids[MAX_SERVERS]; /* unreaped children; 0 = free slot */
static volatile sig_atomic_t g_owner;             /* the process that started them */
static relock_test_redis_t *g_live;               /* servers not yet freed */
static int g_atexit_done;

static const int k_fatal_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGABRT,
                                      SIGSEGV, SIGBUS,  SIGFPE, SIGILL};
#define N_FATAL (sizeof k_fatal_signals / sizeof k_fatal_signals[0])
static struct sigaction g_prev[N_FATAL];

static int registry_add(pid_t pid) {
  for (size_t i = 0; i < MAX_SERVERS; i++) {
    if (g_pids[i] == 0) {
      g_pids[i] = (sig_atomic_t)pid;
      return 0;
    }
  }
  return -1;
}

static void registry_remove(pid_t pid) {
  for (size_t i = 0; i < MAX_SERVERS; i++) {
    if (g_pids[i] == (sig_atomic_t)pid) g_pids[i] = 0;
  }
}

/* Async-signal-safe: kill() only, on registered (unreaped) pids. */
static void kill_registered(void) {
  for (size_t i = 0; i < MAX_SERVERS; i++) {
    pid_t pid = (pid_t)g_pids[i];
    if (pid > 0) kill(pid, SIGKILL);
  }
}

/* Kills the servers, then lets the signal do what it did before: the
 * previous disposition is restored and the signal raised again; it is
 * delivered when this handler returns. */
static void on_fatal_signal(int sig) {
  int saved_errno = errno;
  if (getpid() == (pid_t)g_owner) kill_registered();
  for (size_t i = 0; i < N_FATAL; i++) {
    if (k_fatal_signals[i] == sig) sigaction(sig, &g_prev[i], NULL);
  }
  raise(sig);
  errno = saved_errno;
}

/* Called on every start: a test framework may have replaced the handlers
 * since (cmocka saves and restores its own around each test). A signal the
 * program ignores stays ignored. */
static void install_signal_handlers(void) {
  for (size_t i = 0; i < N_FATAL; i++) {
    struct sigaction cur, sa;
    if (sigaction(k_fatal_signals[i], NULL, &cur) != 0) continue;
    if (!(cur.sa_flags & SA_SIGINFO) &&
        (cur.sa_handler == on_fatal_signal || cur.sa_handler == SIG_IGN))
      continue;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigfillset(&sa.sa_mask);
    g_prev[i] = cur; /* before the handler can run */
    sigaction(k_fatal_signals[i], &sa, NULL);
  }
}

static void kill_and_reap(pid_t pid);
static int wait_fd(int fd, short events, int64_t deadline);
static void remove_tree(const char *dir);
static void destroy(relock_test_redis_t *r);

/* A test that ends without freeing its servers (a failed assertion, an
 * exit()) still kills them and removes their dirs. Children of the test
 * that call exit() have a different pid and touch nothing. */
static void cleanup_at_exit(void) {
  if (getpid() != (pid_t)g_owner) return;
  while (g_live != NULL) {
    relock_test_redis_t *r = g_live;
    if (r->pid > 0) {
      fprintf(stderr, "# relock_test_redis: server pid %ld (port %d) still running at exit: killed\n",
              (long)r->pid, r->port);
      kill_and_reap(r->pid);
      r->pid = 0;
    }
    g_live = r->next;
    remove_tree(r->dir);
    destroy(r);
  }
  for (size_t i = 0; i < MAX_SERVERS; i++) {
    pid_t pid = (pid_t)g_pids[i];
    if (pid > 0) kill_and_reap(pid);
  }
}

static void arm_safety_net(void) {
  /* In a child forked from the test (one that starts servers of its own),
   * the inherited servers belong to the parent: forget, never kill them. */
  if (g_owner != 0 && (pid_t)g_owner != getpid()) {
    for (size_t i = 0; i < MAX_SERVERS; i++) g_pids[i] = 0;
    g_live = NULL;
  }
  g_owner = (sig_atomic_t)getpid();
  if (!g_atexit_done && atexit(cleanup_at_exit) == 0) g_atexit_done = 1;
  install_signal_handlers();
}

/* -- time ------------------------------------------------------------------ */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static int remaining_ms(int64_t deadline) {
  int64_t left = deadline - now_ms();
  if (left <= 0) return 0;
  return left > INT_MAX ? INT_MAX : (int)left;
}

/* -- processes ------------------------------------------------------------- */

/* Waits for pid to exit, up to timeout_ms (-1: for ever). 1 = reaped. */
static int reap(pid_t pid, int timeout_ms, int *status) {
  int64_t deadline = now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
  int backoff = 1, st = 0;
  for (;;) {
    pid_t w = waitpid(pid, &st, timeout_ms < 0 ? 0 : WNOHANG);
    if (w == pid || (w < 0 && errno == ECHILD)) {
      registry_remove(pid);
      if (status != NULL) *status = w == pid ? st : 0;
      return 1;
    }
    if (w < 0 && errno != EINTR) return 0;
    if (timeout_ms >= 0) {
      if (remaining_ms(deadline) == 0) return 0;
      sleep_ms(backoff);
      if (backoff < 20) backoff *= 2;
    }
  }
}

static void kill_and_reap(pid_t pid) {
  kill(pid, SIGKILL);
  reap(pid, -1, NULL);
}

/* The child between fork and exec: only async-signal-safe calls. */
static void child_exec(const char *path, char *const argv[], int out_fd, int err_fd, const char *dir,
                       pid_t parent, long max_fd) {
  struct sigaction dfl;
  sigset_t none;
  int e, null_fd;

  setpgid(0, 0);
#if defined(__linux__)
  /* Dies with the test even when it is SIGKILLed. The parent may already
   * be gone before this call: then getppid() has changed. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
#else
  (void)parent;
#endif
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < 32; sig++) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, NULL);
  }
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);

  null_fd = open("/dev/null", O_RDONLY);
  if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0) goto fail;
  for (long fd = 3; fd < max_fd; fd++) {
    if (fd != err_fd) close((int)fd);
  }
  if (dir != NULL && chdir(dir) != 0) goto fail;
  execvp(path, argv);
fail:
  e = errno;
  if (write(err_fd, &e, sizeof e) < 0) {
    /* nothing left to tell */
  }
  _exit(127);
}

/* fork + exec; out_fd becomes the child's stdout and stderr. Returns the
 * pid, or -1 with *exec_errno set when the program could not be run. */
static pid_t spawn(const char *path, char *const argv[], int out_fd, const char *dir, int *exec_errno) {
  int pfd[2], e = 0;
  sigset_t all, old;
  pid_t parent = getpid(), pid;
  long max_fd = sysconf(_SC_OPEN_MAX);
  ssize_t n;

  *exec_errno = 0;
  if (max_fd < 0 || max_fd > 4096) max_fd = 4096;
  if (pipe2(pfd, O_CLOEXEC) != 0) {
    *exec_errno = errno;
    return -1;
  }
  /* No signal between fork and registering the pid: the handlers must
   * know every child. */
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &old);
  pid = fork();
  if (pid == 0) {
    close(pfd[0]);
    child_exec(path, argv, out_fd, pfd[1], dir, parent, max_fd);
  }
  if (pid > 0) {
    setpgid(pid, pid); /* also done by the child; whichever runs first */
    if (registry_add(pid) != 0) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      pid = -1;
      e = EAGAIN;
    }
  } else {
    e = errno;
  }
  sigprocmask(SIG_SETMASK, &old, NULL);
  close(pfd[1]);
  if (pid < 0) {
    close(pfd[0]);
    *exec_errno = e;
    return -1;
  }
  /* EOF: exec succeeded (the pipe is close-on-exec); an int: it failed. */
  do {
    n = read(pfd[0], &e, sizeof e);
  } while (n < 0 && errno == EINTR);
  close(pfd[0]);
  if (n == (ssize_t)sizeof e) {
    reap(pid, -1, NULL);
    *exec_errno = e;
    return -1;
  }
  return pid;
}

/* -- the server binary ----------------------------------------------------- */

const char *relock_test_redis_server_path(void) {
  const char *p = getenv("REDIS_SERVER");
  return p != NULL && *p != '\0' ? p : "redis-server";
}

static int is_executable(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int relock_test_redis_available(void) {
  const char *name = relock_test_redis_server_path();
  const char *p = getenv("PATH");
  char buf[PATH_MAX];

  if (strchr(name, '/') != NULL) return is_executable(name);
  if (p == NULL) p = "/usr/local/bin:/usr/bin:/bin";
  for (;;) {
    const char *end = strchr(p, ':');
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    int n = len == 0 ? snprintf(buf, sizeof buf, "./%s", name)
                     : snprintf(buf, sizeof buf, "%.*s/%s", (int)len, p, name);
    if (n > 0 && (size_t)n < sizeof buf && is_executable(buf)) return 1;
    if (end == NULL) return 0;
    p = end + 1;
  }
}

/* "Redis server v=7.0.15 sha=..." -> 70015; 0 when unknown. Cached: every
 * start would otherwise pay a fork + exec. */
static int server_version(const char *path) {
  static char cached_path[PATH_MAX];
  static int cached_version = -1;
  char out[512], *v;
  char *argv[3];
  int pfd[2], e, major = 0, minor = 0, patch = 0;
  size_t len = 0;
  int64_t deadline;
  pid_t pid;

  if (cached_version >= 0 && strcmp(cached_path, path) == 0) return cached_version;
  if (pipe2(pfd, O_CLOEXEC) != 0) return 0;
  argv[0] = (char *)(uintptr_t)path;
  argv[1] = (char *)(uintptr_t)"--version";
  argv[2] = NULL;
  pid = spawn(path, argv, pfd[1], NULL, &e);
  close(pfd[1]);
  if (pid < 0) {
    close(pfd[0]);
    return 0;
  }
  deadline = now_ms() + 3000;
  while (len < sizeof out - 1 && wait_fd(pfd[0], POLLIN, deadline) == 0) {
    ssize_t n = read(pfd[0], out + len, sizeof out - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
  }
  out[len] = '\0';
  close(pfd[0]);
  if (!reap(pid, remaining_ms(deadline), NULL)) kill_and_reap(pid);
  v = strstr(out, "v=");
  if (v == NULL || sscanf(v, "v=%d.%d.%d", &major, &minor, &patch) < 2) return 0;
  snprintf(cached_path, sizeof cached_path, "%s", path);
  cached_version = major * 10000 + minor * 100 + patch;
  return cached_version;
}

/* -- the log --------------------------------------------------------------- */

static off_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? st.st_size : 0;
}

/* Reads the log from byte `from` on, at most cap - 1 bytes from its end. */
static size_t read_log(const char *path, off_t from, char *buf, size_t cap) {
  off_t size = file_size(path), start = from;
  ssize_t n;
  int fd;

  if (size - start > (off_t)(cap - 1)) start = size - (off_t)(cap - 1);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  n = pread(fd, buf, cap - 1, start);
  close(fd);
  if (n < 0) n = 0;
  buf[n] = '\0';
  return (size_t)n;
}

static void print_log_tail(const relock_test_redis_t *r, off_t from) {
  char buf[LOG_TAIL_BYTES];
  size_t n = read_log(r->log, from, buf, sizeof buf);
  char *line = buf, *nl;

  fprintf(stderr, "# relock_test_redis: tail of %s:\n", r->log);
  if (n == 0) fprintf(stderr, "#   (empty)\n");
  while (n > 0 && *line != '\0') {
    nl = strchr(line, '\n');
    if (nl != NULL) *nl = '\0';
    fprintf(stderr, "#   %s\n", line);
    if (nl == NULL) break;
    line = nl + 1;
  }
}

static int log_contains(const relock_test_redis_t *r, off_t from, const char *needle) {
  char buf[16384];
  read_log(r->log, from, buf, sizeof buf);
  return strstr(buf, needle) != NULL;
}

/* -- RESP over a unix socket ----------------------------------------------- */

enum { SCAN_OK, SCAN_MORE, SCAN_BAD };

static int parse_len(const char *s, const char *e, long long *out) {
  long long v = 0;
  int neg = 0;
  if (s < e && *s == '-') {
    neg = 1;
    s++;
  }
  if (s == e) return -1;
  for (; s < e; s++) {
    if (*s < '0' || *s > '9' || v > (LLONG_MAX - 9) / 10) return -1;
    v = v * 10 + (*s - '0');
  }
  *out = neg ? -v : v;
  return 0;
}

/* Finds where the reply starting at buf[pos] ends (RESP2, and RESP3's
 * types but attributes), without copying anything. */
static int scan_reply(const char *buf, size_t len, size_t pos, int depth, size_t *end) {
  const char *eol;
  long long n;
  size_t p;

  if (depth > 32) return SCAN_BAD;
  if (pos >= len) return SCAN_MORE;
  eol = memmem(buf + pos, len - pos, "\r\n", 2);
  if (eol == NULL) return SCAN_MORE;
  p = (size_t)(eol - buf) + 2;
  switch (buf[pos]) {
  case '+': case '-': case ':': case '_': case ',': case '#': case '(':
    *end = p;
    return SCAN_OK;
  case '$': case '!': case '=':
    if (parse_len(buf + pos + 1, eol, &n) != 0 || n < -1) return SCAN_BAD;
    if (n == -1) {
      *end = p;
      return SCAN_OK;
    }
    if ((unsigned long long)n > len || len - p < (size_t)n + 2) return SCAN_MORE;
    if (buf[p + (size_t)n] != '\r' || buf[p + (size_t)n + 1] != '\n') return SCAN_BAD;
    *end = p + (size_t)n + 2;
    return SCAN_OK;
  case '*': case '~': case '>': case '%':
    if (parse_len(buf + pos + 1, eol, &n) != 0 || n < -1) return SCAN_BAD;
    if (n > (long long)len) return SCAN_MORE; /* each element takes bytes */
    if (buf[pos] == '%') n *= 2;
    for (long long i = 0; i < n; i++) {
      int rc = scan_reply(buf, len, p, depth + 1, &p);
      if (rc != SCAN_OK) return rc;
    }
    *end = p;
    return SCAN_OK;
  default:
    return SCAN_BAD;
  }
}

static int wait_fd(int fd, short events, int64_t deadline) {
  for (;;) {
    struct pollfd pfd = {fd, events, 0};
    int rc = poll(&pfd, 1, remaining_ms(deadline));
    if (rc > 0) return 0;
    if (rc == 0) return -ETIMEDOUT;
    if (errno != EINTR) return -errno;
  }
}

static int connect_unix(const char *path, int64_t deadline, int *out) {
  sockaddr_un_t sa;
  int fd, rc, err = 0;
  socklen_t errlen = sizeof err;

  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof sa.sun_path) return -ENAMETOOLONG;
  memcpy(sa.sun_path, path, strlen(path) + 1);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  for (;;) {
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) break;
    if (errno == EINTR) continue;
    if (errno == EAGAIN) { /* backlog full: a paused server, say */
      if (remaining_ms(deadline) == 0) {
        close(fd);
        return -ETIMEDOUT;
      }
      sleep_ms(5);
      continue;
    }
    if (errno != EINPROGRESS) {
      rc = -errno;
      close(fd);
      return rc;
    }
    if ((rc = wait_fd(fd, POLLOUT, deadline)) != 0) {
      close(fd);
      return rc;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &errlen) != 0 || err != 0) {
      close(fd);
      return -(err != 0 ? err : errno);
    }
    break;
  }
  *out = fd;
  return 0;
}

static int send_all(int fd, const char *buf, size_t len, int64_t deadline) {
  while (len > 0) {
    ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
    if (n > 0) {
      buf += n;
      len -= (size_t)n;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int rc = wait_fd(fd, POLLOUT, deadline);
      if (rc != 0) return rc;
    } else if (n < 0 && errno != EINTR) {
      return -errno;
    }
  }
  return 0;
}

static int read_reply(int fd, char *buf, size_t cap, int64_t deadline) {
  size_t len = 0, end;
  buf[0] = '\0';
  for (;;) {
    int rc = len > 0 ? scan_reply(buf, len, 0, 0, &end) : SCAN_MORE;
    ssize_t n;
    if (rc == SCAN_OK) return 0;
    if (rc == SCAN_BAD) return -EPROTO;
    if (len == cap - 1) return -ENOSPC;
    if ((rc = wait_fd(fd, POLLIN, deadline)) != 0) return rc;
    n = recv(fd, buf + len, cap - 1 - len, 0);
    if (n == 0) return -ECONNRESET;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return -errno;
    }
    len += (size_t)n;
    buf[len] = '\0';
  }
}

/* One request in RESP: *argc, then $len + bytes for each argument. */
static char *encode(int argc, const char *const *argv, const size_t *argvlen, size_t *outlen) {
  size_t cap = 32, len;
  char *buf;
  for (int i = 0; i < argc; i++) cap += (argvlen != NULL ? argvlen[i] : strlen(argv[i])) + 32;
  buf = malloc(cap);
  if (buf == NULL) return NULL;
  len = (size_t)snprintf(buf, cap, "*%d\r\n", argc);
  for (int i = 0; i < argc; i++) {
    size_t n = argvlen != NULL ? argvlen[i] : strlen(argv[i]);
    len += (size_t)snprintf(buf + len, cap - len, "$%zu\r\n", n);
    memcpy(buf + len, argv[i], n);
    len += n;
    memcpy(buf + len, "\r\n", 2);
    len += 2;
  }
  *outlen = len;
  return buf;
}

static int roundtrip(int fd, int argc, const char *const *argv, const size_t *argvlen, char *reply,
                     size_t replylen, int64_t deadline) {
  size_t len;
  char *req = encode(argc, argv, argvlen, &len);
  int rc;
  if (req == NULL) return -ENOMEM;
  rc = send_all(fd, req, len, deadline);
  free(req);
  return rc != 0 ? rc : read_reply(fd, reply, replylen, deadline);
}

static int cmd_with_deadline(const relock_test_redis_t *r, char *reply, size_t replylen, int argc,
                             const char *const *argv, const size_t *argvlen, int64_t deadline) {
  char scratch[4096];
  int fd = -1, rc;

  if (r == NULL || argc <= 0 || argv == NULL || (reply != NULL && replylen == 0)) return -EINVAL;
  if (reply == NULL) {
    reply = scratch;
    replylen = sizeof scratch;
  }
  reply[0] = '\0';
  if ((rc = connect_unix(r->sock, deadline, &fd)) != 0) return rc;
  if (r->password != NULL) {
    const char *auth[2] = {"AUTH", r->password};
    rc = roundtrip(fd, 2, auth, NULL, reply, replylen, deadline);
    if (rc == 0 && strncmp(reply, "+OK", 3) != 0) rc = -EACCES;
  }
  if (rc == 0) rc = roundtrip(fd, argc, argv, argvlen, reply, replylen, deadline);
  close(fd);
  return rc;
}

int relock_test_redis_cmdv(const relock_test_redis_t *r, char *reply, size_t replylen, int argc,
                           const char *const *argv, const size_t *argvlen) {
  if (r == NULL) return -EINVAL;
  return cmd_with_deadline(r, reply, replylen, argc, argv, argvlen, now_ms() + r->cmd_timeout_ms);
}

int relock_test_redis_cmd(const relock_test_redis_t *r, char *reply, size_t replylen,
                          const char *arg0, ...) {
  const char *argv[MAX_CMD_ARGS];
  int argc = 0;
  const char *a;
  va_list ap;

  va_start(ap, arg0);
  for (a = arg0; a != NULL; a = va_arg(ap, const char *)) {
    if (argc == MAX_CMD_ARGS) {
      va_end(ap);
      return -E2BIG;
    }
    argv[argc++] = a;
  }
  va_end(ap);
  return relock_test_redis_cmdv(r, reply, replylen, argc, argv, NULL);
}

int relock_test_redis_acl_user(const relock_test_redis_t *r, const char *user, ...) {
  const char *argv[MAX_CMD_ARGS] = {"ACL", "SETUSER", user};
  int argc = 3;
  const char *a;
  va_list ap;

  va_start(ap, user);
  for (a = va_arg(ap, const char *); a != NULL; a = va_arg(ap, const char *)) {
    if (argc == MAX_CMD_ARGS - 1) {
      va_end(ap);
      return -E2BIG;
    }
    argv[argc++] = a;
  }
  va_end(ap);
  /* Before 6.2 every user may use every channel, and "&*" is refused. */
  if (r != NULL && r->version >= 60200) argv[argc++] = "&*";
  char reply[512];
  int rc = relock_test_redis_cmdv(r, reply, sizeof reply, argc, argv, NULL);
  if (rc != 0) return rc;
  if (strcmp(reply, "+OK\r\n") != 0) {
    fprintf(stderr, "# relock_test_redis: ACL SETUSER %s: %s", user, reply);
    return -EPROTO;
  }
  return 0;
}

int relock_test_redis_subscribe(const relock_test_redis_t *r, const char *channel) {
  char reply[512];
  int64_t deadline;
  int fd = -1, rc;
  const char *sub[2] = {"SUBSCRIBE", channel};

  if (r == NULL || channel == NULL) return -EINVAL;
  deadline = now_ms() + r->cmd_timeout_ms;
  if ((rc = connect_unix(r->sock, deadline, &fd)) != 0) return rc;
  if (r->password != NULL) {
    const char *auth[2] = {"AUTH", r->password};
    rc = roundtrip(fd, 2, auth, NULL, reply, sizeof reply, deadline);
    if (rc == 0 && strncmp(reply, "+OK", 3) != 0) rc = -EACCES;
  }
  if (rc == 0) rc = roundtrip(fd, 2, sub, NULL, reply, sizeof reply, deadline);
  if (rc == 0 && (reply[0] != '*' || strstr(reply, "subscribe") == NULL)) rc = -EPROTO;
  if (rc != 0) {
    close(fd);
    return rc;
  }
  return fd;
}

int relock_test_redis_read(int fd, char *reply, size_t replylen, int timeout_ms) {
  if (fd < 0 || reply == NULL || replylen == 0) return -EINVAL;
  return read_reply(fd, reply, replylen, now_ms() + (timeout_ms < 0 ? 0 : timeout_ms));
}

/* -- starting -------------------------------------------------------------- */

static int pick_free_port(void) {
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

  if (fd < 0) return -1;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = 0;
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
      getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
    port = ntohs(sa.sin_port);
  close(fd);
  return port;
}

/* Starts the process; it answers only later (see wait_ready). */
static pid_t launch(relock_test_redis_t *r, int *exec_errno) {
  const char *path = relock_test_redis_server_path();
  const char *fixed[MAX_FIXED_ARGS];
  const char **argv;
  size_t n = 0, n_extra = 0;
  int log_fd;
  pid_t pid;

  fixed[n++] = path;
  if (r->conf[0] != '\0')
    fixed[n++] = r->conf;
  if (r->sentinel)
    fixed[n++] = "--sentinel";
  fixed[n++] = r->tls ? "--tls-port" : "--port";
  fixed[n++] = r->port_str;
  if (r->tls) {
    fixed[n++] = "--port";
    fixed[n++] = "0";
    fixed[n++] = "--tls-cert-file";
    fixed[n++] = r->tls_cert;
    fixed[n++] = "--tls-key-file";
    fixed[n++] = r->tls_key;
    fixed[n++] = "--tls-ca-cert-file";
    fixed[n++] = r->tls_ca;
    fixed[n++] = "--tls-auth-clients";
    fixed[n++] = "no";
  }
  fixed[n++] = "--bind";
  fixed[n++] = HOST;
  fixed[n++] = "--unixsocket";
  fixed[n++] = r->sock;
  fixed[n++] = "--unixsocketperm";
  fixed[n++] = "700";
  fixed[n++] = "--dir";
  fixed[n++] = r->dir;
  fixed[n++] = "--logfile";
  fixed[n++] = r->log;
  fixed[n++] = "--daemonize";
  fixed[n++] = "no";
  fixed[n++] = "--save";
  fixed[n++] = "";
  fixed[n++] = "--appendonly";
  fixed[n++] = r->aof ? "yes" : "no";
  if (r->aof) {
    fixed[n++] = "--appendfsync";
    fixed[n++] = "always";
  }
  /* DEBUG (SLEEP, ...) is off by default from 7.0 on, and older servers
   * refuse the option. */
  if (r->version >= 70000) {
    fixed[n++] = "--enable-debug-command";
    fixed[n++] = "local";
  }
  if (r->password != NULL) {
    fixed[n++] = "--requirepass";
    fixed[n++] = r->password;
  }
  while (r->extra != NULL && r->extra[n_extra] != NULL) n_extra++;
  argv = calloc(n + n_extra + 1, sizeof *argv);
  if (argv == NULL) {
    *exec_errno = ENOMEM;
    return -1;
  }
  memcpy(argv, fixed, n * sizeof *argv);
  for (size_t i = 0; i < n_extra; i++) argv[n + i] = r->extra[i];

  snprintf(r->port_str, sizeof r->port_str, "%d", r->port);
  unlink(r->sock); /* left behind by a kill -9 */
  log_fd = open(r->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) {
    *exec_errno = errno;
    free(argv);
    return -1;
  }
  /* execvp() takes char *const[] but changes nothing. */
  pid = spawn(path, (char *const *)(uintptr_t)argv, log_fd, r->dir, exec_errno);
  close(log_fd);
  free(argv);
  return pid;
}

enum { READY, EXITED, TIMED_OUT };

/* Polls PING on the unix socket until the server answers, dies, or the
 * deadline passes. -NOAUTH counts as an answer (a password in extra_args);
 * -LOADING does not. */
static int wait_ready(relock_test_redis_t *r, int64_t deadline, int *status) {
  const char *ping[1] = {"PING"};
  int backoff = 1;
  for (;;) {
    char reply[128];
    int64_t probe_deadline;
    pid_t w = waitpid(r->pid, status, WNOHANG);
    if (w == r->pid || (w < 0 && errno == ECHILD)) {
      if (w < 0) *status = 0;
      registry_remove(r->pid);
      r->pid = 0;
      return EXITED;
    }
    probe_deadline = now_ms() + PING_TIMEOUT_MS;
    if (probe_deadline > deadline) probe_deadline = deadline;
    if (cmd_with_deadline(r, reply, sizeof reply, 1, ping, NULL, probe_deadline) == 0 &&
        (strncmp(reply, "+PONG", 5) == 0 || strncmp(reply, "-NOAUTH", 7) == 0))
      return READY;
    if (remaining_ms(deadline) == 0) return TIMED_OUT;
    sleep_ms(backoff);
    if (backoff < 50) backoff *= 2;
  }
}

static void describe_exit(int status, char *buf, size_t len) {
  if (WIFEXITED(status))
    snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    snprintf(buf, len, "was killed by signal %d", WTERMSIG(status));
  else
    snprintf(buf, len, "ended");
}

/* Starts r's server and waits for it. A port picked here is picked again
 * when redis loses the race for it; a port kept across a restart is tried
 * again a few times (a stranger may hold it for a moment). */
static int start_server(relock_test_redis_t *r, int keep_port) {
  int attempts = r->fixed_port ? 1 : PORT_ATTEMPTS;
  for (int attempt = 1; attempt <= attempts; attempt++) {
    off_t log_from;
    int e = 0, status = 0, rc;
    char how[64];

    if (!r->fixed_port && !keep_port) {
      r->port = pick_free_port();
      if (r->port <= 0) {
        fprintf(stderr, "# relock_test_redis: cannot find a free port: %s\n", strerror(errno));
        return -1;
      }
    }
    log_from = file_size(r->log);
    r->paused = 0;
    r->pid = launch(r, &e);
    if (r->pid < 0) {
      r->pid = 0;
      fprintf(stderr, "# relock_test_redis: cannot run %s: %s\n", relock_test_redis_server_path(),
              strerror(e));
      return -1;
    }
    rc = wait_ready(r, now_ms() + r->start_timeout_ms, &status);
    if (rc == READY) return 0;
    if (rc == TIMED_OUT) {
      fprintf(stderr, "# relock_test_redis: %s (pid %ld, port %d) did not answer within %d ms\n",
              relock_test_redis_server_path(), (long)r->pid, r->port, r->start_timeout_ms);
      kill_and_reap(r->pid);
      r->pid = 0;
      print_log_tail(r, log_from);
      return -1;
    }
    if (attempt < attempts && log_contains(r, log_from, "Address already in use")) {
      fprintf(stderr, "# relock_test_redis: port %d was taken, trying again\n", r->port);
      if (keep_port) sleep_ms(200);
      continue;
    }
    describe_exit(status, how, sizeof how);
    fprintf(stderr, "# relock_test_redis: %s (port %d) %s while starting\n",
            relock_test_redis_server_path(), r->port, how);
    print_log_tail(r, log_from);
    return -1;
  }
  return -1;
}

static int make_dir(relock_test_redis_t *r) {
  const char *base = getenv("TMPDIR");
  int n;

  /* The socket path must fit in sun_path: a long $TMPDIR falls back to /tmp. */
  if (base == NULL || *base == '\0' ||
      strlen(base) + sizeof "/relock-redis-XXXXXX/redis.sock" > sizeof r->sock)
    base = "/tmp";
  n = snprintf(r->dir, sizeof r->dir, "%s/relock-redis-XXXXXX", base);
  if (n < 0 || (size_t)n >= sizeof r->dir || mkdtemp(r->dir) == NULL) {
    fprintf(stderr, "# relock_test_redis: cannot create a temp dir under %s: %s\n", base,
            strerror(errno));
    r->dir[0] = '\0';
    return -1;
  }
  snprintf(r->sock, sizeof r->sock, "%s/redis.sock", r->dir);
  snprintf(r->log, sizeof r->log, "%s/redis.log", r->dir);
  return 0;
}

static int copy_opts(relock_test_redis_t *r, const relock_test_redis_opts_t *o) {
  size_t n = 0;
  r->aof = o->aof;
  r->fixed_port = o->port;
  r->port = o->port;
  r->start_timeout_ms = o->start_timeout_ms > 0 ? o->start_timeout_ms : START_TIMEOUT_MS;
  r->cmd_timeout_ms = o->cmd_timeout_ms > 0 ? o->cmd_timeout_ms : CMD_TIMEOUT_MS;
  if (o->password != NULL && (r->password = strdup(o->password)) == NULL) return -1;
  if (o->tls_dir != NULL) {
    r->tls = 1;
    snprintf(r->tls_cert, sizeof r->tls_cert, "%s/server.crt", o->tls_dir);
    snprintf(r->tls_key, sizeof r->tls_key, "%s/server.key", o->tls_dir);
    snprintf(r->tls_ca, sizeof r->tls_ca, "%s/ca.crt", o->tls_dir);
  }
  r->sentinel = o->sentinel;
  if (o->extra_args == NULL) return 0;
  while (o->extra_args[n] != NULL) n++;
  if ((r->extra = calloc(n + 1, sizeof *r->extra)) == NULL) return -1;
  for (size_t i = 0; i < n; i++) {
    if ((r->extra[i] = strdup(o->extra_args[i])) == NULL) return -1;
  }
  return 0;
}

/* The config file of opts->config_text, written once: a sentinel rewrites
 * it with what it learns, and a restart must start from that. */
static int write_config(relock_test_redis_t *r, const char *text) {
  FILE *f;
  snprintf(r->conf, sizeof r->conf, "%s/redis.conf", r->dir);
  f = fopen(r->conf, "w");
  if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
    fprintf(stderr, "# relock_test_redis: cannot write %s: %s\n", r->conf, strerror(errno));
    return -1;
  }
  return 0;
}

static void destroy(relock_test_redis_t *r) {
  if (r->extra != NULL) {
    for (size_t i = 0; r->extra[i] != NULL; i++) free(r->extra[i]);
    free(r->extra);
  }
  free(r->password);
  free(r);
}

relock_test_redis_t *relock_test_redis_start(const relock_test_redis_opts_t *opts) {
  static const relock_test_redis_opts_t defaults;
  relock_test_redis_t *r = calloc(1, sizeof *r);

  if (opts == NULL) opts = &defaults;
  if (r == NULL) return NULL;
  if (opts->port < 0 || opts->port > 65535 || copy_opts(r, opts) != 0) {
    fprintf(stderr, "# relock_test_redis: bad options or out of memory\n");
    destroy(r);
    return NULL;
  }
  arm_safety_net();
  r->version = server_version(relock_test_redis_server_path());
  if (make_dir(r) != 0) {
    destroy(r);
    return NULL;
  }
  if (opts->config_text != NULL && write_config(r, opts->config_text) != 0) {
    remove_tree(r->dir);
    destroy(r);
    return NULL;
  }
  if (start_server(r, 0) != 0) {
    remove_tree(r->dir);
    destroy(r);
    return NULL;
  }
  r->next = g_live;
  g_live = r;
  return r;
}

/* -- stopping -------------------------------------------------------------- */

int relock_test_redis_stop(relock_test_redis_t *r) {
  if (r == NULL) return -1;
  if (r->pid == 0) return 0;
  kill(r->pid, SIGTERM);
  kill(r->pid, SIGCONT); /* a paused server must run to see SIGTERM */
  if (!reap(r->pid, STOP_TIMEOUT_MS, NULL)) {
    fprintf(stderr, "# relock_test_redis: pid %ld ignored SIGTERM for %d ms: SIGKILL\n",
            (long)r->pid, STOP_TIMEOUT_MS);
    kill_and_reap(r->pid);
  }
  r->pid = 0;
  r->paused = 0;
  return 0;
}

int relock_test_redis_kill9(relock_test_redis_t *r) {
  if (r == NULL || r->pid == 0) return -1;
  kill_and_reap(r->pid);
  r->pid = 0;
  r->paused = 0;
  return 0;
}

int relock_test_redis_restart(relock_test_redis_t *r) {
  if (r == NULL) return -1;
  relock_test_redis_stop(r);
  arm_safety_net();
  return start_server(r, 1);
}

/* Waits for the stop (or continue) to take effect, so the caller's next
 * command really meets a stopped (or running) server. */
static int signal_and_wait(relock_test_redis_t *r, int sig) {
  int st = 0;
  pid_t w;
  if (r == NULL || r->pid == 0) return -1;
  if (kill(r->pid, sig) != 0) return -1;
  do {
    w = waitpid(r->pid, &st, sig == SIGSTOP ? WUNTRACED : WCONTINUED);
  } while (w < 0 && errno == EINTR);
  if (w == r->pid && (WIFEXITED(st) || WIFSIGNALED(st))) {
    registry_remove(r->pid);
    r->pid = 0;
    r->paused = 0;
    return -1;
  }
  if (w != r->pid) return -1;
  r->paused = sig == SIGSTOP;
  return 0;
}

int relock_test_redis_pause(relock_test_redis_t *r) {
  if (r != NULL && r->paused) return 0;
  return signal_and_wait(r, SIGSTOP);
}

int relock_test_redis_resume(relock_test_redis_t *r) {
  if (r != NULL && r->pid != 0 && !r->paused) return 0;
  return signal_and_wait(r, SIGCONT);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  if (remove(path) != 0 && errno != ENOENT)
    fprintf(stderr, "# relock_test_redis: cannot remove %s: %s\n", path, strerror(errno));
  return 0;
}

static void remove_tree(const char *dir) {
  if (dir[0] != '\0') nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void relock_test_redis_free(relock_test_redis_t *r) {
  relock_test_redis_t **p;
  if (r == NULL) return;
  relock_test_redis_stop(r);
  for (p = &g_live; *p != NULL; p = &(*p)->next) {
    if (*p == r) {
      *p = r->next;
      break;
    }
  }
  remove_tree(r->dir);
  destroy(r);
}

/* -- accessors ------------------------------------------------------------- */

const char *relock_test_redis_host(const relock_test_redis_t *r) {
  (void)r;
  return HOST;
}

int relock_test_redis_port(const relock_test_redis_t *r) { return r->port; }
const char *relock_test_redis_unix_path(const relock_test_redis_t *r) { return r->sock; }
const char *relock_test_redis_dir(const relock_test_redis_t *r) { return r->dir; }
const char *relock_test_redis_log_path(const relock_test_redis_t *r) { return r->log; }
pid_t relock_test_redis_pid(const relock_test_redis_t *r) { return r->pid; }
int relock_test_redis_running(const relock_test_redis_t *r) { return r->pid != 0; }
int relock_test_redis_version(const relock_test_redis_t *r) { return r->version; }
int relock_test_redis_server_version(void) { return server_version(relock_test_redis_server_path()); }

void relock_test_redis_set_cmd_timeout(relock_test_redis_t *r, int ms) {
  r->cmd_timeout_ms = ms > 0 ? ms : CMD_TIMEOUT_MS;
}
