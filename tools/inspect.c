/* relock status NAME, relock list PATTERN and relock release --force NAME:
 * what Redis says of locks, and deleting one whoever holds it. A list
 * SCANs every master (a Redis Cluster's keys are spread over them).
 *
 * A lock is Redisson's reentrant lock: a hash whose fields
 * "<client-id>:<owner>" hold hold counts, its PTTL the lease. relock writes
 * the same layout with the same kind of client id (a random UUID), so a
 * holder cannot tell which of the two took it: "format" says "redisson" for
 * both. A read-write lock's hash has one more field, "mode" ("read" or
 * "write"), and its writer's field ends in ":write". A key of another
 * type, or a hash of another shape, is not a lock.
 *
 * A semaphore is a string NAME holding the free count (a decimal integer);
 * the permit-expirable one (relock --semaphore, Redisson's
 * RPermitExpirableSemaphore) also has the zset "{NAME}:timeout" ("NAME:timeout"
 * when NAME has a '{') of its taken permits: each member the 16 bytes of a
 * permit id, its score the expiry in ms on the server's clock. relock's ids
 * begin with the first 16 hex digits of its client id: the holder. An
 * RSemaphore (relock --rsemaphore) records no permits: only its count shows.
 *
 * With --json each object also says who waits (waiters.h: a fair lock's
 * queue length, else the subscribers of the kind's channel), and "age_ms"
 * null: no layout records when a hold began (relock top times holds by
 * watching them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <relock/relock.h>

#include "cli.h"
#include "hold.h"
#include "json.h"
#include "scan.h"
#include "waiters.h"

#define BATCH 500 /* keys whose HGETALL, PTTL, GET, ZRANGE and LLEN are in flight together */
#define PER_KEY 5

/* A permit's score that means "never expires" (Redisson's, in ms). */
#define NEVER_MS 922337203685477LL

/* -- printing a lock ---------------------------------------------------------*/

/* An owner is a number in JSON when it is one (a thread id, a pid). */
static int is_number(const char *s, size_t len) {
  if (len == 0 || len > 20 || (s[0] == '0' && len > 1) || strspn(s, "0123456789") < len)
    return 0;
  return len < 20 || memcmp(s, "18446744073709551615", 20) <= 0; /* a uint64_t */
}

/* ,"waiters":N (null: unknown) and ,"age_ms":null: Redis keeps no time of
 * acquisition (Redisson's layout has none), so one look cannot tell how
 * long a hold has lasted; relock top measures it by watching. */
static void print_waiters_age(int64_t waiters) {
  if (waiters >= 0)
    printf(",\"waiters\":%lld", (long long)waiters);
  else
    fputs(",\"waiters\":null", stdout);
  fputs(",\"age_ms\":null", stdout);
}

static void print_json(const char *name, size_t len, const relock_reply_t *fields, int64_t ttl, int64_t waiters) {
  fputs("{\"name\":", stdout);
  json_string(stdout, name, len);
  printf(",\"held\":%s,\"holders\":[", fields->elements > 0 ? "true" : "false");
  const char *sep = "";
  for (size_t i = 0; i + 1 < fields->elements; i += 2) {
    if (is_mode(fields, i))
      continue;
    /* a writer's "<client-id>:<owner>:write": the holder without the suffix */
    relock_reply_t holder = *fields->element[i];
    int writer = holder.len > 6 && memcmp(holder.str + holder.len - 6, ":write", 6) == 0;
    holder.len -= writer ? 6 : 0;
    const relock_reply_t *field = &holder;
    size_t at = owner_at(field);
    int64_t count = 0;
    hold_count(fields->element[i + 1], &count);
    printf("%s{\"client_id\":", sep);
    sep = ",";
    json_string(stdout, field->str, at - 1);
    fputs(",\"owner\":", stdout);
    if (is_number(field->str + at, field->len - at))
      fwrite(field->str + at, 1, field->len - at, stdout);
    else
      json_string(stdout, field->str + at, field->len - at);
    printf(",\"hold_count\":%lld%s}", (long long)count, writer ? ",\"write\":true" : "");
  }
  fputs("]", stdout);
  for (size_t i = 0; i + 1 < fields->elements; i += 2)
    if (is_mode(fields, i))
      printf(",\"mode\":\"%.*s\"", (int)fields->element[i + 1]->len, fields->element[i + 1]->str);
  printf(",\"ttl_ms\":%lld", (long long)ttl);
  print_waiters_age(waiters);
  printf(",\"format\":%s}\n", fields->elements > 0 ? "\"redisson\"" : "null");
}

static void print_text(const char *name, size_t len, const relock_reply_t *fields, int64_t ttl) {
  if (fields->elements == 0) {
    text_string(stdout, name, len);
    fputs(": free\n", stdout);
  }
  for (size_t i = 0; i + 1 < fields->elements; i += 2) {
    if (is_mode(fields, i)) {
      text_string(stdout, name, len);
      printf(": a read-write lock, in %.*s mode\n", (int)fields->element[i + 1]->len, fields->element[i + 1]->str);
      continue;
    }
    text_string(stdout, name, len);
    fputs(": held by ", stdout);
    text_string(stdout, fields->element[i]->str, fields->element[i]->len);
    fputs(", hold count ", stdout);
    text_string(stdout, fields->element[i + 1]->str, fields->element[i + 1]->len);
    if (ttl >= 0)
      printf(", expires in %lld ms\n", (long long)ttl);
    else
      fputs(", no expiry\n", stdout);
  }
}

/* Prints a lock (fields empty: a free one) with PTTL's reply and its
 * waiters (-1: unknown). */
static void print_lock(const cli_t *c, const char *name, size_t len, const relock_reply_t *fields,
                       const relock_reply_t *pttl, int64_t waiters) {
  int64_t ttl = pttl->type == RELOCK_REPLY_INTEGER && pttl->integer >= 0 ? pttl->integer : -1;
  if (verbosity == 0) /* -q: the exit status says it */
    return;
  if (c->opt.json)
    print_json(name, len, fields, ttl, waiters);
  else
    print_text(name, len, fields, ttl);
}

/* "relock: NAME is not a lock (WHAT)" on stderr, FIELD (if not NULL) escaped
 * in it. */
static int not_a_lock(const char *name, const char *what, const relock_reply_t *field) {
  fputs("relock: ", stderr);
  text_string(stderr, name, strlen(name));
  fprintf(stderr, " is not a lock (a Redis %s", what);
  if (field != NULL) {
    fputs(" whose field \"", stderr);
    text_string(stderr, field->str, field->len);
    fputs("\" is not <client-id>:<owner> with a hold count", stderr);
  }
  fputs(")\n", stderr);
  return EXIT_NOT_LOCK;
}

/* -- reading and printing a semaphore ------------------------------------------*/

/* The key of NAME's permits, "{NAME}:timeout" (malloc'ed; *n its length), as
 * Redisson names it: in NAME's cluster slot. */
static char *timeout_key(const char *name, size_t len, size_t *n) {
  int tagged = memchr(name, '{', len) != NULL;
  char *key = malloc(len + sizeof "{}:timeout");
  if (key == NULL)
    return NULL;
  key[0] = '{';
  memcpy(key + !tagged, name, len);
  memcpy(key + !tagged + len, tagged ? ":timeout" : "}:timeout", tagged ? 9 : 10); /* with the NUL */
  *n = len + (tagged ? 8 : 10);
  return key;
}

/* A decimal integer (a semaphore's count, a score, TIME's fields), or -1 if
 * v is not one. */
static int integer_of(const relock_reply_t *v, int64_t *out) {
  if (v == NULL || v->type != RELOCK_REPLY_STRING || v->len == 0 || v->len > 18) /* no overflow */
    return -1;
  size_t i = v->str[0] == '-' && v->len > 1;
  int64_t n = 0;
  for (; i < v->len; i++) {
    if (v->str[i] < '0' || v->str[i] > '9')
      return -1;
    n = n * 10 + (v->str[i] - '0');
  }
  *out = v->str[0] == '-' ? -n : n;
  return 0;
}

/* TIME's reply in ms, or -1. */
static int64_t time_ms(const relock_reply_t *t) {
  int64_t sec, usec;
  if (t == NULL || t->type != RELOCK_REPLY_ARRAY || t->elements != 2 || integer_of(t->element[0], &sec) != 0 ||
      integer_of(t->element[1], &usec) != 0)
    return -1;
  return sec * 1000 + usec / 1000;
}

/* A permit's id: the 16 bytes in hex, as the library and Redisson write
 * it; a member of another length as hex too. */
static void permit_id(const relock_reply_t *member, char *out, size_t size) {
  size_t n = 0;
  for (size_t i = 0; i < member->len && n + 3 <= size; i++)
    n += (size_t)snprintf(out + n, size - n, "%02x", (unsigned char)member->str[i]);
  out[n] = '\0';
}

/* What a string key is as a semaphore. */
typedef struct semaphore_view {
  int64_t free;                  /* GET NAME */
  const relock_reply_t *permits; /* ZRANGE ... WITHSCORES: member, score, ... */
  int64_t now_ms;                /* the server's TIME */
  int64_t waiters;               /* the subscribers of its channel; -1 unknown */
} semaphore_view_t;

/* Whether GET's and ZRANGE's replies are a semaphore's; fills *v. */
static int is_semaphore(const relock_reply_t *get, const relock_reply_t *zrange, int64_t now_ms,
                        semaphore_view_t *v) {
  if (get == NULL || zrange == NULL || zrange->type != RELOCK_REPLY_ARRAY || zrange->elements % 2 != 0 ||
      integer_of(get, &v->free) != 0)
    return 0;
  v->permits = zrange;
  v->now_ms = now_ms;
  v->waiters = -1;
  return 1;
}

/* A permit's time left: RELOCK_INFINITE for never, else score - now
 * (negative: expired, back in the pool at the next acquisition). */
static int64_t permit_ttl(const semaphore_view_t *v, size_t i) {
  const relock_reply_t *score = v->permits->element[i + 1];
  double ms = score->type == RELOCK_REPLY_STRING ? strtod(score->str, NULL) : 0;
  if (ms >= (double)NEVER_MS)
    return RELOCK_INFINITE;
  return (int64_t)ms - v->now_ms;
}

static void print_semaphore_json(const char *name, size_t len, const semaphore_view_t *v) {
  fputs("{\"name\":", stdout);
  json_string(stdout, name, len);
  printf(",\"semaphore\":true,\"held\":%s,\"free\":%lld,\"permits\":[", v->permits->elements > 0 ? "true" : "false",
         (long long)v->free);
  for (size_t i = 0; i + 1 < v->permits->elements; i += 2) {
    char id[2 * 64 + 1];
    permit_id(v->permits->element[i], id, sizeof id);
    int64_t ttl = permit_ttl(v, i);
    printf("%s{\"id\":\"%s\",\"holder\":\"%.16s\",\"ttl_ms\":", i > 0 ? "," : "", id, id);
    if (ttl == RELOCK_INFINITE)
      fputs("null,\"never\":true}", stdout);
    else
      printf("%lld}", (long long)ttl);
  }
  fputs("]", stdout);
  print_waiters_age(v->waiters);
  fputs(",\"format\":\"redisson\"}\n", stdout);
}

static void print_semaphore_text(const char *name, size_t len, const semaphore_view_t *v) {
  size_t taken = v->permits->elements / 2;
  text_string(stdout, name, len);
  printf(": a semaphore, %lld permit%s free, %zu taken with an id%s\n", (long long)v->free, v->free == 1 ? "" : "s",
         taken, taken > 0 ? ":" : "");
  for (size_t i = 0; i + 1 < v->permits->elements; i += 2) {
    char id[2 * 64 + 1];
    permit_id(v->permits->element[i], id, sizeof id);
    int64_t ttl = permit_ttl(v, i);
    text_string(stdout, name, len);
    printf(": permit %s held by %.16s, ", id, id);
    if (ttl == RELOCK_INFINITE)
      fputs("never expires\n", stdout);
    else if (ttl < 0)
      printf("expired %lld ms ago (back in the pool at the next acquisition)\n", (long long)-ttl);
    else
      printf("expires in %lld ms\n", (long long)ttl);
  }
}

static void print_semaphore(const cli_t *c, const char *name, size_t len, const semaphore_view_t *v) {
  if (verbosity == 0)
    return;
  if (c->opt.json)
    print_semaphore_json(name, len, v);
  else
    print_semaphore_text(name, len, v);
}

/* -- relock status ------------------------------------------------------------*/

/* Waits for f: its reply, or NULL if it failed (or is NULL: no memory). */
static const relock_reply_t *wait_reply(relock_future_t *f) {
  return f != NULL && relock_future_wait(f, RELOCK_INFINITE) == 0 ? relock_future_reply(f) : NULL;
}

/* Says why f failed. */
static int failed(relock_future_t *f) {
  say(0, "%s", f != NULL ? relock_future_message(f) : "out of memory");
  return EXIT_REDIS;
}

/* The length of a fair lock's queue (LLEN's reply; 0 for none or an
 * error: a key of another type is no fair lock's queue). */
static int64_t queue_length(const relock_reply_t *llen) {
  return llen != NULL && llen->type == RELOCK_REPLY_INTEGER && llen->integer > 0 ? llen->integer : 0;
}

/* The channel of a name's waiters (malloc'ed): a semaphore's, a
 * read-write lock's (HGETALL's fields with a mode), else a lock's. */
static char *channel_of(const name_t *name, int semaphore, const relock_reply_t *fields, size_t *n) {
  const char *prefix = semaphore ? SEMAPHORE_CHANNEL
                       : fields != NULL && fields->type == RELOCK_REPLY_ARRAY && rw_mode(fields) != NULL
                           ? RWLOCK_CHANNEL
                           : LOCK_CHANNEL;
  return derived_key(prefix, name->s, name->len, n);
}

/* The waiters of n names (--json only: the text says nothing of them) into
 * waiters: a fair lock's queue length (llen[i]'s), else the subscribers of
 * the name's channel; -1 each when they cannot be counted, with why said
 * once (at the normal verbosity: the JSON then has null). */
static void count_waiters(cli_t *c, const name_t *names, size_t n, const int *semaphore,
                          const relock_reply_t *const *fields, const relock_reply_t *const *llen, int64_t *waiters) {
  for (size_t i = 0; i < n; i++)
    waiters[i] = -1;
  if (!c->opt.json || n == 0)
    return;
  char why[512] = "out of memory";
  const relock_reply_t *masters = NULL;
  relock_future_t *mf = masters_of(c->client, &masters, why, sizeof why);
  char **channels = calloc(n, sizeof *channels);
  size_t *lens = calloc(n, sizeof *lens);
  int ok = masters != NULL && channels != NULL && lens != NULL;
  for (size_t i = 0; ok && i < n; i++)
    ok = (channels[i] = channel_of(&names[i], semaphore[i], fields[i], &lens[i])) != NULL;
  if (ok && count_subscribers(c->client, masters, channels, lens, n, waiters, why, sizeof why) == 0) {
    for (size_t i = 0; i < n; i++)
      if (!semaphore[i] && queue_length(llen[i]) > 0)
        waiters[i] = queue_length(llen[i]);
  } else {
    for (size_t i = 0; i < n; i++)
      waiters[i] = -1;
    say(1, "cannot count the waiters: %s", why);
  }
  for (size_t i = 0; channels != NULL && i < n; i++)
    free(channels[i]);
  free(channels);
  free(lens);
  relock_future_release(mf);
}

/* The length of NAME's fair queue, if it has one; NULL otherwise. */
static relock_future_t *send_llen(cli_t *c, const char *name, size_t len) {
  size_t qlen;
  char *queue = derived_key(FAIR_QUEUE, name, len, &qlen);
  const char *argv[] = {"LLEN", queue};
  const size_t lens[] = {4, qlen};
  relock_future_t *f = queue != NULL ? relock_client_command_async(c->client, 2, argv, lens) : NULL;
  free(queue);
  return f;
}

/* status of a string key: a semaphore's count and permits, in one round
 * trip (GET, ZRANGE, TIME), or not a lock. */
static int show_semaphore(cli_t *c) {
  size_t klen, len = strlen(c->name);
  char *key = timeout_key(c->name, len, &klen);
  if (key == NULL)
    return failed(NULL);
  const char *get[] = {"GET", c->name}, *zrange[] = {"ZRANGE", key, "0", "-1", "WITHSCORES"}, *time[] = {"TIME"};
  const size_t zlens[] = {6, klen, 1, 2, 10};
  relock_future_t *f[3] = {relock_client_command_async(c->client, 2, get, NULL),
                           relock_client_command_async(c->client, 5, zrange, zlens),
                           relock_client_command_async(c->client, 1, time, NULL)};
  const relock_reply_t *reply[3];
  for (int i = 0; i < 3; i++)
    reply[i] = wait_reply(f[i]);
  free(key);
  semaphore_view_t v;
  int code;
  if (reply[0] == NULL || reply[1] == NULL || reply[2] == NULL)
    code = failed(f[reply[0] == NULL ? 0 : reply[1] == NULL ? 1 : 2]);
  else if (!is_semaphore(reply[0], reply[1], time_ms(reply[2]), &v))
    code = not_a_lock(c->name, "string", NULL) /* and no semaphore's count */;
  else {
    name_t name = {(char *)c->name, len};
    const int semaphore = 1;
    const relock_reply_t *none = NULL;
    count_waiters(c, &name, 1, &semaphore, &none, &none, &v.waiters);
    print_semaphore(c, c->name, len, &v);
    code = v.permits->elements > 0 ? 0 : EXIT_FREE;
  }
  for (int i = 0; i < 3; i++)
    relock_future_release(f[i]);
  return code;
}

int show_status(cli_t *c) {
  static const char *const commands[] = {"TYPE", "HGETALL", "PTTL"};
  relock_future_t *f[4];
  const relock_reply_t *reply[4];
  for (int i = 0; i < 3; i++) { /* pipelined: one round trip */
    const char *argv[] = {commands[i], c->name};
    f[i] = relock_client_command_async(c->client, 2, argv, NULL);
  }
  f[3] = c->opt.json ? send_llen(c, c->name, strlen(c->name)) : NULL;
  for (int i = 0; i < 4; i++)
    reply[i] = wait_reply(f[i]);
  /* HGETALL fails (WRONGTYPE) when the key is not a hash: TYPE says what it is */
  const char *type = reply[0] != NULL && reply[0]->str != NULL ? reply[0]->str : "";
  const relock_reply_t *bad = NULL;
  int code;
  if (reply[0] == NULL)
    code = failed(f[0]);
  else if (strcmp(type, "string") == 0)
    code = show_semaphore(c);
  else if (strcmp(type, "none") != 0 && strcmp(type, "hash") != 0)
    code = not_a_lock(c->name, type, NULL);
  else if (reply[1] == NULL || reply[2] == NULL)
    code = failed(reply[1] == NULL ? f[1] : f[2]);
  else if ((bad = bad_field(reply[1])) != NULL)
    code = not_a_lock(c->name, "hash", bad);
  else {
    name_t name = {(char *)c->name, strlen(c->name)};
    const int semaphore = 0;
    int64_t waiters;
    count_waiters(c, &name, 1, &semaphore, &reply[1], &reply[3], &waiters);
    print_lock(c, c->name, name.len, reply[1], reply[2], waiters);
    code = reply[1]->elements > 0 ? 0 : EXIT_FREE;
  }
  for (int i = 0; i < 4; i++)
    relock_future_release(f[i]);
  return code;
}

/* -- relock list ----------------------------------------------------------------*/

/* Whether f failed because its key is of another type (WRONGTYPE). */
static int wrong_type(relock_future_t *f) {
  return f != NULL && relock_future_error(f) == RELOCK_ESERVER &&
         strncmp(relock_future_message(f), "WRONGTYPE", 9) == 0;
}

/* The commands of one name: HGETALL and PTTL (a lock), GET and ZRANGE of
 * its permits (a semaphore); one of the pairs fails with WRONGTYPE; and
 * LLEN of its fair queue (a fair lock's waiters). */
static void send_key(cli_t *c, const name_t *name, relock_future_t **f) {
  size_t klen = 0;
  char *key = timeout_key(name->s, name->len, &klen);
  const char *all[] = {"HGETALL", name->s}, *pttl[] = {"PTTL", name->s}, *get[] = {"GET", name->s};
  const char *zrange[] = {"ZRANGE", key, "0", "-1", "WITHSCORES"};
  const size_t all_lens[] = {7, name->len}, pttl_lens[] = {4, name->len}, get_lens[] = {3, name->len};
  const size_t zlens[] = {6, klen, 1, 2, 10};
  f[0] = relock_client_command_async(c->client, 2, all, all_lens);
  f[1] = relock_client_command_async(c->client, 2, pttl, pttl_lens);
  f[2] = relock_client_command_async(c->client, 2, get, get_lens);
  f[3] = key != NULL ? relock_client_command_async(c->client, 5, zrange, zlens) : NULL;
  f[4] = c->opt.json ? send_llen(c, name->s, name->len) : NULL; /* the text says nothing of waiters */
  free(key);
}

/* The server's TIME in ms, asked once a batch has a semaphore to show
 * (*now_ms -1 until then): a list of locks alone needs no +time rule. */
static int server_time(cli_t *c, int64_t *now_ms) {
  static const char *const time[] = {"TIME"};
  if (*now_ms >= 0)
    return 0;
  relock_future_t *f = relock_client_command_async(c->client, 1, time, NULL);
  const relock_reply_t *t = wait_reply(f);
  int code = t == NULL ? failed(f) : 0;
  if (t != NULL && (*now_ms = time_ms(t)) < 0) {
    say(0, "unexpected reply to TIME");
    code = EXIT_REDIS;
  }
  relock_future_release(f);
  return code;
}

/* Prints name if it is a lock that is held or a semaphore with permits
 * taken (f: send_key's futures); a key of another kind is passed over. */
static int print_key(cli_t *c, const name_t *name, relock_future_t **f, int64_t waiters, int64_t *now_ms,
                     size_t *printed) {
  const relock_reply_t *fields = wait_reply(f[0]), *ttl = wait_reply(f[1]), *get = wait_reply(f[2]),
                       *permits = wait_reply(f[3]);
  if (fields != NULL && ttl != NULL) {
    if (fields->elements > 0 && bad_field(fields) == NULL) {
      print_lock(c, name->s, name->len, fields, ttl, waiters);
      ++*printed;
    }
    return 0;
  }
  if (get != NULL && permits != NULL) {
    semaphore_view_t v;
    if (!is_semaphore(get, permits, 0, &v) || v.permits->elements == 0)
      return 0;
    int code = server_time(c, now_ms);
    if (code != 0)
      return code;
    v.now_ms = *now_ms;
    v.waiters = waiters;
    print_semaphore(c, name->s, name->len, &v);
    ++*printed;
    return 0;
  }
  /* a key that is neither (now) fails with WRONGTYPE: no lock */
  for (int i = 0; i < 4; i++)
    if (wait_reply(f[i]) == NULL && !wrong_type(f[i]))
      return failed(f[i]);
  return 0;
}

/* The commands of n names at once; prints those that are held locks and
 * semaphores with permits taken. */
static int print_batch(cli_t *c, const name_t *names, size_t n, size_t *printed) {
  relock_future_t *f[PER_KEY * BATCH];
  for (size_t i = 0; i < n; i++)
    send_key(c, &names[i], f + PER_KEY * i);
  int semaphore[BATCH];
  const relock_reply_t *fields[BATCH], *llen[BATCH];
  int64_t waiters[BATCH];
  for (size_t i = 0; i < n; i++) {
    fields[i] = wait_reply(f[PER_KEY * i]);
    semaphore[i] = fields[i] == NULL && wait_reply(f[PER_KEY * i + 2]) != NULL;
    llen[i] = wait_reply(f[PER_KEY * i + 4]);
  }
  count_waiters(c, names, n, semaphore, fields, llen, waiters);
  int64_t now_ms = -1;
  int code = 0;
  for (size_t i = 0; i < n && code == 0; i++)
    code = print_key(c, &names[i], f + PER_KEY * i, waiters[i], &now_ms, printed);
  for (size_t i = 0; i < PER_KEY * n; i++) {
    if (f[i] != NULL)
      relock_future_wait(f[i], RELOCK_INFINITE); /* those an error left unread */
    relock_future_release(f[i]);
  }
  return code;
}

int list_locks(cli_t *c) {
  names_t v = {NULL, 0, 0};
  static const char *const types[] = {"hash", "string", NULL}; /* locks, semaphores */
  const relock_reply_t *masters;
  char why[512];
  relock_future_t *mf = masters_of(c->client, &masters, why, sizeof why);
  int code = masters == NULL || scan_names(c->client, masters, c->name, types, &v, why, sizeof why) != 0;
  if (code != 0) {
    say(0, "%s", why);
    code = EXIT_REDIS;
  }
  size_t printed = 0;
  for (size_t i = 0; i < v.n && code == 0; i += BATCH)
    code = print_batch(c, v.at + i, v.n - i < BATCH ? v.n - i : BATCH, &printed);
  names_free(&v);
  relock_future_release(mf);
  return code != 0 ? code : printed > 0 ? 0 : EXIT_FREE;
}

/* -- relock release --force -----------------------------------------------------*/

/* Whether NAME holds no lock's key: the force release's DEL would delete
 * any value, and a semaphore's count deleted is set to N again by the next
 * run while its permits are still taken. A user whose ACL refuses TYPE
 * (the base rules of docs/ACL.md) is not checked. */
static int refuse_non_lock(cli_t *r) {
  const char *argv[] = {"TYPE", r->name};
  relock_future_t *f = relock_client_command_async(r->client, 2, argv, NULL);
  const relock_reply_t *type = wait_reply(f);
  int code = 0;
  if (type == NULL && (f == NULL || relock_future_error(f) != RELOCK_ENOPERM))
    code = failed(f);
  else if (type != NULL && type->str != NULL && strcmp(type->str, "none") != 0 && strcmp(type->str, "hash") != 0)
    code = not_a_lock(r->name, type->str, NULL);
  relock_future_release(f);
  return code;
}

int force_release(cli_t *r) {
  int refused = refuse_non_lock(r);
  if (refused != 0)
    return refused;
  relock_future_t *f = relock_lock_force_unlock_async(r->lock);
  if (f == NULL)
    return EXIT_REDIS;
  int err = relock_future_wait(f, RELOCK_INFINITE);
  int code = 0;
  if (err != 0) {
    say(0, "cannot release %s: %s", r->name, relock_future_message(f));
    code = EXIT_REDIS;
  } else {
    say(1, "%s: %s", r->name, relock_future_bool(f) ? "released" : "was not held");
  }
  relock_future_release(f);
  return code;
}
