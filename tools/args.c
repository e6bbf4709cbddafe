/* The relock command line (args.h): getopt_long over the options, then the
 * operands. Every message is the one relock prints after "relock: ". */
#define _GNU_SOURCE /* vasprintf */
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h> /* strcasecmp */

#include <relock/common.h>
#include <relock/lock.h> /* RELOCK_MIN_LEASE_MS */

#include "args.h"
#include "duration.h"
#include "suggest.h"

static int usage(args_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage(args_t *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  free(a->message);
  if (vasprintf(&a->message, fmt, ap) < 0)
    a->message = NULL;
  va_end(ap);
  return ARGS_USAGE;
}

static int duration_opt(args_t *a, const char *name, const char *text, int64_t *out, int allow_zero) {
  int64_t ms;
  if (parse_duration(text, &ms) != 0 || (!allow_zero && ms == 0))
    return usage(a, "invalid %s \"%s\": use e.g. 500ms, 10s, 5m", name, text);
  *out = ms;
  return ARGS_OK;
}

/* A lease (--lease, --watchdog): a duration of at least RELOCK_MIN_LEASE_MS.
 * A shorter one is nearly all drift margin: relock would try forever. */
static int lease_opt(args_t *a, const char *name, const char *text, int64_t *out) {
  int r = duration_opt(a, name, text, out, 0);
  if (r == ARGS_OK && *out < RELOCK_MIN_LEASE_MS)
    return usage(a, "%s %s is too short: a lease must be at least %dms, since 1%% + 2ms of it is a margin for "
                 "Redis's clock and the answer must come back within the rest",
                 name, text, RELOCK_MIN_LEASE_MS);
  return r;
}

/* A signal by name (TERM, SIGTERM) or number. */
static int signal_opt(args_t *a, const char *text, int *out) {
  static const struct { const char *name; int num; } names[] = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ABRT", SIGABRT}, {"KILL", SIGKILL},
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"ALRM", SIGALRM}, {"TERM", SIGTERM}};
  const char *name = strncasecmp(text, "SIG", 3) == 0 ? text + 3 : text;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcasecmp(name, names[i].name) == 0) {
      *out = names[i].num;
      return ARGS_OK;
    }
  char *end;
  long n = strtol(text, &end, 10);
  if (end != text && *end == '\0' && n > 0 && n < NSIG) {
    *out = (int)n;
    return ARGS_OK;
  }
  return usage(a, "invalid --orphan-signal \"%s\": use a signal name (TERM, KILL, HUP, INT, ...) or number", text);
}
/* Long options without a short one. */
enum {
  OPT_TLS_CA = 256,
  OPT_TLS_CA_DIR,
  OPT_TLS_CERT,
  OPT_TLS_KEY,
  OPT_TLS_SERVER_NAME,
  OPT_TLS_INSECURE,
  OPT_SEMAPHORE,
  OPT_RSEMAPHORE,
  OPT_INTERVAL,
  OPT_ONCE,
  OPT_KIND /* --fair ... --spin: OPT_KIND + the kind */
};

static const char *const kind_options[] = {"", "--fair", "--read", "--write", "--fenced", "--spin"};

/* A count: a whole number from 1 to 2^31 - 1, digits only. */
static int count_opt(args_t *a, const char *what, const char *text, int64_t *out) {
  int64_t n = 0;
  for (const char *p = text; *p != '\0'; p++) {
    if (*p < '0' || *p > '9' || n > INT32_MAX / 10)
      return usage(a, "%s needs a whole number from 1 to %d (got '%.40s')", what, INT32_MAX, text);
    n = n * 10 + (*p - '0');
  }
  if (n < 1 || n > INT32_MAX)
    return usage(a, "%s needs a whole number from 1 to %d (got '%.40s')", what, INT32_MAX, text);
  *out = n;
  return ARGS_OK;
}

/* --semaphore N or --rsemaphore N, one layout: the two count the same key
 * but only one of them gives back the permits of a relock that died. */
static int semaphore_opt(args_t *a, int rsemaphore, const char *text) {
  const char *name = rsemaphore ? "--rsemaphore" : "--semaphore";
  if (a->opt.semaphore > 0 && a->opt.rsemaphore != rsemaphore)
    return usage(a, "--semaphore and --rsemaphore: NAME is a semaphore of one layout");
  a->opt.rsemaphore = rsemaphore;
  return count_opt(a, name, text, &a->opt.semaphore);
}

/* top's --interval: a duration of at least TOP_MIN_INTERVAL_MS. */
static int interval_opt(args_t *a, const char *text) {
  int r = duration_opt(a, "--interval", text, &a->opt.interval_ms, 0);
  if (r == ARGS_OK && a->opt.interval_ms < TOP_MIN_INTERVAL_MS)
    return usage(a, "--interval %.40s is too short: at least %dms", text, TOP_MIN_INTERVAL_MS);
  return r;
}

/* One kind only: "--read --write" is a mistake, not a choice. */
static int kind_opt(args_t *a, int kind) {
  if (a->opt.kind != KIND_LOCK && a->opt.kind != (lock_kind_t)kind)
    return usage(a, "%s and %s: a lock is of one kind", kind_options[a->opt.kind], kind_options[kind]);
  a->opt.kind = (lock_kind_t)kind;
  return ARGS_OK;
}

static int parse_options(int argc, char **argv, args_t *a, int *first) {
  static const struct option longopts[] = {
      {"url", required_argument, NULL, 'u'},        {"url-file", required_argument, NULL, 'F'},
      {"wait", required_argument, NULL, 'w'},       {"lease", required_argument, NULL, 'l'},
      {"kill-grace", required_argument, NULL, 'k'}, {"timeout", required_argument, NULL, 'T'},
      {"watchdog", required_argument, NULL, 'W'},   {"quiet", no_argument, NULL, 'q'},
      {"verbose", no_argument, NULL, 'v'},          {"force", no_argument, NULL, 'f'},
      {"json", no_argument, NULL, 'j'},             {"orphan-signal", required_argument, NULL, 'O'},
      {"help", no_argument, NULL, 'h'},             {"version", no_argument, NULL, 'V'},
      {"tls-ca", required_argument, NULL, OPT_TLS_CA},
      {"tls-ca-dir", required_argument, NULL, OPT_TLS_CA_DIR},
      {"tls-cert", required_argument, NULL, OPT_TLS_CERT},
      {"tls-key", required_argument, NULL, OPT_TLS_KEY},
      {"tls-server-name", required_argument, NULL, OPT_TLS_SERVER_NAME},
      {"tls-insecure", no_argument, NULL, OPT_TLS_INSECURE},
      {"option", required_argument, NULL, 'o'},
      {"fair", no_argument, NULL, OPT_KIND + KIND_FAIR},
      {"read", no_argument, NULL, OPT_KIND + KIND_READ},
      {"write", no_argument, NULL, OPT_KIND + KIND_WRITE},
      {"fenced", no_argument, NULL, OPT_KIND + KIND_FENCED},
      {"spin", no_argument, NULL, OPT_KIND + KIND_SPIN},
      {"semaphore", required_argument, NULL, OPT_SEMAPHORE},
      {"rsemaphore", required_argument, NULL, OPT_RSEMAPHORE},
      {"interval", required_argument, NULL, OPT_INTERVAL},
      {"once", no_argument, NULL, OPT_ONCE},
      {"count", required_argument, NULL, 'n'},
      {NULL, 0, NULL, 0}};
  options_t *o = &a->opt;
  int c, r;
  opterr = 0;
  optind = 0; /* glibc: start over, as on the first call */
  /* '+': stop at the first non-option, so COMMAND's own options are its own */
  while ((c = getopt_long(argc, argv, "+u:w:l:k:o:n:qvhV", longopts, NULL)) != -1) {
    switch (c) {
    case 'u': o->url = optarg; break;
    case 'F': o->url_file = optarg; break;
    case 'w': if ((r = duration_opt(a, "--wait", optarg, &o->wait_ms, 1)) != 0) return r; break;
    case 'l': if ((r = lease_opt(a, "--lease", optarg, &o->lease_ms)) != 0) return r; break;
    case 'k': if ((r = duration_opt(a, "--kill-grace", optarg, &o->grace_ms, 1)) != 0) return r; break;
    case 'T': if ((r = duration_opt(a, "--timeout", optarg, &o->timeout_ms, 0)) != 0) return r; break;
    case 'W': if ((r = lease_opt(a, "--watchdog", optarg, &o->watchdog_ms)) != 0) return r; break;
    case 'O': if ((r = signal_opt(a, optarg, &o->orphan_signal)) != 0) return r; break;
    case 'o':
      if (strchr(optarg, '=') == NULL || optarg[0] == '=')
        return usage(a, "-o needs NAME=VALUE, a library option (e.g. -o min-replicas-acked=1)");
      if (o->nset == (int)(sizeof o->set / sizeof o->set[0]))
        return usage(a, "more than %d -o options", (int)(sizeof o->set / sizeof o->set[0]));
      o->set[o->nset++] = optarg;
      break;
    case 'q': o->verbosity = 0; break;
    case 'v': o->verbosity = 2; break;
    case 'f': o->force = 1; break;
    case 'j': o->json = 1; break;
    case OPT_TLS_CA: o->tls_ca = optarg; break;
    case OPT_TLS_CA_DIR: o->tls_ca_dir = optarg; break;
    case OPT_TLS_CERT: o->tls_cert = optarg; break;
    case OPT_TLS_KEY: o->tls_key = optarg; break;
    case OPT_TLS_SERVER_NAME: o->tls_server_name = optarg; break;
    case OPT_TLS_INSECURE: o->tls_insecure = 1; break;
    case OPT_KIND + KIND_FAIR:
    case OPT_KIND + KIND_READ:
    case OPT_KIND + KIND_WRITE:
    case OPT_KIND + KIND_FENCED:
    case OPT_KIND + KIND_SPIN:
      if ((r = kind_opt(a, c - OPT_KIND)) != ARGS_OK)
        return r;
      break;
    case OPT_SEMAPHORE:
    case OPT_RSEMAPHORE:
      if ((r = semaphore_opt(a, c == OPT_RSEMAPHORE, optarg)) != ARGS_OK)
        return r;
      break;
    case OPT_INTERVAL: if ((r = interval_opt(a, optarg)) != 0) return r; break;
    case OPT_ONCE: o->refreshes = 1; break;
    case 'n': if ((r = count_opt(a, "-n", optarg, &o->refreshes)) != 0) return r; break;
    case 'h': return ARGS_HELP;
    case 'V': return ARGS_VERSION;
    default:
      if (optopt != 0)
        return usage(a, "option -%c needs a value, or is unknown", optopt);
      /* not its value: "--ur=redis://:password@host" (ambiguous) must not echo a password */
      return usage(a, "unknown option %.*s", (int)strcspn(argv[optind - 1], "="), argv[optind - 1]);
    }
  }
  *first = optind;
  return ARGS_OK;
}

/* status and list take their one operand with --json before or after it:
 * "status --json NAME", "status NAME --json" (not "status -- --json", which
 * runs the command --json holding the lock "status", as it always did). */
static int is_json_operand(int nargs, char **args) {
  return nargs == 3 && (strcmp(args[1], "--json") == 0 || (strcmp(args[2], "--json") == 0 && strcmp(args[1], "--") != 0));
}

/* "latch NAME count|down|await" or "latch NAME set N" (anything else runs
 * a command holding the lock "latch", as it always did). */
static int is_latch_op(int nargs, char **args) {
  if (nargs == 3)
    return strcmp(args[2], "count") == 0 || strcmp(args[2], "down") == 0 || strcmp(args[2], "await") == 0;
  return nargs == 4 && strcmp(args[2], "set") == 0;
}

/* NAME -- COMMAND [ARG...]: the -- is required, so that a mistyped
 * subcommand ("relock statsu nightly") is an error, not a lock named
 * "statsu" held while "nightly" runs. After the --, NAME is taken as
 * written: a lock may be named "status". */
static int run_operands(args_t *a, int nargs, char **args) {
  if (nargs < 1)
    return usage(a, "missing lock NAME: relock NAME -- COMMAND");
  if (nargs >= 2 && strcmp(args[1], "--") == 0) {
    if (nargs == 2)
      return usage(a, "missing COMMAND after NAME --");
    a->name = args[0];
    a->command = args + 2;
    return ARGS_OK;
  }
  /* the subcommands' words with operands that fit none of their forms */
  if (strcmp(args[0], "status") == 0 || strcmp(args[0], "list") == 0)
    return usage(a, "%s takes one %s, and --json (to run a command holding a lock named %s: relock %s -- COMMAND)",
                 args[0], args[0][0] == 's' ? "NAME" : "PATTERN", args[0], args[0]);
  if (strcmp(args[0], "release") == 0)
    return usage(a, "usage: relock release --force NAME");
  if (strcmp(args[0], "latch") == 0)
    return usage(a, "usage: relock latch NAME count|down|await|set N");
  const char *meant = suggest_subcommand(args[0]);
  if (meant != NULL)
    return usage(a, "'%.40s' is no subcommand: did you mean 'relock %s'? (to run a command holding the lock "
                 "%.40s: relock %.40s -- COMMAND)", args[0], meant, args[0], args[0]);
  if (nargs == 1)
    return usage(a, "missing -- COMMAND after the lock NAME: relock NAME -- COMMAND");
  return usage(a, "missing -- between the lock NAME and the COMMAND: relock NAME -- COMMAND");
}

/* top's operands: [PATTERN] and its options, in any order after "top"
 * (--interval D, --interval=D, --once, -n N, --count N). */
static int top_operands(args_t *a, int nargs, char **args) {
  a->mode = ARGS_TOP;
  a->name = NULL;
  int code;
  for (int i = 1; i < nargs; i++) {
    const char *s = args[i];
    const char *value = i + 1 < nargs ? args[i + 1] : NULL;
    if (strncmp(s, "--interval=", 11) == 0)
      code = interval_opt(a, s + 11);
    else if (strcmp(s, "--once") == 0)
      code = (a->opt.refreshes = 1, ARGS_OK);
    else if (strcmp(s, "--interval") == 0 || strcmp(s, "-n") == 0 || strcmp(s, "--count") == 0) {
      if (value == NULL)
        return usage(a, "top %s needs a value", s);
      code = s[1] == 'n' || s[2] == 'c' ? count_opt(a, "-n", value, &a->opt.refreshes) : interval_opt(a, value);
      i++;
    } else if (s[0] == '-' && s[1] != '\0')
      return usage(a, "top: unknown option %.*s (top [PATTERN] [--interval DURATION] [--once | -n COUNT])",
                   (int)strcspn(s, "="), s);
    else if (a->name != NULL)
      return usage(a, "top takes one PATTERN (quote it: the shell expands '*')");
    else
      code = (a->name = s, ARGS_OK);
    if (code != ARGS_OK)
      return code;
  }
  if (a->name == NULL)
    a->name = "*";
  return ARGS_OK;
}

int args_parse(int argc, char **argv, args_t *a) {
  *a = (args_t){
      .opt = {.wait_ms = RELOCK_INFINITE, .lease_ms = RELOCK_INFINITE, .grace_ms = 10000, .verbosity = 1,
              .orphan_signal = SIGTERM},
      .mode = ARGS_RUN,
      .name = NULL,
      .command = NULL,
      .message = NULL,
  };
  int first = 0, code;
  if ((code = parse_options(argc, argv, a, &first)) != ARGS_OK)
    return code;
  int nargs = argc - first;
  char **args = argv + first;
  if (nargs >= 1 && (strcmp(args[0], "status") == 0 || strcmp(args[0], "list") == 0) &&
      (nargs <= 2 || is_json_operand(nargs, args))) {
    a->mode = args[0][0] == 's' ? ARGS_STATUS : ARGS_LIST;
    if (nargs == 1 || (nargs == 2 && strcmp(args[1], "--json") == 0))
      return usage(a, a->mode == ARGS_STATUS ? "status needs a lock NAME" : "list needs a PATTERN");
    a->opt.json |= nargs == 3;
    a->name = args[nargs == 3 && strcmp(args[1], "--json") == 0 ? 2 : 1];
  } else if (nargs >= 3 && strcmp(args[0], "latch") == 0 && is_latch_op(nargs, args)) {
    a->mode = ARGS_LATCH;
    a->name = args[1];
    a->latch_op = args[2];
    if (strcmp(args[2], "set") == 0 && (code = count_opt(a, "latch set", args[3], &a->latch_count)) != ARGS_OK)
      return code;
  } else if (nargs >= 1 && strcmp(args[0], "release") == 0 && (nargs == 2 || nargs == 3)) {
    a->mode = ARGS_RELEASE;
    if (nargs == 3 && strcmp(args[1], "--force") == 0)
      a->opt.force = 1;
    a->name = args[nargs - 1];
    if (!a->opt.force)
      return usage(a, "release needs --force: it deletes the lock whoever holds it");
  } else if (nargs >= 1 && strcmp(args[0], "top") == 0 && (nargs == 1 || strcmp(args[1], "--") != 0)) {
    if ((code = top_operands(a, nargs, args)) != ARGS_OK)
      return code; /* "top -- COMMAND": a command holding the lock "top", as it always was */
  } else if ((code = run_operands(a, nargs, args)) != ARGS_OK) {
    return code;
  }
  if (a->name[0] == '\0')
    return usage(a, a->mode == ARGS_LIST ? "the PATTERN is empty" : "the lock NAME is empty");
  if (a->opt.json && a->mode != ARGS_STATUS && a->mode != ARGS_LIST)
    return usage(a, "--json is for status and list");
  const char *sem = a->opt.rsemaphore ? "--rsemaphore" : "--semaphore";
  if (a->opt.semaphore > 0 && a->mode != ARGS_RUN)
    return usage(a, "%s is for running a command", sem);
  if (a->opt.semaphore > 0 && a->opt.kind != KIND_LOCK)
    return usage(a, "%s and %s: NAME is a semaphore or a lock", sem, kind_options[a->opt.kind]);
  if (a->opt.rsemaphore && a->opt.lease_ms != RELOCK_INFINITE)
    return usage(a, "--rsemaphore and --lease: an RSemaphore's permits have no lease (--semaphore's have)");
  if (a->mode != ARGS_TOP && (a->opt.interval_ms > 0 || a->opt.refreshes > 0))
    return usage(a, "--interval, --once and -n are for top");
  if (a->mode == ARGS_TOP && a->opt.kind != KIND_LOCK)
    return usage(a, "top shows locks of every kind: no %s", kind_options[a->opt.kind]);
  if (a->mode == ARGS_LATCH && a->opt.kind != KIND_LOCK)
    return usage(a, "latch and %s: a latch is no lock", kind_options[a->opt.kind]);
  return ARGS_OK;
}

void args_cleanup(args_t *a) {
  free(a->message);
  a->message = NULL;
}
