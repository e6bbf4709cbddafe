/* The processes a command started (members.h): found with kill(-group, 0)
 * and waitid, signalled with kill over the tree of relock's descendants
 * read from /proc. */
#define _GNU_SOURCE /* waitid's WNOWAIT */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "members.h"

int members_left(pid_t group) {
  if (kill(-group, 0) == 0 || errno != ESRCH)
    return 1; /* EPERM: a member that changed its user still runs */
  /* WNOWAIT: only look; libev's SIGCHLD handler reaps (and tells run.c) */
  siginfo_t si;
  memset(&si, 0, sizeof si);
  return waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0;
}

/* One process, from /proc/PID/stat. */
typedef struct proc {
  pid_t pid, ppid, pgid;
  int mine; /* 1 relock's descendant, 2 not, 0 not known yet */
} proc_t;

/* Reads /proc/<name>/stat into *p; 0 on success. The command name in
 * parentheses may hold anything: the fields follow its last ')'. */
static int read_proc(const char *name, proc_t *p) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%s/stat", name);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *end = strrchr(buf, ')');
  char state;
  int ppid, pgid;
  if (end == NULL || sscanf(end + 1, " %c %d %d", &state, &ppid, &pgid) != 3)
    return -1;
  *p = (proc_t){.pid = (pid_t)atoi(name), .ppid = (pid_t)ppid, .pgid = (pid_t)pgid, .mine = 0};
  return 0;
}

/* Every process now, from /proc; NULL if it cannot be read. */
static proc_t *read_procs(size_t *count) {
  DIR *dir = opendir("/proc");
  if (dir == NULL)
    return NULL;
  size_t n = 0, cap = 256;
  proc_t *procs = malloc(cap * sizeof *procs);
  struct dirent *e;
  while (procs != NULL && (e = readdir(dir)) != NULL) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9')
      continue;
    if (n == cap) {
      proc_t *more = realloc(procs, 2 * cap * sizeof *procs);
      if (more == NULL) {
        free(procs);
        procs = NULL;
        break;
      }
      procs = more;
      cap *= 2;
    }
    if (read_proc(e->d_name, &procs[n]) == 0)
      n++;
  }
  closedir(dir);
  *count = n;
  return procs;
}

static int by_pid(const void *a, const void *b) {
  pid_t x = ((const proc_t *)a)->pid, y = ((const proc_t *)b)->pid;
  return (x > y) - (x < y);
}

static proc_t *find(proc_t *procs, size_t n, pid_t pid) {
  proc_t key = {.pid = pid};
  return bsearch(&key, procs, n, sizeof *procs, by_pid);
}

/* Whether p descends from relock (1) or not (2), remembered in ->mine. The
 * walk up is bounded: a /proc read while processes come and go may hold a
 * parent that is gone, or (pid reuse) a loop. */
static int descends(proc_t *procs, size_t n, proc_t *p, pid_t self) {
  proc_t *q = p;
  int verdict = 2;
  for (size_t steps = 0; q != NULL && steps <= n; steps++) {
    if (q->mine != 0) {
      verdict = q->mine;
      break;
    }
    if (q->ppid == self) {
      verdict = 1;
      break;
    }
    q = find(procs, n, q->ppid);
  }
  for (q = p; q != NULL && q->mine == 0 && q->ppid != self; q = find(procs, n, q->ppid))
    q->mine = verdict; /* the chain walked shares the verdict */
  if (p->mine == 0)
    p->mine = verdict;
  return p->mine;
}

void members_signal(pid_t group, int sig) {
  kill(-group, sig);
  /* The descendants outside the group: a daemon (setsid) and what it
   * started, whether relock's children already or still their parents'
   * (a leader that takes its time to end). /proc/PID/task/TID/children
   * needs CONFIG_PROC_CHILDREN, which not every kernel has; a walk of /proc
   * works everywhere. Called only when the lock is lost or on a signal. */
  size_t n = 0;
  proc_t *procs = read_procs(&n);
  if (procs == NULL)
    return;
  qsort(procs, n, sizeof *procs, by_pid);
  pid_t self = getpid();
  for (size_t i = 0; i < n; i++)
    descends(procs, n, &procs[i], self);
  for (size_t i = 0; i < n; i++) {
    if (procs[i].mine != 1 || procs[i].pgid == group)
      continue; /* not the command's, or signalled with the group */
    proc_t *leader = find(procs, n, procs[i].pgid);
    if (procs[i].pgid == procs[i].pid)
      kill(-procs[i].pid, sig); /* a daemon after setsid, and its group */
    else if (leader == NULL || leader->mine != 1)
      kill(procs[i].pid, sig); /* in a group not led by one of them */
  }
  free(procs);
}
