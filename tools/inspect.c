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
 * RSemaphore (relock --rsemaphore) records no permits: only its count shows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <relock/relock.h>

#include "cli.h"
#include "json.h"

#define SCAN_COUNT "1000"
#define BATCH 500 /* keys whose HGETALL, PTTL, GET and ZRANGE are in flight together */
#define PER_KEY 4

/* A permit's score that means "never expires" (Redisson's, in ms). */
#define NEVER_MS 922337203685477LL

/* -- reading a lock ---------------------------------------------------------*/

/* A hold count: a decimal integer from 1 on, as Redisson writes it. */
static int hold_count(const relock_reply_t *v, int64_t *count) {
  if (v->type != RELOCK_REPLY_STRING || v->len == 0 || v->len > 18 || v->str[0] == '0')
    return -1;
  int64_t n = 0;
  for (size_t i = 0; i < v->len; i++) {
    if (v->str[i] < '0' || v->str[i] > '9')
      return -1;
    n = n * 10 + (v->str[i] - '0');
  }
  *count = n;
  return 0;
}

/* Where the owner begins in a holder field "<client-id>:<owner>" (after the
 * last ':'; client ids may have some), or 0 if it is not one. */
static size_t owner_at(const relock_reply_t *field) {
  if (field->type != RELOCK_REPLY_STRING)
    return 0;
  size_t i = field->len;
  while (i > 0 && field->str[i - 1] != ':')
    i--;
  return i > 1 && i < field->len ? i : 0;
}

static int is_string(const relock_reply_t *v, const char *s) {
  return v->type == RELOCK_REPLY_STRING && v->len == strlen(s) && memcmp(v->str, s, v->len) == 0;
}

/* Whether HGETALL's pair at i is a read-write lock's "mode". */
static int is_mode(const relock_reply_t *fields, size_t i) {
  const relock_reply_t *v = fields->element[i + 1];
  return is_string(fields->element[i], "mode") && (is_string(v, "read") || is_string(v, "write"));
}

/* HGETALL's reply: the first field that is not a lock's holder, or NULL if
 * they all are. */
static const relock_reply_t *bad_field(const relock_reply_t *fields) {
  int64_t count;
  for (size_t i = 0; i + 1 < fields->elements; i += 2)
    if (!is_mode(fields, i) && (owner_at(fields->element[i]) == 0 || hold_count(fields->element[i + 1], &count) != 0))
      return fields->element[i];
  return fields->elements % 2 == 0 ? NULL : fields->element[fields->elements - 1];
}

/* -- printing a lock ---------------------------------------------------------*/

/* An owner is a number in JSON when it is one (a thread id, a pid). */
static int is_number(const char *s, size_t len) {
  if (len == 0 || len > 20 || (s[0] == '0' && len > 1) || strspn(s, "0123456789") < len)
    return 0;
  return len < 20 || memcmp(s, "18446744073709551615", 20) <= 0; /* a uint64_t */
}

static void print_json(const char *name, size_t len, const relock_reply_t *fields, int64_t ttl) {
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
  printf(",\"ttl_ms\":%lld,\"format\":%s}\n", (long long)ttl, fields->elements > 0 ? "\"redisson\"" : "null");
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

/* Prints a lock (fields empty: a free one) with PTTL's reply. */
static void print_lock(const cli_t *c, const char *name, size_t len, const relock_reply_t *fields,
                       const relock_reply_t *pttl) {
  int64_t ttl = pttl->type == RELOCK_REPLY_INTEGER && pttl->integer >= 0 ? pttl->integer : -1;
  if (verbosity == 0) /* -q: the exit status says it */
    return;
  if (c->opt.json)
    print_json(name, len, fields, ttl);
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
} semaphore_view_t;

/* Whether GET's and ZRANGE's replies are a semaphore's; fills *v. */
static int is_semaphore(const relock_reply_t *get, const relock_reply_t *zrange, int64_t now_ms,
                        semaphore_view_t *v) {
  if (get == NULL || zrange == NULL || zrange->type != RELOCK_REPLY_ARRAY || zrange->elements % 2 != 0 ||
      integer_of(get, &v->free) != 0)
    return 0;
  v->permits = zrange;
  v->now_ms = now_ms;
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
  fputs("],\"format\":\"redisson\"}\n", stdout);
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
    print_semaphore(c, c->name, len, &v);
    code = v.permits->elements > 0 ? 0 : EXIT_FREE;
  }
  for (int i = 0; i < 3; i++)
    relock_future_release(f[i]);
  return code;
}

int show_status(cli_t *c) {
  static const char *const commands[] = {"TYPE", "HGETALL", "PTTL"};
  relock_future_t *f[3];
  const relock_reply_t *reply[3];
  for (int i = 0; i < 3; i++) { /* pipelined: one round trip */
    const char *argv[] = {commands[i], c->name};
    f[i] = relock_client_command_async(c->client, 2, argv, NULL);
  }
  for (int i = 0; i < 3; i++)
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
    print_lock(c, c->name, strlen(c->name), reply[1], reply[2]);
    code = reply[1]->elements > 0 ? 0 : EXIT_FREE;
  }
  for (int i = 0; i < 3; i++)
    relock_future_release(f[i]);
  return code;
}

/* -- relock list ----------------------------------------------------------------*/

typedef struct name {
  char *s;
  size_t len;
} name_t;

typedef struct names {
  name_t *at;
  size_t n, cap;
} names_t;

static int add_name(names_t *v, const relock_reply_t *key) {
  if (key->type != RELOCK_REPLY_STRING)
    return 0;
  if (v->n == v->cap) {
    size_t cap = v->cap ? 2 * v->cap : 1024;
    name_t *at = realloc(v->at, cap * sizeof *at);
    if (at == NULL)
      return -1;
    v->at = at, v->cap = cap;
  }
  name_t *k = &v->at[v->n];
  if ((k->s = malloc(key->len + 1)) == NULL)
    return -1;
  memcpy(k->s, key->str, key->len + 1);
  k->len = key->len;
  v->n++;
  return 0;
}

static int by_bytes(const void *pa, const void *pb) {
  const name_t *a = pa, *b = pb;
  int d = memcmp(a->s, b->s, a->len < b->len ? a->len : b->len);
  return d != 0 ? d : (a->len > b->len) - (a->len < b->len);
}

/* Sorts the names and drops the duplicates SCAN may return. */
static void sort_unique(names_t *v) {
  if (v->n == 0)
    return;
  qsort(v->at, v->n, sizeof *v->at, by_bytes);
  size_t kept = 1;
  for (size_t i = 1; i < v->n; i++) {
    if (by_bytes(&v->at[i], &v->at[kept - 1]) == 0)
      free(v->at[i].s);
    else
      v->at[kept++] = v->at[i];
  }
  v->n = kept;
}

/* One SCAN call on the master at node from cursor (which it advances;
 * *done when it is back to 0): the keys of type into v. Redis before 6.0 has no
 * TYPE filter; *typed is then cleared, and the keys that are neither hashes
 * nor strings fall out later (HGETALL and GET fail on them with WRONGTYPE). */
static int scan_step(cli_t *c, const char *node, const char *type, char *cursor, size_t size, int *typed, int *done,
                     names_t *v) {
  const char *argv[] = {"SCAN", cursor, "MATCH", c->name, "COUNT", SCAN_COUNT, "TYPE", type};
  relock_future_t *f = relock_client_command_at_async(c->client, node, *typed ? 8 : 6, argv, NULL);
  const relock_reply_t *r = wait_reply(f);
  int code = 0;
  if (r == NULL && *typed && strcmp(cursor, "0") == 0 && relock_future_error(f) == RELOCK_ESERVER) {
    *typed = 0;
  } else if (r == NULL) {
    code = failed(f);
  } else if (r->type != RELOCK_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != RELOCK_REPLY_STRING ||
             r->element[0]->len >= size || r->element[1]->type != RELOCK_REPLY_ARRAY) {
    say(0, "unexpected reply to SCAN");
    code = EXIT_REDIS;
  } else {
    for (size_t i = 0; i < r->element[1]->elements && code == 0; i++)
      if (add_name(v, r->element[1]->element[i]) != 0)
        code = failed(NULL);
    memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
    *done = strcmp(cursor, "0") == 0;
  }
  relock_future_release(f);
  return code;
}

/* Whether f failed because its key is of another type (WRONGTYPE). */
static int wrong_type(relock_future_t *f) {
  return f != NULL && relock_future_error(f) == RELOCK_ESERVER &&
         strncmp(relock_future_message(f), "WRONGTYPE", 9) == 0;
}

/* The commands of one name: HGETALL and PTTL (a lock), GET and ZRANGE of
 * its permits (a semaphore); one of the pairs fails with WRONGTYPE. */
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
static int print_key(cli_t *c, const name_t *name, relock_future_t **f, int64_t *now_ms, size_t *printed) {
  const relock_reply_t *fields = wait_reply(f[0]), *ttl = wait_reply(f[1]), *get = wait_reply(f[2]),
                       *permits = wait_reply(f[3]);
  if (fields != NULL && ttl != NULL) {
    if (fields->elements > 0 && bad_field(fields) == NULL) {
      print_lock(c, name->s, name->len, fields, ttl);
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
    print_semaphore(c, name->s, name->len, &v);
    ++*printed;
    return 0;
  }
  /* a key that is neither (now) fails with WRONGTYPE: no lock */
  for (int i = 0; i < PER_KEY; i++)
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
  int64_t now_ms = -1;
  int code = 0;
  for (size_t i = 0; i < n && code == 0; i++)
    code = print_key(c, &names[i], f + PER_KEY * i, &now_ms, printed);
  for (size_t i = 0; i < PER_KEY * n; i++) {
    relock_future_wait(f[i], RELOCK_INFINITE); /* those an error left unread */
    relock_future_release(f[i]);
  }
  return code;
}

/* The keys matching on every master: SCAN answers for one node, and a
 * Cluster's keys are spread over its masters. */
static int scan_masters(cli_t *c, names_t *v) {
  relock_future_t *f = relock_client_masters_async(c->client);
  const relock_reply_t *masters = wait_reply(f);
  int typed = 1, code = 0;
  if (masters == NULL)
    code = failed(f);
  /* locks are hashes, semaphores strings; untyped (old Redis), one pass finds both */
  static const char *const types[] = {"hash", "string"};
  for (size_t m = 0; code == 0 && m < masters->elements; m++)
    for (int t = 0; code == 0 && t < 2 && (t == 0 || typed); t++) {
      char cursor[32] = "0";
      int done = 0;
      while (code == 0 && !done)
        code = scan_step(c, masters->element[m]->str, types[t], cursor, sizeof cursor, &typed, &done, v);
    }
  relock_future_release(f);
  return code;
}

int list_locks(cli_t *c) {
  names_t v = {NULL, 0, 0};
  int code = scan_masters(c, &v);
  sort_unique(&v); /* SCAN's order is no order: sorted, the output can be compared */
  size_t printed = 0;
  for (size_t i = 0; i < v.n && code == 0; i += BATCH)
    code = print_batch(c, v.at + i, v.n - i < BATCH ? v.n - i : BATCH, &printed);
  for (size_t i = 0; i < v.n; i++)
    free(v.at[i].s);
  free(v.at);
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
