/* Statistics in Prometheus's text exposition format, version 0.0.4
 * (relock_stats_prometheus): written into the caller's buffer a line at a
 * time, measured like snprintf, never allocating. */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <relock/stats.h>

typedef struct out {
  char *buf;
  size_t size;
  size_t len;      /* the whole text's length so far */
  size_t kept;     /* what buf holds: whole lines only */
  int full;        /* a line did not fit: no later one is written either */
  const char *labels; /* the caller's, "" for none */
} out_t;

static void line(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends one line (fmt ends with its newline) when it fits whole. */
static void line(out_t *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if (!o->full && o->kept + (size_t)n < o->size) {
    va_start(ap, fmt);
    vsnprintf(o->buf + o->kept, o->size - o->kept, fmt, ap);
    va_end(ap);
    o->kept += (size_t)n;
  } else {
    o->full = 1;
  }
  o->len += (size_t)n;
}

/* Writes a decimal number of seconds for ns nanoseconds, without trailing
 * zeros ("0.00005", "2.5", "3600"). */
static const char *seconds(uint64_t ns, char buf[32]) {
  int n = snprintf(buf, 32, "%llu.%09llu", (unsigned long long)(ns / 1000000000u),
                   (unsigned long long)(ns % 1000000000u));
  while (n > 0 && buf[n - 1] == '0')
    buf[--n] = '\0';
  if (n > 0 && buf[n - 1] == '.')
    buf[--n] = '\0';
  return buf;
}

static void header(out_t *o, const char *name, const char *type, const char *help) {
  line(o, "# HELP %s %s\n", name, help);
  line(o, "# TYPE %s %s\n", name, type);
}

/* A sample: name{labels,own} value. own: "" or "kind=\"lock\"" etc. */
static void sample(out_t *o, const char *name, const char *own, uint64_t value) {
  const char *sep = o->labels[0] != '\0' && own[0] != '\0' ? "," : "";
  if (o->labels[0] == '\0' && own[0] == '\0')
    line(o, "%s %llu\n", name, (unsigned long long)value);
  else
    line(o, "%s{%s%s%s} %llu\n", name, o->labels, sep, own, (unsigned long long)value);
}

static void sample_seconds(out_t *o, const char *name, const char *own, uint64_t ns) {
  char s[32];
  const char *sep = o->labels[0] != '\0' && own[0] != '\0' ? "," : "";
  if (o->labels[0] == '\0' && own[0] == '\0')
    line(o, "%s %s\n", name, seconds(ns, s));
  else
    line(o, "%s{%s%s%s} %s\n", name, o->labels, sep, own, seconds(ns, s));
}

/* A duration histogram's samples (buckets cumulative, as Prometheus's are). */
static void histogram(out_t *o, const char *name, const char *own, const relock_histogram_t *h) {
  char metric[96], labels[160], le[32];
  const char *comma = own[0] != '\0' ? "," : "";
  uint64_t cumulative = 0;
  snprintf(metric, sizeof metric, "%s_bucket", name);
  for (int i = 0; i < RELOCK_STATS_BUCKETS; i++) {
    cumulative += h->bucket[i];
    int64_t us = relock_stats_bound_us(i);
    if (i < RELOCK_STATS_BUCKETS - 1)
      seconds((uint64_t)us * 1000u, le);
    else
      snprintf(le, sizeof le, "+Inf");
    snprintf(labels, sizeof labels, "%s%sle=\"%s\"", own, comma, le);
    sample(o, metric, labels, cumulative);
  }
  snprintf(metric, sizeof metric, "%s_sum", name);
  sample_seconds(o, metric, own, h->sum_ns);
  snprintf(metric, sizeof metric, "%s_count", name);
  sample(o, metric, own, h->count);
}

static void tries_histogram(out_t *o, const char *own, const relock_kind_stats_t *k) {
  char labels[160], le[32];
  uint64_t cumulative = 0;
  for (int i = 0; i < RELOCK_STATS_TRY_BUCKETS; i++) {
    cumulative += k->tries_bucket[i];
    int64_t bound = relock_stats_try_bound(i);
    if (i < RELOCK_STATS_TRY_BUCKETS - 1)
      snprintf(le, sizeof le, "%lld", (long long)bound);
    else
      snprintf(le, sizeof le, "+Inf");
    snprintf(labels, sizeof labels, "%s,le=\"%s\"", own, le);
    sample(o, "relock_acquire_tries_bucket", labels, cumulative);
  }
  sample(o, "relock_acquire_tries_sum", own, k->tries);
  sample(o, "relock_acquire_tries_count", own, cumulative); /* the +Inf bucket: every ended one */
}

static int kind_used(const relock_kind_stats_t *k) {
  if (k->started != 0 || k->released != 0 || k->hold.count != 0)
    return 1;
  for (int i = 0; i < RELOCK_LOSSES; i++)
    if (k->lost[i] != 0)
      return 1;
  return 0;
}

/* The kinds of the snapshot that were used, by index; returns how many. */
static int used_kinds(const relock_stats_t *st, int used[RELOCK_STATS_KINDS]) {
  int n = 0, kinds = st->kinds < RELOCK_KINDS ? (int)st->kinds : RELOCK_KINDS;
  for (int i = 0; i < kinds; i++)
    if (kind_used(&st->kind[i]))
      used[n++] = i;
  return n;
}

static void kind_label(int kind, char own[64]) { snprintf(own, 64, "kind=\"%s\"", relock_kind_name(kind)); }

static void acquisitions(out_t *o, const relock_stats_t *st, const int *used, int nused) {
  char own[64], both[128];
  header(o, "relock_acquisitions_started_total", "counter", "Acquisitions started, by kind.");
  for (int j = 0; j < nused; j++) {
    kind_label(used[j], own);
    sample(o, "relock_acquisitions_started_total", own, st->kind[used[j]].started);
  }
  header(o, "relock_acquisitions_total", "counter", "Acquisitions ended, by kind and outcome.");
  for (int j = 0; j < nused; j++)
    for (int out = 0; out < RELOCK_OUTCOMES; out++) {
      snprintf(both, sizeof both, "kind=\"%s\",outcome=\"%s\"", relock_kind_name(used[j]), relock_outcome_name(out));
      sample(o, "relock_acquisitions_total", both, st->kind[used[j]].outcome[out]);
    }
  header(o, "relock_acquisitions_waited_total", "counter",
         "Acquisitions ended that waited: a try found the lock held (cancelled ones too).");
  for (int j = 0; j < nused; j++) {
    kind_label(used[j], own);
    sample(o, "relock_acquisitions_waited_total", own, st->kind[used[j]].waited);
  }
  header(o, "relock_acquire_tries", "histogram", "Tries sent per ended acquisition.");
  for (int j = 0; j < nused; j++) {
    kind_label(used[j], own);
    tries_histogram(o, own, &st->kind[used[j]]);
  }
  header(o, "relock_acquire_wait_seconds", "histogram", "Time from the call to acquired, acquired ones.");
  for (int j = 0; j < nused; j++) {
    kind_label(used[j], own);
    histogram(o, "relock_acquire_wait_seconds", own, &st->kind[used[j]].wait);
  }
}

static void holds(out_t *o, const relock_stats_t *st, const int *used, int nused) {
  char own[64], both[128];
  header(o, "relock_hold_seconds", "histogram",
         "Time held, from acquired to released or lost (holds with a lease or the watchdog's).");
  for (int j = 0; j < nused; j++) {
    kind_label(used[j], own);
    histogram(o, "relock_hold_seconds", own, &st->kind[used[j]].hold);
  }
  header(o, "relock_releases_total", "counter", "Holds released by their holder.");
  for (int j = 0; j < nused; j++) {
    kind_label(used[j], own);
    sample(o, "relock_releases_total", own, st->kind[used[j]].released);
  }
  header(o, "relock_losses_total", "counter", "Holds that ended without their holder's release, by cause.");
  for (int j = 0; j < nused; j++)
    for (int cause = 0; cause < RELOCK_LOSSES; cause++) {
      snprintf(both, sizeof both, "kind=\"%s\",cause=\"%s\"", relock_kind_name(used[j]), relock_loss_name(cause));
      sample(o, "relock_losses_total", both, st->kind[used[j]].lost[cause]);
    }
}

static void counter(out_t *o, const char *name, const char *help, uint64_t value) {
  header(o, name, "counter", help);
  sample(o, name, "", value);
}

size_t relock_stats_prometheus(const relock_stats_t *st, const char *labels, char *buf, size_t size) {
  out_t o = {.buf = buf, .size = buf != NULL ? size : 0, .labels = labels != NULL ? labels : ""};
  if (o.size > 0)
    buf[0] = '\0';
  if (st == NULL)
    return 0;
  /* A snapshot an older program took holds the fields of its size only:
   * the later ones read as 0 (0: a struct the caller filled, whole). */
  relock_stats_t whole;
  if (st->size != 0 && st->size < sizeof whole) {
    memset(&whole, 0, sizeof whole);
    memcpy(&whole, st, st->size);
    st = &whole;
  }
  int used[RELOCK_STATS_KINDS];
  int nused = used_kinds(st, used);
  acquisitions(&o, st, used, nused);
  holds(&o, st, used, nused);
  counter(&o, "relock_renewals_total", "Holds renewed by the watchdog.", st->renewals);
  counter(&o, "relock_renewal_failures_total", "Renewal batches that failed.", st->renewal_failures);
  counter(&o, "relock_release_retries_total", "Background attempts of releases that got no answer.",
          st->release_retries);
  counter(&o, "relock_releases_settled_total", "Releases retried in the background that Redis then answered.",
          st->releases_settled);
  counter(&o, "relock_releases_expired_total",
          "Releases retried in the background until the hold's lease ended.", st->releases_expired);
  counter(&o, "relock_reconnects_total", "Connections made again after one was lost.", st->reconnects);
  counter(&o, "relock_failovers_total", "New masters followed after a failover.", st->failovers);
  counter(&o, "relock_redirections_total", "MOVED and ASK answers followed.", st->redirections);
  counter(&o, "relock_script_loads_total", "Scripts sent again in full after NOSCRIPT.", st->script_loads);
  counter(&o, "relock_commands_total", "Commands and scripts answered.", st->commands);
  counter(&o, "relock_command_errors_total", "Commands answered with an error.", st->command_errors);
  counter(&o, "relock_command_failures_total", "Commands that got no answer (timed out, connection lost).",
          st->command_failures);
  header(&o, "relock_command_seconds", "histogram", "Time from sent to answered.");
  histogram(&o, "relock_command_seconds", "", &st->command_time);
  header(&o, "relock_uptime_seconds", "gauge", "Time since the client was made.");
  sample_seconds(&o, "relock_uptime_seconds", "", st->uptime_ns);
  if (o.size > 0)
    buf[o.kept] = '\0';
  return o.len;
}
