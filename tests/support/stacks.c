/* Backtraces of a stuck process through gdb in batch mode: a test that
 * is about to kill a worker that did not wind down prints them first. */
#include <config.h>

#include <stdio.h>
#include <string.h>

#include "support/stacks.h"

void relock_test_print_stacks(pid_t pid, int max_lines) {
  char cmd[256];
  /* -nx: no user's .gdbinit; the process stays stopped only while gdb reads it */
  snprintf(cmd, sizeof cmd, "gdb -nx -batch -p %ld -ex 'thread apply all bt' 2>&1", (long)pid);
  fflush(stdout);
  FILE *p = popen(cmd, "r");
  if (p == NULL) {
    printf("# (no stacks: cannot run gdb)\n");
    return;
  }
  char line[512];
  int n = 0, printed = 0;
  while (fgets(line, sizeof line, p) != NULL) {
    /* gdb's own chatter is not the process's state */
    if (strncmp(line, "Thread ", 7) != 0 && line[0] != '#')
      continue;
    if (n++ < max_lines) {
      printf("#   %s", line);
      printed++;
    }
  }
  int status = pclose(p);
  if (printed == 0)
    printf("# (no stacks: gdb is missing or could not attach, status %d)\n", status);
  else if (n > printed)
    printf("#   ... %d more lines\n", n - printed);
  fflush(stdout);
}
