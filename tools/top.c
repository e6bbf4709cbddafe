/* relock top [PATTERN]: a live view of the locks matching PATTERN, looked
 * at again every --interval (snapshot.c gathers, this file shows). On a
 * terminal: a full screen redrawn in place with ANSI escapes, keys read raw
 * (term.c gives the terminal back on q and on the signals). Otherwise: plain lines, a header and a line per lock per look,
 * for a pipe or a log.
 *
 * "Held for" is what top itself saw: Redis keeps no time of acquisition,
 * so a hold's age is counted from the first look that found the lock held
 * by the same holders; a hold already there at top's start shows ">=". */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "json.h"
#include "snapshot.h"
#include "term.h"

/* What top remembers of a hold between looks. */
typedef struct seen {
  char *name;
  size_t len;
  char *holders;
  int64_t since_ms;  /* monotonic: the first look that saw these holders */
  int at_start;      /* held so at top's first look: held for at least that */
} seen_t;

typedef enum sort_key { SORT_WAITERS, SORT_AGE, SORT_NAME, SORT_TTL } sort_key_t;

typedef struct top {
  cli_t *c;
  int tty;              /* stdout is a terminal: the full-screen view */
  int keys;             /* stdin is a terminal too: keys are read */
  snapshot_t snap;      /* the last look */
  int failed;           /* the last look failed */
  seen_t *seen;         /* by name, sorted */
  size_t nseen;
  int64_t now_ms;       /* monotonic, at the last look */
  int64_t looks;
  int seen_once;        /* a look has worked: holds found later began after top's start */
  sort_key_t sort;
  int reverse;
  int64_t interval_ms;
} top_t;

static const char *const sort_names[] = {"waiters", "age", "name", "ttl"};

#define MAX_WIDTH 1000 /* columns drawn at most; a wider terminal's rest stays blank */

/* -- what top saw ---------------------------------------------------------------*/

static int64_t monotonic_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int by_name(const char *a, size_t alen, const char *b, size_t blen) {
  int d = memcmp(a, b, alen < blen ? alen : blen);
  return d != 0 ? d : (alen > blen) - (alen < blen);
}

static int seen_cmp(const void *pa, const void *pb) {
  const seen_t *a = pa, *b = pb;
  return by_name(a->name, a->len, b->name, b->len);
}

static const seen_t *find_seen(const top_t *t, const lock_row_t *row) {
  size_t lo = 0, hi = t->nseen;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int d = by_name(row->name, row->len, t->seen[mid].name, t->seen[mid].len);
    if (d == 0)
      return &t->seen[mid];
    if (d < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

static void free_seen(seen_t *seen, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(seen[i].name);
    free(seen[i].holders);
  }
  free(seen);
}

/* The holds of the new look: those with the same holders as before keep
 * their time; the others start now. Locks gone are forgotten. */
static void remember(top_t *t) {
  seen_t *next = calloc(t->snap.n + 1, sizeof *next);
  if (next == NULL)
    return; /* ages start again at the next look */
  size_t n = 0;
  for (size_t i = 0; i < t->snap.n; i++) {
    const lock_row_t *row = &t->snap.rows[i];
    const seen_t *old = find_seen(t, row);
    seen_t *s = &next[n];
    s->name = malloc(row->len + 1);
    s->holders = strdup(row->holders);
    if (s->name == NULL || s->holders == NULL) {
      free(s->name);
      free(s->holders);
      continue;
    }
    memcpy(s->name, row->name, row->len + 1);
    s->len = row->len;
    if (old != NULL && strcmp(old->holders, row->holders) == 0) {
      s->since_ms = old->since_ms;
      s->at_start = old->at_start;
    } else {
      s->since_ms = t->now_ms;
      s->at_start = !t->seen_once;
    }
    n++;
  }
  qsort(next, n, sizeof *next, seen_cmp);
  t->seen_once = 1;
  free_seen(t->seen, t->nseen);
  t->seen = next;
  t->nseen = n;
}

/* How long top has seen row held by its holders; *at_start: at least that. */
static int64_t held_for(const top_t *t, const lock_row_t *row, int *at_start) {
  const seen_t *s = find_seen(t, row);
  *at_start = s != NULL && s->at_start;
  return s != NULL ? t->now_ms - s->since_ms : 0;
}

/* -- order ---------------------------------------------------------------------*/

static const top_t *sorting; /* qsort has no argument */

static int row_cmp(const void *pa, const void *pb) {
  const lock_row_t *a = pa, *b = pb;
  int at;
  int64_t age_a = held_for(sorting, a, &at), age_b = held_for(sorting, b, &at);
  /* no expiry last: the soonest to expire first */
  uint64_t ttl_a = (uint64_t)a->ttl_ms, ttl_b = (uint64_t)b->ttl_ms;
  int d = 0;
  switch (sorting->sort) {
  case SORT_WAITERS: d = (a->waiters < b->waiters) - (a->waiters > b->waiters); break;
  case SORT_TTL: d = (ttl_a > ttl_b) - (ttl_a < ttl_b); break;
  case SORT_NAME: break;
  case SORT_AGE: break;
  }
  if (d == 0 && sorting->sort != SORT_NAME)
    d = (age_a < age_b) - (age_a > age_b); /* the oldest first */
  if (d == 0)
    d = by_name(a->name, a->len, b->name, b->len);
  return sorting->reverse ? -d : d;
}

static void sort_rows(top_t *t) {
  sorting = t;
  if (t->snap.n > 1)
    qsort(t->snap.rows, t->snap.n, sizeof *t->snap.rows, row_cmp);
}

/* -- showing -------------------------------------------------------------------*/

/* A duration for a person: 950ms, 12.3s, 4m05s, 2h07m. */
static void duration(char *out, size_t size, int64_t ms) {
  if (ms < 1000)
    snprintf(out, size, "%lldms", (long long)ms);
  else if (ms < 60000)
    snprintf(out, size, "%.1fs", (double)ms / 1000);
  else if (ms < 3600000)
    snprintf(out, size, "%lldm%02llds", (long long)(ms / 60000), (long long)(ms / 1000 % 60));
  else
    snprintf(out, size, "%lldh%02lldm", (long long)(ms / 3600000), (long long)(ms / 60000 % 60));
}

/* s (len bytes) for the screen, at most width columns: bytes that could
 * move the cursor or change colours as '?'; cut at the end, or at the
 * start (keep_tail: a holder's owner is at its end) with "..". */
static void fit(char *out, const char *s, size_t len, size_t width, int keep_tail) {
  size_t from = 0, n = len;
  if (len > width && width >= 2) {
    n = width - 2;
    from = keep_tail ? len - n : 0;
  } else if (len > width) {
    n = width;
  }
  size_t o = 0;
  if (len > width && width >= 2 && keep_tail)
    out[o++] = '.', out[o++] = '.';
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[from + i];
    out[o++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
  }
  if (len > width && width >= 2 && !keep_tail)
    out[o++] = '.', out[o++] = '.';
  out[o] = '\0';
}

static void cell_waiters(char *out, size_t size, int64_t w) {
  if (w < 0)
    snprintf(out, size, "?");
  else
    snprintf(out, size, "%lld", (long long)w);
}

static void cell_ttl(char *out, size_t size, int64_t ttl) {
  if (ttl < 0)
    snprintf(out, size, "none");
  else
    duration(out, size, ttl);
}

static void cell_held(char *out, size_t size, const top_t *t, const lock_row_t *row) {
  int at_start;
  char d[32];
  duration(d, sizeof d, held_for(t, row, &at_start));
  snprintf(out, size, "%s%s", at_start ? ">=" : "", d);
}

/* The header, the error line (blank without one) and the column titles. */
static void draw_header(const top_t *t, size_t width, size_t name_w, size_t holder_w) {
  char line[4 * MAX_WIDTH], out[MAX_WIDTH + 3], now[32];
  time_t wall = time(NULL);
  strftime(now, sizeof now, "%H:%M:%S UTC", gmtime(&wall));
  snprintf(line, sizeof line, "relock top %s  %s  %zu lock%s  every %.1fs  sort: %s%s   q quit, w a n t sort, r reverse",
           t->c->name, now, t->snap.n, t->snap.n == 1 ? "" : "s", (double)t->interval_ms / 1000,
           sort_names[t->sort], t->reverse ? " (reversed)" : "");
  fit(out, line, strlen(line), width, 0);
  printf("\033[H%s\033[K\r\n", out);
  if (t->snap.error[0] != '\0') {
    snprintf(line, sizeof line, "error: %s (trying again)", t->snap.error);
    fit(out, line, strlen(line), width, 0);
    printf("\033[7m%s\033[m\033[K\r\n", out);
  } else {
    printf("\033[K\r\n");
  }
  snprintf(line, sizeof line, "%-*s %-6s %-*s %5s %8s %10s %7s", (int)name_w, "NAME", "KIND", (int)holder_w,
           "HOLDER", "HOLDS", "TTL", "HELD FOR", "WAITERS");
  fit(out, line, strlen(line), width, 0);
  printf("\033[1m%s\033[m\033[K\r\n", out);
}

/* The widths of the name and holder columns: the longest name, at most 40
 * columns and a third of a narrow screen; the holder what is left, at most
 * the longest holder (the numbers stay near the names). */
static void column_widths(const top_t *t, size_t width, size_t *name_w, size_t *holder_w) {
  size_t n = 4, longest = 6, most = width / 3 > 8 ? width / 3 : 8;
  for (size_t i = 0; i < t->snap.n; i++) {
    const lock_row_t *row = &t->snap.rows[i];
    n = row->len > n ? row->len : n;
    size_t h = strlen(row->holders) + (row->nholders > 1 ? 6 : 0);
    longest = h > longest ? h : longest;
  }
  most = most < 40 ? most : 40;
  *name_w = n < most ? n : most;
  size_t fixed = *name_w + 1 + 6 + 1 + 1 + 5 + 1 + 8 + 1 + 10 + 1 + 7; /* KIND HOLDS TTL HELD-FOR WAITERS */
  *holder_w = width > fixed + 10 ? width - fixed : 10;
  if (*holder_w > longest)
    *holder_w = longest;
}

/* One lock's row, at most width columns, into out. */
static void format_row(const top_t *t, const lock_row_t *row, size_t width, size_t name_w, size_t holder_w,
                       char *out) {
  char line[4 * MAX_WIDTH], cell[4 * MAX_WIDTH], name[MAX_WIDTH + 3], holder[MAX_WIDTH + 3], ttl[32], held[40],
      waiters[24];
  fit(name, row->name, row->len, name_w, 0);
  if (row->nholders > 1)
    snprintf(cell, sizeof cell, "%s (%zu)", row->holders, row->nholders);
  else
    snprintf(cell, sizeof cell, "%s", row->holders);
  fit(holder, cell, strlen(cell), holder_w, 1);
  cell_ttl(ttl, sizeof ttl, row->ttl_ms);
  cell_held(held, sizeof held, t, row);
  cell_waiters(waiters, sizeof waiters, row->waiters);
  snprintf(line, sizeof line, "%-*s %-6s %-*s %5lld %8s %10s %7s", (int)name_w, name, row->kind, (int)holder_w,
           holder, (long long)row->holds, ttl, held, waiters);
  fit(out, line, strlen(line), width, 0);
}

/* The whole screen, redrawn in place: as many rows as fit, then "... N more". */
static void draw_screen(top_t *t) {
  int rows, cols;
  term_size(&rows, &cols);
  size_t width = (size_t)cols < MAX_WIDTH ? (size_t)cols : MAX_WIDTH, name_w, holder_w;
  column_widths(t, width, &name_w, &holder_w);
  draw_header(t, width, name_w, holder_w);
  int used = 3;
  for (size_t i = 0; i < t->snap.n && used < rows; i++, used++) {
    if (used == rows - 1 && i + 1 < t->snap.n) {
      printf("... %zu more\033[K", t->snap.n - i);
      break;
    }
    char out[MAX_WIDTH + 3];
    format_row(t, &t->snap.rows[i], width, name_w, holder_w, out);
    printf("%s\033[K%s", out, used + 1 < rows ? "\r\n" : "");
  }
  fputs("\033[J", stdout);
  fflush(stdout);
}

/* Plain lines: "# TIME relock top PATTERN: N locks", then one line per lock
 * (its name escaped as in relock list, then key=value), or "# error: ...". */
static void print_lines(top_t *t) {
  char now[32], ttl[32], held[40], waiters[24];
  time_t wall = time(NULL);
  strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", gmtime(&wall));
  printf("# %s relock top ", now);
  text_string(stdout, t->c->name, strlen(t->c->name));
  printf(": %zu lock%s\n", t->snap.n, t->snap.n == 1 ? "" : "s");
  if (t->snap.error[0] != '\0')
    printf("# error: %s\n", t->snap.error);
  for (size_t i = 0; i < t->snap.n; i++) {
    const lock_row_t *row = &t->snap.rows[i];
    text_string(stdout, row->name, row->len);
    cell_ttl(ttl, sizeof ttl, row->ttl_ms);
    cell_held(held, sizeof held, t, row);
    cell_waiters(waiters, sizeof waiters, row->waiters);
    printf(" kind=%s holds=%lld ttl=%s held_for=%s waiters=%s holders=", row->kind, (long long)row->holds, ttl, held,
           waiters);
    text_string(stdout, row->holders, strlen(row->holders));
    putchar('\n');
  }
  fflush(stdout);
}

static void show(top_t *t) {
  sort_rows(t);
  if (t->tty)
    draw_screen(t);
  else
    print_lines(t);
}

/* -- the loop --------------------------------------------------------------------*/

/* One look at Redis: the rows, their ages. */
static void look(top_t *t) {
  snapshot_free(&t->snap);
  t->failed = snapshot_take(t->c->client, t->c->name, &t->snap) != 0;
  t->now_ms = monotonic_ms();
  if (!t->failed)
    remember(t);
  t->looks++;
}

/* A key: 1 to quit, else 0 (the view is redrawn if it changed). */
static int key(top_t *t, char k) {
  switch (k) {
  case 'q': case 'Q': return 1;
  case 'w': t->sort = SORT_WAITERS; break;
  case 'a': t->sort = SORT_AGE; break;
  case 'n': t->sort = SORT_NAME; break;
  case 't': t->sort = SORT_TTL; break;
  case 'r': t->reverse = !t->reverse; break;
  default: return 0;
  }
  show(t);
  return 0;
}

/* Waits until the next look is due, reading keys: 1 to quit. */
static int wait_next(top_t *t, int64_t due_ms) {
  for (;;) {
    int64_t left = due_ms - monotonic_ms();
    if (left <= 0)
      return 0;
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    int n = poll(&p, t->keys ? 1 : 0, (int)left);
    if (term_redraw_due())
      show(t);
    if (n <= 0 || !(p.revents & (POLLIN | POLLHUP)))
      continue;
    char buf[64];
    ssize_t got = read(STDIN_FILENO, buf, sizeof buf);
    if (got <= 0) {
      t->keys = 0; /* stdin closed: no more keys, the view goes on */
      continue;
    }
    for (ssize_t i = 0; i < got; i++)
      if (key(t, buf[i]))
        return 1;
  }
}

int top_command(cli_t *c) {
  top_t t;
  memset(&t, 0, sizeof t);
  t.c = c;
  t.tty = isatty(STDOUT_FILENO);
  t.keys = t.tty && isatty(STDIN_FILENO);
  t.interval_ms = c->opt.interval_ms > 0 ? c->opt.interval_ms : 1000;
  if (t.tty)
    term_start(t.keys);
  int64_t due = monotonic_ms();
  int quit = 0;
  for (int64_t k = 0; !quit; k++) {
    look(&t);
    show(&t);
    if (ferror(stdout))
      break; /* the pipe's reader is gone */
    if (c->opt.refreshes > 0 && k + 1 >= c->opt.refreshes)
      break;
    due += t.interval_ms;
    quit = wait_next(&t, due);
  }
  if (t.tty)
    term_restore();
  int code = t.failed && !quit ? EXIT_REDIS : 0; /* q: the user's choice, whatever Redis said */
  if (code != 0 && t.tty)
    say(0, "%s", t.snap.error); /* the screen that said it is gone */
  snapshot_free(&t.snap);
  free_seen(t.seen, t.nseen);
  return code;
}
