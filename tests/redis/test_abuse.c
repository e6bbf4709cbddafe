/* The abuse table: every public function fed bad input, against a real
 * redis-server (and against a TCP listener that is not Redis at all).
 *
 * Each row is printed as a TAP comment, so the harness keeps the table in
 * the log:
 *   # | input | expected | observed | ok |
 * and every row is an assertion: a test whose rows do not all match fails,
 * naming them. Rows run to the end even when one fails, so the whole table
 * is always printed. Inputs that may crash the process (or trip a sanitizer)
 * run in a forked child, whose fate is the observation. Nothing here waits
 * longer than the short timeouts it configures; a per-test alarm turns a
 * hang into a failure that names the row. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h> /* HIREDIS_MAJOR: which reader the library runs on */

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define HAVE_VALGRIND_H 1
#endif
#endif

#include "support/client_fixture.h"
#include "objects/lock_impl.h"

#if defined(__SANITIZE_ADDRESS__)
#define ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_BUILD 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TSAN_BUILD 1
#endif
#endif

/* -- the table --------------------------------------------------------------*/

static struct {
  int rows;
  int bad;
  int skipped;
  char bad_rows[3000];
} tab;

/* The row being worked on, for the hang guard. */
static char stage_name[200];

static void stage(const char *what) { snprintf(stage_name, sizeof stage_name, "%s", what); }

/* A cell of the table: one line, no '|', at most ~150 characters. */
static const char *cell(char *out, size_t size, const char *in) {
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  for (const unsigned char *p = (const unsigned char *)in; *p != '\0'; p++) {
    if (o + 8 >= size || o >= 150) {
      memcpy(out + o, "...", 3);
      o += 3;
      break;
    }
    if (*p == '|') {
      out[o++] = '/';
    } else if (*p < 0x20 || *p >= 0x7f) {
      out[o++] = '\\';
      out[o++] = 'x';
      out[o++] = hex[*p >> 4];
      out[o++] = hex[*p & 15];
    } else {
      out[o++] = (char)*p;
    }
  }
  out[o] = '\0';
  return out;
}

static void table(const char *title) {
  memset(&tab, 0, sizeof tab);
  printf("# %s\n# | input | expected | observed | ok |\n# |---|---|---|---|\n", title);
  fflush(stdout);
}

static void print_row(const char *input, const char *expected, const char *observed, const char *verdict) {
  char a[200], b[200], c[200];
  printf("# | %s | %s | %s | %s |\n", cell(a, sizeof a, input), cell(b, sizeof b, expected),
         cell(c, sizeof c, observed), verdict);
  fflush(stdout);
}

/* Prints a row and records a mismatch; returns ok. */
static int row(int ok, const char *input, const char *expected, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int row(int ok, const char *input, const char *expected, const char *fmt, ...) {
  char observed[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(observed, sizeof observed, fmt, ap);
  va_end(ap);
  print_row(input, expected, observed, ok ? "ok" : "MISMATCH");
  tab.rows++;
  if (!ok) {
    tab.bad++;
    size_t used = strlen(tab.bad_rows);
    char name[200];
    snprintf(tab.bad_rows + used, sizeof tab.bad_rows - used, "%s[%s]", used > 0 ? ", " : "",
             cell(name, sizeof name, input));
  }
  return ok;
}

/* A row that cannot run in this build: said loudly, never silently. */
static __attribute__((unused)) void row_skip(const char *input, const char *expected, const char *why) {
  print_row(input, expected, why, "SKIP");
  tab.skipped++;
}

/* Every row is an assertion: the test fails naming the rows that did not
 * match (after the whole table has been printed). */
static void table_end(void) {
  printf("# %d rows, %d mismatched, %d skipped\n", tab.rows, tab.bad, tab.skipped);
  fflush(stdout);
  if (tab.bad > 0)
    fail_msg("%d of %d rows did not match: %s", tab.bad, tab.rows, tab.bad_rows);
}

/* -- outcomes of futures ----------------------------------------------------*/

typedef struct {
  int null;   /* the call returned NULL */
  int err;    /* relock_future_wait's answer (RELOCK_EPENDING: it hung) */
  relock_value_type_t vt;
  int64_t v;
  double ms;  /* how long the wait took */
  char msg[300];
} out_t;

/* Waits for f (bounded), records its outcome and releases it. A future still
 * pending is cancelled: a hung operation must not outlive its row. */
static out_t settle(relock_future_t *f, int64_t timeout_ms) {
  out_t o;
  memset(&o, 0, sizeof o);
  if (f == NULL) {
    o.null = 1;
    return o;
  }
  uint64_t t0 = relock__now_ns();
  o.err = relock_future_wait(f, fx_slack_ms(timeout_ms));
  o.ms = fx_ms_since(t0);
  if (o.err == RELOCK_EPENDING)
    relock_future_cancel(f);
  o.vt = relock_future_value_type(f);
  o.v = o.vt == RELOCK_VALUE_BOOL ? relock_future_bool(f) : relock_future_int(f);
  snprintf(o.msg, sizeof o.msg, "%s", relock_future_message(f));
  relock_future_release(f);
  return o;
}

static const char *show(const out_t *o, char *buf, size_t size) {
  if (o->null)
    snprintf(buf, size, "NULL");
  else if (o->err == RELOCK_EPENDING)
    snprintf(buf, size, "still pending after %.0f ms (hang)", o->ms);
  else if (o->err == 0 && (o->vt == RELOCK_VALUE_BOOL || o->vt == RELOCK_VALUE_INT))
    snprintf(buf, size, "%lld", (long long)o->v);
  else if (o->err == 0)
    snprintf(buf, size, "succeeded (%s)", o->vt == RELOCK_VALUE_PTR ? "a reply" : "no value");
  else if (strcmp(o->msg, relock_strerror(o->err)) != 0)
    snprintf(buf, size, "%s: %s", relock_err_name(o->err), o->msg);
  else
    snprintf(buf, size, "%s", relock_err_name(o->err));
  return buf;
}

static int in_codes(int err, const int *codes) {
  for (; *codes != 0; codes++)
    if (err == *codes)
      return 1;
  return 0;
}

/* A future that must fail with one of codes (0-terminated), its message
 * containing needle (NULL: any message), within bound_ms if > 0. */
static int row_fails_in(const char *input, relock_future_t *f, const int *codes, const char *needle,
                        int64_t bound_ms) {
  out_t o = settle(f, 10000);
  char expected[200] = "", observed[400];
  for (const int *c = codes; *c != 0; c++)
    snprintf(expected + strlen(expected), sizeof expected - strlen(expected), "%s%s", c == codes ? "" : " or ",
             relock_err_name(*c));
  if (needle != NULL)
    snprintf(expected + strlen(expected), sizeof expected - strlen(expected), " ~ \"%s\"", needle);
  if (bound_ms > 0)
    snprintf(expected + strlen(expected), sizeof expected - strlen(expected), ", < %lld ms",
             (long long)fx_slack_ms(bound_ms));
  show(&o, observed, sizeof observed);
  if (bound_ms > 0 && !o.null)
    snprintf(observed + strlen(observed), sizeof observed - strlen(observed), " (%.0f ms)", o.ms);
  int ok = !o.null && in_codes(o.err, codes) && (needle == NULL || strstr(o.msg, needle) != NULL) &&
           (bound_ms <= 0 || o.ms < (double)fx_slack_ms(bound_ms));
  return row(ok, input, expected, "%s", observed);
}

static int row_fails(const char *input, relock_future_t *f, int code, const char *needle) {
  const int codes[] = {code, 0};
  return row_fails_in(input, f, codes, needle, 0);
}

/* A future that must succeed with value v (a boolean or an integer). */
static int row_value(const char *input, relock_future_t *f, int64_t v) {
  out_t o = settle(f, 10000);
  char expected[64], observed[400];
  snprintf(expected, sizeof expected, "%lld", (long long)v);
  return row(!o.null && o.err == 0 && o.v == v, input, expected, "%s", show(&o, observed, sizeof observed));
}

/* A call that must refuse its arguments by returning NULL. */
/* Invalid arguments: a future that has already failed with RELOCK_EINVAL
 * (NULL is only for out of memory), so waiting on it returns at once. */
static int row_refused(const char *input, relock_future_t *f) {
  int done = f != NULL && relock_future_is_done(f);
  out_t o = settle(f, 10000);
  char observed[400];
  snprintf(observed, sizeof observed, "%s%s", done || o.null ? "" : "pending, then ",
           show(&o, (char[300]){0}, 300));
  return row(done && o.err == RELOCK_EINVAL && o.msg[0] != '\0', input, "failed at once: RELOCK_EINVAL + message",
             "%s", observed);
}

/* What a child reports for a call that must be refused. */
static const char *refused_or_not(relock_future_t *f) {
  return f == NULL                                                          ? "NULL"
         : relock_future_is_done(f) && relock_future_error(f) == RELOCK_EINVAL ? "refused (RELOCK_EINVAL)"
                                                                             : "a future";
}

static const char *rc_name(int rc) { return rc == 0 ? "0" : relock_err_name(rc); }

/* A return code that must be code. */
static int row_rc(const char *input, int rc, int code) {
  return row(rc == code, input, rc_name(code), "%s", rc_name(rc));
}

/* -- forked probes ----------------------------------------------------------*/

/* What happened to a child that ran a probe: its exit, the result it wrote
 * on its pipe, and the line of its stderr that explains a crash. */
typedef struct {
  int exited, code, signaled, sig, hung;
  char out[3000];
  char why[300];
} fate_t;

typedef void (*probe_fn)(int fd, void *arg);

static void keep_why(fate_t *fate, const char *errbuf) {
  static const char *const marks[] = {"Assertion", "runtime error", "AddressSanitizer", "Invalid read",
                                      "Invalid write", "LeakSanitizer", "ThreadSanitizer"};
  for (size_t i = 0; i < sizeof marks / sizeof marks[0] && fate->why[0] == '\0'; i++) {
    const char *p = strstr(errbuf, marks[i]);
    if (p == NULL)
      continue;
    const char *start = p;
    while (start > errbuf && start[-1] != '\n')
      start--;
    size_t n = strcspn(start, "\n");
    snprintf(fate->why, sizeof fate->why, "%.*s", (int)n, start);
  }
}

/* Valgrind reports a child's leaks and crashes on the test's own stderr
 * (its log descriptor was set up before the fork): a child that crashes on
 * purpose would fill the log with noise. Its fate is the observation; the
 * ASan build, whose reports the probe captures, checks its memory. */
static void quiet_valgrind(void) {
#if defined(HAVE_VALGRIND_H)
  VALGRIND_DISABLE_ERROR_REPORTING;
#endif
}

/* Runs fn(fd, arg) in a forked child with default fatal signals (cmocka's
 * handlers would otherwise resume the test run in the child) and its stderr
 * captured; the child writes its observation to fd. */
static fate_t probe(probe_fn fn, void *arg, int64_t timeout_ms) {
  fate_t fate;
  memset(&fate, 0, sizeof fate);
  int res[2], errp[2];
  assert_int_equal(pipe(res), 0);
  assert_int_equal(pipe(errp), 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS, SIGABRT, SIGALRM};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
      signal(sigs[i], SIG_DFL);
    alarm(0);
    quiet_valgrind();
    close(res[0]);
    close(errp[0]);
    dup2(errp[1], STDERR_FILENO);
    fn(res[1], arg);
    _exit(0);
  }
  close(res[1]);
  close(errp[1]);
  static char errbuf[1 << 16];
  size_t outlen = 0, errlen = 0;
  int open_fds = 2;
  struct pollfd pfd[2] = {{res[0], POLLIN, 0}, {errp[0], POLLIN, 0}};
  uint64_t deadline = relock__now_ns() + (uint64_t)fx_slack_ms(timeout_ms) * 1000000u;
  while (open_fds > 0) {
    uint64_t now = relock__now_ns();
    if (now >= deadline) {
      fate.hung = 1;
      kill(pid, SIGKILL);
      break;
    }
    if (poll(pfd, 2, (int)((deadline - now) / 1000000u) + 1) < 0 && errno != EINTR)
      break;
    for (int i = 0; i < 2; i++) {
      if (pfd[i].fd < 0 || pfd[i].revents == 0)
        continue;
      char chunk[4096];
      ssize_t n = read(pfd[i].fd, chunk, sizeof chunk);
      if (n <= 0) {
        close(pfd[i].fd);
        pfd[i].fd = -1;
        open_fds--;
        continue;
      }
      if (i == 0) {
        size_t room = sizeof fate.out - 1 - outlen;
        memcpy(fate.out + outlen, chunk, (size_t)n < room ? (size_t)n : room);
        outlen += (size_t)n < room ? (size_t)n : room;
      } else {
        size_t room = sizeof errbuf - 1 - errlen;
        memcpy(errbuf + errlen, chunk, (size_t)n < room ? (size_t)n : room);
        errlen += (size_t)n < room ? (size_t)n : room;
      }
    }
  }
  for (int i = 0; i < 2; i++)
    if (pfd[i].fd >= 0)
      close(pfd[i].fd);
  fate.out[outlen] = '\0';
  errbuf[errlen] = '\0';
  int status = 0;
  waitpid(pid, &status, 0);
  fate.exited = WIFEXITED(status);
  fate.code = fate.exited ? WEXITSTATUS(status) : 0;
  fate.signaled = WIFSIGNALED(status);
  fate.sig = fate.signaled ? WTERMSIG(status) : 0;
  keep_why(&fate, errbuf);
  return fate;
}

static const char *fate_show(const fate_t *f, char *buf, size_t size) {
  const char *sep = f->out[0] ? "; wrote: " : "";
  if (f->hung)
    snprintf(buf, size, "hung (killed)%s%.300s", sep, f->out);
  else if (f->signaled)
    snprintf(buf, size, "killed by %s%s%.200s%s%.300s", strsignal(f->sig), f->why[0] ? ": " : "", f->why, sep,
             f->out);
  else if (f->code != 0)
    snprintf(buf, size, "exit %d%s%.200s%s%.300s", f->code, f->why[0] ? ": " : "", f->why, sep, f->out);
  else
    snprintf(buf, size, "%.300s", f->out);
  return buf;
}

/* A probe that must end normally, having written one of the two answers. */
static int row_probe(const char *input, const fate_t *f, const char *expected, const char *alternative) {
  char exp[300], obs[700];
  if (alternative != NULL)
    snprintf(exp, sizeof exp, "%s; or %s", expected, alternative);
  else
    snprintf(exp, sizeof exp, "%s", expected);
  /* A child may exit non-zero under valgrind (its leak check counts what
   * the parent left allocated); a sanitizer or an assertion names itself. */
  int ok = !f->hung && f->exited && (f->code == 0 || f->why[0] == '\0') &&
           (strcmp(f->out, expected) == 0 || (alternative != NULL && strcmp(f->out, alternative) == 0));
  return row(ok, input, exp, "%s", fate_show(f, obs, sizeof obs));
}

/* -- the fixture ------------------------------------------------------------*/

typedef fx_pair_t fx_t;

/* A hang is a failure naming the row, not a CI job killed after an hour. */
static void on_hang(int sig) {
  (void)sig;
  static const char head[] = "\n# HANG: no progress within the test's time limit; last stage: ";
  (void)!write(STDOUT_FILENO, head, sizeof head - 1);
  (void)!write(STDOUT_FILENO, stage_name, strlen(stage_name));
  (void)!write(STDOUT_FILENO, "\n", 1);
  _exit(124);
}

static int setup(void **state) {
  if (fx_pair_server_setup(state) != 0)
    return -1;
  stage("setup");
  signal(SIGALRM, on_hang);
  alarm((unsigned)(fx_slack_ms(90000) / 1000));
  return 0;
}

static int teardown(void **state) {
  alarm(0);
  return fx_pair_teardown(state);
}

static relock_lock_t *lock_of(relock_client_t *c, const char *name) {
  relock_error_t err = {-1, ""};
  relock_lock_t *l = relock_lock_new(c, name, &err);
  assert_non_null(l);
  assert_int_equal(err.code, 0);
  return l;
}

/* A raw command that must get a reply; the reply goes to buf. */
static const char *raw(fx_t *fx, char *buf, size_t size, int argc, const char *const *argv, const size_t *lens) {
  int rc = relock_test_redis_cmdv(fx->redis, buf, size, argc, argv, lens);
  if (rc != 0)
    fail_msg("raw %s: %d", argv[0], rc);
  return buf;
}

#define RAW(fx, buf, ...)                                                                           \
  raw((fx), (buf), sizeof(buf), (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), \
      (const char *const[]){__VA_ARGS__}, NULL)

/* The count in owner's field of the lock key (0: none), read raw. */
static long long raw_hold(fx_t *fx, relock_lock_t *l, uint64_t owner) {
  char field[RELOCK__FIELD_MAX], buf[256];
  size_t flen = relock__lock_field(l, owner, field);
  const char *argv[] = {"HGET", l->name, field};
  const size_t lens[] = {4, l->len, flen};
  raw(fx, buf, sizeof buf, 3, argv, lens);
  return buf[0] == '$' && buf[1] != '-' ? atoll(strchr(buf, '\n') + 1) : 0;
}

static long long raw_exists(fx_t *fx, const char *key, size_t len) {
  char buf[64];
  const char *argv[] = {"EXISTS", key};
  const size_t lens[] = {6, len};
  raw(fx, buf, sizeof buf, 2, argv, lens);
  return buf[0] == ':' ? atoll(buf + 1) : -1;
}

#define ACQ(l, owner, wait, lease) relock_lock_lock_async((l), (owner), (wait), (lease))
#define REL(l, owner) relock_lock_unlock_async((l), (owner))

/* Waits for a future that must succeed (a setup step, not a row). */
static int64_t must(relock_future_t *f) {
  assert_non_null(f);
  int r = relock_future_wait(f, fx_slack_ms(10000));
  if (r != 0)
    fail_msg("setup step failed: %s (%s)", relock_future_message(f), relock_err_name(r));
  int64_t v = relock_future_value_type(f) == RELOCK_VALUE_BOOL ? relock_future_bool(f) : relock_future_int(f);
  relock_future_release(f);
  return v;
}

static void ignore_message(relock_subscription_t *sub, const char *payload, size_t len, void *arg) {
  (void)sub;
  (void)payload;
  (void)len;
  (void)arg;
}

static void noop_cb(relock_future_t *f, void *arg) {
  (void)f;
  (void)arg;
}

/* ==========================================================================
 * NULL pointers and invalid arguments, per public function
 * ==========================================================================*/

static void test_invalid_args_futures_and_errors(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  table("NULL and invalid arguments: futures, error codes");
  stage("futures with NULL");
  relock_future_t *done = relock_client_commandf_async(fx->a, "PING");
  assert_int_equal(relock_future_wait(done, fx_slack_ms(5000)), 0);

  row(relock_future_state(NULL) != RELOCK_FUTURE_PENDING, "relock_future_state(NULL)", "not PENDING", "%d",
      relock_future_state(NULL));
  row(relock_future_is_done(NULL) != 0, "relock_future_is_done(NULL)", "non-zero", "%d",
      relock_future_is_done(NULL));
  row_rc("relock_future_error(NULL)", relock_future_error(NULL), RELOCK_EINVAL);
  const char *m = relock_future_message(NULL);
  row(m != NULL && m[0] != '\0', "relock_future_message(NULL)", "a message, never NULL", "%s",
      m != NULL ? m : "NULL");
  row(relock_future_value_type(NULL) == RELOCK_VALUE_NONE, "relock_future_value_type(NULL)",
      "RELOCK_VALUE_NONE", "%d", relock_future_value_type(NULL));
  row(relock_future_bool(NULL) == 0 && relock_future_int(NULL) == 0 && relock_future_ptr(NULL) == NULL,
      "relock_future_bool/int/ptr(NULL)", "0, 0, NULL", "%d, %lld, %p", relock_future_bool(NULL),
      (long long)relock_future_int(NULL), relock_future_ptr(NULL));
  size_t len = 99;
  const char *s = relock_future_string(NULL, &len);
  row(s == NULL && len == 0, "relock_future_string(NULL, &len)", "NULL, len 0", "%s, len %zu",
      s ? "non-NULL" : "NULL", len);
  row(relock_future_string(done, NULL) == NULL, "relock_future_string(reply future, NULL len)", "NULL", "%s",
      relock_future_string(done, NULL) ? "non-NULL" : "NULL");
  row(relock_future_loop(NULL) == NULL, "relock_future_loop(NULL)", "NULL", "%p", (void *)relock_future_loop(NULL));
  row_rc("relock_future_on_done(NULL, cb, arg)", relock_future_on_done(NULL, noop_cb, NULL), RELOCK_EINVAL);
  row_rc("relock_future_on_done(f, NULL, arg)", relock_future_on_done(done, NULL, NULL), RELOCK_EINVAL);
  row(relock_future_cancel(NULL) == 0, "relock_future_cancel(NULL)", "0", "%d", relock_future_cancel(NULL));
  row(relock_future_cancel(done) == 0, "relock_future_cancel(completed future)", "0", "%d",
      relock_future_cancel(done));
  row_rc("relock_future_wait(NULL, 100)", relock_future_wait(NULL, 100), RELOCK_EINVAL);
  row_rc("relock_future_wait(f, -2)", relock_future_wait(done, -2), RELOCK_EINVAL);
  row_rc("relock_future_wait(f, INT64_MIN)", relock_future_wait(done, INT64_MIN), RELOCK_EINVAL);
  row(relock_future_retain(NULL) == NULL, "relock_future_retain(NULL)", "NULL", "%s",
      relock_future_retain(NULL) ? "non-NULL" : "NULL");
  relock_future_release(NULL);
  row(1, "relock_future_release(NULL)", "no effect", "returned");
  const relock_reply_t *rep = relock_future_reply(NULL);
  row(rep == NULL, "relock_future_reply(NULL)", "NULL", "%s", rep ? "non-NULL" : "NULL");

  stage("combinators");
  relock_error_t err;
  relock_future_t *c = relock_future_all(NULL, 1, &err);
  row(c == NULL && err.code == RELOCK_EINVAL, "relock_future_all(NULL, 1, &err)", "NULL, RELOCK_EINVAL", "%s, %s",
      c ? "a future" : "NULL", rc_name(err.code));
  relock_future_release(c);
  c = relock_future_all(&done, 0, &err);
  row(c == NULL && err.code == RELOCK_EINVAL, "relock_future_all(fs, 0, &err)", "NULL, RELOCK_EINVAL", "%s, %s",
      c ? "a future" : "NULL", rc_name(err.code));
  relock_future_release(c);
  relock_future_t *with_null[2] = {done, NULL};
  c = relock_future_any(with_null, 2, &err);
  row(c == NULL && err.code == RELOCK_EINVAL, "relock_future_any({f, NULL}, 2, &err)", "NULL, RELOCK_EINVAL",
      "%s, %s", c ? "a future" : "NULL", rc_name(err.code));
  relock_future_release(c);
  relock_future_t *other = relock_client_commandf_async(fx->b, "PING"); /* another client: another loop */
  relock_future_t *two_loops[2] = {done, other};
  c = relock_future_all(two_loops, 2, &err);
  row(c == NULL && err.code == RELOCK_EINVAL, "relock_future_all(futures of two loops)", "NULL, RELOCK_EINVAL",
      "%s, %s", c ? "a future" : "NULL", rc_name(err.code));
  relock_future_release(c);
  c = relock_future_any(two_loops, 2, NULL);
  row(c == NULL, "relock_future_any(futures of two loops, err NULL)", "NULL", "%s", c ? "a future" : "NULL");
  relock_future_release(c);
  relock_future_release(other);
  relock_future_release(done);

  stage("error codes");
  static const int unknown[] = {1, 42, -26, -1000, INT_MIN, INT_MAX}; /* -26: one past the last code */
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    char input[64];
    snprintf(input, sizeof input, "relock_strerror / relock_err_name(%d)", unknown[i]);
    const char *e = relock_strerror(unknown[i]), *n = relock_err_name(unknown[i]);
    row(e != NULL && n != NULL && strcmp(e, "unknown error") == 0 && strcmp(n, "RELOCK_EUNKNOWN") == 0, input,
        "\"unknown error\", \"RELOCK_EUNKNOWN\"", "\"%s\", \"%s\"", e ? e : "NULL", n ? n : "NULL");
  }
  table_end();
}

/* A command with a NULL string among its arguments, in a child: it may
 * crash where the library does not check. */
typedef struct {
  const relock_options_t *cfg;
} child_cfg_t;

static void child_null_argv_element(int fd, void *arg) {
  child_cfg_t *cc = arg;
  relock_client_t *c = relock_client_new(NULL, cc->cfg, NULL);
  const char *argv[] = {"GET", NULL};
  relock_future_t *f = relock_client_command_async(c, 2, argv, NULL);
  dprintf(fd, "%s", refused_or_not(f));
  relock_future_release(f);
  relock_client_free(c);
}

/* commandf with a format of no words, then a command that must get its own
 * reply. */
static void empty_format_then_echo(int fd, const child_cfg_t *cc, const char *format) {
  relock_client_t *c = relock_client_new(NULL, cc->cfg, NULL);
  relock_future_t *ping = relock_client_commandf_async(c, "PING"); /* connected and ready */
  relock_future_wait(ping, 5000);
  relock_future_release(ping);
  relock_future_t *blank = relock_client_commandf_async(c, format);
  relock_future_t *echo = relock_client_commandf_async(c, "ECHO %s", "mine");
  int r = relock_future_wait(echo, 3000);
  const relock_reply_t *reply = relock_future_reply(echo);
  dprintf(fd, "%s, then ECHO gets %s%s%s", refused_or_not(blank),
          reply != NULL && reply->type == RELOCK_REPLY_STRING ? "\"" : "",
          reply != NULL && reply->type == RELOCK_REPLY_STRING ? reply->str : rc_name(r),
          reply != NULL && reply->type == RELOCK_REPLY_STRING ? "\"" : "");
  relock_future_release(echo);
  relock_future_release(blank);
  relock_client_free(c);
}

static void child_empty_format(int fd, void *arg) { empty_format_then_echo(fd, arg, ""); }

static void child_blank_format(int fd, void *arg) { empty_format_then_echo(fd, arg, "   "); }

static void test_invalid_args_client(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  table("NULL and invalid arguments: configuration, client, commands, pub/sub");
  stage("options");
  relock_options_free(NULL);
  row(1, "relock_options_free(NULL)", "no effect", "returned");
  relock_error_t err;
  memset(&err, 0, sizeof err);
  row_rc("relock_options_validate(NULL, &err)", relock_options_validate(NULL, &err), RELOCK_EINVAL);
  row_rc("relock_options_validate(NULL, NULL)", relock_options_validate(NULL, NULL), RELOCK_EINVAL);
  relock_options_t *opts = relock_options_new(NULL);
  row_rc("relock_options_set_url(NULL, url, &err)", relock_options_set_url(NULL, "redis://h", &err), RELOCK_EINVAL);
  row_rc("relock_options_set_url(opts, NULL, &err)", relock_options_set_url(opts, NULL, &err), RELOCK_EINVAL);
  row_rc("relock_options_set_url(opts, NULL, NULL)", relock_options_set_url(opts, NULL, NULL), RELOCK_EINVAL);
  row_rc("relock_options_set_int(NULL, \"port\", 1, &err)", relock_options_set_int(NULL, RELOCK_OPT_PORT, 1, &err),
         RELOCK_EINVAL);
  row_rc("relock_options_set_int(opts, NULL, 1, &err)", relock_options_set_int(opts, NULL, 1, &err), RELOCK_EINVAL);
  row_rc("relock_options_set(opts, \"no-such\", \"1\", NULL)", relock_options_set(opts, "no-such", "1", NULL),
         RELOCK_EINVAL);
  row_rc("relock_options_get_string(opts, \"host\", NULL, NULL)",
         relock_options_get_string(opts, RELOCK_OPT_HOST, NULL, NULL), RELOCK_EINVAL);
  relock_options_t *copy = relock_options_copy(NULL, &err);
  row(copy == NULL && err.code == RELOCK_EINVAL, "relock_options_copy(NULL, &err)", "NULL, RELOCK_EINVAL", "%s, %s",
      copy ? "a copy" : "NULL", rc_name(err.code));
  relock_options_free(opts);

  stage("client_new with bad options");
  /* No options: the defaults (it connects to 127.0.0.1:6379, or keeps
   * trying, in the background). */
  relock_client_t *c = relock_client_new(NULL, NULL, &err);
  row(c != NULL && err.code == 0, "relock_client_new(NULL, NULL, &err)", "a client (defaults), 0", "%s, %s",
      c ? "a client" : "NULL", rc_name(err.code));
  relock_client_free(c);
  struct {
    const char *what;
    const char *name;
    const char *text;
  } bad[16];
  size_t nbad = 0;
  char long_id[70];
  memset(long_id, 'i', 65);
  long_id[65] = '\0';
#define BAD(label, opt, value)   \
  do {                           \
    bad[nbad].what = label;      \
    bad[nbad].name = opt;        \
    bad[nbad].text = value;      \
    nbad++;                      \
  } while (0)
  BAD("host NULL", RELOCK_OPT_HOST, NULL);
  BAD("host \"\"", RELOCK_OPT_HOST, "");
  BAD("port 0", RELOCK_OPT_PORT, "0");
  BAD("port 65536", RELOCK_OPT_PORT, "65536");
  BAD("unix-path relative", RELOCK_OPT_UNIX_PATH, "redis.sock");
  BAD("db -1", RELOCK_OPT_DB, "-1");
  BAD("username without password", RELOCK_OPT_USERNAME, "u");
  BAD("password \"\"", RELOCK_OPT_PASSWORD, "");
  BAD("command-timeout 0", RELOCK_OPT_COMMAND_TIMEOUT, "0");
  BAD("connect-timeout -5", RELOCK_OPT_CONNECT_TIMEOUT, "-5");
  BAD("retry-attempts -1", RELOCK_OPT_RETRY_ATTEMPTS, "-1");
  BAD("watchdog-timeout 2", RELOCK_OPT_WATCHDOG_TIMEOUT, "2");
  BAD("client-id \"a:b\"", RELOCK_OPT_CLIENT_ID, "a:b");
  BAD("client-id of 65 bytes", RELOCK_OPT_CLIENT_ID, long_id);
  BAD("client-name \"has space\"", RELOCK_OPT_CLIENT_NAME, "has space");
  BAD("reconnect-min > reconnect-max", RELOCK_OPT_RECONNECT_MIN, "20000");
#undef BAD
  for (size_t i = 0; i < nbad; i++) {
    /* A value is refused when it is set; a combination by client_new. */
    memset(&err, 0, sizeof err);
    opts = relock_options_new(NULL);
    int rc = relock_options_set(opts, bad[i].name, bad[i].text, &err);
    c = rc == 0 ? relock_client_new(NULL, opts, &err) : NULL;
    relock_options_free(opts);
    char input[96];
    snprintf(input, sizeof input, "set %s, relock_client_new", bad[i].what);
    row(c == NULL && err.code == RELOCK_EINVAL && err.message[0] != '\0', input,
        "refused (by the setter or client_new): RELOCK_EINVAL + message", "%s%s, %s: %s",
        rc != 0 ? "setter refused" : "setter took it, ", rc != 0 ? "" : c ? "a client" : "NULL", rc_name(err.code),
        err.message);
    relock_client_free(c);
  }

  stage("client functions with NULL");
  row_rc("relock_client_close(NULL, NULL, NULL)", relock_client_close(NULL, NULL, NULL), RELOCK_EINVAL);
  relock_client_free(NULL);
  row(1, "relock_client_free(NULL)", "no effect", "returned");
  row(relock_client_loop(NULL) == NULL, "relock_client_loop(NULL)", "NULL", "%p", (void *)relock_client_loop(NULL));
  row(relock_client_id(NULL) == NULL, "relock_client_id(NULL)", "NULL", "%s",
      relock_client_id(NULL) ? relock_client_id(NULL) : "NULL");

  stage("commands with bad arguments");
  const char *ping[] = {"PING"};
  row_refused("relock_client_command_async(NULL, 1, {PING}, NULL)",
                  relock_client_command_async(NULL, 1, ping, NULL));
  row_refused("relock_client_command_async(c, 0, argv, NULL)", relock_client_command_async(fx->a, 0, ping, NULL));
  row_refused("relock_client_command_async(c, -1, argv, NULL)",
                  relock_client_command_async(fx->a, -1, ping, NULL));
  row_refused("relock_client_command_async(c, INT_MIN, argv, NULL)",
                  relock_client_command_async(fx->a, INT_MIN, ping, NULL));
  row_refused("relock_client_command_async(c, 1, NULL, NULL)", relock_client_command_async(fx->a, 1, NULL, NULL));
  child_cfg_t cc = {fx->cfg};
  fate_t fate = probe(child_null_argv_element, &cc, 10000);
  row_probe("relock_client_command_async(c, 2, {\"GET\", NULL}, NULL) (in a child)", &fate, "refused (RELOCK_EINVAL)", NULL);
  const char *empty_name[] = {""};
  row_fails("relock_client_command_async(c, 1, {\"\"}, NULL)", relock_client_command_async(fx->a, 1, empty_name, NULL),
            RELOCK_ESERVER, "unknown command");
  row_refused("relock_client_commandf_async(NULL, \"PING\")", relock_client_commandf_async(NULL, "PING"));
  row_refused("relock_client_commandf_async(c, NULL)", relock_client_commandf_async(fx->a, NULL));
  /* An empty format makes a command of no arguments ("*0\r\n"): Redis never
   * answers one, and hiredis asserts on it. In a child, then. */
  fate = probe(child_empty_format, &cc, 20000);
  row_probe("relock_client_commandf_async(c, \"\"), then ECHO mine (in a child)", &fate,
            "refused (RELOCK_EINVAL), then ECHO gets \"mine\"", NULL);
  fate = probe(child_blank_format, &cc, 20000);
  row_probe("relock_client_commandf_async(c, \"   \"), then ECHO mine (in a child)", &fate,
            "refused (RELOCK_EINVAL), then ECHO gets \"mine\"", NULL);

  stage("subscribe with bad arguments");
  relock_subscription_t *sub = (relock_subscription_t *)&sub;
  relock_future_t *f = relock_client_subscribe_async(NULL, "ch", 2, ignore_message, NULL, &sub);
  row(f != NULL && relock_future_error(f) == RELOCK_EINVAL && sub == NULL, "relock_client_subscribe_async(NULL client, ..., &sub)",
      "failed: RELOCK_EINVAL, *sub NULL", "%s, *sub %s", refused_or_not(f), sub ? "set" : "NULL");
  relock_future_release(f);
  sub = (relock_subscription_t *)&sub;
  f = relock_client_subscribe_async(fx->a, NULL, 2, ignore_message, NULL, &sub);
  row(f != NULL && relock_future_error(f) == RELOCK_EINVAL && sub == NULL, "relock_client_subscribe_async(c, NULL channel, ...)",
      "failed: RELOCK_EINVAL, *sub NULL", "%s, *sub %s", refused_or_not(f), sub ? "set" : "NULL");
  relock_future_release(f);
  sub = (relock_subscription_t *)&sub;
  f = relock_client_subscribe_async(fx->a, "ch", 2, NULL, NULL, &sub);
  row(f != NULL && relock_future_error(f) == RELOCK_EINVAL && sub == NULL, "relock_client_subscribe_async(c, ch, NULL cb, ...)",
      "failed: RELOCK_EINVAL, *sub NULL", "%s, *sub %s", refused_or_not(f), sub ? "set" : "NULL");
  relock_future_release(f);
  f = relock_client_subscribe_async(fx->a, "ch", 2, ignore_message, NULL, NULL);
  row(f != NULL && relock_future_error(f) == RELOCK_EINVAL, "relock_client_subscribe_async(c, ch, cb, arg, NULL sub)",
      "failed: RELOCK_EINVAL", "%s", refused_or_not(f));
  relock_future_release(f);
  relock_subscription_free(NULL);
  row(1, "relock_subscription_free(NULL)", "no effect", "returned");
  table_end();
}

static void test_invalid_args_lock(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  table("NULL and invalid arguments: the lock");
  stage("lock_new");
  relock_error_t err = {0, ""};
  relock_lock_t *l = relock_lock_new(NULL, "x", &err);
  row(l == NULL && err.code == RELOCK_EINVAL && err.message[0] != '\0', "relock_lock_new(NULL, \"x\", &err)",
      "NULL, RELOCK_EINVAL + message", "%s, %s: %s", l ? "a lock" : "NULL", rc_name(err.code), err.message);
  relock_lock_free(l);
  err.code = 0;
  l = relock_lock_new(fx->a, NULL, &err);
  row(l == NULL && err.code == RELOCK_EINVAL && err.message[0] != '\0', "relock_lock_new(c, NULL, &err)",
      "NULL, RELOCK_EINVAL + message", "%s, %s: %s", l ? "a lock" : "NULL", rc_name(err.code), err.message);
  relock_lock_free(l);
  l = relock_lock_new(fx->a, NULL, NULL);
  row(l == NULL, "relock_lock_new(c, NULL, NULL)", "NULL", "%s", l ? "a lock" : "NULL");
  relock_lock_free(l);
  relock_lock_free(NULL);
  row(1, "relock_lock_free(NULL)", "no effect", "returned");
  row(relock_lock_name(NULL) == NULL, "relock_lock_name(NULL)", "NULL", "%s",
      relock_lock_name(NULL) ? "non-NULL" : "NULL");
  relock_lock_on_lost(NULL, NULL, NULL);
  row(1, "relock_lock_on_lost(NULL, NULL, NULL)", "no effect", "returned");

  stage("lock_field");
  l = lock_of(fx->a, "x");
  size_t need = strlen(relock_client_id(fx->a)) + strlen(":7") + 1;
  size_t n = relock_lock_field(NULL, 7, NULL, 0);
  row(n == 0, "relock_lock_field(NULL, 7, NULL, 0)", "0", "%zu", n);
  n = relock_lock_field(l, 7, NULL, 0);
  row(n == need, "relock_lock_field(l, 7, NULL, 0)", "the length needed (id + \":7\" + NUL)", "%zu (need %zu)", n,
      need);
  char small[5] = "~~~~";
  n = relock_lock_field(l, 7, small, 0);
  row(n == need && strcmp(small, "~~~~") == 0, "relock_lock_field(l, 7, buf, 0)", "length needed, buf untouched",
      "%zu, buf \"%s\"", n, small);
  n = relock_lock_field(l, 7, small, sizeof small);
  row(n == need && strlen(small) == 4 && strncmp(small, relock_client_id(fx->a), 4) == 0,
      "relock_lock_field(l, 7, buf, 5)", "length needed, buf cut to 4 bytes + NUL", "%zu, buf \"%s\"", n, small);

  stage("async lock functions with NULL");
  row_refused("relock_lock_lock_async(NULL, 1, 0, -1)", relock_lock_lock_async(NULL, 1, 0, -1));
  row_refused("relock_lock_unlock_async(NULL, 1)", relock_lock_unlock_async(NULL, 1));
  row_refused("relock_lock_force_unlock_async(NULL)", relock_lock_force_unlock_async(NULL));
  row_refused("relock_lock_is_locked_async(NULL)", relock_lock_is_locked_async(NULL));
  row_refused("relock_lock_is_held_by_thread_async(NULL, 1)", relock_lock_is_held_by_thread_async(NULL, 1));
  row_refused("relock_lock_hold_count_async(NULL, 1)", relock_lock_hold_count_async(NULL, 1));
  row_refused("relock_lock_remaining_ttl_async(NULL)", relock_lock_remaining_ttl_async(NULL));

  stage("blocking lock functions with NULL");
  int flag = 0;
  int64_t count = 0;
  row_rc("relock_lock_lock(NULL, -1)", relock_lock_lock(NULL, RELOCK_INFINITE), RELOCK_EINVAL);
  row_rc("relock_lock_try_lock(NULL, 0, -1, &acquired)", relock_lock_try_lock(NULL, 0, -1, &flag), RELOCK_EINVAL);
  row_rc("relock_lock_unlock(NULL)", relock_lock_unlock(NULL), RELOCK_EINVAL);
  row_rc("relock_lock_force_unlock(NULL, &was)", relock_lock_force_unlock(NULL, &flag), RELOCK_EINVAL);
  row_rc("relock_lock_is_locked(NULL, &locked)", relock_lock_is_locked(NULL, &flag), RELOCK_EINVAL);
  row_rc("relock_lock_is_held_by_thread(NULL, &held)", relock_lock_is_held_by_thread(NULL, &flag), RELOCK_EINVAL);
  row_rc("relock_lock_hold_count(NULL, &count)", relock_lock_hold_count(NULL, &count), RELOCK_EINVAL);

  stage("optional out-parameters left NULL");
  row_rc("relock_lock_try_lock(l, 0, -1, NULL)", relock_lock_try_lock(l, 0, RELOCK_INFINITE, NULL), 0);
  row_rc("relock_lock_is_held_by_thread(l, NULL)", relock_lock_is_held_by_thread(l, NULL), 0);
  row_rc("relock_lock_hold_count(l, NULL)", relock_lock_hold_count(l, NULL), 0);
  row_rc("relock_lock_is_locked(l, NULL)", relock_lock_is_locked(l, NULL), 0);
  row_rc("relock_lock_force_unlock(l, NULL)", relock_lock_force_unlock(l, NULL), 0);
  relock_lock_free(l);
  table_end();
}

/* ==========================================================================
 * futures released twice (debug builds catch it)
 * ==========================================================================*/


static void child_release_completed_twice(int fd, void *arg) {
  child_cfg_t *cc = arg;
  relock_client_t *c = relock_client_new(NULL, cc->cfg, NULL);
  relock_future_t *f = relock_client_commandf_async(c, "PING");
  int r = relock_future_wait(f, 5000);
  relock_future_release(f);
  relock_future_release(f); /* one release too many */
  dprintf(fd, "not caught (PING: %s)", rc_name(r));
}

static void child_release_pending_twice(int fd, void *arg) {
  child_cfg_t *cc = arg;
  struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO); /* the child's own: it runs it below */
  relock_client_t *c = relock_client_new(loop, cc->cfg, NULL);
  relock_future_t *ready = relock_client_commandf_async(c, "PING"); /* connected first */
  relock_future_wait(ready, 5000);
  relock_future_release(ready);
  relock_future_t *f = relock_client_commandf_async(c, "PING");
  /* Answered after f (one connection, in order), and made before f is
   * freed, so it cannot take f's memory: waiting on it is sure to deliver
   * f's reply to the freed future first. */
  relock_future_t *after = relock_client_commandf_async(c, "PING");
  relock_future_release(f);
  relock_future_release(f); /* drops the operation's reference */
  int r = relock_future_wait(after, 2000);
  dprintf(fd, "not caught (next PING: %s)", rc_name(r));
}

static int caught(const fate_t *f) {
  if (f->signaled && f->sig == SIGABRT)
    return 1;
#if defined(ASAN_BUILD)
  /* ASan reports the use after free first; it exits 1 unless abort_on_error. */
  return f->exited && f->code != 0 && strstr(f->why, "AddressSanitizer") != NULL;
#elif defined(TSAN_BUILD)
  /* So does TSan (heap-use-after-free), and exits 66 with halt_on_error. */
  return f->exited && f->code != 0 && strstr(f->why, "ThreadSanitizer") != NULL;
#else
  return 0;
#endif
}

static void test_future_released_twice(void **state) {
  fx_t *fx = *state;
  table("futures released twice (caught by an assertion in debug builds)");
  child_cfg_t cc = {fx->cfg};
#if defined(NDEBUG)
  row_skip("relock_future_release twice on a completed future", "SIGABRT (assertion)",
           "built with NDEBUG: the assertion is compiled out");
  row_skip("relock_future_release twice on a pending future", "SIGABRT (assertion)",
           "built with NDEBUG: the assertion is compiled out");
#else
  const char *expected =
#if defined(ASAN_BUILD)
      "SIGABRT (assertion), or an ASan use-after-free report";
#elif defined(TSAN_BUILD)
      "SIGABRT (assertion), or a TSan heap-use-after-free report";
#else
      "SIGABRT (assertion)";
#endif
  char obs[700];
  stage("double release of a completed future");
  fate_t fate = probe(child_release_completed_twice, &cc, 20000);
  row(caught(&fate), "relock_future_release twice on a completed future (child)", expected, "%s",
      fate_show(&fate, obs, sizeof obs));
  stage("double release of a pending future");
  fate = probe(child_release_pending_twice, &cc, 20000);
  row(caught(&fate), "relock_future_release twice on a pending future, then its reply arrives (child)", expected,
      "%s", fate_show(&fate, obs, sizeof obs));
#endif
  table_end();
}

/* ==========================================================================
 * lock names
 * ==========================================================================*/

typedef struct {
  int messages;
  char last[8];
} heard_t;

static void on_heard(relock_subscription_t *sub, const char *payload, size_t len, void *arg) {
  (void)sub;
  heard_t *h = arg;
  if (payload == NULL)
    return;
  h->messages++;
  snprintf(h->last, sizeof h->last, "%.*s", (int)(len < 7 ? len : 7), payload);
}

static int heard_one(void *arg) { return ((heard_t *)arg)->messages > 0; }

/* The first key matching pattern, read raw ("" if none). */
static void first_key(fx_t *fx, const char *pattern, char *out, size_t size) {
  char buf[4096];
  RAW(fx, buf, "KEYS", pattern);
  out[0] = '\0';
  if (buf[0] != '*' || atoi(buf + 1) < 1)
    return;
  const char *p = strchr(buf, '\n');
  p = p != NULL ? strchr(p + 1, '\n') : NULL;
  if (p == NULL)
    return;
  snprintf(out, size, "%.*s", (int)strcspn(p + 1, "\r"), p + 1);
}

/* A name's unlock channel and latch names, checked in Redis: a listener on
 * the expected channel hears the unlock, and the latch keys carry the
 * expected prefix. */
static void check_derived_names(fx_t *fx, const char *name, const char *channel, const char *latch_prefix) {
  char input[200], key[600], made[RELOCK__CHANNEL_BUF];
  relock_lock_t *l = lock_of(fx->a, name);
  snprintf(input, sizeof input, "channel of \"%s\"", name);
  relock__lock_channel_to(l, made, sizeof made);
  row(strcmp(made, channel) == 0, input, channel, "%s", made);
  heard_t h = {0};
  relock_subscription_t *sub = NULL;
  must(relock_client_subscribe_async(fx->b, channel, strlen(channel), on_heard, &h, &sub));
  fx_keyevents_t set = {0}; /* the acquisition's latch, heard being set */
  relock_subscription_t *setsub = fx_keyevents(fx->b, fx->redis, "set", &set);
  RAW(fx, key, "FLUSHDB");
  snprintf(input, sizeof input, "acquire + release \"%s\"", name);
  relock_future_t *acq = ACQ(l, 1, 0, RELOCK_INFINITE);
  int64_t got = settle(acq, 5000).v;
  out_t rel = settle(REL(l, 1), 5000);
  row(got == 1 && rel.err == 0 && rel.v == 1, input, "1, 1", "%lld, %s", (long long)got,
      show(&rel, (char[300]){0}, 300));
  fx_run_until(relock_client_loop(fx->b), heard_one, &h, 2000);
  snprintf(input, sizeof input, "unlock of \"%s\" published on %s", name, channel);
  row(h.messages == 1 && strcmp(h.last, "0") == 0, input, "one message \"0\"", "%d message(s), last \"%s\"",
      h.messages, h.last);
  first_key(fx, "redisson_unlock_latch:*", key, sizeof key);
  snprintf(input, sizeof input, "release latch key of \"%s\"", name);
  row(strncmp(key, latch_prefix, strlen(latch_prefix)) == 0, input, latch_prefix, "%s", key[0] ? key : "(none)");
  fx_keyevents_wait(fx->b, &set, 1);
  const char *acquired = set.n > 0 ? set.keys[0] : "";
  relock_subscription_free(setsub);
  /* the release took the acquisition's latch over: one key, one name */
  snprintf(input, sizeof input, "acquire latch key of \"%s\"", name);
  row(key[0] != '\0' && strcmp(acquired, key) == 0, input, key[0] ? key : latch_prefix, "%s",
      acquired[0] ? acquired : "(none)");
  relock_subscription_free(sub);
  relock_lock_free(l);
}

/* Acquire, field in Redis, a contender, release, key gone: for a name that
 * C strings and RESP find awkward. */
static void full_cycle(fx_t *fx, const char *name, size_t len, const char *label) {
  char input[200];
  relock_error_t err = {-1, ""};
  relock_lock_t *l = relock_lock_new(fx->a, name, &err);
  snprintf(input, sizeof input, "relock_lock_new, %s", label);
  row(l != NULL && err.code == 0 && l->len == len, input, "a lock (name copied whole)", "%s, %s, %zu bytes",
      l ? "a lock" : "NULL", rc_name(err.code), l ? (size_t)l->len : (size_t)0);
  if (l == NULL)
    return;
  relock_lock_t *lb = relock_lock_new(fx->b, name, NULL);
  snprintf(input, sizeof input, "acquire(owner 1), %s", label);
  row_value(input, ACQ(l, 1, 0, RELOCK_INFINITE), 1);
  snprintf(input, sizeof input, "hold count in Redis, %s", label);
  long long held = raw_hold(fx, l, 1);
  row(held == 1, input, "1", "%lld", held);
  snprintf(input, sizeof input, "another client waits on the channel, %s", label);
  relock_future_t *waiter = ACQ(lb, 2, 5000, RELOCK_INFINITE);
  int r = relock_future_wait(waiter, 150);
  row(r == RELOCK_EPENDING, input, "pending (subscribed, waiting)", "%s",
      r == RELOCK_EPENDING ? "pending" : rc_name(r));
  snprintf(input, sizeof input, "release(owner 1), %s", label);
  row_value(input, REL(l, 1), 1);
  snprintf(input, sizeof input, "the waiter is woken by the unlock, %s", label);
  out_t o = settle(waiter, 3000);
  row(!o.null && o.err == 0 && o.v == 1 && o.ms < (double)fx_slack_ms(1000), input,
      "1, within a round trip (not the 5 s deadline)", "%s after %.0f ms", show(&o, (char[300]){0}, 300), o.ms);
  snprintf(input, sizeof input, "release(owner 2), then the key is gone, %s", label);
  out_t rel = settle(REL(lb, 2), 5000);
  long long left = raw_exists(fx, name, len);
  row(rel.err == 0 && rel.v == 1 && left == 0, input, "1, key gone", "%s, EXISTS %lld",
      show(&rel, (char[300]){0}, 300), left);
  relock_lock_free(lb);
  relock_lock_free(l);
}

static void test_lock_names(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  table("lock names: empty, 1 MiB, hash tags, binary bytes");
  stage("empty name");
  relock_error_t err = {0, ""};
  relock_lock_t *l = relock_lock_new(fx->a, "", &err);
  row(l == NULL && err.code == RELOCK_EINVAL, "relock_lock_new(c, \"\", &err)", "NULL, RELOCK_EINVAL", "%s, %s",
      l ? "a lock" : "NULL", rc_name(err.code));
  relock_lock_free(l);

  stage("1 MiB name");
  size_t big_len = (size_t)1 << 20;
  char *big = malloc(big_len + 1);
  assert_non_null(big);
  for (size_t i = 0; i < big_len; i++)
    big[i] = (char)('a' + i % 26);
  big[big_len] = '\0';
  full_cycle(fx, big, big_len, "1 MiB name");
  free(big);

  stage("binary names");
  char bin[256];
  for (int i = 1; i < 256; i++)
    bin[i - 1] = (char)i; /* every byte but NUL, '{' and '}' included */
  bin[255] = '\0';
  full_cycle(fx, bin, 255, "name of bytes 0x01..0xff");
  static const char injection[] = "x\r\n*1\r\n$4\r\nPING\r\n";
  full_cycle(fx, injection, strlen(injection), "name holding RESP (\"x\\r\\n*1\\r\\n$4\\r\\nPING\\r\\n\")");
  static const char utf8_bad[] = "\xc3\x28\xff\xfe lock \xe2\x82";
  full_cycle(fx, utf8_bad, strlen(utf8_bad), "name of invalid UTF-8");

  stage("hash tags");
  check_derived_names(fx, "plain", "redisson_lock__channel:{plain}", "redisson_unlock_latch:{plain}:");
  check_derived_names(fx, "a{tag}b", "redisson_lock__channel:a{tag}b", "redisson_unlock_latch:a{tag}b:");
  check_derived_names(fx, "{}", "redisson_lock__channel:{}", "redisson_unlock_latch:{}:");
  check_derived_names(fx, "open{", "redisson_lock__channel:open{", "redisson_unlock_latch:open{:");
  check_derived_names(fx, "close}", "redisson_lock__channel:{close}}", "redisson_unlock_latch:{close}}:");
  check_derived_names(fx, "}x{", "redisson_lock__channel:}x{", "redisson_unlock_latch:}x{:");
  table_end();
}

/* ==========================================================================
 * durations
 * ==========================================================================*/

static void test_durations(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  table("durations: negative, zero, huge waits and leases");
  relock_lock_t *l = lock_of(fx->a, "d"), *lb = lock_of(fx->b, "d");
  char buf[256];

  stage("invalid waits and leases");
  row_refused("acquire(wait -2, lease -1)", ACQ(l, 1, -2, RELOCK_INFINITE));
  row_refused("acquire(wait INT64_MIN, lease -1)", ACQ(l, 1, INT64_MIN, RELOCK_INFINITE));
  row_refused("acquire(wait 0, lease 0)", ACQ(l, 1, 0, 0));
  row_refused("acquire(wait 0, lease -2)", ACQ(l, 1, 0, -2));
  row_refused("acquire(wait 0, lease INT64_MIN)", ACQ(l, 1, 0, INT64_MIN));
  row_rc("relock_lock_try_lock(wait -2, lease -1)", relock_lock_try_lock(l, -2, RELOCK_INFINITE, NULL),
         RELOCK_EINVAL);
  row_rc("relock_lock_try_lock(wait 0, lease 0)", relock_lock_try_lock(l, 0, 0, NULL), RELOCK_EINVAL);
  row_rc("relock_lock_try_lock(wait 0, lease INT64_MIN)", relock_lock_try_lock(l, 0, INT64_MIN, NULL),
         RELOCK_EINVAL);
  row_rc("relock_lock_lock(lease 0)", relock_lock_lock(l, 0), RELOCK_EINVAL);
  row_rc("relock_lock_lock(lease -7)", relock_lock_lock(l, -7), RELOCK_EINVAL);
  row_value("is_locked after the refused calls", relock_lock_is_locked_async(l), 0);

  stage("relock_future_wait timeouts");
  relock_future_t *ping = relock_client_commandf_async(fx->a, "PING");
  row_rc("relock_future_wait(PING, INT64_MAX)", relock_future_wait(ping, INT64_MAX), 0);
  relock_future_release(ping);

  stage("tiny durations");
  /* No answer can come back within a 1 ms lease less the drift margin:
   * "acquired" would be a lie by the time it is read. Refused at once, as
   * is every lease under RELOCK_MIN_LEASE_MS. */
  row_fails("acquire(owner 1, wait 0, lease 1 ms)", ACQ(l, 1, 0, 1), RELOCK_EINVAL, "drift margin");
  row_fails("acquire(owner 1, wait 0, lease RELOCK_MIN_LEASE_MS - 1)", ACQ(l, 1, 0, RELOCK_MIN_LEASE_MS - 1),
            RELOCK_EINVAL, "drift margin");
  relock_future_t *tiny = ACQ(lb, 2, 1, RELOCK_INFINITE);
  out_t o = settle(tiny, 3000);
  /* The wait bounds the try in flight too: no answer within it is a
   * timeout (under valgrind the try can outlast 1 ms). */
  row(!o.null && ((o.err == 0 && (o.v == 0 || o.v == 1)) || o.err == RELOCK_ETIMEDOUT) &&
          o.ms < (double)fx_slack_ms(500),
      "acquire(owner 2, wait 1 ms) right after", "0 or 1 (or RELOCK_ETIMEDOUT), at once", "%s after %.0f ms",
      show(&o, buf, sizeof buf), o.ms);
  must(relock_lock_force_unlock_async(l));

  stage("huge waits");
  must(ACQ(l, 1, 0, 60000)); /* held by owner 1 for a minute */
  static const struct {
    int64_t wait;
    const char *label;
  } waits[] = {{INT64_MAX, "INT64_MAX"},
               {INT64_MAX / 2, "INT64_MAX / 2"},
               {((int64_t)1 << 58) + 100, "2^58 + 100 (9 million years)"},
               {(int64_t)1 << 40, "2^40 (34 years)"}};
  for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++) {
    char input[160];
    snprintf(input, sizeof input, "acquire(owner 2, wait %s) on a lock held for a minute", waits[i].label);
    relock_future_t *f = ACQ(lb, 2, waits[i].wait, RELOCK_INFINITE);
    uint64_t t0 = relock__now_ns();
    int r = f != NULL ? relock_future_wait(f, 300) : RELOCK_EINVAL;
    double ms = fx_ms_since(t0);
    if (r == RELOCK_EPENDING)
      row(1, input, "still waiting after 300 ms", "waiting");
    else if (f == NULL)
      row(0, input, "still waiting after 300 ms", "NULL");
    else
      row(0, input, "still waiting after 300 ms", "%s after %.0f ms",
          r == 0 ? (relock_future_bool(f) ? "1" : "0 (gave up: not acquired)") : rc_name(r), ms);
    snprintf(input, sizeof input, "... then owner 1 releases: the wait %s acquires", waits[i].label);
    if (r == RELOCK_EPENDING) {
      must(REL(l, 1));
      row_value(input, f, 1);
      must(REL(lb, 2));
      must(ACQ(l, 1, 0, 60000));
    } else {
      relock_future_release(f);
    }
  }
  must(relock_lock_force_unlock_async(l));
  row_value("acquire(wait INT64_MAX) on a free lock", ACQ(l, 1, INT64_MAX, RELOCK_INFINITE), 1);
  must(REL(l, 1));

  stage("huge leases");
  relock_future_t *f = ACQ(l, 1, 0, INT64_MAX);
  o = settle(f, 5000);
  long long ttl = -3;
  int left = (int)raw_exists(fx, "d", 1);
  if (left) {
    RAW(fx, buf, "PTTL", "d");
    ttl = atoll(buf + 1);
  }
  int acquired = !o.null && o.err == 0 && o.v == 1;
  int refused = o.err == RELOCK_EINVAL; /* a future failed at once */
  row(acquired || refused, "acquire(owner 1, wait 0, lease INT64_MAX)",
      "1 (a lease of ~292 million years), or RELOCK_EINVAL",
      "%s", show(&o, buf, sizeof buf));
  row(acquired ? left == 1 : left == 0, "... and the key in Redis afterwards",
      "held with a TTL if acquired; no key if not", "%s, PTTL %lld", left ? "key present" : "no key", ttl);
  if (acquired)
    row_value("... release(owner 1)", REL(l, 1), 1);
  RAW(fx, buf, "DEL", "d");
  /* lock.h documents RELOCK_MAX_LEASE_MS (2^40 ms, ~34 years): longer is refused */
  o = settle(ACQ(l, 1, 0, INT64_MAX / 2), 5000);
  row(o.err == RELOCK_EINVAL && !raw_exists(fx, "d", 1), "acquire(owner 1, wait 0, lease INT64_MAX / 2)",
      "RELOCK_EINVAL (over RELOCK_MAX_LEASE_MS), no key", "%s", show(&o, buf, sizeof buf));
  o = settle(ACQ(l, 1, 0, RELOCK_MAX_LEASE_MS + 1), 5000);
  row(o.err == RELOCK_EINVAL, "acquire(owner 1, wait 0, lease RELOCK_MAX_LEASE_MS + 1)", "RELOCK_EINVAL", "%s",
      show(&o, buf, sizeof buf));
  o = settle(ACQ(l, 1, 0, RELOCK_MAX_LEASE_MS), 5000);
  RAW(fx, buf, "PTTL", "d");
  ttl = atoll(buf + 1);
  row(!o.null && o.err == 0 && o.v == 1 && ttl > (long long)1e12, "acquire(owner 1, wait 0, lease RELOCK_MAX_LEASE_MS)",
      "1, PTTL > 10^12 ms", "%s, PTTL %lld", show(&o, buf, sizeof buf), ttl);
  row_value("... acquire again (reentrant), same lease", ACQ(l, 1, 0, RELOCK_MAX_LEASE_MS), 1);
  row_value("... release(owner 1): one hold left", REL(l, 1), 0);
  row_value("... release(owner 1): free", REL(l, 1), 1);
  RAW(fx, buf, "DEL", "d");
  relock_lock_free(l);
  relock_lock_free(lb);
  table_end();
}

/* A configuration with one huge duration, used from a child: the library
 * may overflow (and a sanitizer stop it) where it does not bound them. */
typedef struct {
  relock_options_t *cfg;
} huge_cfg_t;

static void child_huge_config(int fd, void *arg) {
  huge_cfg_t *h = arg;
  relock_error_t err;
  relock_client_t *c = relock_client_new(NULL, h->cfg, &err);
  if (c == NULL) {
    dprintf(fd, "client_new %s", rc_name(err.code));
    return;
  }
  relock_future_t *f = relock_client_commandf_async(c, "PING");
  int ping = relock_future_wait(f, 5000);
  relock_future_release(f);
  relock_lock_t *l = relock_lock_new(c, "huge", NULL);
  f = relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE);
  int acq = relock_future_wait(f, 5000);
  int acquired = acq == 0 && relock_future_bool(f);
  char acq_msg[120];
  snprintf(acq_msg, sizeof acq_msg, "%s", relock_future_message(f));
  relock_future_release(f);
  f = relock_lock_unlock_async(l, 1);
  int rel = relock_future_wait(f, 5000);
  int freed = rel == 0 && relock_future_bool(f);
  relock_future_release(f);
  f = relock_client_commandf_async(c, "EXISTS huge");
  int ex = relock_future_wait(f, 5000);
  long long left = ex == 0 && relock_future_reply(f) != NULL ? relock_future_reply(f)->integer : -1;
  relock_future_release(f);
  if (acq == 0)
    dprintf(fd, "PING %s, acquire %d, release %s, key left %lld", rc_name(ping), acquired,
            rel == 0 ? (freed ? "1" : "0") : rc_name(rel), left);
  else
    dprintf(fd, "PING %s, acquire %s (%.60s), release %s, key left %lld", rc_name(ping), rc_name(acq), acq_msg,
            rel == 0 ? (freed ? "1" : "0") : rc_name(rel), left);
  relock_lock_free(l);
  relock_client_free(c);
}

static void test_huge_configured_durations(void **state) {
  fx_t *fx = *state;
  table("durations: huge configured timeouts (each in a child: overflow must not crash or mislead)");
  static const struct {
    const char *label;
    const char *name;
    int is_int;
  } fields[] = {
      {"command-timeout = INT64_MAX", RELOCK_OPT_COMMAND_TIMEOUT, 0},
      {"connect-timeout = INT64_MAX", RELOCK_OPT_CONNECT_TIMEOUT, 0},
      {"retry-interval = INT64_MAX", RELOCK_OPT_RETRY_INTERVAL, 0},
      {"reconnect-max = INT64_MAX", RELOCK_OPT_RECONNECT_MAX, 0},
      {"watchdog-timeout = INT64_MAX", RELOCK_OPT_WATCHDOG_TIMEOUT, 0},
      {"retry-attempts = INT_MAX", RELOCK_OPT_RETRY_ATTEMPTS, 1},
  };
  char buf[64];
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    stage(fields[i].label);
    huge_cfg_t h;
    h.cfg = fx_copy(fx->cfg);
    relock_error_t err;
    int rc = fields[i].is_int ? relock_options_set_int(h.cfg, fields[i].name, INT_MAX, &err)
                              : relock_options_set_ms(h.cfg, fields[i].name, INT64_MAX, &err);
    char input[120];
    snprintf(input, sizeof input, "options %s: PING, acquire, release", fields[i].label);
    if (rc != 0) { /* refused when set: nothing can overflow */
      row(rc == RELOCK_EINVAL, input, "PING 0, acquire 1, release 1, key left 0; or refused when set (RELOCK_EINVAL)",
          "refused when set: %s (%s)", rc_name(rc), err.message);
      relock_options_free(h.cfg);
      continue;
    }
    fate_t fate = probe(child_huge_config, &h, 30000);
    relock_options_free(h.cfg);
    row_probe(input, &fate, "PING 0, acquire 1, release 1, key left 0", "client_new RELOCK_EINVAL");
    RAW(fx, buf, "DEL", "huge");
  }
  table_end();
}

/* ==========================================================================
 * owners
 * ==========================================================================*/

static void owner_row(fx_t *fx, relock_lock_t *l, uint64_t owner, const char *label) {
  char input[160], expected[160], field[RELOCK__FIELD_MAX];
  snprintf(expected, sizeof expected, "%s:%llu", relock_client_id(l->client), (unsigned long long)owner);
  relock_lock_field(l, owner, field, sizeof field);
  snprintf(input, sizeof input, "relock_lock_field(owner %s)", label);
  row(strcmp(field, expected) == 0, input, expected, "%s", field);
  snprintf(input, sizeof input, "acquire(owner %s)", label);
  row_value(input, ACQ(l, owner, 0, RELOCK_INFINITE), 1);
  /* the field in Redis, read raw: exactly the decimal owner */
  char buf[512];
  RAW(fx, buf, "HKEYS", l->name);
  char *nl = strchr(buf, '\n');
  char got[200] = "";
  if (buf[0] == '*' && nl != NULL && (nl = strchr(nl + 1, '\n')) != NULL)
    snprintf(got, sizeof got, "%.*s", (int)strcspn(nl + 1, "\r"), nl + 1);
  snprintf(input, sizeof input, "field in Redis, owner %s", label);
  row(strcmp(got, expected) == 0, input, expected, "%s", got);
  snprintf(input, sizeof input, "is_held_by / hold_count(owner %s)", label);
  out_t h = settle(relock_lock_is_held_by_thread_async(l, owner), 5000), c = settle(relock_lock_hold_count_async(l, owner),
                                                                             5000);
  row(h.err == 0 && h.v == 1 && c.err == 0 && c.v == 1, input, "1, 1", "%lld, %lld", (long long)h.v,
      (long long)c.v);
}

static void test_owners(void **state) {
  fx_t *fx = *state;
  static char long_id[65];
  memset(long_id, 'Z', 64);
  fx->b = fx_client(fx->cfg);
  fx_set_str(fx->cfg, RELOCK_OPT_CLIENT_ID, long_id); /* the longest id: the field is at its longest too */
  fx->a = fx_client(fx->cfg);
  table("owners: 0, UINT64_MAX, next to each other");
  relock_lock_t *l = lock_of(fx->a, "o");
  stage("owner 0");
  owner_row(fx, l, 0, "0");
  row_value("acquire(owner UINT64_MAX) while owner 0 holds", ACQ(l, UINT64_MAX, 0, RELOCK_INFINITE), 0);
  row_value("is_held_by(owner UINT64_MAX) while owner 0 holds", relock_lock_is_held_by_thread_async(l, UINT64_MAX), 0);
  row_fails("release(owner UINT64_MAX) while owner 0 holds", REL(l, UINT64_MAX), RELOCK_ENOTOWNER, NULL);
  row_value("release(owner 0)", REL(l, 0), 1);
  stage("owner UINT64_MAX");
  owner_row(fx, l, UINT64_MAX, "UINT64_MAX");
  row_value("acquire(owner 0) while owner UINT64_MAX holds", ACQ(l, 0, 0, RELOCK_INFINITE), 0);
  row_fails("release(owner UINT64_MAX - 1)", REL(l, UINT64_MAX - 1), RELOCK_ENOTOWNER, NULL);
  row_value("release(owner UINT64_MAX)", REL(l, UINT64_MAX), 1);
  stage("same owner, two clients");
  relock_lock_t *lb = lock_of(fx->b, "o");
  must(ACQ(l, 5, 0, RELOCK_INFINITE));
  row_value("acquire(owner 5) through another client (other id) while client a's owner 5 holds",
            ACQ(lb, 5, 0, RELOCK_INFINITE), 0);
  must(REL(l, 5));
  row(fx->a->ledger.nrenewing == 0, "holds renewed after all releases", "0", "%zu", fx->a->ledger.nrenewing);
  relock_lock_free(lb);
  relock_lock_free(l);
  table_end();
}

/* ==========================================================================
 * release misuse
 * ==========================================================================*/

typedef struct {
  int calls;
  int reason;
} lost_t;

static void on_lost(relock_lock_t *lock, uint64_t owner, int reason, const char *message, void *arg) {
  (void)lock;
  (void)owner;
  (void)message;
  lost_t *l = arg;
  l->calls++;
  l->reason = reason;
}

static int key_r_gone(void *arg) { return raw_exists(arg, "r", 1) == 0; }

static void test_release_misuse(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  table("release misuse: without acquire, twice, after the lease, by others");
  relock_lock_t *l = lock_of(fx->a, "r"), *lb = lock_of(fx->b, "r");
  lost_t lost = {0, 0};
  relock_lock_on_lost(l, on_lost, &lost);

  stage("release without acquire");
  row_fails("release(owner 1), never acquired", REL(l, 1), RELOCK_ENOTOWNER, "not held");
  row_rc("relock_lock_unlock, never locked", relock_lock_unlock(l), RELOCK_ENOTOWNER);

  stage("double release");
  must(ACQ(l, 1, 0, RELOCK_INFINITE));
  row_value("release(owner 1) after one acquire", REL(l, 1), 1);
  row_fails("release(owner 1) again", REL(l, 1), RELOCK_ENOTOWNER, NULL);
  must(ACQ(l, 1, 0, RELOCK_INFINITE));
  must(ACQ(l, 1, 0, RELOCK_INFINITE));
  row_value("release #1 of two holds", REL(l, 1), 0);
  row_value("release #2 of two holds", REL(l, 1), 1);
  row_fails("release #3 of two holds", REL(l, 1), RELOCK_ENOTOWNER, NULL);
  row_rc("relock_lock_lock + unlock + unlock: the second unlock",
         (relock_lock_lock(l, RELOCK_INFINITE), relock_lock_unlock(l), relock_lock_unlock(l)), RELOCK_ENOTOWNER);

  stage("two releases of one hold in flight at once");
  must(ACQ(l, 1, 0, RELOCK_INFINITE));
  relock_future_t *r1 = REL(l, 1), *r2 = REL(l, 1);
  out_t o1 = settle(r1, 5000), o2 = settle(r2, 5000);
  char b1[300], b2[300];
  row(o1.err == 0 && o1.v == 1 && o2.err == RELOCK_ENOTOWNER, "release(owner 1) twice, both in flight, one hold",
      "1, then RELOCK_ENOTOWNER", "%s, then %s", show(&o1, b1, sizeof b1), show(&o2, b2, sizeof b2));
  row(fx->a->ledger.nrenewing == 0 && fx->a->ledger.holds.count == 0, "... holds tracked afterwards", "none",
      "%zu renewed, %zu tracked", fx->a->ledger.nrenewing, (size_t)fx->a->ledger.holds.count);

  stage("release after the lease expired");
  must(ACQ(l, 1, 0, 100));
  fx_run_until(relock_client_loop(fx->a), key_r_gone, fx, 3000);
  row_fails("release(owner 1) after its 100 ms lease expired", REL(l, 1), RELOCK_ENOTOWNER, "lease expired");
  must(ACQ(l, 1, 0, 100));
  fx_run_until(relock_client_loop(fx->a), key_r_gone, fx, 3000);
  must(ACQ(lb, 2, 0, 60000)); /* another owner took it since */
  row_fails("release(owner 1) after its lease expired and owner 2 took the lock", REL(l, 1), RELOCK_ENOTOWNER, NULL);
  row_value("... owner 2 still holds it", relock_lock_is_held_by_thread_async(lb, 2), 1);
  must(REL(lb, 2));

  stage("release after the lock was deleted under a watchdog hold");
  must(ACQ(l, 1, 0, RELOCK_INFINITE));
  must(relock_lock_force_unlock_async(lb));
  row_fails("release(owner 1) after another client force-released it", REL(l, 1), RELOCK_ELOST, "lost");
  row(lost.calls == 1 && lost.reason == RELOCK_ELOST, "... the lost callback", "called once, RELOCK_ELOST",
      "%d call(s), %s", lost.calls, rc_name(lost.reason));
  row_fails("release(owner 1) once more", REL(l, 1), RELOCK_ENOTOWNER, NULL);

  stage("release by others");
  must(ACQ(l, 1, 0, RELOCK_INFINITE));
  row_fails("release(owner 2) while owner 1 holds", REL(l, 2), RELOCK_ENOTOWNER, NULL);
  row_fails("release(owner 1) through another client", REL(lb, 1), RELOCK_ENOTOWNER, NULL);
  row_value("... owner 1 still holds it once", relock_lock_hold_count_async(l, 1), 1);
  row_value("force release when held", relock_lock_force_unlock_async(lb), 1);
  row_value("force release when free", relock_lock_force_unlock_async(lb), 0);
  relock_lock_free(lb);
  relock_lock_free(l);
  table_end();
}

/* ==========================================================================
 * operations after relock_client_close
 * ==========================================================================*/

typedef struct {
  relock_lock_t *lock;
  int called;
  int acquire_err;
  int command_err;
  int block_rc;
} in_close_t;

static void close_cb_uses_client(relock_client_t *c, void *arg) {
  in_close_t *ic = arg;
  ic->called++;
  relock_future_t *f = relock_lock_lock_async(ic->lock, 9, 0, RELOCK_INFINITE);
  ic->acquire_err = f == NULL ? RELOCK_EINVAL : relock_future_error(f);
  relock_future_release(f);
  f = relock_client_commandf_async(c, "PING");
  ic->command_err = f == NULL ? RELOCK_EINVAL : relock_future_error(f);
  relock_future_release(f);
  ic->block_rc = relock_lock_unlock(ic->lock);
}

static int called(void *arg) { return ((in_close_t *)arg)->called > 0; }

/* Every operation on a closed client: async ones fail with ECLOSED,
 * blocking ones return it. */
static void closed_rows(relock_client_t *c, relock_lock_t *l, const char *when) {
  char input[200];
#define CLOSED_FUTURE(text, call)                                \
  do {                                                           \
    snprintf(input, sizeof input, "%s, %s", text, when);         \
    row_fails(input, call, RELOCK_ECLOSED, NULL);                \
  } while (0)
#define CLOSED_RC(text, call)                                    \
  do {                                                           \
    snprintf(input, sizeof input, "%s, %s", text, when);         \
    row_rc(input, call, RELOCK_ECLOSED);                         \
  } while (0)
  const char *ping[] = {"PING"};
  CLOSED_FUTURE("relock_client_command_async(PING)", relock_client_command_async(c, 1, ping, NULL));
  CLOSED_FUTURE("relock_client_commandf_async(PING)", relock_client_commandf_async(c, "PING"));
  relock_subscription_t *sub = NULL;
  snprintf(input, sizeof input, "relock_client_subscribe_async, %s", when);
  relock_future_t *f = relock_client_subscribe_async(c, "ch", 2, ignore_message, NULL, &sub);
  out_t o = settle(f, 3000);
  row(o.err == RELOCK_ECLOSED, input, "RELOCK_ECLOSED (the subscription can be freed)", "%s%s",
      show(&o, (char[300]){0}, 300), sub ? ", *sub set" : ", *sub NULL");
  relock_subscription_free(sub);
  CLOSED_FUTURE("acquire(owner 2, wait 0)", ACQ(l, 2, 0, RELOCK_INFINITE));
  CLOSED_FUTURE("acquire(owner 2, wait -1)", ACQ(l, 2, RELOCK_INFINITE, RELOCK_INFINITE));
  CLOSED_FUTURE("force_release", relock_lock_force_unlock_async(l));
  CLOSED_FUTURE("is_locked", relock_lock_is_locked_async(l));
  CLOSED_FUTURE("is_held_by(1)", relock_lock_is_held_by_thread_async(l, 1));
  CLOSED_FUTURE("hold_count(1)", relock_lock_hold_count_async(l, 1));
  CLOSED_FUTURE("remaining_ttl", relock_lock_remaining_ttl_async(l));
  int flag = -1;
  int64_t count = -1;
  CLOSED_RC("relock_lock_lock(-1)", relock_lock_lock(l, RELOCK_INFINITE));
  CLOSED_RC("relock_lock_try_lock(1000, -1)", relock_lock_try_lock(l, 1000, RELOCK_INFINITE, &flag));
  CLOSED_RC("relock_lock_force_unlock", relock_lock_force_unlock(l, &flag));
  CLOSED_RC("relock_lock_is_locked", relock_lock_is_locked(l, &flag));
  CLOSED_RC("relock_lock_is_held_by_thread", relock_lock_is_held_by_thread(l, &flag));
  CLOSED_RC("relock_lock_hold_count", relock_lock_hold_count(l, &count));
  relock_error_t err = {-99, ""};
  relock_lock_t *fresh = relock_lock_new(c, "fresh", &err);
  snprintf(input, sizeof input, "relock_lock_new + acquire, %s", when);
  if (fresh == NULL) {
    row(err.code == RELOCK_ECLOSED, input, "NULL with RELOCK_ECLOSED, or a lock whose acquire fails RELOCK_ECLOSED",
        "NULL, %s", rc_name(err.code));
  } else {
    out_t a = settle(ACQ(fresh, 1, 0, RELOCK_INFINITE), 3000);
    row(a.err == RELOCK_ECLOSED, input, "NULL with RELOCK_ECLOSED, or a lock whose acquire fails RELOCK_ECLOSED",
        "a lock; acquire: %s", show(&a, (char[300]){0}, 300));
    relock_lock_free(fresh);
  }
#undef CLOSED_FUTURE
#undef CLOSED_RC
}

/* Releases around a close, each in a child: they reach the renewal registry,
 * which close has already torn down. */
typedef struct {
  const relock_options_t *cfg;
  int mode;
} release_close_t;

enum { REL_AFTER_CLOSE, REL_AFTER_CLOSE_CB, REL_IN_FLIGHT, UNLOCK_AFTER_CLOSE };

static void mark_called(relock_client_t *c, void *arg) {
  (void)c;
  *(int *)arg = 1;
}

static int flag_set(void *arg) { return *(int *)arg != 0; }

static void child_release_and_close(int fd, void *arg) {
  release_close_t *rc = arg;
  struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO); /* the child's own: it runs it below */
  relock_client_t *c = relock_client_new(loop, rc->cfg, NULL);
  relock_lock_t *l = relock_lock_new(c, "res", NULL);
  uint64_t owner = rc->mode == UNLOCK_AFTER_CLOSE ? relock_thread_owner() : 1;
  relock_future_t *f = relock_lock_lock_async(l, owner, 0, RELOCK_INFINITE);
  relock_future_wait(f, 5000);
  relock_future_release(f);
  int closed = 0;
  if (rc->mode == REL_IN_FLIGHT) {
    f = relock_lock_unlock_async(l, owner);
    relock_client_close(c, mark_called, &closed);
  } else {
    relock_client_close(c, mark_called, &closed);
    if (rc->mode == REL_AFTER_CLOSE_CB)
      fx_run_until(loop, flag_set, &closed, 3000);
    if (rc->mode == UNLOCK_AFTER_CLOSE) {
      int r = relock_lock_unlock(l);
      dprintf(fd, "%s", rc_name(r));
      relock_lock_free(l);
      relock_client_free(c);
      return;
    }
    f = relock_lock_unlock_async(l, owner);
  }
  int r = f == NULL ? 1 : relock_future_wait(f, 5000);
  dprintf(fd, "%s", r == 1 ? "NULL" : r == 0 ? (relock_future_bool(f) ? "1" : "0") : rc_name(r));
  relock_future_release(f);
  relock_lock_free(l);
  relock_client_free(c);
}

static void test_after_close(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  table("operations after relock_client_close");
  relock_client_t *c = fx->a;
  relock_lock_t *l = lock_of(c, "res"), *q = lock_of(c, "q"), *qb = lock_of(fx->b, "q");
  relock_lock_t *other = lock_of(c, "other");
  must(ACQ(l, 1, 0, RELOCK_INFINITE)); /* a watchdog hold */
  relock_subscription_t *sub = NULL;
  must(relock_client_subscribe_async(c, "ch", 2, ignore_message, NULL, &sub));
  relock_future_t *kept = relock_client_commandf_async(c, "PING");
  assert_int_equal(relock_future_wait(kept, fx_slack_ms(5000)), 0);
  must(ACQ(qb, 7, 0, 60000));                                           /* b holds "q"... */
  relock_future_t *queued = ACQ(q, 2, RELOCK_INFINITE, RELOCK_INFINITE); /* ...a waits for it */
  assert_int_equal(relock_future_wait(queued, 200), RELOCK_EPENDING);
  relock_future_t *waiting = ACQ(other, 2, RELOCK_INFINITE, RELOCK_INFINITE); /* in flight */
  relock_future_t *before = relock_client_commandf_async(c, "PING");         /* in flight */

  stage("close");
  in_close_t ic = {l, 0, 0, 0, 0};
  row_rc("relock_client_close(c, cb, arg)", relock_client_close(c, close_cb_uses_client, &ic), 0);
  row_rc("relock_client_close again", relock_client_close(c, NULL, NULL), RELOCK_ECLOSED);
  row(ic.called == 0, "close callback during relock_client_close", "not called (later, from the loop)", "%s",
      ic.called ? "called" : "not called");
  row_fails("acquire(owner 2) waiting for a held lock at close", queued, RELOCK_ECLOSED, NULL);
  out_t ow = settle(waiting, 3000);
  row(ow.err == RELOCK_ECLOSED || (ow.err == 0 && ow.v == 1), "acquire of a free lock in flight at close",
      "RELOCK_ECLOSED (or 1 if answered first)", "%s", show(&ow, (char[300]){0}, 300));
  out_t ob = settle(before, 3000);
  row(ob.err == RELOCK_ECLOSED || ob.err == 0, "PING in flight at close", "RELOCK_ECLOSED (or its reply)", "%s",
      show(&ob, (char[300]){0}, 300));
  row(relock_client_id(c) != NULL && relock_client_loop(c) != NULL, "relock_client_id / relock_client_loop, closing",
      "still answer", "%s, %p", relock_client_id(c) ? relock_client_id(c) : "NULL", (void *)relock_client_loop(c));
  closed_rows(c, l, "closing");

  stage("releases around close, in children");
  static const struct {
    int mode;
    const char *input;
    const char *alternative;
  } rel[] = {
      {REL_IN_FLIGHT, "release(owner 1) of a watchdog hold, in flight when relock_client_close is called (child)", "1"},
      {REL_AFTER_CLOSE, "release(owner 1) of a watchdog hold, after relock_client_close (child)", NULL},
      {REL_AFTER_CLOSE_CB, "release(owner 1) of a watchdog hold, after the close callback (child)", NULL},
      {UNLOCK_AFTER_CLOSE, "relock_lock_unlock of a hold, after relock_client_close (child)", NULL},
  };
  for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
    release_close_t arg = {fx->cfg, rel[i].mode};
    fate_t fate = probe(child_release_and_close, &arg, 20000);
    row_probe(rel[i].input, &fate, "RELOCK_ECLOSED", rel[i].alternative);
  }

  stage("close callback");
  fx_run_until(relock_client_loop(c), called, &ic, 3000);
  row(ic.called == 1, "close callback", "called once", "%d call(s)", ic.called);
  row(ic.acquire_err == RELOCK_ECLOSED && ic.command_err == RELOCK_ECLOSED,
      "acquire / PING from inside the close callback", "RELOCK_ECLOSED, RELOCK_ECLOSED", "%s, %s",
      rc_name(ic.acquire_err), rc_name(ic.command_err));
  row(ic.block_rc == RELOCK_EWOULDBLOCK || ic.block_rc == RELOCK_ECLOSED,
      "blocking relock_lock_unlock from inside the close callback", "RELOCK_EWOULDBLOCK or RELOCK_ECLOSED", "%s",
      rc_name(ic.block_rc));
  closed_rows(c, l, "closed (after the close callback)");

  stage("free");
  relock_client_free(c);
  fx->a = NULL;
  row(relock_future_error(kept) == 0, "a future completed before close, read after relock_client_free", "0", "%s",
      rc_name(relock_future_error(kept)));
  relock_future_release(kept);
  relock_subscription_free(sub);
  row(1, "relock_subscription_free after relock_client_free", "no crash (valgrind/ASan clean)", "returned");
  relock_lock_free(l);
  relock_lock_free(q);
  relock_lock_free(other);
  row(1, "relock_lock_free (one with a hold, one with a wait) after relock_client_free",
      "no crash (valgrind/ASan clean)", "returned");
  must(relock_lock_force_unlock_async(qb));
  relock_lock_free(qb);
  table_end();
}

/* ==========================================================================
 * wrong types under the lock name
 * ==========================================================================*/

static int both_lost(void *arg) {
  lost_t *l = arg;
  return l[0].calls > 0 && l[1].calls > 0;
}

static void test_wrong_types(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  table("wrong types under the lock name");
  char buf[256];
  static const struct {
    const char *type;
    const char *argv[4];
    int argc;
  } kinds[] = {
      {"string", {"SET", "w", "x"}, 3},
      {"list", {"RPUSH", "w", "x"}, 3},
      {"set", {"SADD", "w", "x"}, 3},
      {"zset", {"ZADD", "w", "1", "x"}, 4},
  };
  relock_lock_t *l = lock_of(fx->a, "w");
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    stage(kinds[i].type);
    RAW(fx, buf, "DEL", "w");
    raw(fx, buf, sizeof buf, kinds[i].argc, kinds[i].argv, NULL);
    char input[120];
#define WT(what, call)                                                               \
  do {                                                                               \
    snprintf(input, sizeof input, "%s, a %s under the name", what, kinds[i].type); \
    row_fails(input, call, RELOCK_EWRONGKIND, "holds a Redis");                        \
  } while (0)
    WT("acquire(wait 0)", ACQ(l, 1, 0, RELOCK_INFINITE));
    snprintf(input, sizeof input, "acquire(wait 2000), a %s under the name", kinds[i].type);
    const int server[] = {RELOCK_EWRONGKIND, 0};
    row_fails_in(input, ACQ(l, 1, 2000, RELOCK_INFINITE), server, "holds a Redis", 500);
    WT("release(owner 1)", REL(l, 1));
    WT("is_held_by(1)", relock_lock_is_held_by_thread_async(l, 1));
    WT("hold_count(1)", relock_lock_hold_count_async(l, 1));
#undef WT
    if (i == 0) {
      row_rc("relock_lock_try_lock, a string under the name", relock_lock_try_lock(l, 0, RELOCK_INFINITE, NULL),
             RELOCK_EWRONGKIND);
      row_rc("relock_lock_unlock, a string under the name", relock_lock_unlock(l), RELOCK_EWRONGKIND);
      row_value("is_locked, a string under the name (EXISTS)", relock_lock_is_locked_async(l), 1);
      row_value("remaining_ttl, a string without expiry", relock_lock_remaining_ttl_async(l), -1);
      row_value("force_release, a string under the name (deleted, like Redisson)", relock_lock_force_unlock_async(l),
                1);
    }
    row(fx->a->ledger.holds.count == 0, "holds tracked afterwards", "none", "%zu",
        (size_t)fx->a->ledger.holds.count);
  }
  stage("hash with a non-integer count");
  RAW(fx, buf, "DEL", "w");
  char field[RELOCK__FIELD_MAX];
  relock__lock_field(l, 1, field);
  RAW(fx, buf, "HSET", "w", field, "abc");
  row_fails("acquire(owner 1), its field holds \"abc\"", ACQ(l, 1, 0, RELOCK_INFINITE), RELOCK_ESERVER,
            "not an integer");
  row_fails("release(owner 1), its field holds \"abc\"", REL(l, 1), RELOCK_ESERVER, "not an integer");
  row_value("acquire(owner 2), a hash held by another field", ACQ(l, 2, 0, RELOCK_INFINITE), 0);
  RAW(fx, buf, "DEL", "w");
  relock_lock_free(l);

  stage("a held lock's key replaced by a string");
  relock_client_free(fx->a);
  fx_set_ms(fx->cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 300);
  fx->a = fx_client(fx->cfg);
  relock_lock_t *good = lock_of(fx->a, "good"), *victim = lock_of(fx->a, "victim");
  lost_t lost[2] = {{0, 0}, {0, 0}};
  relock_lock_on_lost(good, on_lost, &lost[0]);
  relock_lock_on_lost(victim, on_lost, &lost[1]);
  must(ACQ(good, 1, 0, RELOCK_INFINITE));
  must(ACQ(victim, 1, 0, RELOCK_INFINITE));
  RAW(fx, buf, "SET", "tmp", "x");
  RAW(fx, buf, "RENAME", "tmp", "victim"); /* atomically: a string where the hash was */
  fx_run_until(relock_client_loop(fx->a), both_lost, lost, 1500);
  row(lost[1].calls == 1 && lost[1].reason == RELOCK_ELOST,
      "watchdog hold whose key became a string: its lost callback", "called once, RELOCK_ELOST (the field is gone)",
      "%d call(s)%s%s", lost[1].calls, lost[1].calls ? ", " : "", lost[1].calls ? rc_name(lost[1].reason) : "");
  long long good_left = raw_exists(fx, "good", 4);
  row(lost[0].calls == 0 && good_left == 1, "the other lock, renewed in the same batch",
      "not lost, still in Redis after 5 lease periods", "%d lost call(s)%s%s, EXISTS %lld", lost[0].calls,
      lost[0].calls ? ", " : "", lost[0].calls ? rc_name(lost[0].reason) : "", good_left);
  relock_lock_free(good);
  relock_lock_free(victim);
  table_end();
}

/* ==========================================================================
 * a server answering scripts with errors
 * ==========================================================================*/

static relock_client_t *client_as(fx_t *fx, const char *user) {
  relock_options_t *cfg = fx_copy(fx->cfg);
  fx_set_str(cfg, RELOCK_OPT_USERNAME, user);
  fx_set_str(cfg, RELOCK_OPT_PASSWORD, "pw");
  relock_client_t *c = fx_client(cfg);
  relock_options_free(cfg);
  return c;
}

/* The user "nochan" (resetchannels): a subscription, and a wait, refused
 * at once with the server's NOPERM. */
static void channels_refused(fx_t *fx) {
  stage("user without channels");
  relock_client_t *c = client_as(fx, "nochan");
  relock_subscription_t *sub = NULL;
  row_fails("relock_client_subscribe_async, user with resetchannels",
            relock_client_subscribe_async(c, "ch", 2, ignore_message, NULL, &sub), RELOCK_ENOPERM, "NOPERM");
  relock_subscription_free(sub);
  relock_lock_t *l = lock_of(c, "acl");
  relock_lock_t *holder = lock_of(fx->a, "acl");
  must(ACQ(holder, 1, 0, 300));
  /* a refused SUBSCRIBE is the operator's to fix: said at once, not polled around */
  const int noperm[] = {RELOCK_ENOPERM, 0};
  row_fails_in("acquire(wait 3000) of a lock held for 300 ms, user with resetchannels", ACQ(l, 2, 3000, RELOCK_INFINITE),
               noperm, "NOPERM", 1000);
  relock_lock_free(holder);
  relock_lock_free(l);
  relock_client_free(c);
}

/* Before Redis 6.2 there are no channel permissions: "resetchannels" is
 * refused, and "nochan" (made without channel rules) may subscribe and
 * wait on any channel. */
static void any_channel_before_6_2(fx_t *fx) {
  char buf[512];
  stage("user without channel rules, before Redis 6.2 (no channel permissions there)");
  RAW(fx, buf, "ACL", "SETUSER", "nochan", "resetchannels");
  row(strncmp(buf, "-ERR", 4) == 0, "raw ACL SETUSER resetchannels, Redis before 6.2", "-ERR ...", "%.60s", buf);
  relock_client_t *c = client_as(fx, "nochan");
  relock_subscription_t *sub = NULL;
  char observed[400];
  out_t o = settle(relock_client_subscribe_async(c, "ch", 2, ignore_message, NULL, &sub), 10000);
  row(!o.null && o.err == 0, "relock_client_subscribe_async, user without channel rules", "subscribed", "%s",
      show(&o, observed, sizeof observed));
  relock_subscription_free(sub);
  relock_lock_t *l = lock_of(c, "acl");
  relock_lock_t *holder = lock_of(fx->a, "acl");
  must(ACQ(holder, 1, 0, 300));
  row_value("acquire(wait 3000) of a lock held for 300 ms, user without channel rules", ACQ(l, 2, 3000, 10000), 1);
  relock_lock_free(holder);
  relock_lock_free(l);
  relock_client_free(c);
}

static void test_server_errors_acl(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  table("server errors: ACL users without EVALSHA / EVAL, keys or channels");
  char buf[512];
  /* every channel ("&*") where the server has channel permissions (6.2+) */
  assert_int_equal(relock_test_redis_acl_user(fx->redis, "noscript", "on", ">pw", "~*", "+@all", "-evalsha", "-eval",
                                              NULL), 0);
  assert_int_equal(relock_test_redis_acl_user(fx->redis, "noeval", "on", ">pw", "~*", "+@all", "-eval", NULL), 0);
  assert_int_equal(relock_test_redis_acl_user(fx->redis, "nokeys", "on", ">pw", "~other:*", "+@all", NULL), 0);
  assert_int_equal(relock_test_redis_acl_user(fx->redis, "disabled", "off", ">pw", "~*", "+@all", NULL), 0);
  /* no channel: "resetchannels" (6.2+); before 6.2 there are no channel
   * permissions, every user may use every channel */
  int channel_rules = relock_test_redis_version(fx->redis) >= 60200;
  if (channel_rules)
    RAW(fx, buf, "ACL", "SETUSER", "nochan", "on", ">pw", "~*", "resetchannels", "+@all");
  else
    RAW(fx, buf, "ACL", "SETUSER", "nochan", "on", ">pw", "~*", "+@all");
  assert_string_equal(buf, "+OK\r\n");

  stage("user without EVALSHA and EVAL");
  relock_client_t *c = client_as(fx, "noscript");
  relock_lock_t *l = lock_of(c, "acl");
  row_fails("acquire, user -evalsha -eval", ACQ(l, 1, 0, RELOCK_INFINITE), RELOCK_ENOPERM, "NOPERM");
  const int server[] = {RELOCK_ENOPERM, 0};
  row_fails_in("acquire(wait -1), user -evalsha -eval", ACQ(l, 1, RELOCK_INFINITE, RELOCK_INFINITE), server, "NOPERM",
               1000);
  row_rc("relock_lock_lock(-1), user -evalsha -eval", relock_lock_lock(l, RELOCK_INFINITE), RELOCK_ENOPERM);
  row_fails("release, user -evalsha -eval", REL(l, 1), RELOCK_ENOPERM, "NOPERM");
  row_fails("force_release, user -evalsha -eval", relock_lock_force_unlock_async(l), RELOCK_ENOPERM, "NOPERM");
  row_value("is_locked (EXISTS), user -evalsha -eval", relock_lock_is_locked_async(l), 0);
  relock_lock_free(l);
  relock_client_free(c);

  stage("user without EVAL");
  RAW(fx, buf, "SCRIPT", "FLUSH");
  c = client_as(fx, "noeval");
  l = lock_of(c, "acl");
  row_fails("acquire, user -eval, script not cached (NOSCRIPT, then EVAL)", ACQ(l, 1, 0, RELOCK_INFINITE),
            RELOCK_ENOPERM, "NOPERM");
  relock_lock_t *la = lock_of(fx->a, "warm");
  must(ACQ(la, 1, 0, RELOCK_INFINITE)); /* the default user caches the scripts */
  must(REL(la, 1));
  relock_lock_free(la);
  row_value("acquire, user -eval, script cached by another client", ACQ(l, 1, 0, RELOCK_INFINITE), 1);
  row_value("release, user -eval, script cached", REL(l, 1), 1);
  relock_lock_free(l);
  relock_client_free(c);

  stage("user without the key");
  c = client_as(fx, "nokeys");
  l = lock_of(c, "acl");
  row_fails("acquire, user allowed only ~other:*", ACQ(l, 1, 0, RELOCK_INFINITE), RELOCK_ENOPERM, "NOPERM");
  row_fails("is_locked, user allowed only ~other:*", relock_lock_is_locked_async(l), RELOCK_ENOPERM, "NOPERM");
  relock_lock_free(l);
  relock_client_free(c);

  if (channel_rules)
    channels_refused(fx);
  else
    any_channel_before_6_2(fx);

  stage("disabled user");
  c = client_as(fx, "disabled");
  l = lock_of(c, "acl");
  row_fails("acquire, ACL user that is off", ACQ(l, 1, 0, RELOCK_INFINITE), RELOCK_EAUTH, NULL);
  relock_lock_free(l);
  relock_client_free(c);
  table_end();
}

static void test_server_errors_oom_and_readonly(void **state) {
  fx_t *fx = *state;
  fx_pair_clients(fx);
  table("server errors: maxmemory reached (noeviction), a read-only replica");
  char buf[512];
  relock_lock_t *held = lock_of(fx->a, "held"), *fresh = lock_of(fx->a, "fresh");
  must(ACQ(held, 1, 0, 60000));
  must(ACQ(fresh, 1, 0, RELOCK_INFINITE)); /* caches the scripts */
  must(REL(fresh, 1));

  stage("fill the server");
  RAW(fx, buf, "DEBUG", "POPULATE", "3000", "fill", "512");
  RAW(fx, buf, "CONFIG", "SET", "maxmemory-policy", "noeviction");
  RAW(fx, buf, "CONFIG", "SET", "maxmemory", "1mb");
  RAW(fx, buf, "SET", "probe", "x");
  row(strncmp(buf, "-OOM", 4) == 0, "raw SET on the full server", "-OOM ...", "%.60s", buf);

  stage("scripts under OOM");
  row_fails("acquire(owner 1), server full", ACQ(fresh, 1, 0, RELOCK_INFINITE), RELOCK_ESERVER, "OOM");
  const int server[] = {RELOCK_ESERVER, 0};
  row_fails_in("acquire(owner 1, wait 2000), server full", ACQ(fresh, 1, 2000, RELOCK_INFINITE), server, "OOM", 500);
  row_rc("relock_lock_try_lock, server full", relock_lock_try_lock(fresh, 0, RELOCK_INFINITE, NULL), RELOCK_ESERVER);
  row_fails("acquire(owner 1) again, held, reentrant, server full", ACQ(held, 1, 0, 60000), RELOCK_ESERVER, "OOM");
  row_value("acquire(owner 2) of the held lock, server full (no write needed)", ACQ(held, 2, 0, 60000), 0);
  row_fails("release(owner 1) of the held lock, server full", REL(held, 1), RELOCK_ESERVER, "OOM");
  row_value("hold_count(owner 1), server full", relock_lock_hold_count_async(held, 1), 1);
  const char *set[] = {"SET", "k", "v"};
  row_fails("plain SET, server full", relock_client_command_async(fx->a, 3, set, NULL), RELOCK_ESERVER, "OOM");
  /* The owner asked to release: it is let go at once (never renewed
   * again), its release retried in the background (docs/SAFETY.md,
   * "Letting go"). */
  row(fx->a->ledger.holds.count == 1 && relock_lock_validity_ms(held, 1) == RELOCK_ENOTOWNER,
      "holds tracked after the failures", "1 (owner 1 of \"held\", let go: validity RELOCK_ENOTOWNER)",
      "%zu, validity %lld", (size_t)fx->a->ledger.holds.count, (long long)relock_lock_validity_ms(held, 1));
  row_value("force_release (DEL is allowed), server full", relock_lock_force_unlock_async(held), 1);

  stage("memory back");
  RAW(fx, buf, "CONFIG", "SET", "maxmemory", "0");
  row_value("acquire(owner 1) once memory is back", ACQ(fresh, 1, 0, RELOCK_INFINITE), 1);
  row_value("release(owner 1)", REL(fresh, 1), 1);
  RAW(fx, buf, "FLUSHALL");

  stage("read-only replica");
  must(ACQ(held, 1, 0, 60000));
  int dead_port = relock_test_redis_port(fx->redis) == 1 ? 2 : 1;
  char port[16];
  snprintf(port, sizeof port, "%d", dead_port);
  RAW(fx, buf, "REPLICAOF", "127.0.0.1", port);
  row_fails("acquire, the server became a replica", ACQ(fresh, 1, 0, RELOCK_INFINITE), RELOCK_ESERVER, "READONLY");
  row_fails("release of a lock held before, the server is a replica", REL(held, 1), RELOCK_ESERVER, "READONLY");
  row_fails("force_release, the server is a replica", relock_lock_force_unlock_async(held), RELOCK_ESERVER,
            "READONLY");
  row_value("is_locked (a read), the server is a replica", relock_lock_is_locked_async(held), 1);
  row_fails("release(owner 2), not the holder, the server is a replica (no write needed)", REL(held, 2),
            RELOCK_ENOTOWNER, NULL);
  RAW(fx, buf, "REPLICAOF", "NO", "ONE");
  /* The refused release goes on in the background: once the server is a
   * master again it frees the lock, and the owner holds nothing more. */
  uint64_t t0 = relock__now_ns();
  long long exists = 1;
  while ((exists = fx_raw_int(fx->redis, "EXISTS", "held", NULL)) == 1 && fx_ms_since(t0) < fx_slack_ms(10000))
    fx_run_for(fx->a->loop, 20);
  row(exists == 0, "the refused release, retried in the background, once it is a master again", "the lock freed",
      "%s after %.0f ms", exists == 0 ? "freed" : "still held", fx_ms_since(t0));
  row_fails("release(owner 1) again, once it is a master again", REL(held, 1), RELOCK_ENOTOWNER, NULL);
  row_value("acquire once it is a master again", ACQ(fresh, 1, 0, RELOCK_INFINITE), 1);
  must(REL(fresh, 1));
  relock_lock_free(held);
  relock_lock_free(fresh);
  table_end();
}

/* ==========================================================================
 * a server that is not Redis
 * ==========================================================================*/

#define FAKE_MAX 16

/* A TCP listener in a process of its own (a thread would make every later
 * fork of the test unsafe) that says what it is told: bytes on accept, and a
 * fixed answer to every whole request it reads (or nothing), or it closes at
 * once. */
typedef struct {
  int lfd, port;
  int wake[2]; /* closing the write end stops the listener */
  pid_t pid;
  const char *greeting; /* written on accept (NULL: nothing) */
  size_t greeting_len;
  int close_on_accept;
  const char *answer;   /* written per whole request (NULL: never answers) */
  size_t answer_len;
  int fds[FAKE_MAX];
  size_t lens[FAKE_MAX];
  char bufs[FAKE_MAX][8192];
} fake_t;

static int line_number(const char *buf, size_t len, size_t *pos, char type, long long *v) {
  size_t p = *pos;
  if (p >= len || buf[p] != type)
    return 0;
  const char *nl = memchr(buf + p, '\n', len - p);
  if (nl == NULL)
    return 0;
  *v = strtoll(buf + p + 1, NULL, 10);
  *pos = (size_t)(nl - buf) + 1;
  return 1;
}

/* How many whole RESP requests ("*N" of "$len" strings) buf starts with. */
static int whole_requests(const char *buf, size_t len, size_t *used) {
  size_t p = 0;
  int n = 0;
  for (;;) {
    size_t q = p;
    long long argc, blen;
    if (!line_number(buf, len, &q, '*', &argc))
      break;
    int whole = 1;
    for (long long i = 0; i < argc && whole; i++) {
      if (!line_number(buf, len, &q, '$', &blen) || blen < 0 || q + (size_t)blen + 2 > len)
        whole = 0;
      else
        q += (size_t)blen + 2;
    }
    if (!whole)
      break;
    p = q;
    n++;
  }
  *used = p;
  return n;
}

static void fake_drop(fake_t *s, int i) {
  close(s->fds[i]);
  s->fds[i] = -1;
  s->lens[i] = 0;
}

static void fake_read(fake_t *s, int i) {
  size_t room = sizeof s->bufs[i] - s->lens[i];
  ssize_t n = recv(s->fds[i], s->bufs[i] + s->lens[i], room, 0);
  if (n <= 0) {
    fake_drop(s, i);
    return;
  }
  s->lens[i] += (size_t)n;
  size_t used = 0;
  int requests = whole_requests(s->bufs[i], s->lens[i], &used);
  for (int k = 0; k < requests && s->answer != NULL; k++)
    send(s->fds[i], s->answer, s->answer_len, MSG_NOSIGNAL);
  memmove(s->bufs[i], s->bufs[i] + used, s->lens[i] - used);
  s->lens[i] -= used;
  if (s->lens[i] == sizeof s->bufs[i])
    s->lens[i] = 0; /* garbage in: forget it */
}

static void fake_main(fake_t *s) {
  for (;;) {
    struct pollfd pfd[2 + FAKE_MAX];
    pfd[0] = (struct pollfd){s->wake[0], POLLIN, 0};
    pfd[1] = (struct pollfd){s->lfd, POLLIN, 0};
    for (int i = 0; i < FAKE_MAX; i++)
      pfd[2 + i] = (struct pollfd){s->fds[i], POLLIN, 0};
    if (poll(pfd, 2 + FAKE_MAX, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (pfd[0].revents != 0)
      break;
    if (pfd[1].revents & POLLIN) {
      int fd = accept(s->lfd, NULL, NULL);
      if (fd >= 0) {
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        if (s->greeting != NULL)
          send(fd, s->greeting, s->greeting_len, MSG_NOSIGNAL);
        int slot = -1;
        for (int i = 0; i < FAKE_MAX && slot < 0; i++)
          if (s->fds[i] < 0)
            slot = i;
        if (s->close_on_accept || slot < 0)
          close(fd);
        else
          s->fds[slot] = fd;
      }
    }
    for (int i = 0; i < FAKE_MAX; i++)
      if (s->fds[i] >= 0 && pfd[2 + i].revents != 0)
        fake_read(s, i);
  }
  for (int i = 0; i < FAKE_MAX; i++)
    if (s->fds[i] >= 0)
      fake_drop(s, i);
}

static fake_t *fake_start(const char *greeting, size_t greeting_len, int close_on_accept, const char *answer,
                          size_t answer_len) {
  fake_t *s = calloc(1, sizeof(*s));
  assert_non_null(s);
  for (int i = 0; i < FAKE_MAX; i++)
    s->fds[i] = -1;
  s->greeting = greeting;
  s->greeting_len = greeting_len;
  s->close_on_accept = close_on_accept;
  s->answer = answer;
  s->answer_len = answer_len;
  s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(s->lfd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(s->lfd, 64), 0);
  assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &alen), 0);
  s->port = ntohs(a.sin_port);
  assert_int_equal(pipe(s->wake), 0);
  fflush(stdout);
  fflush(stderr);
  s->pid = fork();
  assert_true(s->pid >= 0);
  if (s->pid == 0) {
    alarm(0);
    quiet_valgrind();
    close(s->wake[1]);
    fake_main(s);
    _exit(0);
  }
  close(s->wake[0]);
  close(s->lfd);
  return s;
}

static void fake_stop(fake_t *s) {
  close(s->wake[1]);
  waitpid(s->pid, NULL, 0);
  free(s);
}

typedef struct {
  const char *label;
  const char *greeting;
  size_t greeting_len;
  int close_on_accept;
  const char *answer;
  size_t answer_len;
  int ping_succeeds; /* 1: the answer is a fine reply to PING; 2: it may be (timing) */
  int codes[5];
} fake_case_t;

#define S(lit) lit, sizeof(lit) - 1

/* One line per operation: "<op> <code> <ms> <message>". */
static void report(int fd, const char *op, relock_future_t *f) {
  uint64_t t0 = relock__now_ns();
  int r = f != NULL ? relock_future_wait(f, 10000) : 1;
  if (r == RELOCK_EPENDING)
    relock_future_cancel(f);
  dprintf(fd, "%s %d %.0f %s\n", op, r, fx_ms_since(t0), f != NULL ? relock_future_message(f) : "NULL");
  relock_future_release(f);
}

/* Talks to the fake server from a child: hiredis may abort the process on
 * some replies, and that is an observation, not the end of the test. */
static void child_not_redis(int fd, void *arg) {
  relock_client_t *c = relock_client_new(NULL, arg, NULL);
  relock_lock_t *l = relock_lock_new(c, "nr", NULL);
  report(fd, "acquire", relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE));
  report(fd, "release", relock_lock_unlock_async(l, 1));
  uint64_t t0 = relock__now_ns();
  int rc = relock_lock_lock(l, RELOCK_INFINITE);
  dprintf(fd, "lock %d %.0f -\n", rc, fx_ms_since(t0));
  report(fd, "ping", relock_client_commandf_async(c, "PING"));
  relock_subscription_t *sub = NULL;
  report(fd, "subscribe", relock_client_subscribe_async(c, "ch", 2, ignore_message, NULL, &sub));
  relock_subscription_free(sub);
  relock_lock_free(l);
  t0 = relock__now_ns();
  relock_client_free(c);
  dprintf(fd, "free 0 %.0f -\n", fx_ms_since(t0));
}

/* The child's line for op: code and time; 0 if it never wrote one. */
static int child_line(const fate_t *f, const char *op, int *code, double *ms, char *msg, size_t size) {
  for (const char *p = f->out; *p != '\0';) {
    size_t n = strcspn(p, "\n");
    size_t oplen = strlen(op);
    if (n > oplen && strncmp(p, op, oplen) == 0 && p[oplen] == ' ') {
      char line[600];
      snprintf(line, sizeof line, "%.*s", (int)n, p);
      int used = 0;
      if (sscanf(line + oplen + 1, "%d %lf %n", code, ms, &used) >= 2) {
        snprintf(msg, size, "%s", line + oplen + 1 + used);
        return 1;
      }
    }
    p += n;
    if (*p == '\n')
      p++;
  }
  return 0;
}

static void not_redis_row(const fake_case_t *fc, const fate_t *f, const char *op, const char *what,
                          const int *codes, int may_succeed, int64_t bound_ms) {
  char input[200], expected[200] = "", observed[800], msg[400];
  snprintf(input, sizeof input, "%s: %s", what, fc->label);
  if (may_succeed)
    snprintf(expected, sizeof expected, "0");
  for (const int *c = codes; *c != 0; c++)
    snprintf(expected + strlen(expected), sizeof expected - strlen(expected), "%s%s",
             expected[0] != '\0' ? " or " : "", rc_name(*c));
  snprintf(expected + strlen(expected), sizeof expected - strlen(expected), ", < %lld ms, no crash",
           (long long)fx_slack_ms(bound_ms));
  int code = 0;
  double ms = 0;
  if (!child_line(f, op, &code, &ms, msg, sizeof msg)) {
    char why[700];
    row(0, input, expected, "never finished: child %s", fate_show(f, why, sizeof why));
    return;
  }
  int ok = ((may_succeed && code == 0) || in_codes(code, codes)) && ms < (double)fx_slack_ms(bound_ms);
  snprintf(observed, sizeof observed, "%s%s%s (%.0f ms)", code == 1 ? "NULL" : rc_name(code),
           strcmp(msg, "-") != 0 && code != 0 ? ": " : "", strcmp(msg, "-") != 0 && code != 0 ? msg : "", ms);
  row(ok, input, expected, "%s", observed);
}

/* hiredis 0.14 refuses replies nested deeper than 7 levels (a protocol
 * error); 1.x reads them: a fine, if odd, answer to PING. */
#if defined(HIREDIS_MAJOR) && HIREDIS_MAJOR >= 1
#define NESTED_20_IS_A_REPLY 1
#else
#define NESTED_20_IS_A_REPLY 0
#endif

static void test_not_redis(void **state) {
  fx_t *fx = *state;
  table("a server that is not Redis (a TCP listener saying the wrong things; the client runs in a child)");
  static const char binary[] = "\x00\x01\x02\xff\xfe\r\n\x7f garbage \x80\x81";
  /* Where every request is answered with garbage, a request can also time
   * out waiting behind the reconnects that the garbage causes (an earlier
   * failed acquisition's undo goes first): RELOCK_ETIMEDOUT. */
  static const fake_case_t cases[] = {
      {"HTTP error page on accept", S("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"), 0, NULL, 0, 0,
       {RELOCK_ECONNLOST, RELOCK_EPROTO, 0}},
      {"binary garbage on accept", binary, sizeof binary - 1, 0, NULL, 0, 0, {RELOCK_ECONNLOST, RELOCK_EPROTO, 0}},
      {"binary garbage for every request", NULL, 0, 0, binary, sizeof binary - 1, 0,
       {RELOCK_ECONNLOST, RELOCK_EPROTO, RELOCK_ETIMEDOUT, 0}},
      {"accept, then close at once", NULL, 0, 1, NULL, 0, 0,
       {RELOCK_ECONNLOST, RELOCK_ECONNREFUSED, RELOCK_ETIMEDOUT, 0}},
      {"\"-ERR max number of clients reached\" on accept, then close", S("-ERR max number of clients reached\r\n"), 1,
       NULL, 0, 0, {RELOCK_ECONNLOST, RELOCK_ECONNREFUSED, RELOCK_ETIMEDOUT, RELOCK_ESERVER, 0}},
      /* the command times out, or the health check's PING (sent on the idle
       * connection) finds the server dead first: RELOCK_ECONNLOST */
      {"accepts, never answers", NULL, 0, 0, NULL, 0, 0, {RELOCK_ETIMEDOUT, RELOCK_ECONNLOST, 0}},
      {"\"+OK\" to every request", NULL, 0, 0, S("+OK\r\n"), 1, {RELOCK_EPROTO, 0}},
      {"two replies (\"+OK\" \"+OK\") to every request", NULL, 0, 0, S("+OK\r\n+OK\r\n"), 1,
       {RELOCK_EPROTO, RELOCK_ECONNLOST, 0}},
      {"\"+OK POP3 server ready\" greeting, \"-ERR\" to requests", S("+OK POP3 server ready\r\n"), 0,
       S("-ERR unknown command\r\n"), 2, {RELOCK_EPROTO, RELOCK_ECONNLOST, RELOCK_ESERVER, 0}},
      {"an array of 2^63-1 elements", NULL, 0, 0, S("*9223372036854775807\r\n"), 0,
       {RELOCK_ECONNLOST, RELOCK_EPROTO, RELOCK_ETIMEDOUT, 0}},
      {"a 10^12-byte string announced, never sent", NULL, 0, 0, S("$1000000000000\r\n"), 0,
       {RELOCK_ECONNLOST, RELOCK_EPROTO, RELOCK_ETIMEDOUT, 0}},
      {"a negative bulk length", NULL, 0, 0, S("$-5\r\n"), 0, {RELOCK_ECONNLOST, RELOCK_EPROTO, RELOCK_ETIMEDOUT, 0}},
      {"arrays nested 20 deep", NULL, 0, 0,
       S("*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n"
         "*1\r\n*1\r\n:1\r\n"),
       NESTED_20_IS_A_REPLY, {RELOCK_ECONNLOST, RELOCK_EPROTO, RELOCK_ETIMEDOUT, 0}},
  };
  /* RELOCK_ESERVER: the fake answered the SUBSCRIBE with an error reply */
  const int sub_codes[] = {RELOCK_ECONNLOST, RELOCK_EPROTO, RELOCK_ETIMEDOUT, RELOCK_ECONNREFUSED, RELOCK_ESERVER, 0};
  const int none[] = {0};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const fake_case_t *fc = &cases[i];
    stage(fc->label);
    fake_t *s = fake_start(fc->greeting, fc->greeting_len, fc->close_on_accept, fc->answer, fc->answer_len);
    relock_options_t *cfg = fx_copy(fx->cfg);
    fx_set_str(cfg, RELOCK_OPT_UNIX_PATH, NULL);
    fx_set_str(cfg, RELOCK_OPT_HOST, "127.0.0.1");
    fx_set_int(cfg, RELOCK_OPT_PORT, s->port);
    fx_set_ms(cfg, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(300));
    fx_set_ms(cfg, RELOCK_OPT_CONNECT_TIMEOUT, fx_slack_ms(300));
    fx_set_int(cfg, RELOCK_OPT_RETRY_ATTEMPTS, 1);
    fx_set_ms(cfg, RELOCK_OPT_RETRY_INTERVAL, 50);
    fate_t fate = probe(child_not_redis, cfg, 60000);
    relock_options_free(cfg);
    fake_stop(s);
    /* two attempts of 300 ms, a back-off and connecting: a few seconds at most */
    not_redis_row(fc, &fate, "acquire", "acquire(wait 0)", fc->codes, 0, 3000);
    not_redis_row(fc, &fate, "release", "release", fc->codes, 0, 3000);
    not_redis_row(fc, &fate, "lock", "relock_lock_lock(-1) (blocking, no deadline)", fc->codes, 0, 3000);
    not_redis_row(fc, &fate, "ping", "plain PING", fc->ping_succeeds == 1 ? none : fc->codes, fc->ping_succeeds,
                  3000);
    not_redis_row(fc, &fate, "subscribe", "relock_client_subscribe_async", sub_codes, 0, 3000);
    not_redis_row(fc, &fate, "free", "relock_client_free", none, 1, 1000);
  }
  table_end();
}

/* ==========================================================================
 * malformed URLs
 * ==========================================================================*/

static void test_malformed_urls(void **state) {
  (void)state;
  table("malformed URLs (relock_options_set_url): RELOCK_EINVAL, options unchanged, no password in the message");
  static const char *const urls[] = {
      "",
      "redis",
      "redis:",
      "redis:/",
      "redis:/host",
      "://host",
      "http://host:6379",
      "redis+sentinel://host",
      "1redis://host",
      "redis://",
      "redis://:6379",
      "redis://host:",
      "redis://host:0",
      "redis://host:65536",
      "redis://host:-1",
      "redis://host:abc",
      "redis://host:99999999999999999999",
      "redis://host:6379:6380",
      "redis://host/abc",
      "redis://host/-1",
      "redis://host/2147483648",
      "redis://host/0/extra",
      "redis://host?db=1",
      "redis://host#frag",
      "redis://user@host",
      "redis://:@host",
      "redis://user:@host",
      "redis://:pa%zzss@host",
      "redis://:pa%00ss@host",
      "redis://:pass%2@host",
      "redis://:pa/ss@host",
      "redis://ho st",
      "redis://host\x01",
      "redis://h\xc3\xa9te",
      "redis://h*st",
      "redis://[::1",
      "redis://[]:6379",
      "redis://[zz::1]",
      "redis://[1.2.3.4]",
      "redis://[::1]x",
      "redis://[fe80::1%eth0]",
      "redis://::1:6379",
      "unix://",
      "unix://relative/path",
      "unix:///",
      "unix:///tmp/dir/",
      "unix:///tmp/r.sock?",
      "unix:///tmp/r.sock?db=abc",
      "unix:///tmp/r.sock?db=",
      "unix:///tmp/r.sock?db=1&db=2",
      "unix:///tmp/r.sock?foo=1",
      "unix:///tmp/r.sock?username=u",
      "unix:///tmp/r.sock?password=",
      "unix:///tmp/r.sock?&",
      "unix:///tmp/r.sock?password=pw&x=1",
  };
  relock_options_t *cfg = relock_options_new(NULL);
  const char *host0 = NULL, *s = NULL;
  relock_options_get_string(cfg, RELOCK_OPT_HOST, &host0, NULL);
  for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
    stage(urls[i]);
    relock_error_t err;
    memset(&err, 0, sizeof err);
    int rc = relock_options_set_url(cfg, urls[i], &err);
    int port = 0, db = -1, unchanged = 1;
    relock_options_get_int(cfg, RELOCK_OPT_PORT, &port, NULL);
    relock_options_get_int(cfg, RELOCK_OPT_DB, &db, NULL);
    relock_options_get_string(cfg, RELOCK_OPT_HOST, &s, NULL);
    unchanged = unchanged && s == host0 && port == 6379 && db == 0;
    static const char *const unset[] = {RELOCK_OPT_UNIX_PATH, RELOCK_OPT_PASSWORD, RELOCK_OPT_USERNAME};
    for (size_t u = 0; u < 3; u++) {
      relock_options_get_string(cfg, unset[u], &s, NULL);
      unchanged = unchanged && s == NULL;
    }
    char input[200];
    snprintf(input, sizeof input, "\"%s\"", urls[i]);
    row(rc == RELOCK_EINVAL && err.code == RELOCK_EINVAL && err.message[0] != '\0' && unchanged, input,
        "RELOCK_EINVAL + message, options unchanged", "%s: %s%s", rc_name(rc), err.message,
        unchanged ? "" : " (options CHANGED)");
  }
  stage("secrets stay out of messages");
  static const char *const secret_urls[] = {
      "redis://:s3cr3t@host:bad",
      "redis://user:s3cr3t@host/notadb",
      "redis://:s3cr3t%zz@host",
      "redis://:s3cr3t@host?x",
      "unix:///tmp/r.sock?password=s3cr3t&db=x",
      "unix:///tmp/r.sock?password=s3cr3t&bogus=1",
      "redis://s3cr3t@host",
  };
  for (size_t i = 0; i < sizeof secret_urls / sizeof secret_urls[0]; i++) {
    relock_error_t err;
    memset(&err, 0, sizeof err);
    int rc = relock_options_set_url(cfg, secret_urls[i], &err);
    char input[200];
    snprintf(input, sizeof input, "\"%s\"", secret_urls[i]);
    row(rc == RELOCK_EINVAL && strstr(err.message, "s3cr3t") == NULL, input,
        "RELOCK_EINVAL, \"s3cr3t\" not in the message", "%s: %s", rc_name(rc), err.message);
  }
  stage("huge URLs");
  size_t n = (size_t)1 << 20;
  char *huge = malloc(n + 32);
  assert_non_null(huge);
  memset(huge, 'x', n);
  huge[n] = '\0';
  relock_error_t err;
  int rc = relock_options_set_url(cfg, huge, &err);
  row(rc == RELOCK_EINVAL, "1 MiB of \"x\", no scheme", "RELOCK_EINVAL", "%s: %.80s", rc_name(rc), err.message);
  memcpy(huge, "redis://:", 9);
  memcpy(huge + n - 8, "@h:99999", 9);
  rc = relock_options_set_url(cfg, huge, &err);
  row(rc == RELOCK_EINVAL && strstr(err.message, "xxxxxxxx") == NULL,
      "redis:// with a 1 MiB password and port 99999", "RELOCK_EINVAL, password not quoted", "%s: %.80s", rc_name(rc),
      err.message);
  memcpy(huge, "unix:///", 8);
  huge[n] = '\0';
  rc = relock_options_set_url(cfg, huge, &err);
  row(rc == RELOCK_EINVAL, "unix:// with a 1 MiB socket path", "RELOCK_EINVAL (longer than sun_path)", "%s: %.80s",
      rc_name(rc), err.message);
  free(huge);
  relock_options_free(cfg);
  table_end();
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_invalid_args_futures_and_errors),
      T(test_invalid_args_client),
      T(test_invalid_args_lock),
      T(test_future_released_twice),
      T(test_lock_names),
      T(test_durations),
      T(test_huge_configured_durations),
      T(test_owners),
      T(test_release_misuse),
      T(test_after_close),
      T(test_wrong_types),
      T(test_server_errors_acl),
      T(test_server_errors_oom_and_readonly),
      T(test_not_redis),
      T(test_malformed_urls),
  };
#undef T
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found: install the Debian package redis-server");
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("abuse", tests, NULL, NULL);
}
