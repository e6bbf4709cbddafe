/* The processes a command started (members.h): found with kill(-group, 0),
 * waitid and /proc, signalled with kill. */
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

/* The parent of process pid, from /proc/pid/stat; 0 if gone. The command
 * name in parentheses may hold anything: the fields follow its last ')'. */
static pid_t parent_of(const char *pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%s/stat", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *end = strrchr(buf, ')');
  char state;
  int ppid;
  if (end == NULL || sscanf(end + 1, " %c %d", &state, &ppid) != 2)
    return 0;
  return (pid_t)ppid;
}

void members_signal(pid_t group, int sig) {
  kill(-group, sig);
  /* relock's children outside the group: /proc/self/task/TID/children
   * needs CONFIG_PROC_CHILDREN, which not every kernel has; a walk of
   * /proc works everywhere. Called only when the lock is lost. */
  DIR *proc = opendir("/proc");
  if (proc == NULL)
    return;
  pid_t self = getpid();
  struct dirent *e;
  while ((e = readdir(proc)) != NULL) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9' || parent_of(e->d_name) != self)
      continue;
    pid_t pid = (pid_t)atoi(e->d_name);
    pid_t pgid = getpgid(pid);
    if (pgid == group)
      continue; /* signalled with the group */
    if (pgid == pid)
      kill(-pid, sig); /* a daemon after setsid, and what it started */
    else
      kill(pid, sig);
  }
  closedir(proc);
}
