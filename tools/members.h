/* The processes a command run by relock started: its process group, and the
 * descendants that left it (a daemon's setsid), which the child subreaper
 * (run.c) makes relock's children when their parent exits. relock holds the
 * lock until they are all gone, and stops them all when it is lost. */
#ifndef RELOCK_TOOLS_MEMBERS_H
#define RELOCK_TOOLS_MEMBERS_H

#include <sys/types.h>

/* Whether any of them still runs: a member of process group `group`, or a
 * child of relock's (every child relock has is the command or one of its
 * descendants). A zombie libev has not reaped yet counts, until it does. */
int members_left(pid_t group);

/* Sends sig to process group `group`, and to each descendant of relock's
 * outside it: to the whole group of one that leads a group (a daemon after
 * setsid), else to the process alone. */
void members_signal(pid_t group, int sig);

#endif /* RELOCK_TOOLS_MEMBERS_H */
