/* relock NAME -- COMMAND: acquire, run the command in a process group of its
 * own, renew while it runs, stop it if the lock is lost, release when it
 * ends. With --semaphore N, what is held is one of N permits of the
 * permit-expirable semaphore NAME instead: a permit with a lease, renewed
 * and lost as a lock's hold is. With --rsemaphore N, a permit of Redisson's
 * RSemaphore (no lease: nothing to renew or lose, and nothing gives it back
 * if relock dies). One libev loop drives all of it: the lock's futures, the
 * renewals, the child watcher and the signal watchers. */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

#include <relock/relock.h>

#include "cli.h"
#include "hold.h"
#include "members.h"

/* What the loop's callbacks share. */
typedef struct run {
  cli_t *c;
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
  ev_timer retry;     /* --wait: the next try after a refused connection */
  double wait_end;    /* --wait: when it ends (monotonic s) */
  double next_progress;
  ev_timer patience;          /* waiting this long: say who holds the lock */
  relock_future_t *holders;   /* that report's HGETALL, until its PTTL answers */
  int killed;     /* the grace ran out: the group got SIGKILL */
  ev_timer lease; /* a fixed lease: its end is a lost lock */
  ev_timer reap;  /* polls until the processes the command started are gone */
  ev_child members;    /* any child's exit, once the leader has exited */
  int releasing;       /* the hold is being given back: a loss now is the release's */
  ev_signal jobctl[2]; /* SIGTSTP, SIGCONT */
  int tstp_sent;       /* relock got SIGTSTP and passed it on */
  int64_t token;       /* --fenced: the acquisition's token, for $RELOCK_TOKEN */
  char permit[RELOCK_PERMIT_ID_SIZE]; /* --semaphore: the permit's id, for its release */
} run_t;

/* The command's processes after its leader exited: checked on every exit of
 * a child of relock's (each is one of them, see members.h), and polled as
 * well for the rare member of the group that is not relock's descendant.
 * After a loss the poll is quicker: they were told to end. */
#define MEMBERS_POLL_S 1.0
#define MEMBERS_POLL_LOST_S 0.05

/* How long relock waits quietly before saying who holds the lock. */
#define PATIENCE_S 1.0

/* What the command runs holding: a hold of the lock, or a permit. */
static relock_future_t *acquire_hold(run_t *r, int64_t wait_ms) {
  cli_t *c = r->c;
  if (c->permits != NULL) /* RELOCK_INFINITE: a watched permit, renewed as a lock's hold */
    return relock_permit_semaphore_acquire_async(c->permits, wait_ms, c->opt.lease_ms);
  if (c->semaphore != NULL)
    return relock_semaphore_acquire_async(c->semaphore, 1, wait_ms);
  return relock_lock_lock_async(c->lock, c->owner, wait_ms, c->opt.lease_ms);
}

static relock_future_t *release_hold(run_t *r) {
  cli_t *c = r->c;
  if (c->permits != NULL)
    return relock_permit_semaphore_release_async(c->permits, r->permit);
  if (c->semaphore != NULL)
    return relock_semaphore_release_async(c->semaphore, 1);
  return relock_lock_unlock_async(c->lock, c->owner);
}

/* How long the hold is known valid (relock_lock_validity_ms); RELOCK_INFINITE
 * for an RSemaphore's permit, which never expires. */
static int64_t hold_validity_ms(run_t *r) {
  cli_t *c = r->c;
  if (c->permits != NULL)
    return relock_permit_semaphore_validity_ms(c->permits, r->permit);
  if (c->semaphore != NULL)
    return RELOCK_INFINITE;
  return relock_lock_validity_ms(c->lock, c->owner);
}

/* -- ending -----------------------------------------------------------------*/

static void on_closed(relock_client_t *client, void *arg) {
  (void)client;
  run_t *r = arg;
  ev_break(r->c->loop, EVBREAK_ALL);
}

static void finish(run_t *r, int code) {
  r->exit_code = code;
  for (int i = 0; i < 3; i++)
    ev_signal_stop(r->c->loop, &r->signals[i]);
  ev_timer_stop(r->c->loop, &r->grace);
  ev_timer_stop(r->c->loop, &r->patience);
  ev_timer_stop(r->c->loop, &r->retry);
  ev_timer_stop(r->c->loop, &r->lease);
  ev_timer_stop(r->c->loop, &r->reap);
  ev_child_stop(r->c->loop, &r->members);
  for (int i = 0; i < 2; i++)
    ev_signal_stop(r->c->loop, &r->jobctl[i]);
  if (relock_client_close(r->c->client, on_closed, r) != 0)
    ev_break(r->c->loop, EVBREAK_ALL);
}

static int status_code(int status) {
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return 1;
}

/* The library's message for f without its "<kind> <name>: " opening,
 * which relock's own sentence has already said. */
static const char *words_of(const run_t *r, relock_future_t *f) {
  const char *m = relock_future_message(f);
  size_t what = strlen(r->c->what), name = strlen(r->c->name);
  if (strncmp(m, r->c->what, what) == 0 && m[what] == ' ' && strncmp(m + what + 1, r->c->name, name) == 0 &&
      strncmp(m + what + 1 + name, ": ", 2) == 0)
    return m + what + 1 + name + 2;
  return m;
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
    say(0, "%s %s was lost while the command ran: %s", r->c->what, r->c->name, words_of(r, f));
    code = EXIT_LOST;
  } else if (err == 0 && r->c->permits != NULL && !relock_future_bool(f)) {
    /* the permit was gone before the renewal found out: the same */
    say(0, "the permit %s of semaphore %s was lost while the command ran: it was no longer taken", r->permit,
        r->c->name);
    code = EXIT_LOST;
  } else if (err != 0) {
    say(0, "could not release %s %s: %s (%s)", r->c->what, r->c->name, words_of(r, f),
        r->c->semaphore != NULL ? "its permit is not given back: an RSemaphore's permits never expire"
                                : "it expires with its lease");
  } else {
    say(2, "released %s", r->c->name);
  }
  relock_future_release(f);
  finish(r, code);
}

/* tcsetpgrp with SIGTTOU blocked: a background process group changing the
 * terminal would get it. */
static int set_terminal(pid_t pgrp) {
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGTTOU);
  sigprocmask(SIG_BLOCK, &set, &old);
  int rc = tcsetpgrp(STDIN_FILENO, pgrp);
  sigprocmask(SIG_SETMASK, &old, NULL);
  return rc;
}

static int in_foreground(void) { return isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp(); }

/* The command runs in the foreground when relock does: its group gets the
 * terminal (and with it ^C, ^Z and reading). */
static void give_terminal(run_t *r) {
  if (in_foreground())
    r->terminal = set_terminal(r->child) == 0;
}

static void give_terminal_back(run_t *r) {
  if (!r->terminal)
    return;
  set_terminal(getpgrp());
  r->terminal = 0;
}

/* -- job control ------------------------------------------------------------*/

/* The command stopped (^Z on the terminal it has, SIGTSTP, SIGSTOP,
 * SIGTTIN): stop relock too, so that the shell sees its job stopped and
 * takes the terminal back; it continues relock with SIGCONT (on_cont). Had
 * the terminal not been the command's, ^Z would have stopped relock's whole
 * group: do the same then. While relock is stopped the lease is not renewed. */
static void stop_self(run_t *r) {
  pid_t whom = r->terminal && !r->tstp_sent ? 0 : getpid();
  r->tstp_sent = 0;
  give_terminal_back(r);
  sigset_t cont, mask;
  sigemptyset(&cont);
  sigaddset(&cont, SIGCONT);
  /* Blocked, SIGCONT still continues us but stays pending: proof that we
   * were stopped. libev's handler gets it when the mask is restored. */
  sigprocmask(SIG_BLOCK, &cont, &mask);
  struct sigaction dfl, old;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGTSTP, &dfl, &old);
  kill(whom, SIGTSTP); /* stops here until SIGCONT */
  sigaction(SIGTSTP, &old, NULL);
  sigset_t pending;
  sigpending(&pending);
  int stopped = sigismember(&pending, SIGCONT);
  sigprocmask(SIG_SETMASK, &mask, NULL);
  if (!stopped && r->child > 0 && !r->child_done) {
    /* The kernel drops SIGTSTP in an orphaned process group (no
     * job-control shell of this session above it): nobody could continue
     * us, so do not hang. */
    say(1, "cannot stop (no job control here): the command goes on");
    give_terminal(r);
    kill(-r->child, SIGCONT);
  }
}

/* SIGTSTP sent to relock: the command stops first, then on_child stops
 * relock. Before the command runs, relock stops at once. */
static void on_tstp(struct ev_loop *loop, ev_signal *w, int revents) {
  (void)loop;
  (void)revents;
  run_t *r = w->data;
  if (r->child > 0 && !r->child_done) {
    r->tstp_sent = 1; /* then stop relock alone, not its group */
    kill(-r->child, SIGTSTP);
  } else {
    stop_self(r);
  }
}

static void lose(run_t *r, const char *message);

/* SIGCONT: relock was continued (fg, bg, kill -CONT): continue the command;
 * in the foreground (fg) it gets the terminal again. A stopped relock
 * renewed nothing: if the hold is no longer known valid, the command is
 * continued only to be stopped, before the renewal or the lease timer
 * would find out. */
static void on_cont(struct ev_loop *loop, ev_signal *w, int revents) {
  (void)loop;
  (void)revents;
  run_t *r = w->data;
  if (r->child <= 0 || r->child_done)
    return;
  give_terminal(r);
  if (!r->lost && r->c->semaphore == NULL && hold_validity_ms(r) <= 0) {
    char message[512];
    snprintf(message, sizeof message, "the lease of %s %s ran out while relock was stopped", r->c->what, r->c->name);
    lose(r, message); /* SIGTERM, SIGCONT */
    return;
  }
  kill(-r->child, SIGCONT);
}

/* -- the command's end ------------------------------------------------------*/

/* Watches for the end of the processes the command started, its leader
 * gone: on every exit of a child of relock's, and polled every `poll` s. */
static void watch_members(run_t *r, double poll) {
  if (!ev_is_active(&r->members))
    ev_child_start(r->c->loop, &r->members);
  if (!ev_is_active(&r->reap) || r->reap.repeat != poll) {
    ev_timer_stop(r->c->loop, &r->reap);
    ev_timer_set(&r->reap, poll, poll);
    ev_timer_start(r->c->loop, &r->reap);
  }
}

/* The lock is lost: relock ends once the command's processes are all gone
 * (members.h), not just its leader: a member that ignores SIGTERM would
 * otherwise run on unprotected. Called when the leader was reaped, as the
 * others end, and at the end of the grace. */
static void end_when_gone(run_t *r) {
  if (!r->child_done)
    return; /* on_child comes */
  if (!r->killed && members_left(r->child)) {
    watch_members(r, MEMBERS_POLL_LOST_S);
    return;
  }
  say(0, "%s; the command was terminated", r->lost_message);
  finish(r, EXIT_LOST);
}

static void release_now(run_t *r);

/* The leader has exited: as flock(1) keeps its lock while the descriptor
 * lives, relock keeps the lock (renewing it) while any process the command
 * started still runs (`cmd &`, a daemon), and gives it back when the last
 * one ends. Releasing at the leader's exit let a second relock run beside
 * them. */
static void check_members(run_t *r) {
  if (r->lost) {
    end_when_gone(r);
    return;
  }
  if (r->releasing)
    return;
  if (members_left(r->child)) {
    watch_members(r, MEMBERS_POLL_S);
    return;
  }
  ev_timer_stop(r->c->loop, &r->reap);
  ev_child_stop(r->c->loop, &r->members);
  release_now(r);
}

static void on_reap(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  check_members(w->data);
}

static void on_member(struct ev_loop *loop, ev_child *w, int revents) {
  (void)loop;
  (void)revents;
  check_members(w->data);
}

static void on_child(struct ev_loop *loop, ev_child *w, int revents) {
  (void)revents;
  run_t *r = w->data;
  if (WIFCONTINUED(w->rstatus))
    return;
  if (WIFSTOPPED(w->rstatus)) {
    if (r->lost)
      kill(-r->child, SIGCONT); /* let it see the SIGTERM */
    else
      stop_self(r);
    return;
  }
  ev_child_stop(loop, w);
  give_terminal_back(r);
  r->child_status = w->rstatus;
  r->child_done = 1;
  say(2, "command exited with status %d", status_code(w->rstatus));
  if (r->lost) { /* nothing to release; the grace timer runs on */
    end_when_gone(r);
    return;
  }
  if (members_left(r->child))
    say(2, "processes the command started still run: holding %s %s until they end", r->c->what, r->c->name);
  check_members(r);
}

/* Gives the hold back; relock then exits with the command's status. */
static void release_now(run_t *r) {
  r->releasing = 1;
  ev_timer_stop(r->c->loop, &r->lease);
  relock_future_t *f = release_hold(r);
  if (f == NULL) {
    say(0, "out of memory releasing %s %s", r->c->what, r->c->name);
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
  if (members_left(r->child))
    say(1, "command still running %lld ms after SIGTERM: SIGKILL", (long long)r->c->opt.grace_ms);
  members_signal(r->child, SIGKILL);
  r->killed = 1; /* SIGKILL cannot be ignored: no need to wait for the group */
  end_when_gone(r);
}

/* The lock is no longer held (lost, or the fixed lease ran out): stop the
 * command's processes (its group, and those that left it: members.h),
 * SIGTERM now and SIGKILL after the grace; also after the leader exited,
 * while the others run on. */
static void lose(run_t *r, const char *message) {
  if (r->lost || r->releasing)
    return;
  r->lost = 1;
  ev_timer_stop(r->c->loop, &r->lease);
  snprintf(r->lost_message, sizeof r->lost_message, "%s", message);
  say(0, "%s: stopping the command (SIGTERM, SIGKILL after %lld ms)", message, (long long)r->c->opt.grace_ms);
  if (r->child > 0) {
    members_signal(r->child, SIGTERM);
    members_signal(r->child, SIGCONT); /* a stopped process would not see the SIGTERM */
    ev_timer_set(&r->grace, (double)r->c->opt.grace_ms / 1000.0, 0.0);
    ev_timer_start(r->c->loop, &r->grace);
    if (r->child_done)
      end_when_gone(r); /* the leader has exited: the others' ends come to on_member */
  }
}

static void on_lost(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg) {
  (void)lock;
  (void)owner;
  (void)reason;
  lose(arg, message);
}

/* A permit's loss is a lock's: the same stop, the same 76. */
static void on_permit_lost(relock_permit_semaphore_t *s, const char *id, int reason, const char *message, void *arg) {
  (void)s;
  (void)reason;
  run_t *r = arg;
  if (strcmp(id, r->permit) == 0)
    lose(r, message);
}

/* A fixed lease is never renewed, and the library does not call on_lost
 * when it merely runs out: this timer does. */
static void on_lease(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  run_t *r = w->data;
  char message[512];
  snprintf(message, sizeof message, "the fixed lease of %s %s (%lld ms) ran out", r->c->what, r->c->name,
           (long long)r->c->opt.lease_ms);
  lose(r, message);
}

/* Arms on_lease for the validity the library knows without network: from
 * the send time of the confirmed acquisition, less a drift margin, so never
 * later than the lease ends on the server. libev counts from the loop's
 * cached time, which is not later than now: earlier still, never late. */
static void start_lease(run_t *r) {
  if (r->c->opt.lease_ms == RELOCK_INFINITE)
    return;
  int64_t left = hold_validity_ms(r);
  ev_timer_set(&r->lease, left > 0 ? (double)left / 1000.0 : 0.0, 0.0);
  ev_timer_start(r->c->loop, &r->lease);
}

static int spawn(run_t *r) {
  char field[160] = ""; /* a semaphore has no holder field: RELOCK_OWNER is empty */
  relock_lock_field(r->c->lock, r->c->owner, field, sizeof field);
  int pipefd[2]; /* reports exec failure; closed on a successful exec */
  if (pipe2(pipefd, O_CLOEXEC) != 0)
    return -1;
  int foreground = in_foreground();
  /* Members of the command's group whose parent exits become relock's
   * children, and libev's SIGCHLD handler reaps every child: so once the
   * group is gone, kill(-group, 0) says so at once, even where init leaves
   * zombies (some containers). */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    close(pipefd[0]);
    /* If relock dies (SIGKILL, the OOM killer), the command must not run on
     * unprotected: the kernel signals it when the parent *thread* exits;
     * relock is single-threaded (the client runs embedded on relock's own
     * loop), so that is relock's end. Kept across exec (but for set-user-ID
     * programs). If relock died before prctl, nobody will tell: stop now. */
    prctl(PR_SET_PDEATHSIG, r->c->opt.orphan_signal);
    if (getppid() != parent)
      _exit(128 + r->c->opt.orphan_signal);
    setpgid(0, 0); /* its own process group: a lost lock stops all of it */
    if (foreground) /* also here, before exec: it may read the terminal at once */
      set_terminal(getpid());
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL); /* relock ignores it (relock.c); the command expects the default */
    setenv("RELOCK_NAME", r->c->name, 1);
    setenv("RELOCK_OWNER", field, 1);
    if (r->c->permits != NULL)
      setenv("RELOCK_PERMIT", r->permit, 1);
    if (r->c->opt.kind == KIND_FENCED) {
      char token[24];
      snprintf(token, sizeof token, "%lld", (long long)r->token);
      setenv("RELOCK_TOKEN", token, 1);
    }
    execvp(r->c->argv[0], r->c->argv);
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
    say(0, "cannot run %s: %s", r->c->argv[0], strerror(e));
    return 0; /* the child exits with 126/127; on_child takes it from there */
  }
  if (foreground) /* the child may have taken it already: not give_terminal */
    r->terminal = set_terminal(pid) == 0;
  say(2, "running %s (pid %d)", r->c->argv[0], (int)pid);
  start_lease(r);
  return 0;
}

/* -- waiting ----------------------------------------------------------------*/

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_acquired(relock_future_t *f, void *arg);

static void on_retry(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  run_t *r = w->data;
  double left = r->wait_end - mono_s();
  /* The last moments: one try, so that the answer is Redis's, not the end
   * of a wait too short for it. */
  r->acquire = acquire_hold(r, left > 0.2 ? (int64_t)(left * 1000) : 0);
  if (r->acquire == NULL) {
    say(0, "cannot acquire %s %s: out of memory", r->c->what, r->c->name);
    finish(r, EXIT_REDIS);
    return;
  }
  relock_future_on_done(r->acquire, on_acquired, r);
}

/* An explicit --wait asks to wait for Redis too: a refused connection is
 * tried again until the wait ends, saying so about once a second. Without
 * it, the refusal is the answer (the library reports it at once). */
static int retry_refused(run_t *r, relock_future_t *f) {
  const options_t *o = &r->c->opt;
  double now = mono_s(), left = r->wait_end - now;
  if (relock_future_error(f) != RELOCK_ECONNREFUSED || o->wait_ms <= 0 || o->wait_ms == RELOCK_INFINITE ||
      left <= 0)
    return 0;
  if (now >= r->next_progress) {
    say(1, "cannot acquire %s %s: %s; retrying until the wait ends (%.1f s left)", r->c->what, r->c->name,
        words_of(r, f), left);
    r->next_progress = now + 1.0;
  }
  ev_timer_set(&r->retry, left < 0.2 ? left : 0.2, 0.0);
  ev_timer_start(r->c->loop, &r->retry);
  return 1;
}

/* -v: each try that found the lock held. */
static void on_wait(relock_lock_t *lock, uint64_t owner, int64_t ttl_ms, void *arg) {
  (void)owner;
  (void)arg;
  if (ttl_ms >= 0)
    say(2, "lock %s is held, its lease ends in %lld ms: waiting", relock_lock_name(lock), (long long)ttl_ms);
  else
    say(2, "lock %s is held, with no lease: waiting", relock_lock_name(lock));
}

/* The report's second half: the lease left. The key may have gone since
 * HGETALL (released meanwhile): then PTTL says -2. */
static void on_holder_ttl(relock_future_t *f, void *arg) {
  run_t *r = arg;
  const relock_reply_t *all = relock_future_reply(r->holders), *ttl = relock_future_reply(f);
  size_t i = 0; /* the first holder: a read-write lock's hash has its "mode" too */
  while (i + 1 < all->elements && is_mode(all, i))
    i += 2;
  if (r->acquire != NULL && relock_future_error(f) == 0 && ttl->type == RELOCK_REPLY_INTEGER) {
    if (i + 1 >= all->elements || ttl->integer == -2)
      say(1, "waiting for lock %s: it is being released", r->c->name);
    else if (ttl->integer == -1)
      say(1, "waiting for lock %s, held by %s (hold count %s), with no expiry", r->c->name, all->element[i]->str,
          all->element[i + 1]->str);
    else
      say(1, "waiting for lock %s, held by %s (hold count %s), expires in %lld ms", r->c->name,
          all->element[i]->str, all->element[i + 1]->str, (long long)ttl->integer);
  }
  relock_future_release(r->holders);
  r->holders = NULL;
  relock_future_release(f);
}

static void on_holders(relock_future_t *f, void *arg) {
  run_t *r = arg;
  const relock_reply_t *all = relock_future_reply(f);
  const char *argv[] = {"PTTL", r->c->name};
  relock_future_t *ttl = NULL;
  /* Not a hash (a key of another type): the acquisition will say why. */
  if (r->acquire != NULL && relock_future_error(f) == 0 && all->type == RELOCK_REPLY_ARRAY)
    ttl = relock_client_command_async(r->c->client, 2, argv, NULL);
  if (ttl == NULL) {
    relock_future_release(f);
    return;
  }
  r->holders = f;
  relock_future_on_done(ttl, on_holder_ttl, r);
}

/* Waiting for a while: who holds the lock, and for how long? Said once:
 * quiet waits stay quiet, and a long one says why it takes long. */
static void on_patience(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop;
  (void)revents;
  run_t *r = w->data;
  const char *argv[] = {"HGETALL", r->c->name};
  relock_future_t *f = r->acquire != NULL && r->c->lock != NULL
                           ? relock_client_command_async(r->c->client, 2, argv, NULL)
                           : NULL; /* a semaphore has no holders to name */
  if (f != NULL)
    relock_future_on_done(f, on_holders, r);
}

/* -- acquired ----------------------------------------------------------------*/

/* Whether the acquisition f took the hold: a boolean, a fenced lock's token
 * (0: not acquired), or a permit's id (no value: none free in time). */
static int took_hold(run_t *r, relock_future_t *f) {
  relock_value_type_t type = relock_future_value_type(f);
  if (type == RELOCK_VALUE_STRING) {
    snprintf(r->permit, sizeof r->permit, "%s", relock_future_string(f, NULL));
    return 1;
  }
  if (type == RELOCK_VALUE_NONE)
    return 0;
  int64_t value = type == RELOCK_VALUE_INT ? relock_future_int(f) : relock_future_bool(f);
  r->token = value;
  return value != 0;
}

static void on_acquired(relock_future_t *f, void *arg) {
  run_t *r = arg;
  r->acquire = NULL;
  int err = relock_future_error(f);
  if (err == RELOCK_ECANCELED) {
    relock_future_release(f);
    return; /* a signal: on_signal has chosen the exit code */
  }
  if (err != 0 && retry_refused(r, f)) {
    relock_future_release(f);
    return;
  }
  ev_timer_stop(r->c->loop, &r->patience); /* the wait is over */
  if (err != 0) {
    say(0, "cannot acquire %s %s: %s", r->c->what, r->c->name, words_of(r, f));
    relock_future_release(f);
    /* a name that holds another kind is the data's fault, as for status */
    finish(r, err == RELOCK_EWRONGKIND ? EXIT_NOT_LOCK : EXIT_REDIS);
    return;
  }
  int acquired = took_hold(r, f);
  relock_future_release(f);
  if (!acquired) {
    say(1, "%s %s is busy%s", r->c->what, r->c->name, r->c->opt.wait_ms > 0 ? ": not acquired in time" : "");
    finish(r, EXIT_BUSY);
    return;
  }
  say(2, "acquired %s", r->c->name);
  if (spawn(r) != 0) {
    say(0, "cannot start %s: %s", r->c->argv[0], strerror(errno));
    r->releasing = 1;
    relock_future_t *rf = release_hold(r);
    r->child_status = EXIT_CANNOT_RUN << 8;
    if (rf != NULL)
      relock_future_on_done(rf, on_released, r);
    else
      finish(r, EXIT_CANNOT_RUN);
    return;
  }
  ev_child_init(&r->child_watcher, on_child, r->child, 1); /* 1: stops too (job control) */
  r->child_watcher.data = r;
  ev_child_start(r->c->loop, &r->child_watcher);
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents) {
  (void)revents;
  run_t *r = w->data;
  if (r->child > 0 && (!r->child_done || ev_is_active(&r->members))) {
    say(2, "forwarding signal %d to the command", w->signum);
    if (r->child_done)
      members_signal(r->child, w->signum); /* its leader gone: those it left */
    else
      kill(-r->child, w->signum);
    return;
  }
  if (r->acquire != NULL || ev_is_active(&r->retry)) {
    say(1, "interrupted while waiting for %s %s", r->c->what, r->c->name);
    ev_timer_stop(loop, &r->retry);
    /* A try in flight may take the lock yet: the cancel sends its give-back,
     * and the close in finish() waits for that before on_closed ends us. */
    if (r->acquire != NULL)
      relock_future_cancel(r->acquire);
    finish(r, 128 + w->signum);
  }
}

/* --semaphore N, --rsemaphore N: the semaphore gets N permits unless it
 * has a count already (Redisson's trySetPermits: the first to come sets it;
 * both layouts keep it in the same key). */
static int set_permits(cli_t *c) {
  int set = 0;
  int rc = c->permits != NULL ? relock_permit_semaphore_try_set_permits(c->permits, c->opt.semaphore, &set)
                              : relock_semaphore_try_set_permits(c->semaphore, c->opt.semaphore, &set);
  if (rc != 0) {
    say(0, "cannot set up semaphore %s: %s", c->name, relock_last_error_message());
    return -1;
  }
  say(2, set ? "semaphore %s set to %lld permits" : "semaphore %s has a count already", c->name,
      (long long)c->opt.semaphore);
  return 0;
}

int run_command(cli_t *c) {
  run_t run, *r = &run;
  memset(r, 0, sizeof *r);
  r->c = c;
  if (c->lock != NULL) {
    int rc = relock_lock_on_lost(c->lock, on_lost, r);
    if (rc != 0) { /* a command that would not be stopped on a loss must not start */
      say(0, "cannot watch %s %s for a loss: %s", c->what, c->name, relock_strerror(rc));
      return EXIT_REDIS;
    }
    /* a force release (relock release --force, Redisson's forceUnlock) stops
     * the command within milliseconds, not at the next renewal */
    relock_lock_watch_loss(c->lock, 1);
  }
  if (c->permits != NULL) {
    int rc = relock_permit_semaphore_on_lost(c->permits, on_permit_lost, r);
    if (rc != 0) {
      say(0, "cannot watch %s %s for a loss: %s", c->what, c->name, relock_strerror(rc));
      return EXIT_REDIS;
    }
  }
  static const int signums[3] = {SIGINT, SIGTERM, SIGHUP};
  for (int i = 0; i < 3; i++) {
    ev_signal_init(&r->signals[i], on_signal, signums[i]);
    r->signals[i].data = r;
    ev_signal_start(c->loop, &r->signals[i]);
  }
  ev_timer_init(&r->grace, on_grace, 0.0, 0.0);
  r->grace.data = r;
  ev_timer_init(&r->retry, on_retry, 0.0, 0.0);
  r->retry.data = r;
  r->wait_end = mono_s() + (double)c->opt.wait_ms / 1000.0;
  ev_timer_init(&r->patience, on_patience, PATIENCE_S, 0.0);
  r->patience.data = r;
  if (verbosity >= 2 && c->lock != NULL)
    relock_lock_on_wait(c->lock, on_wait, r); /* only a progress report: ENOMEM leaves it out */
  ev_timer_init(&r->lease, on_lease, 0.0, 0.0);
  r->lease.data = r;
  ev_timer_init(&r->reap, on_reap, MEMBERS_POLL_S, MEMBERS_POLL_S);
  r->reap.data = r;
  ev_child_init(&r->members, on_member, 0, 0); /* 0: any child; 0: exits only */
  r->members.data = r;
  static const int jobctl[2] = {SIGTSTP, SIGCONT};
  for (int i = 0; i < 2; i++) {
    ev_signal_init(&r->jobctl[i], i == 0 ? on_tstp : on_cont, jobctl[i]);
    r->jobctl[i].data = r;
    ev_signal_start(c->loop, &r->jobctl[i]);
  }
  if ((c->semaphore != NULL || c->permits != NULL) && set_permits(c) != 0)
    return EXIT_REDIS;
  r->acquire = acquire_hold(r, c->opt.wait_ms);
  if (r->acquire == NULL) {
    say(0, "cannot acquire %s %s: out of memory", c->what, c->name);
    return EXIT_REDIS;
  }
  relock_future_on_done(r->acquire, on_acquired, r);
  if (r->acquire != NULL && verbosity >= 1)
    ev_timer_start(c->loop, &r->patience);
  r->exit_code = -1;
  ev_run(c->loop, 0);
  if (c->lock != NULL) {
    relock_lock_on_lost(c->lock, NULL, NULL);
    relock_lock_on_wait(c->lock, NULL, NULL);
  }
  if (c->permits != NULL)
    relock_permit_semaphore_on_lost(c->permits, NULL, NULL);
  return r->exit_code >= 0 ? r->exit_code : EXIT_REDIS;
}
