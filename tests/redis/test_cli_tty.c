/* relock(1) on a terminal: job control. The test plays a minimal
 * job-control shell on a pseudo-terminal (forkpty): the "shell" is the
 * session leader, runs relock in a process group of its own in the
 * foreground and waits for it with WUNTRACED, as bash does; the test types
 * ^Z on the master side while the command runs. relock must then stop too
 * (so the shell gets its prompt back), and on fg (terminal to relock's
 * group + SIGCONT) hand the terminal and the SIGCONT on to the command,
 * which finishes normally. Against a real redis-server. */
#include <config.h>

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/redis_server.h"
#include "support/test.h"

typedef struct fx {
  relock_test_redis_t *redis;
  char tty[4096];            /* what the pty printed (relock's messages) */
  size_t tty_len;
  char dir[64];              /* the command's pid and "go" files */
  char relock[PATH_MAX];     /* the relock program */
} fx_t;

static int setup(void **state) {
  fx_t *fx = calloc(1, sizeof *fx);
  if ((fx->redis = relock_test_redis_start(NULL)) == NULL)
    fail_msg("cannot start redis-server");
  strcpy(fx->dir, "/tmp/relock-tty.XXXXXX");
  if (mkdtemp(fx->dir) == NULL)
    fail_msg("mkdtemp: %s", strerror(errno));
  const char *bin = getenv("RELOCK") != NULL ? getenv("RELOCK") : "tools/relock";
  if (realpath(bin, fx->relock) == NULL)
    fail_msg("no relock program at %s: %s", bin, strerror(errno));
  char url[128];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", relock_test_redis_port(fx->redis));
  setenv("RELOCK_URL", url, 1);
  *state = fx;
  return 0;
}

static void rm_in(const char *dir, const char *name) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  unlink(path);
}

static int teardown(void **state) {
  fx_t *fx = *state;
  rm_in(fx->dir, "pid");
  rm_in(fx->dir, "pid.tmp");
  rm_in(fx->dir, "go");
  rmdir(fx->dir);
  relock_test_redis_free(fx->redis);
  free(fx);
  return 0;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t slack(int64_t ms) { return relock_test_under_valgrind() ? ms * 10 : ms; }

/* The command, in the test's directory: waits until it has the terminal (relock hands it over after
 * the exec), says its pid, waits for "go", then checks that it has the
 * terminal again (relock hands it back on SIGCONT) and exits 0. Polls are
 * bounded: exit 3 / 4 if it never gets the terminal. In perl, not sh: it
 * must not fork. A process stopped by ^Z between dash's vfork and exec
 * leaves its parent waiting in the kernel, never reported stopped - under
 * any job-control shell, relock or not. */
static const char command[] =
    "chdir $ENV{TTY_DIR} or exit 6;\n"
    "sub fg { open(my $f, '<', \"/proc/$$/stat\") or return 0; my @s = split / /, scalar <$f>; $s[4] == $s[7] }\n"
    "sub until_fg { for (1 .. 2500) { return if fg(); select(undef, undef, undef, 0.02) } exit $_[0] }\n"
    "until_fg(3);\n"
    "open(my $p, '>', 'pid.tmp') or exit 5; print $p \"$$\\n\"; close $p; rename 'pid.tmp', 'pid';\n"
    "select(undef, undef, undef, 0.02) until -e 'go';\n"
    "until_fg(4);\n"
    "exit 0;\n";

/* What the shell saw, sent to the test over a pipe after relock's pid
 * (whom to kill if it hangs). */
typedef struct report {
  int stopped;        /* relock's wait status after ^Z was WIFSTOPPED */
  pid_t foreground;   /* the terminal's foreground group then */
  char cmd_state;     /* the command's state then (/proc/PID/stat) */
  int status;         /* relock's final wait status */
} report_t;

static char cmd_state(const char *dir) {
  char path[128], buf[256];
  snprintf(path, sizeof path, "%s/pid", dir);
  FILE *f = fopen(path, "r");
  int pid = 0;
  if (f == NULL || fscanf(f, "%d", &pid) != 1)
    pid = 0;
  if (f != NULL)
    fclose(f);
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  if (pid <= 0 || (f = fopen(path, "r")) == NULL)
    return '?';
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')'); /* "pid (comm) S ..." */
  return p != NULL && p[1] == ' ' ? p[2] : '?';
}

/* How the command is stopped. */
enum mode {
  CTRL_Z,      /* ^Z typed on the terminal */
  KILL_TSTP,   /* kill -TSTP relock */
  ORPHANED,    /* ^Z, relock in an orphaned process group: cannot stop */
  LOST,        /* ^Z, and fg only once the lease ran out in Redis */
};

/* The session leader on the pty: a job-control shell with one job (but for
 * ORPHANED: then relock stays in the shell's own group, whose parent, the
 * test, is in another session). */
static void shell(fx_t *fx, int out, enum mode mode) {
  signal(SIGTTOU, SIG_IGN); /* as shells do, to move the terminal around */
  pid_t pid = fork();
  if (pid == 0) {
    if (mode != ORPHANED) {
      setpgid(0, 0);
      tcsetpgrp(STDIN_FILENO, getpid());
    }
    signal(SIGTTOU, SIG_DFL);
    setenv("TTY_DIR", fx->dir, 1);
    /* ORPHANED: the test reads what relock says. */
    const char *q = mode == ORPHANED ? "-v" : "-q", *watchdog = mode == LOST ? "600ms" : "30s";
    /* Not under $RELOCK_CLI_WRAPPER (make check-valgrind): a program under
     * valgrind does not stop on a SIGTSTP it sends itself with the default
     * action, so relock would take itself for orphaned. */
    execl(fx->relock, fx->relock, q, "--watchdog", watchdog, "tty-job", "--", "perl", "-e", command, (char *)NULL);
    _exit(121);
  }
  if (mode != ORPHANED) {
    setpgid(pid, pid); /* also here: whichever runs first */
    tcsetpgrp(STDIN_FILENO, pid);
  }
  report_t rep = {0};
  (void)!write(out, &pid, sizeof pid);
  int st;
  while (waitpid(pid, &st, WUNTRACED) < 0 && errno == EINTR)
    ;
  rep.stopped = WIFSTOPPED(st);
  rep.foreground = tcgetpgrp(STDIN_FILENO);
  rep.cmd_state = cmd_state(fx->dir);
  rep.status = st;
  char reply[64] = "";
  for (int64_t end = now_ms() + slack(10000); mode == LOST && strcmp(reply, ":0\r\n") != 0 && now_ms() < end;)
    if (relock_test_redis_cmd(fx->redis, reply, sizeof reply, "EXISTS", "tty-job", NULL) != 0)
      break; /* until the lease ran out */
  if (rep.stopped && mode != ORPHANED) { /* fg */
    tcsetpgrp(STDIN_FILENO, pid);
    kill(-pid, SIGCONT);
    char go[128];
    snprintf(go, sizeof go, "%s/go", fx->dir);
    close(open(go, O_CREAT | O_WRONLY, 0600));
    while (waitpid(pid, &rep.status, WUNTRACED) < 0 && errno == EINTR)
      ;
  }
  (void)!write(out, &rep, sizeof rep);
  _exit(0);
}

/* Keeps what the pty prints (nothing else reads it). */
static void drain(fx_t *fx, int master, int ms) {
  struct pollfd p = {master, POLLIN, 0};
  if (poll(&p, 1, ms) <= 0)
    return;
  char buf[512];
  ssize_t n = read(master, buf, sizeof buf);
  if (n > 0 && fx->tty_len + (size_t)n < sizeof fx->tty) {
    memcpy(fx->tty + fx->tty_len, buf, (size_t)n);
    fx->tty_len += (size_t)n;
    fx->tty[fx->tty_len] = '\0';
  }
}

/* Reads len bytes from fd within ms, draining the pty. 0 when they came. */
static int read_within(fx_t *fx, int master, int fd, void *buf, size_t len, int64_t ms) {
  int64_t end = now_ms() + ms;
  size_t got = 0;
  while (got < len) {
    if (now_ms() >= end)
      return -1;
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 0) > 0) {
      ssize_t n = read(fd, (char *)buf + got, len - got);
      if (n <= 0)
        return -1;
      got += (size_t)n;
    } else {
      drain(fx, master, 20);
    }
  }
  return 0;
}

/* Until path exists (0) or ms pass (-1), draining the pty. */
static int wait_file(fx_t *fx, int master, const char *path, int64_t ms) {
  int64_t end = now_ms() + ms;
  struct stat sb;
  while (stat(path, &sb) != 0) {
    if (now_ms() >= end)
      return -1;
    drain(fx, master, 20);
  }
  return 0;
}

/* Until the pty printed text (0) or ms pass (-1). */
static int wait_tty(fx_t *fx, int master, const char *text, int64_t ms) {
  int64_t end = now_ms() + ms;
  while (strstr(fx->tty, text) == NULL) {
    if (now_ms() >= end)
      return -1;
    drain(fx, master, 20);
  }
  return 0;
}

static void kill_group_in(const char *path) {
  FILE *f = fopen(path, "r");
  int pid = 0;
  if (f != NULL && fscanf(f, "%d", &pid) == 1 && pid > 0)
    kill(-pid, SIGKILL);
  if (f != NULL)
    fclose(f);
}

/* Runs the job, stops its command as mode says, and reports. */
static report_t run_job(fx_t *fx, enum mode mode, pid_t *relock) {
  int pipefd[2];
  assert_int_equal(pipe(pipefd), 0);
  int master;
  pid_t sh = forkpty(&master, NULL, NULL, NULL);
  assert_true(sh >= 0);
  if (sh == 0) {
    close(pipefd[0]);
    shell(fx, pipefd[1], mode);
  }
  close(pipefd[1]);
  report_t rep = {0};
  char pid_path[128], go[128];
  snprintf(pid_path, sizeof pid_path, "%s/pid", fx->dir);
  snprintf(go, sizeof go, "%s/go", fx->dir);
  *relock = 0;
  int ok = read_within(fx, master, pipefd[0], relock, sizeof *relock, slack(10000)) == 0 &&
           wait_file(fx, master, pid_path, slack(20000)) == 0;
  if (ok && mode == KILL_TSTP)
    kill(*relock, SIGTSTP);
  else if (ok)
    assert_int_equal(write(master, "\x1a", 1), 1); /* ^Z */
  if (ok && mode == ORPHANED) { /* relock cannot stop: it resumes the command */
    ok = wait_tty(fx, master, "cannot stop", slack(20000)) == 0;
    close(open(go, O_CREAT | O_WRONLY, 0600));
  }
  if (ok)
    ok = read_within(fx, master, pipefd[0], &rep, sizeof rep, slack(20000)) == 0;
  if (!ok) { /* a hang: end it before failing */
    char ps[128]; /* the session's processes, for the log */
    snprintf(ps, sizeof ps, "ps -s %d -o pid,ppid,pgid,tpgid,stat,wchan:20,args >&2", (int)sh);
    (void)!system(ps);
    if (*relock > 0)
      kill(mode == ORPHANED ? *relock : -*relock, SIGKILL);
    kill_group_in(pid_path);
  }
  kill(sh, SIGKILL);
  waitpid(sh, NULL, 0);
  close(master);
  close(pipefd[0]);
  if (!ok)
    fail_msg("relock hung after the command was stopped; the terminal said: %s", fx->tty);
  return rep;
}

static void assert_released(fx_t *fx) {
  char reply[64];
  assert_int_equal(relock_test_redis_cmd(fx->redis, reply, sizeof reply, "EXISTS", "tty-job", NULL), 0);
  assert_string_equal(reply, ":0\r\n");
}

/* The shell gets its prompt back on ^Z; fg resumes the command with the
 * terminal, and it ends normally. */
static void test_ctrl_z_stops_relock_and_fg_resumes_the_command(void **state) {
  fx_t *fx = *state;
  pid_t relock;
  report_t rep = run_job(fx, CTRL_Z, &relock);
  assert_true(rep.stopped);
  assert_int_equal(rep.foreground, relock); /* relock took the terminal back */
  assert_int_equal(rep.cmd_state, 'T');     /* and the command is stopped */
  assert_true(WIFEXITED(rep.status));
  assert_int_equal(WEXITSTATUS(rep.status), 0); /* after fg it had the terminal and ended */
  assert_released(fx);
}

/* kill -TSTP relock stops the command, then relock. */
static void test_sigtstp_to_relock_stops_the_command(void **state) {
  fx_t *fx = *state;
  pid_t relock;
  report_t rep = run_job(fx, KILL_TSTP, &relock);
  assert_true(rep.stopped);
  assert_int_equal(rep.cmd_state, 'T');
  assert_true(WIFEXITED(rep.status));
  assert_int_equal(WEXITSTATUS(rep.status), 0);
  assert_released(fx);
}

/* Where nobody could continue relock, it does not stop: it says so and
 * resumes the command, with the terminal. */
static void test_orphaned_relock_resumes_the_command(void **state) {
  fx_t *fx = *state;
  pid_t relock;
  report_t rep = run_job(fx, ORPHANED, &relock);
  assert_false(rep.stopped);
  assert_true(WIFEXITED(rep.status));
  assert_int_equal(WEXITSTATUS(rep.status), 0);
  assert_released(fx);
}

/* A job stopped past its lease has lost the lock: on fg the command is
 * continued only to get SIGTERM, and relock exits 76. */
static void test_lock_lost_while_stopped(void **state) {
  fx_t *fx = *state;
  pid_t relock;
  report_t rep = run_job(fx, LOST, &relock);
  assert_true(rep.stopped);
  assert_true(WIFEXITED(rep.status));
  assert_int_equal(WEXITSTATUS(rep.status), 76);
  assert_released(fx);
}

int main(void) {
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found");
  if (system("perl -e 1 2>/dev/null") != 0)
    RELOCK_TEST_CANNOT_RUN("perl not found (the command under test is a perl one-liner)");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_ctrl_z_stops_relock_and_fg_resumes_the_command, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sigtstp_to_relock_stops_the_command, setup, teardown),
      cmocka_unit_test_setup_teardown(test_orphaned_relock_resumes_the_command, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lock_lost_while_stopped, setup, teardown),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, NULL, NULL);
}
