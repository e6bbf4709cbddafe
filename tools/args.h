/* The relock command line: options, then what to do (run a command, status,
 * release, list, latch) and its operands. Parsed without printing or exiting, so that the
 * fuzz target (tests/fuzz/fuzz_cli.c) can run it as often as it likes. */
#ifndef RELOCK_TOOLS_ARGS_H
#define RELOCK_TOOLS_ARGS_H

#include <stdint.h>

/* Which of Redisson's locks NAME is (--fair, --read, --write, --fenced,
 * --spin; the reentrant lock unless given). */
typedef enum lock_kind { KIND_LOCK = 0, KIND_FAIR, KIND_READ, KIND_WRITE, KIND_FENCED, KIND_SPIN } lock_kind_t;

typedef struct options {
  const char *url;      /* -u: NULL for $RELOCK_URL, else the default */
  const char *url_file; /* --url-file */
  int64_t wait_ms;      /* -w: RELOCK_INFINITE (forever) unless given; >= 0 */
  int64_t lease_ms;     /* -l: RELOCK_INFINITE (watchdog lease) unless given; > 0 */
  int64_t grace_ms;     /* -k: 10000 unless given; >= 0 */
  int64_t timeout_ms;   /* --timeout: 0 (the library's default) unless given; > 0 */
  int64_t watchdog_ms;  /* --watchdog: 0 (the library's default) unless given; > 0 */
  int verbosity;        /* 0 quiet, 1 normal, 2 verbose */
  int force;            /* --force */
  int json;             /* --json: status and list print JSON */
  int orphan_signal;    /* --orphan-signal: the command's signal if relock dies; SIGTERM */
  const char *tls_ca;   /* --tls-ca FILE; the --tls-* are NULL unless given */
  const char *tls_ca_dir;
  const char *tls_cert;
  const char *tls_key;
  const char *tls_server_name;
  int tls_insecure;     /* --tls-insecure: no verification, for tests only */
  const char *set[16];  /* -o NAME=VALUE: library options, in order (point into argv) */
  int nset;
  lock_kind_t kind;
  int64_t semaphore;    /* --semaphore N, --rsemaphore N: run holding one of N permits; 0 unless given */
  int rsemaphore;       /* --rsemaphore: Redisson's RSemaphore, permits that never expire */
  int64_t interval_ms;  /* top --interval: 0 (one second) unless given; >= TOP_MIN_INTERVAL_MS */
  int64_t refreshes;    /* top -n COUNT, --once (1): 0 (until quit) unless given */
} options_t;

/* top's shortest --interval: a shorter one would load Redis for nothing
 * a person can read. */
#define TOP_MIN_INTERVAL_MS 100

typedef enum args_mode {
  ARGS_RUN,     /* NAME -- COMMAND [ARG...] */
  ARGS_STATUS,  /* status NAME */
  ARGS_RELEASE, /* release --force NAME */
  ARGS_LIST,    /* list PATTERN */
  ARGS_LATCH,   /* latch NAME count|down|await|set N */
  ARGS_TOP,     /* top [PATTERN] */
} args_mode_t;

typedef struct args {
  options_t opt;
  args_mode_t mode;
  const char *name; /* the lock's name (never empty); points into argv;
                       ARGS_LIST, ARGS_TOP: the pattern */
  char **command;   /* ARGS_RUN: the command and its arguments, the tail of
                       argv after NAME --, so NULL-terminated as argv is */
  const char *latch_op; /* ARGS_LATCH: count, down, await or set */
  int64_t latch_count;  /* ARGS_LATCH set: the count (>= 1) */
  char *message;    /* ARGS_USAGE: what is wrong, without "relock: ";
                       NULL if there was no memory for it */
} args_t;

/* What args_parse found. */
enum {
  ARGS_OK = 0,  /* *a is filled in */
  ARGS_USAGE,   /* a usage error: a->message says which */
  ARGS_HELP,    /* -h / --help: print the usage text and exit 0 */
  ARGS_VERSION, /* -V / --version: print the version and exit 0 */
};

/* Parses argv (argc elements plus the terminating NULL, argv[0] the
 * program's name) into *a, which it initialises first. Uses getopt_long and
 * resets its state, so it can be called more than once; it does not reorder
 * argv. Free a->message with args_cleanup whatever the result. */
int args_parse(int argc, char **argv, args_t *a);

void args_cleanup(args_t *a);

#endif /* RELOCK_TOOLS_ARGS_H */
