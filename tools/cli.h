/* What the parts of relock(1) share: its exit statuses, the messages it
 * prints, and the state of one invocation. */
#ifndef RELOCK_TOOLS_CLI_H
#define RELOCK_TOOLS_CLI_H

#include <stdint.h>

#include <relock/relock.h>

#include "args.h"

struct ev_loop;

/* Exit statuses of relock itself; anything else is the command's own. */
enum {
  EXIT_FREE = 1,      /* status: the lock is free; list: no lock matched */
  EXIT_USAGE = 64,    /* bad options or arguments */
  EXIT_NOT_LOCK = 65, /* the key is not a lock, or one of another kind (EX_DATAERR) */
  EXIT_REDIS = 69,    /* cannot reach Redis, or Redis answered with an error */
  EXIT_BUSY = 75,     /* the lock was not acquired in time (held by another) */
  EXIT_LOST = 76,     /* the lock (or permit) was lost while the command ran */
  EXIT_CANNOT_RUN = 126,
  EXIT_NOT_FOUND = 127
};

/* One invocation: the options, and the client and lock every mode uses. */
typedef struct cli {
  options_t opt;
  const char *name;   /* the lock's name */
  const char *what;   /* "lock" or "semaphore": what NAME is, in messages */
  char **argv;        /* run: the command and its arguments */
  struct ev_loop *loop;
  relock_client_t *client;
  relock_lock_t *lock;           /* NULL for --semaphore, --rsemaphore and latch */
  relock_semaphore_t *semaphore; /* --rsemaphore: NAME is one, run holds a permit */
  relock_permit_semaphore_t *permits; /* --semaphore: NAME is one, run holds a watched permit */
  const char *latch_op;          /* latch: count, down, await, set */
  int64_t latch_count;           /* latch set N */
  int top;                       /* relock top: no lock object, Redis may be down */
  uint64_t owner;     /* the process id: the holder field is "<client-id>:<pid>" */
} cli_t;

/* 0 quiet, 1 normal, 2 verbose (-q, default, -v). */
extern int verbosity;

/* Prints "relock: " and the message on stderr if verbosity >= level. */
void say(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The modes: each returns relock's exit status. */
int run_command(cli_t *c);   /* run.c */
int show_status(cli_t *c);   /* inspect.c */
int force_release(cli_t *c); /* inspect.c */
int list_locks(cli_t *c);    /* inspect.c */
int latch_command(cli_t *c); /* latch.c */
int top_command(cli_t *c);   /* top.c */

#endif /* RELOCK_TOOLS_CLI_H */
