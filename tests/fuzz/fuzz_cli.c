/* libFuzzer target: the relock command line. The input is an argument
 * vector, the arguments separated by NUL bytes (a NUL at the very end ends
 * the last one; "\0\0" makes an empty argument); the target puts "relock" in
 * front as argv[0].
 *
 * Every argument goes to parse_duration, whose result must be refused, or
 * lie between 0 and a year; and which must match, for text in the documented
 * form DIGITS[.DIGITS][ms|s|m|h], the exact value rounded up to a whole
 * millisecond, computed here in rational arithmetic (refused when over a
 * year), and refuse everything else. An accepted value written back as
 * "<ms>ms" parses to itself.
 *
 * The vector goes to args_parse, twice, with the same result both times
 * (getopt's state is reset): argv is not reordered; a usage error has a
 * message; a parse that succeeds has a non-empty lock name taken from argv,
 * durations in their ranges, and for a command run a command that is a
 * non-empty tail of argv after NAME --; for status and list the
 * name last after the mode's word, or with --json before or after it;
 * --json for no other mode; latch NAME and its operation (set with a count
 * in range) last; --semaphore N in range, only to run a command; top
 * with its PATTERN from argv after the word "top" (or "*" when none is
 * given), --interval and -n in their ranges and for top alone. */
#include <ctype.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <relock/common.h>

#include "args.h"
#include "duration.h"
#include "fuzz.h"

#define MAX_MS INT64_C(31622400000) /* 366 days */

/* -- durations ------------------------------------------------------------------*/

/* The documented form, evaluated in exact rational arithmetic (differently
 * from duration.c): 0 when text is not in that form, else 1 with the range
 * [*lo, *hi] the rounded-up value must be in (one value unless the fraction
 * has more than 25 digits), INT64_MAX standing for "over a year". */
static int expected_duration(const char *text, int64_t *lo, int64_t *hi) {
  const char *p = text;
  size_t int_digits = strspn(p, "0123456789");
  if (int_digits == 0)
    return 0;
  const char *frac = p + int_digits;
  size_t frac_digits = 0;
  if (*frac == '.') {
    frac++;
    frac_digits = strspn(frac, "0123456789");
    if (frac_digits == 0)
      return 0;
  }
  const char *unit = frac + frac_digits;
  int64_t scale;
  if (strcmp(unit, "") == 0 || strcmp(unit, "s") == 0)
    scale = 1000;
  else if (strcmp(unit, "ms") == 0)
    scale = 1;
  else if (strcmp(unit, "m") == 0)
    scale = 60000;
  else if (strcmp(unit, "h") == 0)
    scale = 3600000;
  else
    return 0;

  /* Past 12 significant digits the whole part is over a year in any unit. */
  while (int_digits > 1 && *p == '0')
    p++, int_digits--;
  if (int_digits > 12) {
    *lo = *hi = INT64_MAX;
    return 1;
  }
  __int128 whole = 0;
  for (size_t i = 0; i < int_digits; i++)
    whole = whole * 10 + (p[i] - '0');

  /* fraction = f / den, f of its first 25 digits; "beyond" if more follow
   * that are not all zero. */
  size_t k = frac_digits < 25 ? frac_digits : 25;
  __int128 f = 0, den = 1;
  for (size_t i = 0; i < k; i++)
    f = f * 10 + (frac[i] - '0'), den *= 10;
  int beyond = strspn(frac + k, "0") < frac_digits - k;
  __int128 num = f * scale, low, high;
  if (!beyond) {
    low = high = num / den + (num % den != 0);
  } else { /* f / den < fraction < (f + 1) / den */
    low = num / den + 1;
    high = ((f + 1) * scale) / den + (((f + 1) * scale) % den != 0);
  }
  low += whole * scale;
  high += whole * scale;
  *lo = low > MAX_MS ? INT64_MAX : (int64_t)low;
  *hi = high > MAX_MS ? INT64_MAX : (int64_t)high;
  return 1;
}

static void check_duration(const char *text) {
  int64_t ms = -12345;
  int rc = parse_duration(text, &ms);
  FUZZ_CHECK(rc == 0 || rc == -1);
  if (rc != 0)
    FUZZ_CHECK(ms == -12345);
  else
    FUZZ_CHECK(ms >= 0 && ms <= MAX_MS && isdigit((unsigned char)text[0]));

  int64_t lo, hi;
  if (!expected_duration(text, &lo, &hi)) {
    if (rc == 0)
      fprintf(stderr, "\"%s\" is not a duration, but was read as %lld ms\n", text, (long long)ms);
    FUZZ_CHECK(rc != 0);
  } else if (lo == INT64_MAX) {
    if (rc == 0)
      fprintf(stderr, "\"%s\" is over a year, but was read as %lld ms\n", text, (long long)ms);
    FUZZ_CHECK(rc != 0);
  } else if (hi != INT64_MAX) {
    if (rc != 0 || ms < lo || ms > hi)
      fprintf(stderr, "\"%s\": wanted %lld ms, got %s%lld\n", text, (long long)lo, rc != 0 ? "refused " : "",
              (long long)ms);
    FUZZ_CHECK(rc == 0 && ms >= lo && ms <= hi);
  }

  if (rc == 0) {
    char again[32];
    int64_t back = -1;
    snprintf(again, sizeof again, "%lldms", (long long)ms);
    FUZZ_CHECK(parse_duration(again, &back) == 0 && back == ms);
  }
}

/* -- the command line -------------------------------------------------------------*/

static int duration_ok(int64_t ms, int64_t unset, int64_t min) {
  return ms == unset || (ms >= min && ms <= MAX_MS);
}

/* Whether p points into one of argv's strings. */
static int in_argv(int argc, char **argv, const char *p) {
  for (int i = 1; i < argc; i++)
    if (p >= argv[i] && p <= argv[i] + strlen(argv[i]))
      return 1;
  return 0;
}

static void check_parsed(int argc, char **argv, int rc, const args_t *a) {
  FUZZ_CHECK(rc == ARGS_OK || rc == ARGS_USAGE || rc == ARGS_HELP || rc == ARGS_VERSION);
  if (rc == ARGS_USAGE)
    FUZZ_CHECK(a->message != NULL && a->message[0] != '\0');
  else
    FUZZ_CHECK(a->message == NULL);
  if (rc != ARGS_OK)
    return;

  const options_t *o = &a->opt;
  FUZZ_CHECK(duration_ok(o->wait_ms, RELOCK_INFINITE, 0));
  FUZZ_CHECK(duration_ok(o->lease_ms, RELOCK_INFINITE, 1));
  FUZZ_CHECK(duration_ok(o->grace_ms, 10000, 0));
  FUZZ_CHECK(duration_ok(o->timeout_ms, 0, 1));
  FUZZ_CHECK(duration_ok(o->watchdog_ms, 0, 1));
  FUZZ_CHECK(o->verbosity >= 0 && o->verbosity <= 2 && (o->force == 0 || o->force == 1));
  FUZZ_CHECK(o->json == 0 || (o->json == 1 && (a->mode == ARGS_STATUS || a->mode == ARGS_LIST)));
  FUZZ_CHECK(o->url == NULL || in_argv(argc, argv, o->url));
  FUZZ_CHECK(o->url_file == NULL || in_argv(argc, argv, o->url_file));
  FUZZ_CHECK(o->orphan_signal > 0 && o->orphan_signal < NSIG);
  /* --semaphore N, --rsemaphore N: 1 to 2^31 - 1, for running a command on the plain kind; the
   * RSemaphore's permits without a lease */
  FUZZ_CHECK(o->semaphore >= 0 && o->semaphore <= INT32_MAX);
  FUZZ_CHECK(o->semaphore == 0 || (a->mode == ARGS_RUN && o->kind == KIND_LOCK));
  FUZZ_CHECK(!o->rsemaphore || (o->semaphore > 0 && o->lease_ms == RELOCK_INFINITE));

  /* top's --interval (at least TOP_MIN_INTERVAL_MS) and -n (1 to 2^31 - 1), for top alone */
  FUZZ_CHECK(o->interval_ms == 0 || (o->interval_ms >= TOP_MIN_INTERVAL_MS && o->interval_ms <= MAX_MS));
  FUZZ_CHECK(o->refreshes >= 0 && o->refreshes <= INT32_MAX);
  FUZZ_CHECK(a->mode == ARGS_TOP || (o->interval_ms == 0 && o->refreshes == 0));

  FUZZ_CHECK(a->name != NULL && a->name[0] != '\0');
  int name_at = 0;
  for (int i = 1; i < argc; i++)
    if (argv[i] == a->name)
      name_at = i;
  FUZZ_CHECK(name_at > 0 || (a->mode == ARGS_TOP && strcmp(a->name, "*") == 0));
  switch (a->mode) {
  case ARGS_RUN: {
    FUZZ_CHECK(a->command != NULL && a->command > argv && a->command < argv + argc);
    ptrdiff_t at = a->command - argv;
    /* NAME -- COMMAND: without the --, a mistyped subcommand would be a lock name */
    FUZZ_CHECK(at == name_at + 2 && strcmp(argv[name_at + 1], "--") == 0);
    break;
  }
  case ARGS_STATUS:
  case ARGS_LIST: {
    /* WORD NAME, WORD --json NAME or WORD NAME --json (not WORD -- --json) */
    const char *word = a->mode == ARGS_STATUS ? "status" : "list";
    int after = name_at == argc - 2 && strcmp(argv[argc - 1], "--json") == 0;
    FUZZ_CHECK(a->command == NULL && (name_at == argc - 1 || after));
    int at = name_at - 1, before = at > 1 && strcmp(argv[at], "--json") == 0 && strcmp(argv[at - 1], word) == 0;
    FUZZ_CHECK(strcmp(argv[at], word) == 0 || before);
    FUZZ_CHECK(!(after && before) && (!after || strcmp(argv[name_at], "--") != 0));
    FUZZ_CHECK(!(after || before) || o->json == 1);
    break;
  }
  case ARGS_RELEASE:
    FUZZ_CHECK(a->command == NULL && name_at == argc - 1 && o->force == 1);
    break;
  case ARGS_LATCH: {
    /* latch NAME count|down|await, or latch NAME set N (N: 1 to 2^31 - 1) */
    int set = strcmp(a->latch_op, "set") == 0;
    FUZZ_CHECK(a->command == NULL && name_at >= 2 && strcmp(argv[name_at - 1], "latch") == 0);
    FUZZ_CHECK(name_at == argc - (set ? 3 : 2) && a->latch_op == argv[name_at + 1]);
    FUZZ_CHECK(set ? a->latch_count >= 1 && a->latch_count <= INT32_MAX
                   : strcmp(a->latch_op, "count") == 0 || strcmp(a->latch_op, "down") == 0 ||
                         strcmp(a->latch_op, "await") == 0);
    FUZZ_CHECK(o->kind == KIND_LOCK);
    break;
  }
  case ARGS_TOP: {
    /* top [PATTERN] [its options]: the pattern after the word, not "--" right after it */
    int word = 0;
    for (int i = 1; i < argc && word == 0; i++)
      if (strcmp(argv[i], "top") == 0)
        word = i;
    FUZZ_CHECK(a->command == NULL && word > 0 && (name_at == 0 || name_at > word) && o->kind == KIND_LOCK);
    FUZZ_CHECK(word == argc - 1 || strcmp(argv[word + 1], "--") != 0);
    break;
  }
  default: FUZZ_CHECK(!"a mode args.h does not have");
  }
}

static int same_args(const args_t *a, const args_t *b) {
  const options_t *x = &a->opt, *y = &b->opt;
  return x->url == y->url && x->url_file == y->url_file && x->wait_ms == y->wait_ms && x->lease_ms == y->lease_ms &&
         x->grace_ms == y->grace_ms && x->timeout_ms == y->timeout_ms && x->watchdog_ms == y->watchdog_ms &&
         x->verbosity == y->verbosity && x->force == y->force && x->json == y->json && a->mode == b->mode && a->name == b->name &&
         a->command == b->command && x->semaphore == y->semaphore && x->rsemaphore == y->rsemaphore &&
         a->latch_op == b->latch_op && a->latch_count == b->latch_count && x->interval_ms == y->interval_ms &&
         x->refreshes == y->refreshes &&
         (a->message == NULL ? b->message == NULL : b->message != NULL && strcmp(a->message, b->message) == 0);
}

static void check_args(int argc, char **argv) {
  char **before = malloc(((size_t)argc + 1) * sizeof *before);
  FUZZ_CHECK(before != NULL);
  memcpy(before, argv, ((size_t)argc + 1) * sizeof *before);

  args_t a, b;
  int rc = args_parse(argc, argv, &a);
  FUZZ_CHECK(memcmp(before, argv, ((size_t)argc + 1) * sizeof *before) == 0);
  check_parsed(argc, argv, rc, &a);
  FUZZ_CHECK(args_parse(argc, argv, &b) == rc && same_args(&a, &b));
  args_cleanup(&a);
  args_cleanup(&b);
  FUZZ_CHECK(a.message == NULL);
  free(before);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* "relock", the arguments and a NUL for each, and a NULL pointer after them */
  char *text = malloc(sizeof "relock" + size + 1);
  FUZZ_CHECK(text != NULL);
  memcpy(text, "relock", sizeof "relock");
  char *args = text + sizeof "relock";
  memcpy(args, data, size);
  args[size] = '\0';
  int nargs = 0; /* a NUL ends an argument; so does the end of the input */
  for (size_t i = 0; i < size; i++)
    nargs += data[i] == '\0' || i == size - 1;

  char **argv = malloc(((size_t)nargs + 2) * sizeof *argv);
  FUZZ_CHECK(argv != NULL);
  argv[0] = text;
  char *p = args;
  for (int i = 1; i <= nargs; i++) {
    argv[i] = p;
    p += strlen(p) + 1;
  }
  argv[nargs + 1] = NULL;

  for (int i = 1; i <= nargs; i++)
    check_duration(argv[i]);
  check_args(nargs + 1, argv);
  free(argv);
  free(text);
  return 0;
}
