/* relock(1): runs a command while holding a distributed lock, like flock(1)
 * across machines; also shows and force-releases locks.
 *
 * This file parses the command line, connects, and hands over to a mode:
 * run.c (run a command holding the lock) or inspect.c (status, release).
 * The tool uses only the public API. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ev.h>

#include <relock/relock.h>

#include "args.h"
#include "cli.h"

static const char usage_text[] =
    "usage: relock [options] NAME -- COMMAND [ARG...]   run COMMAND holding lock NAME\n"
    "       relock [options] status NAME | list PATTERN | top [PATTERN]  who holds NAME | matches | live\n"
    "       relock [options] release --force NAME       delete NAME whoever holds it\n"
    "       relock [options] latch NAME count|down|await|set N   a count-down latch\n"
    "\n"
    "  -u, --url URL          Redis URL (default: $RELOCK_URL, else redis://127.0.0.1:6379)\n"
    "      --url-file FILE    read the URL from FILE (keeps a password out of ps)\n"
    "  -w, --wait DURATION    how long to wait for the lock (default: forever; 0: try once)\n"
    "  -l, --lease DURATION   fixed lease, >= 10ms (default: the watchdog's, renewed while running)\n"
    "  -k, --kill-grace DURATION  SIGTERM to SIGKILL when the lock is lost (default 10s)\n"
    "      --orphan-signal SIG  the command's signal if relock dies (default TERM)\n"
    "      --timeout DURATION  each Redis command and connection attempt (default 3s)\n"
    "      --watchdog DURATION watchdog lease (default 30s, renewed every third)\n"
    "      --tls-ca FILE | --tls-ca-dir DIR  TLS: trust these CAs (default: the system's);\n"
    "                         any --tls-* option turns TLS on, as rediss:// does\n"
    "      --tls-cert FILE, --tls-key FILE  TLS: client certificate and key (mutual TLS)\n"
    "      --tls-server-name NAME  TLS: the name the certificate must have (default: the host)\n"
    "      --tls-insecure     TLS without verifying the server at all: for tests only\n"
    "  -o, --option NAME=VALUE  a library option (relock_options(3)): -o min-replicas-acked=1\n"
    "      --fair | --read | --write | --fenced | --spin  the kind of lock (man relock)\n"
    "      --semaphore N      hold one of N leased permits (--rsemaphore N: never expiring)\n"
    "  -q, --quiet | -v, --verbose  only errors | say what happens;  -h, --help;  -V, --version\n"
    "      --json             status, list: JSON lines;  top: --interval D, --once, -n N\n"
    "DURATION: 500ms, 10s, 5m, 1h, or plain seconds (1.5).\n"
    "Exit: the command's status (128+N if killed by signal N); 64 usage, 69 Redis\n"
    "unreachable or failing, 75 lock busy / not acquired in time, 76 lock lost while\n"
    "running (the command was terminated), 126/127 command not runnable / not found.\n"
    "status, list: 0 held / some listed, 1 free / none, 65 not a lock; latch: count and\n"
    "down print the count, await 75 if not open in time, set 1 if set already.\n";

int verbosity = 1;

/* --timeout's default. */
#define DEFAULT_TIMEOUT_MS 3000

void say(int level, const char *fmt, ...) {
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

/* -- main -------------------------------------------------------------------*/

/* The URL on the first line of path (malloc'ed), or NULL with why in
 * *why. A file that gives none is an error, never the default server: an
 * empty file, or a blank first line (the URL goes there, nowhere else). */
static char *read_url_file(const char *path, const char **why) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    *why = strerror(errno);
    return NULL;
  }
  char buf[4096];
  char *line = fgets(buf, sizeof buf, f);
  int failed = line == NULL && ferror(f);
  int e = errno;
  fclose(f);
  if (line == NULL) {
    *why = failed ? strerror(e) : "empty";
    return NULL;
  }
  buf[strcspn(buf, "\r\n")] = '\0';
  if (buf[strspn(buf, " \t\r\v\f")] == '\0') {
    *why = "first line is blank (the URL goes there)";
    return NULL;
  }
  char *url = strdup(buf);
  if (url == NULL)
    *why = "out of memory";
  return url;
}

/* The --tls-* options; any of them turns TLS on, even with a redis:// URL. */
static int set_tls(relock_options_t *opts, const options_t *o, relock_error_t *err) {
  const struct {
    const char *name, *value;
  } strings[] = {{RELOCK_OPT_TLS_CA_FILE, o->tls_ca},
                 {RELOCK_OPT_TLS_CA_DIR, o->tls_ca_dir},
                 {RELOCK_OPT_TLS_CERT, o->tls_cert},
                 {RELOCK_OPT_TLS_KEY, o->tls_key},
                 {RELOCK_OPT_TLS_SERVER_NAME, o->tls_server_name}};
  int any = o->tls_insecure, rc = 0;
  for (size_t i = 0; i < sizeof strings / sizeof strings[0] && rc == 0; i++)
    if (strings[i].value != NULL) {
      any = 1;
      rc = relock_options_set_string(opts, strings[i].name, strings[i].value, err);
    }
  if (rc == 0 && o->tls_insecure) {
    say(0, "WARNING: --tls-insecure: the server's certificate and name are NOT verified; anyone on the "
           "path can read and change the traffic, password included. For tests only.");
    rc = relock_options_set_int(opts, RELOCK_OPT_TLS_INSECURE_SKIP_VERIFY, 1, err);
  }
  if (rc == 0 && any)
    rc = relock_options_set_int(opts, RELOCK_OPT_TLS, 1, err);
  return rc;
}

/* Whether Redis answers, within --timeout: a PING, sent once. A command
 * that follows may be re-sent once (the library's retry, for a connection
 * lost under it), each attempt with the whole timeout: without this, a
 * server that never answers would be reported after twice --timeout. Any
 * answer will do, an error too (a user the ACL refuses PING). A refused
 * connection is left to run's --wait, which tries again until it ends. */
static int reach_redis(cli_t *r) {
  static const char *const ping[] = {"PING"};
  relock_future_t *f = relock_client_command_async(r->client, 1, ping, NULL);
  int err = f == NULL ? RELOCK_ENOMEM : relock_future_wait(f, RELOCK_INFINITE);
  int code = 0;
  if (err == 0 || err == RELOCK_ESERVER || err == RELOCK_ENOPERM)
    code = 0;
  else if (err == RELOCK_ECONNREFUSED && r->argv != NULL && r->opt.wait_ms > 0 && r->opt.wait_ms != RELOCK_INFINITE)
    code = 0;
  else {
    say(0, "cannot reach Redis: %s", f != NULL ? relock_future_message(f) : "out of memory");
    code = EXIT_REDIS;
  }
  relock_future_release(f);
  return code;
}

static int connect_client(cli_t *r) {
  const options_t *o = &r->opt;
  char *from_file = NULL;
  const char *url = o->url;
  const char *why = NULL;
  if (url == NULL && o->url_file != NULL && (url = from_file = read_url_file(o->url_file, &why)) == NULL) {
    say(0, "%s: %s", o->url_file, why);
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
    rc = set_tls(opts, o, &err);
  if (rc == 0)
    rc = relock_options_set_string(opts, RELOCK_OPT_CLIENT_NAME, "relock-cli", &err);
  /* --timeout bounds each command and each connection attempt alike: the
   * library's connect timeout (5 s) is not the CLI's */
  int64_t timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
  if (rc == 0)
    rc = relock_options_set_ms(opts, RELOCK_OPT_COMMAND_TIMEOUT, timeout_ms, &err);
  if (rc == 0)
    rc = relock_options_set_ms(opts, RELOCK_OPT_CONNECT_TIMEOUT, timeout_ms, &err);
  /* a CLI answers soon: one re-send, then it says why */
  if (rc == 0)
    rc = relock_options_set_int(opts, RELOCK_OPT_RETRY_ATTEMPTS, 1, &err);
  if (rc == 0 && o->watchdog_ms > 0)
    rc = relock_options_set_ms(opts, RELOCK_OPT_WATCHDOG_TIMEOUT, o->watchdog_ms, &err);
  for (int i = 0; rc == 0 && i < o->nset; i++) { /* last: they override the above */
    const char *eq = strchr(o->set[i], '=');
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(eq - o->set[i]), o->set[i]);
    rc = relock_options_set(opts, name, eq + 1, &err);
  }
  if (rc == 0)
    rc = relock_options_validate(opts, &err);
  if (rc != 0) {
    relock_options_free(opts);
    say(0, "%s", err.message);
    /* RELOCK_ETLS here: TLS asked of a build without it */
    return rc == RELOCK_EINVAL || rc == RELOCK_ETLS ? EXIT_USAGE : EXIT_REDIS;
  }
  r->client = relock_client_new(r->loop, opts, &err);
  relock_options_free(opts);
  if (r->client == NULL) {
    say(0, "%s", err.message);
    /* RELOCK_ETLS here: a CA, certificate or key file that cannot be loaded */
    return err.code == RELOCK_EINVAL || err.code == RELOCK_ETLS ? EXIT_USAGE : EXIT_REDIS;
  }
  /* Redisson's kinds, on the same name as a Java service's */
  static relock_lock_t *(*const make[])(relock_client_t *, const char *, relock_error_t *) = {
      [KIND_LOCK] = relock_lock_new,        [KIND_FAIR] = relock_fair_lock_new,
      [KIND_READ] = relock_read_lock_new,   [KIND_WRITE] = relock_write_lock_new,
      [KIND_FENCED] = relock_fenced_lock_new, [KIND_SPIN] = relock_spin_lock_new};
  if (r->top) {
    /* top shows Redis down on its screen, and tries again; but a PING
     * first all the same: with Sentinel, the master's address (which top
     * sends its commands to) is known once a connection found it */
    static const char *const ping[] = {"PING"};
    relock_future_t *f = relock_client_command_async(r->client, 1, ping, NULL);
    if (f != NULL)
      relock_future_wait(f, RELOCK_INFINITE);
    relock_future_release(f);
    return 0;
  }
  if ((rc = reach_redis(r)) != 0)
    return rc;
  if (r->latch_op != NULL)
    return 0; /* latch.c makes its object */
  if (o->semaphore > 0 && !o->rsemaphore) {
    if ((r->permits = relock_permit_semaphore_new(r->client, r->name, &err)) == NULL) {
      say(0, "invalid semaphore name: %s", relock_strerror(err.code));
      return EXIT_USAGE;
    }
    return 0;
  }
  if (o->semaphore > 0) {
    if ((r->semaphore = relock_semaphore_new(r->client, r->name, &err)) == NULL) {
      say(0, "invalid semaphore name: %s", relock_strerror(err.code));
      return EXIT_USAGE;
    }
    return 0;
  }
  if ((r->lock = make[o->kind](r->client, r->name, &err)) == NULL) {
    say(0, "invalid lock name: %s", relock_strerror(err.code));
    return EXIT_USAGE;
  }
  return 0;
}

int main(int argc, char **argv) {
  /* Nothing relock prints may stop it from protecting the lock: with
   * stderr a pipe nobody reads, the loss's message raised SIGPIPE and
   * killed relock before it stopped the command's group. A failed write
   * is ignored instead. The command gets the default back (run.c). */
  signal(SIGPIPE, SIG_IGN);
  cli_t r;
  memset(&r, 0, sizeof r);
  args_t a;
  int parsed = args_parse(argc, argv, &a), code = 0;
  if (parsed == ARGS_HELP)
    fputs(usage_text, stdout);
  else if (parsed == ARGS_VERSION)
    printf("relock %s\nTLS: %s\n", relock_version_string(), relock_tls_available() ? "yes" : "no");
  else if (parsed == ARGS_USAGE)
    code = usage_error("%s", a.message != NULL ? a.message : "out of memory");
  args_cleanup(&a);
  if (parsed != ARGS_OK)
    return code;
  r.opt = a.opt;
  r.name = a.name;
  r.argv = a.command;
  r.what = r.opt.semaphore > 0 ? "semaphore" : "lock";
  r.latch_op = a.latch_op;
  r.latch_count = a.latch_count;
  r.top = a.mode == ARGS_TOP;
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
  else if (a.mode == ARGS_LIST)
    code = list_locks(&r);
  else if (a.mode == ARGS_LATCH)
    code = latch_command(&r);
  else if (a.mode == ARGS_TOP)
    code = top_command(&r);
  else
    code = run_command(&r);
  relock_lock_free(r.lock);
  relock_semaphore_free(r.semaphore);
  relock_permit_semaphore_free(r.permits);
  relock_client_free(r.client);
  return code;
}
