/* relock(1): runs a command while holding a distributed lock, like flock(1)
 * across machines; also shows and force-releases locks.
 *
 * The whole tool is one libev loop: the lock's future, its renewals, the
 * child watcher and the signal watchers. It uses only the public API. */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <ev.h>

#include <relock/relock.h>

#include "args.h"

/* Exit statuses of relock itself; anything else is the command's own. */
enum {
  EXIT_USAGE = 64,    /* bad options or arguments */
  EXIT_REDIS = 69,    /* cannot reach Redis, or Redis answered with an error */
  EXIT_BUSY = 75,     /* the lock was not acquired in time (held by another) */
  EXIT_LOST = 76,     /* the lock was lost while the command ran */
  EXIT_CANNOT_RUN = 126,
  EXIT_NOT_FOUND = 127
};

static const char usage_text[] =
    "usage: relock [options] NAME -- COMMAND [ARG...]   run COMMAND holding lock NAME\n"
    "       relock [options] status NAME                show who holds NAME\n"
    "       relock [options] release --force NAME       delete NAME whoever holds it\n"
    "\n"
    "  -u, --url URL          Redis URL (default: $RELOCK_URL, else redis://127.0.0.1:6379)\n"
    "      --url-file FILE    read the URL from FILE (keeps a password out of ps)\n"
    "  -w, --wait DURATION    how long to wait for the lock (default: forever; 0: try once)\n"
    "  -l, --lease DURATION   fixed lease (default: a watchdog lease renewed while running)\n"
    "  -k, --kill-grace DURATION  SIGTERM to SIGKILL when the lock is lost (default 10s)\n"
    "      --timeout DURATION  Redis command timeout (default 3s)\n"
    "      --watchdog DURATION watchdog lease (default 30s, renewed every third)\n"
    "  -q, --quiet            print nothing but errors\n"
    "  -v, --verbose          say what happens\n"
    "  -h, --help             this text;  -V, --version\n"
    "DURATION: 500ms, 10s, 5m, 1h, or plain seconds (1.5).\n"
    "Exit: the command's status (128+N if killed by signal N); 64 usage, 69 Redis\n"
    "unreachable or failing, 75 lock busy / not acquired in time, 76 lock lost while\n"
    "running (the command was terminated), 126/127 command not runnable / not found.\n";

/* Everything the loop's callbacks share. */
typedef struct run {
  options_t opt;
  struct ev_loop *loop;
  relock_client_t *client;
  relock_lock_t *lock;
  uint64_t owner;
  const char *name;
  char **argv; /* the command */
  relock_future_t *acquire;
  pid_t child;
  int child_status;
  int child_done;
  int lost;
  char lost_message[512];
  int exit_code;
  int terminal; /* the child was given the terminal */
  ev_child child_watcher;
  ev_signal signals[3];
  ev_timer grace;
} run_t;

static int verbosity = 1;

static void say(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int level, const char *fmt, ...) {
  if (verbosity < level)
    return;
  va_list ap;
  va_start(ap, fmt);
  fputs("relock: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("relock: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputs("\nTry 'relock --help'.\n", stderr);
  va_end(ap);
  return EXIT_USAGE;
}

/* -- ending -----------------------------------------------------------------*/

static void on_closed(relock_client_t *client, void *arg) {
  (void)client;
  run_t *r = arg;
  ev_break(r->loop, EVBREAK_ALL);
}

static void finish(run_t *r, int code) {
  r->exit_code = code;
  for (int i = 0; i < 3; i++)
    ev_signal_stop(r->loop, &r->signals[i]);
  ev_timer_stop(r->loop, &r->grace);
  if (relock_client_close(r->client, on_closed, r) != 0)
    ev_break(r->loop, EVBREAK_ALL);
}

static int status_code(int status) {
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return 1;
}

static void on_released(relock_future_t *f, void *arg) {
  run_t *r = arg;
  int err = relock_future_error(f);
  int code = status_code(r->child_status);
  if (r->lost) {
    say(0, "%s; the command was terminated", r->lost_message);
    code = EXIT_LOST;
  } else if (err == RELOCK_ELOST || err == RELOCK_ENOTOWNER) {
    /* Not seen while running, but the command did run without the lock. */
    say(0, "lock %s was lost while the command ran: %s", r->name, relock_future_message(f));
    code = EXIT_LOST;
  } else if (err != 0) {
    say(0, "could not release lock %s: %s (it expires with its lease)", r->name, relock_future_message(f));
  } else {
    say(2, "released %s", r->name);
  }
  relock_future_release(f);
  finish(r, code);
}

static void give_terminal_back(run_t *r) {
  if (!r->terminal)
    return;
  /* A background process group changing the terminal gets SIGTTOU. */
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGTTOU);
  sigprocmask(SIG_BLOCK, &set, &old);
  tcsetpgrp(STDIN_FILENO, getpgrp());
  sigprocmask(SIG_SETMASK, &old, NULL);
  r->terminal = 0;
}

static void on_child(struct ev_loop *loop, ev_child *w, int revents) {
  (void)revents;
  run_t *r = w->data;
  ev_child_stop(loop, w);
  ev_timer_stop(loop, &r->grace);
  give_terminal_back(r);
  r->child_status = w->rstatus;
  r->child_done = 1;
  say(2, "command exited with status %d", status_code(w->rstatus));
  if (r->lost) { /* nothing to release: report and go */
    say(0, "%s; the command was terminated", r->lost_message);
    finish(r, EXIT_LOST);
    return;
  }
  relock_future_t *f = relock_lock_release_async(r->lock, r->owner);
  if (f == NULL) {
    say(0, "out of memory releasing lock %s", r->name);
    finish(r, status_code(r->child_status));
    return;
  }
  relock_future_on_done(f, on_released, r);
}

/* -- the command ------------------------------------------------------------*/

static void on_grace(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  run_t *r = w->data;
  if (!r->child_done) {
    say(1, "command still running %lld ms after SIGTERM: SIGKILL", (long long)r->opt.grace_ms);
    kill(-r->child, SIGKILL);
  }
}

static void on_lost(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg) {
  (void)lock;
  (void)owner;
  (void)reason;
  run_t *r = arg;
  if (r->lost || r->child_done)
    return;
  r->lost = 1;
  snprintf(r->lost_message, sizeof r->lost_message, "%s", message);
  say(0, "%s: stopping the command (SIGTERM, SIGKILL after %lld ms)", message, (long long)r->opt.grace_ms);
  if (r->child > 0) {
    kill(-r->child, SIGTERM);
    ev_timer_set(&r->grace, (double)r->opt.grace_ms / 1000.0, 0.0);
    ev_timer_start(r->loop, &r->grace);
  }
}

static int spawn(run_t *r) {
  char field[160];
  relock_lock_field(r->lock, r->owner, field, sizeof field);
  int pipefd[2]; /* reports exec failure; closed on a successful exec */
  if (pipe2(pipefd, O_CLOEXEC) != 0)
    return -1;
  int foreground = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    close(pipefd[0]);
    setpgid(0, 0); /* its own process group: a lost lock stops all of it */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    setenv("RELOCK_NAME", r->name, 1);
    setenv("RELOCK_OWNER", field, 1);
    execvp(r->argv[0], r->argv);
    int e = errno;
    (void)!write(pipefd[1], &e, sizeof e);
    _exit(e == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN);
  }
  setpgid(pid, pid); /* also here: whichever runs first */
  close(pipefd[1]);
  int e = 0;
  ssize_t n;
  while ((n = read(pipefd[0], &e, sizeof e)) < 0 && errno == EINTR)
    ;
  close(pipefd[0]);
  r->child = pid;
  if (n == (ssize_t)sizeof e) {
    say(0, "cannot run %s: %s", r->argv[0], strerror(e));
    return 0; /* the child exits with 126/127; on_child takes it from there */
  }
  if (foreground) {
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGTTOU);
    sigprocmask(SIG_BLOCK, &set, &old);
    r->terminal = tcsetpgrp(STDIN_FILENO, pid) == 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
  }
  say(2, "running %s (pid %d)", r->argv[0], (int)pid);
  return 0;
}

static void on_acquired(relock_future_t *f, void *arg) {
  run_t *r = arg;
  r->acquire = NULL;
  int err = relock_future_error(f);
  if (err == RELOCK_ECANCELED) {
    relock_future_release(f);
    return; /* a signal: on_signal has chosen the exit code */
  }
  if (err != 0) {
    say(0, "cannot acquire lock %s: %s", r->name, relock_future_message(f));
    relock_future_release(f);
    finish(r, EXIT_REDIS);
    return;
  }
  int acquired = relock_future_bool(f);
  relock_future_release(f);
  if (!acquired) {
    say(1, "lock %s is busy%s", r->name, r->opt.wait_ms > 0 ? ": not acquired in time" : "");
    finish(r, EXIT_BUSY);
    return;
  }
  say(2, "acquired %s", r->name);
  if (spawn(r) != 0) {
    say(0, "cannot start %s: %s", r->argv[0], strerror(errno));
    relock_future_t *rf = relock_lock_release_async(r->lock, r->owner);
    r->child_status = EXIT_CANNOT_RUN << 8;
    if (rf != NULL)
      relock_future_on_done(rf, on_released, r);
    else
      finish(r, EXIT_CANNOT_RUN);
    return;
  }
  ev_child_init(&r->child_watcher, on_child, r->child, 0);
  r->child_watcher.data = r;
  ev_child_start(r->loop, &r->child_watcher);
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents) {
  (void)loop;
  (void)revents;
  run_t *r = w->data;
  if (r->child > 0 && !r->child_done) {
    say(2, "forwarding signal %d to the command", w->signum);
    kill(-r->child, w->signum);
    return;
  }
  if (r->acquire != NULL) {
    say(1, "interrupted while waiting for lock %s", r->name);
    relock_future_cancel(r->acquire);
    finish(r, 128 + w->signum);
  }
}

/* -- status and release -----------------------------------------------------*/

static int wait_reply(relock_future_t *f, const relock_reply_t **reply) {
  int err = relock_future_wait(f, RELOCK_INFINITE);
  if (err != 0) {
    say(0, "%s", relock_future_message(f));
    return EXIT_REDIS;
  }
  *reply = relock_future_reply(f);
  return 0;
}

static int show_status(run_t *r) {
  const char *argv[] = {"HGETALL", r->name};
  relock_future_t *all = relock_client_command_async(r->client, 2, argv, NULL);
  const char *pttl_argv[] = {"PTTL", r->name};
  relock_future_t *ttl = relock_client_command_async(r->client, 2, pttl_argv, NULL);
  const relock_reply_t *fields = NULL, *left = NULL;
  int code = wait_reply(all, &fields);
  if (code == 0)
    code = wait_reply(ttl, &left);
  if (code == 0) {
    if (fields->elements == 0) {
      printf("%s: free\n", r->name);
    } else {
      for (size_t i = 0; i + 1 < fields->elements; i += 2)
        printf("%s: held by %s, hold count %s, expires in %lld ms\n", r->name, fields->element[i]->str,
               fields->element[i + 1]->str, (long long)left->integer);
    }
  }
  relock_future_release(all);
  relock_future_release(ttl);
  return code;
}

static int force_release(run_t *r) {
  relock_future_t *f = relock_lock_force_release_async(r->lock);
  if (f == NULL)
    return EXIT_REDIS;
  int err = relock_future_wait(f, RELOCK_INFINITE);
  int code = 0;
  if (err != 0) {
    say(0, "cannot release %s: %s", r->name, relock_future_message(f));
    code = EXIT_REDIS;
  } else {
    say(1, "%s: %s", r->name, relock_future_bool(f) ? "released" : "was not held");
  }
  relock_future_release(f);
  return code;
}

/* -- main -------------------------------------------------------------------*/

static char *read_url_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return NULL;
  char buf[4096];
  char *line = fgets(buf, sizeof buf, f);
  fclose(f);
  if (line == NULL)
    return NULL;
  buf[strcspn(buf, "\r\n")] = '\0';
  return strdup(buf);
}

static int connect_client(run_t *r) {
  const options_t *o = &r->opt;
  char *from_file = NULL;
  const char *url = o->url;
  if (url == NULL && o->url_file != NULL && (url = from_file = read_url_file(o->url_file)) == NULL) {
    say(0, "cannot read a URL from %s: %s", o->url_file, strerror(errno));
    return EXIT_USAGE;
  }
  if (url == NULL)
    url = getenv("RELOCK_URL");
  if (url == NULL || url[0] == '\0')
    url = "redis://127.0.0.1:6379";
  relock_error_t err;
  relock_options_t *opts = relock_options_new(&err);
  if (opts == NULL) {
    free(from_file);
    say(0, "%s", err.message);
    return EXIT_REDIS;
  }
  /* A value the options refuse is the user's to fix: a usage error. */
  int rc = relock_options_set_url(opts, url, &err);
  free(from_file);
  if (rc == 0)
    rc = relock_options_set_string(opts, RELOCK_OPT_CLIENT_NAME, "relock-cli", &err);
  if (rc == 0 && o->timeout_ms > 0)
    rc = relock_options_set_ms(opts, RELOCK_OPT_COMMAND_TIMEOUT, o->timeout_ms, &err);
  if (rc == 0 && o->timeout_ms > 0)
    rc = relock_options_set_ms(opts, RELOCK_OPT_CONNECT_TIMEOUT, o->timeout_ms, &err);
  /* a CLI answers soon: one re-send, then it says why */
  if (rc == 0)
    rc = relock_options_set_int(opts, RELOCK_OPT_RETRY_ATTEMPTS, 1, &err);
  if (rc == 0 && o->watchdog_ms > 0)
    rc = relock_options_set_ms(opts, RELOCK_OPT_WATCHDOG_TIMEOUT, o->watchdog_ms, &err);
  if (rc != 0) {
    relock_options_free(opts);
    say(0, "%s", err.message);
    return rc == RELOCK_EINVAL ? EXIT_USAGE : EXIT_REDIS;
  }
  r->client = relock_client_new(r->loop, opts, &err);
  relock_options_free(opts);
  if (r->client == NULL) {
    say(0, "%s", err.message);
    return err.code == RELOCK_EINVAL ? EXIT_USAGE : EXIT_REDIS;
  }
  if ((r->lock = relock_lock_new(r->client, r->name, &err)) == NULL) {
    say(0, "invalid lock name: %s", relock_strerror(err.code));
    return EXIT_USAGE;
  }
  return 0;
}

static int run_command(run_t *r) {
  relock_lock_on_lost(r->lock, on_lost, r);
  static const int signums[3] = {SIGINT, SIGTERM, SIGHUP};
  for (int i = 0; i < 3; i++) {
    ev_signal_init(&r->signals[i], on_signal, signums[i]);
    r->signals[i].data = r;
    ev_signal_start(r->loop, &r->signals[i]);
  }
  ev_timer_init(&r->grace, on_grace, 0.0, 0.0);
  r->grace.data = r;
  r->acquire = relock_lock_acquire_async(r->lock, r->owner, r->opt.wait_ms, r->opt.lease_ms);
  if (r->acquire == NULL) {
    say(0, "cannot acquire lock %s: out of memory", r->name);
    return EXIT_REDIS;
  }
  relock_future_on_done(r->acquire, on_acquired, r);
  r->exit_code = -1;
  ev_run(r->loop, 0);
  return r->exit_code >= 0 ? r->exit_code : EXIT_REDIS;
}

int main(int argc, char **argv) {
  run_t r;
  memset(&r, 0, sizeof r);
  args_t a;
  int parsed = args_parse(argc, argv, &a), code = 0;
  if (parsed == ARGS_HELP)
    fputs(usage_text, stdout);
  else if (parsed == ARGS_VERSION)
    printf("relock %s\n", relock_version_string());
  else if (parsed == ARGS_USAGE)
    code = usage_error("%s", a.message != NULL ? a.message : "out of memory");
  args_cleanup(&a);
  if (parsed != ARGS_OK)
    return code;
  r.opt = a.opt;
  r.name = a.name;
  r.argv = a.command;
  verbosity = r.opt.verbosity;

  r.loop = ev_default_loop(EVFLAG_AUTO); /* ev_child needs the default loop */
  r.owner = (uint64_t)getpid();
  if ((code = connect_client(&r)) != 0) {
    if (r.client != NULL)
      relock_client_free(r.client);
    return code;
  }
  if (a.mode == ARGS_STATUS)
    code = show_status(&r);
  else if (a.mode == ARGS_RELEASE)
    code = force_release(&r);
  else
    code = run_command(&r);
  relock_lock_free(r.lock);
  relock_client_free(r.client);
  return code;
}
