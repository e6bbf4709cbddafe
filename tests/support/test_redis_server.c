/* Smoke test of the private redis-server helper (redis_server.c) that the
 * integration tests stand on: start, commands, pause, restart on the same
 * port, AOF durability, kill -9, cleanup, and that no server outlives the
 * test process however it ends. */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif
#include <time.h>
#include <unistd.h>

#include "support/redis_server.h"
#include "support/test.h"

/* Runs before main(), so before cmocka prints its TAP plan: the skip must
 * be the only plan in the output. */
__attribute__((constructor)) static void skip_without_redis_server(void) {
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found (install the Debian package redis-server, "
                         "or set REDIS_SERVER to its path)");
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Sends an inline PING over TCP (not the unix socket the helper uses) and
 * returns the first reply line, e.g. "+PONG". */
static void tcp_ping(const relock_test_redis_t *r, char *out, size_t len) {
  struct sockaddr_in sa;
  struct timeval tv = {2, 0};
  size_t n = 0;
  int fd = socket(AF_INET, SOCK_STREAM, 0);

  assert_true(fd >= 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)relock_test_redis_port(r));
  assert_int_equal(inet_pton(AF_INET, relock_test_redis_host(r), &sa.sin_addr), 1);
  assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(send(fd, "PING\r\n", 6, MSG_NOSIGNAL), 6);
  while (n < len - 1) {
    ssize_t got = recv(fd, out + n, len - 1 - n, 0);
    if (got <= 0) break;
    n += (size_t)got;
    if (memchr(out, '\n', n) != NULL) break;
  }
  close(fd);
  out[n] = '\0';
  if (n >= 2 && out[n - 2] == '\r') out[n - 2] = '\0';
}

/* Gone: no such process, or a zombie someone else has to reap. */
static int process_gone(pid_t pid) {
  char path[64], buf[512], *paren;
  FILE *f;
  size_t n;

  pid_t w = waitpid(pid, NULL, WNOHANG); /* an orphan that came to us */

  if (w == pid) return 1;
  if (w == 0) return 0; /* our child, still running */
  if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
  snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  if ((f = fopen(path, "r")) == NULL) return 0;
  n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  paren = strrchr(buf, ')');
  return paren != NULL && (paren[2] == 'Z' || paren[2] == 'X');
}

static int wait_gone(pid_t pid, int timeout_ms) {
  int64_t deadline = now_ms() + timeout_ms;
  while (!process_gone(pid)) {
    if (now_ms() > deadline) return 0;
    sleep_ms(10);
  }
  return 1;
}

/* A macro, so a failure points at the caller's line. */
#define ASSERT_CMD(r, expect, ...)                                                                 \
  do {                                                                                             \
    char reply_[256];                                                                              \
    assert_int_equal(relock_test_redis_cmd((r), reply_, sizeof reply_, __VA_ARGS__, (const char *)NULL), \
                     0);                                                                           \
    assert_string_equal(reply_, (expect));                                                         \
  } while (0)

static void test_start_and_commands(void **state) {
  char reply[256], line[64];
  relock_test_redis_t *r;
  struct stat st;
  (void)state;

  r = relock_test_redis_start(NULL);
  assert_non_null(r);
  assert_true(relock_test_redis_running(r));
  assert_true(relock_test_redis_pid(r) > 0);
  assert_int_equal(kill(relock_test_redis_pid(r), 0), 0);
  assert_true(relock_test_redis_port(r) > 0 && relock_test_redis_port(r) < 65536);
  assert_string_equal(relock_test_redis_host(r), "127.0.0.1");
  assert_int_equal(stat(relock_test_redis_dir(r), &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(strncmp(relock_test_redis_unix_path(r), relock_test_redis_dir(r),
                           strlen(relock_test_redis_dir(r))),
                   0);
  assert_int_equal(stat(relock_test_redis_unix_path(r), &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  assert_int_equal(stat(relock_test_redis_log_path(r), &st), 0);
  assert_true(relock_test_redis_version(r) > 0);

  ASSERT_CMD(r, "+PONG\r\n", "PING");
  ASSERT_CMD(r, "+OK\r\n", "SET", "k", "v");
  ASSERT_CMD(r, "$1\r\nv\r\n", "GET", "k");
  ASSERT_CMD(r, "$-1\r\n", "GET", "missing");
  ASSERT_CMD(r, ":1\r\n", "DEL", "k");
  /* The defaults: no persistence of any kind. */
  ASSERT_CMD(r, "*2\r\n$4\r\nsave\r\n$0\r\n\r\n", "CONFIG", "GET", "save");
  ASSERT_CMD(r, "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n", "CONFIG", "GET", "appendonly");
  ASSERT_CMD(r, "*2\r\n$4\r\nbind\r\n$9\r\n127.0.0.1\r\n", "CONFIG", "GET", "bind");
  if (relock_test_redis_version(r) >= 70000) ASSERT_CMD(r, "+OK\r\n", "DEBUG", "SLEEP", "0");

  /* An error reply is a reply. */
  assert_int_equal(relock_test_redis_cmd(r, reply, sizeof reply, "NOSUCHCOMMAND", (const char *)NULL), 0);
  assert_int_equal(strncmp(reply, "-ERR", 4), 0);

  /* Binary arguments, and a reply split across reads is read whole. */
  {
    static const char value[] = {'a', '\0', '\r', '\n', 'b'};
    const char *argv[3] = {"SET", "bin", value};
    const size_t argvlen[3] = {3, 3, sizeof value};
    const char *get[2] = {"GET", "bin"};
    static const char expect[] = "$5\r\na\0\r\nb\r\n";
    assert_int_equal(relock_test_redis_cmdv(r, reply, sizeof reply, 3, argv, argvlen), 0);
    assert_string_equal(reply, "+OK\r\n");
    assert_int_equal(relock_test_redis_cmdv(r, reply, sizeof reply, 2, get, NULL), 0);
    assert_memory_equal(reply, expect, sizeof expect - 1);
  }

  /* A reply too long for the buffer, and a discarded reply. */
  ASSERT_CMD(r, "+OK\r\n", "SET", "long", "0123456789012345678901234567890123456789");
  assert_int_equal(relock_test_redis_cmd(r, reply, 16, "GET", "long", (const char *)NULL), -ENOSPC);
  assert_int_equal(strlen(reply), 15);
  assert_int_equal(relock_test_redis_cmd(r, NULL, 0, "GET", "long", (const char *)NULL), 0);

  /* The TCP port answers too. */
  tcp_ping(r, line, sizeof line);
  assert_string_equal(line, "+PONG");

  relock_test_redis_free(r);
}

static void test_pause_times_out_then_resume(void **state) {
  const int timeout_ms = 300;
  relock_test_redis_t *r = relock_test_redis_start(NULL);
  char reply[64];
  int64_t t0, elapsed;
  (void)state;

  assert_non_null(r);
  relock_test_redis_set_cmd_timeout(r, timeout_ms);
  assert_int_equal(relock_test_redis_pause(r), 0);
  assert_int_equal(relock_test_redis_pause(r), 0); /* idempotent */
  assert_int_equal(kill(relock_test_redis_pid(r), 0), 0);

  t0 = now_ms();
  assert_int_equal(relock_test_redis_cmd(r, reply, sizeof reply, "PING", (const char *)NULL), -ETIMEDOUT);
  elapsed = now_ms() - t0;
  assert_true(elapsed >= timeout_ms);
  assert_true(elapsed < timeout_ms + 2000);

  assert_int_equal(relock_test_redis_resume(r), 0);
  assert_int_equal(relock_test_redis_resume(r), 0); /* idempotent */
  ASSERT_CMD(r, "+PONG\r\n", "PING");
  relock_test_redis_free(r);
}

static void test_restart_keeps_port_and_socket(void **state) {
  relock_test_redis_t *r = relock_test_redis_start(NULL);
  char sock[128], dir[128], line[64];
  pid_t old_pid;
  int port;
  (void)state;

  assert_non_null(r);
  port = relock_test_redis_port(r);
  old_pid = relock_test_redis_pid(r);
  snprintf(sock, sizeof sock, "%s", relock_test_redis_unix_path(r));
  snprintf(dir, sizeof dir, "%s", relock_test_redis_dir(r));
  ASSERT_CMD(r, "+OK\r\n", "SET", "k", "v");

  assert_int_equal(relock_test_redis_restart(r), 0);
  assert_true(relock_test_redis_running(r));
  assert_int_equal(relock_test_redis_port(r), port);
  assert_string_equal(relock_test_redis_unix_path(r), sock);
  assert_string_equal(relock_test_redis_dir(r), dir);
  assert_true(process_gone(old_pid));
  ASSERT_CMD(r, "+PONG\r\n", "PING");
  tcp_ping(r, line, sizeof line);
  assert_string_equal(line, "+PONG");
  /* Without AOF nothing survives (--save '' means no RDB on shutdown). */
  ASSERT_CMD(r, "$-1\r\n", "GET", "k");

  /* Stop, then restart a stopped server. */
  assert_int_equal(relock_test_redis_stop(r), 0);
  assert_false(relock_test_redis_running(r));
  assert_int_equal(relock_test_redis_pid(r), 0);
  assert_int_equal(relock_test_redis_stop(r), 0); /* no-op */
  assert_int_equal(relock_test_redis_restart(r), 0);
  assert_int_equal(relock_test_redis_port(r), port);
  ASSERT_CMD(r, "+PONG\r\n", "PING");

  /* A paused server restarts too. */
  assert_int_equal(relock_test_redis_pause(r), 0);
  assert_int_equal(relock_test_redis_restart(r), 0);
  ASSERT_CMD(r, "+PONG\r\n", "PING");
  relock_test_redis_free(r);
}

static void test_aof_survives_restart_and_kill9(void **state) {
  relock_test_redis_opts_t opts = {0};
  relock_test_redis_t *r;
  char reply[64];
  pid_t pid;
  int port, rc;
  (void)state;

  opts.aof = 1;
  r = relock_test_redis_start(&opts);
  assert_non_null(r);
  port = relock_test_redis_port(r);
  ASSERT_CMD(r, "*2\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n", "CONFIG", "GET", "appendonly");
  ASSERT_CMD(r, "*2\r\n$11\r\nappendfsync\r\n$6\r\nalways\r\n", "CONFIG", "GET", "appendfsync");

  ASSERT_CMD(r, "+OK\r\n", "SET", "k", "v");
  assert_int_equal(relock_test_redis_restart(r), 0);
  ASSERT_CMD(r, "$1\r\nv\r\n", "GET", "k");

  /* kill -9 right after an acknowledged write: appendfsync always keeps it. */
  ASSERT_CMD(r, "+OK\r\n", "SET", "k2", "v2");
  pid = relock_test_redis_pid(r);
  assert_int_equal(relock_test_redis_kill9(r), 0);
  assert_int_equal(kill(pid, 0), -1);
  assert_int_equal(errno, ESRCH);
  assert_false(relock_test_redis_running(r));
  assert_int_equal(relock_test_redis_kill9(r), -1); /* nothing to kill */
  rc = relock_test_redis_cmd(r, reply, sizeof reply, "PING", (const char *)NULL);
  assert_true(rc == -ECONNREFUSED || rc == -ENOENT);

  assert_int_equal(relock_test_redis_restart(r), 0);
  assert_int_equal(relock_test_redis_port(r), port);
  ASSERT_CMD(r, "$1\r\nv\r\n", "GET", "k");
  ASSERT_CMD(r, "$2\r\nv2\r\n", "GET", "k2");
  relock_test_redis_free(r);
}

static void test_free_removes_dir_and_process(void **state) {
  relock_test_redis_t *r = relock_test_redis_start(NULL);
  char dir[128];
  struct stat st;
  pid_t pid;
  (void)state;

  assert_non_null(r);
  snprintf(dir, sizeof dir, "%s", relock_test_redis_dir(r));
  pid = relock_test_redis_pid(r);
  ASSERT_CMD(r, "+OK\r\n", "SET", "k", "v");
  assert_int_equal(relock_test_redis_pause(r), 0); /* free copes with a paused server */
  relock_test_redis_free(r);

  assert_int_equal(stat(dir, &st), -1);
  assert_int_equal(errno, ENOENT);
  assert_int_equal(kill(pid, 0), -1);
  assert_int_equal(errno, ESRCH);
  assert_int_equal(waitpid(pid, NULL, WNOHANG), -1);
  assert_int_equal(errno, ECHILD);
  relock_test_redis_free(NULL);
}

static void test_password_and_extra_args(void **state) {
  char maxmemory[] = "10mb";
  const char *extra[] = {"--maxmemory", maxmemory, NULL};
  relock_test_redis_opts_t opts = {0};
  relock_test_redis_t *r;
  char line[128];
  (void)state;

  opts.password = "s3cret";
  opts.extra_args = extra;
  r = relock_test_redis_start(&opts);
  assert_non_null(r);
  maxmemory[0] = '9'; /* the helper copied its arguments */

  ASSERT_CMD(r, "+PONG\r\n", "PING"); /* AUTH sent first */
  ASSERT_CMD(r, "*2\r\n$9\r\nmaxmemory\r\n$8\r\n10485760\r\n", "CONFIG", "GET", "maxmemory");
  tcp_ping(r, line, sizeof line); /* no AUTH on this one */
  assert_int_equal(strncmp(line, "-NOAUTH", 7), 0);

  assert_int_equal(relock_test_redis_restart(r), 0);
  ASSERT_CMD(r, "*2\r\n$9\r\nmaxmemory\r\n$8\r\n10485760\r\n", "CONFIG", "GET", "maxmemory");
  relock_test_redis_free(r);
}

static void test_two_servers_are_independent(void **state) {
  relock_test_redis_t *a = relock_test_redis_start(NULL);
  relock_test_redis_t *b = relock_test_redis_start(NULL);
  (void)state;

  assert_non_null(a);
  assert_non_null(b);
  assert_int_not_equal(relock_test_redis_port(a), relock_test_redis_port(b));
  assert_string_not_equal(relock_test_redis_dir(a), relock_test_redis_dir(b));
  assert_int_not_equal(relock_test_redis_pid(a), relock_test_redis_pid(b));
  ASSERT_CMD(a, "+OK\r\n", "SET", "k", "a");
  ASSERT_CMD(b, "$-1\r\n", "GET", "k");
  relock_test_redis_free(a);
  ASSERT_CMD(b, "+PONG\r\n", "PING");
  relock_test_redis_free(b);
}

static void test_port_in_use_fails(void **state) {
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  relock_test_redis_opts_t opts = {0};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int64_t t0;
  (void)state;

  /* Hold a port; a server told to use it exits, and start says so. */
  assert_true(fd >= 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(fd, 1), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
  opts.port = ntohs(sa.sin_port);
  t0 = now_ms();
  assert_null(relock_test_redis_start(&opts));
  assert_true(now_ms() - t0 < 5000);
  close(fd);
}

static void test_missing_or_hanging_binary_fails(void **state) {
  char *saved = getenv("REDIS_SERVER") != NULL ? strdup(getenv("REDIS_SERVER")) : NULL;
  char dir[] = "/tmp/relock-test-fake-XXXXXX", script[64];
  relock_test_redis_opts_t opts = {0};
  FILE *f;
  int64_t t0;
  (void)state;

  assert_int_equal(setenv("REDIS_SERVER", "/nonexistent/redis-server", 1), 0);
  assert_false(relock_test_redis_available());
  assert_null(relock_test_redis_start(NULL));

  assert_int_equal(setenv("REDIS_SERVER", "", 1), 0);
  assert_string_equal(relock_test_redis_server_path(), "redis-server");

  /* A "server" that never answers: start gives up at its deadline and
   * kills it. */
  assert_non_null(mkdtemp(dir));
  snprintf(script, sizeof script, "%s/fake-redis", dir);
  assert_non_null(f = fopen(script, "w"));
  fputs("#!/bin/sh\n[ \"$1\" = --version ] && { echo 'Redis server v=7.0.0'; exit 0; }\nexec sleep 30\n",
        f);
  fclose(f);
  assert_int_equal(chmod(script, 0700), 0);
  assert_int_equal(setenv("REDIS_SERVER", script, 1), 0);
  assert_true(relock_test_redis_available());
  opts.start_timeout_ms = 300;
  t0 = now_ms();
  assert_null(relock_test_redis_start(&opts));
  assert_true(now_ms() - t0 < 3000);
  unlink(script);
  rmdir(dir);

  if (saved != NULL) {
    setenv("REDIS_SERVER", saved, 1);
    free(saved);
  } else {
    unsetenv("REDIS_SERVER");
  }
  assert_true(relock_test_redis_available());
}

/* A forked child starts a server, reports its pid and dir, then ends as
 * `how` says; the server must not outlive it. */
enum { END_EXIT, END_SIGTERM, END_SIGKILL };

static void child_ends_server_dies(int how) {
  struct {
    pid_t pid;
    char dir[128];
  } msg;
  int pfd[2], status = 0;
  pid_t child;
  struct stat st;

  assert_int_equal(pipe(pfd), 0);
#if defined(__linux__)
  /* The orphaned server comes to us, not to an init that may never reap
   * it (a container's), so it can be reaped and checked exactly. */
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
#endif
  fflush(NULL);
  child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    relock_test_redis_t *r = relock_test_redis_start(NULL);
    close(pfd[0]);
    memset(&msg, 0, sizeof msg);
    if (r != NULL) {
      msg.pid = relock_test_redis_pid(r);
      snprintf(msg.dir, sizeof msg.dir, "%s", relock_test_redis_dir(r));
    }
    if (write(pfd[1], &msg, sizeof msg) != (ssize_t)sizeof msg || r == NULL) _exit(2);
    if (how == END_EXIT) exit(0);                /* atexit */
    if (how == END_SIGTERM) raise(SIGTERM);      /* the signal handler */
    if (how == END_SIGKILL) kill(getpid(), SIGKILL); /* PR_SET_PDEATHSIG */
    _exit(3);
  }
  close(pfd[1]);
  assert_int_equal(read(pfd[0], &msg, sizeof msg), (ssize_t)sizeof msg);
  close(pfd[0]);
  assert_true(msg.pid > 0);
  assert_int_equal(waitpid(child, &status, 0), child);
  switch (how) {
  case END_EXIT:
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    break;
  case END_SIGTERM:
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM); /* raised again */
    break;
  default:
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    break;
  }
  assert_true(wait_gone(msg.pid, 5000));
#if defined(__linux__)
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
#endif
  if (how == END_EXIT) {
    assert_int_equal(stat(msg.dir, &st), -1); /* atexit removed it too */
  } else {
    char cmd[192];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", msg.dir);
    assert_int_equal(system(cmd), 0);
  }
}

static void test_server_dies_with_exiting_test(void **state) {
  (void)state;
  child_ends_server_dies(END_EXIT);
}

static void test_server_dies_with_signalled_test(void **state) {
  (void)state;
  child_ends_server_dies(END_SIGTERM);
}

static void test_server_dies_with_killed_test(void **state) {
  (void)state;
#if defined(__linux__)
  child_ends_server_dies(END_SIGKILL);
#else
  skip();
#endif
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_start_and_commands),
    cmocka_unit_test(test_pause_times_out_then_resume),
    cmocka_unit_test(test_restart_keeps_port_and_socket),
    cmocka_unit_test(test_aof_survives_restart_and_kill9),
    cmocka_unit_test(test_free_removes_dir_and_process),
    cmocka_unit_test(test_password_and_extra_args),
    cmocka_unit_test(test_two_servers_are_independent),
    cmocka_unit_test(test_port_in_use_fails),
    cmocka_unit_test(test_missing_or_hanging_binary_fails),
    cmocka_unit_test(test_server_dies_with_exiting_test),
    cmocka_unit_test(test_server_dies_with_signalled_test),
    cmocka_unit_test(test_server_dies_with_killed_test),
};

RELOCK_TEST_MAIN(tests, NULL, NULL)
