/* The Redisson peer (java_peer.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/java_peer.h"
#include "support/test.h"

#define MAX_LINES 256

struct java_peer {
  pid_t pid;
  int in;   /* its stdin */
  int out;  /* its stdout */
  char err_path[256];
  char id[128];
  char buf[65536];
  size_t len;
  char *lines[MAX_LINES]; /* answers not taken yet */
  int nlines;
  char result[1024];
};

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void die(java_peer_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(java_peer_t *p, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("# java peer: %s\n", msg);
  FILE *f = p != NULL ? fopen(p->err_path, "r") : NULL;
  if (f != NULL) { /* its last words */
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL && n++ < 40)
      printf("# peer stderr: %s", line);
    fclose(f);
  }
  fflush(stdout);
  fail_msg("java peer: %s", msg);
  abort(); /* not reached */
}

/* Reads what is there into lines, waiting at most wait_ms; 0 on EOF. */
static int pump(java_peer_t *p, int64_t wait_ms) {
  struct pollfd pfd = {p->out, POLLIN, 0};
  int r = poll(&pfd, 1, (int)(wait_ms < 0 ? 0 : wait_ms));
  if (r <= 0)
    return 1;
  ssize_t n = read(p->out, p->buf + p->len, sizeof p->buf - 1 - p->len);
  if (n <= 0)
    return 0;
  p->len += (size_t)n;
  p->buf[p->len] = '\0';
  char *nl;
  while ((nl = memchr(p->buf, '\n', p->len)) != NULL) {
    *nl = '\0';
    if (p->nlines < MAX_LINES)
      p->lines[p->nlines++] = strdup(p->buf);
    size_t used = (size_t)(nl - p->buf) + 1;
    memmove(p->buf, nl + 1, p->len - used);
    p->len -= used;
  }
  return 1;
}

/* The index of the first line starting "tag op ", or -1. */
static int find(java_peer_t *p, const char *tag, const char *op) {
  char prefix[256];
  snprintf(prefix, sizeof prefix, "%s %s ", tag, op);
  for (int i = 0; i < p->nlines; i++)
    if (strncmp(p->lines[i], prefix, strlen(prefix)) == 0)
      return i;
  return -1;
}

static int wait_for(java_peer_t *p, const char *tag, const char *op, int64_t timeout_ms) {
  uint64_t end = now_ms() + (uint64_t)timeout_ms;
  int i;
  while ((i = find(p, tag, op)) < 0) {
    uint64_t now = now_ms();
    if (now >= end)
      return -1;
    if (!pump(p, (int64_t)(end - now)))
      die(p, "it exited while the test waited for \"%s %s\"", tag, op);
  }
  return i;
}

java_peer_t *java_peer_start(const char *url, int64_t watchdog_ms, int64_t fair_wait_ms) {
  const char *src = getenv("RELOCK_SRCDIR"), *build = getenv("RELOCK_BUILDDIR");
  if (src == NULL || build == NULL)
    RELOCK_TEST_CANNOT_RUN("RELOCK_SRCDIR and RELOCK_BUILDDIR are not set: run it through make check");
  char out_dir[1024], cmd[4096];
  snprintf(out_dir, sizeof out_dir, "%s/tests/interop/peer", build);
  snprintf(cmd, sizeof cmd, "sh '%s/tests/interop/build.sh' '%s' >&2", src, out_dir);
  if (system(cmd) != 0)
    RELOCK_TEST_CANNOT_RUN("tests/interop/build.sh could not build the Redisson peer (./bootstrap --deps installs "
                           "java and maven and fetches Redisson)");
  java_peer_t *p = calloc(1, sizeof(*p));
  assert_non_null(p);
  snprintf(p->err_path, sizeof p->err_path, "%s/tests/interop/peer-%d.err", build, (int)getpid());
  int to[2], from[2];
  assert_int_equal(pipe(to), 0);
  assert_int_equal(pipe(from), 0);
  char classpath[2200], wd[32] = "", fw[32] = "";
  snprintf(classpath, sizeof classpath, "%s/classes:%s/lib/*", out_dir, out_dir);
  if (watchdog_ms > 0 || fair_wait_ms > 0)
    snprintf(wd, sizeof wd, "%lld", (long long)(watchdog_ms > 0 ? watchdog_ms : 30000));
  if (fair_wait_ms > 0)
    snprintf(fw, sizeof fw, "%lld", (long long)fair_wait_ms);
  p->pid = fork();
  assert_true(p->pid >= 0);
  if (p->pid == 0) {
    setpgid(0, 0);
    dup2(to[0], 0);
    dup2(from[1], 1);
    int err = open(p->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err >= 0)
      dup2(err, 2);
    close(to[1]);
    close(from[0]);
    execlp("java", "java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath, "relock.interop.Peer", url,
           wd[0] ? wd : NULL, fw[0] ? fw : NULL, (char *)NULL);
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  p->in = to[1];
  p->out = from[0];
  signal(SIGPIPE, SIG_IGN);
  uint64_t end = now_ms() + 30000;
  int i;
  for (;;) { /* "ready <client-id>" */
    for (i = 0; i < p->nlines && strncmp(p->lines[i], "ready ", 6) != 0; i++)
      ;
    if (i < p->nlines)
      break;
    if (now_ms() >= end)
      die(p, "not ready within 30 s");
    if (!pump(p, 100))
      die(p, "it exited before it was ready");
  }
  snprintf(p->id, sizeof p->id, "%s", p->lines[i] + 6);
  free(p->lines[i]);
  p->lines[i] = p->lines[--p->nlines];
  return p;
}

void java_peer_send(java_peer_t *p, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  line[n++] = '\n';
  if (write(p->in, line, (size_t)n) != n)
    die(p, "cannot write to it: %s", strerror(errno));
}

const char *java_peer_expect(java_peer_t *p, const char *tag, const char *op, int64_t timeout_ms, uint64_t *ns) {
  int i = wait_for(p, tag, op, timeout_ms);
  if (i < 0)
    die(p, "no answer to \"%s %s\" within %lld ms", tag, op, (long long)timeout_ms);
  char *line = p->lines[i];
  for (int j = i; j + 1 < p->nlines; j++) /* keep the others in order */
    p->lines[j] = p->lines[j + 1];
  p->nlines--;
  const char *rest = line + strlen(tag) + 1 + strlen(op) + 1;
  const char *last = strrchr(rest, ' ');
  if (last == NULL)
    die(p, "malformed answer \"%s\"", line);
  snprintf(p->result, sizeof p->result, "%.*s", (int)(last - rest), rest);
  if (ns != NULL)
    *ns = strtoull(last + 1, NULL, 10);
  free(line);
  return p->result;
}

int java_peer_has(java_peer_t *p, const char *tag, const char *op, int64_t wait_ms) {
  return wait_for(p, tag, op, wait_ms) >= 0;
}

const char *java_peer_field(java_peer_t *p, const char *tag, char *buf, size_t size) {
  const char *id = java_peer_expect(p, tag, "thread", 10000, NULL);
  snprintf(buf, size, "%s:%s", p->id, id);
  return buf;
}

void java_peer_stop(java_peer_t *p) {
  if (p == NULL)
    return;
  java_peer_send(p, "quit");
  close(p->in);
  for (int i = 0; i < 100; i++) { /* 5 s for Redisson to shut down */
    if (waitpid(p->pid, NULL, WNOHANG) == p->pid) {
      p->pid = 0;
      break;
    }
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
  }
  if (p->pid > 0) {
    kill(-p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
  }
  close(p->out);
  unlink(p->err_path);
  for (int i = 0; i < p->nlines; i++)
    free(p->lines[i]);
  free(p);
}
