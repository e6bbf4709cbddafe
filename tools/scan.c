/* The keys matching a pattern on every master (scan.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scan.h"

#define SCAN_COUNT "1000"

const relock_reply_t *await_reply(relock_future_t *f) {
  return f != NULL && relock_future_wait(f, RELOCK_INFINITE) == 0 ? relock_future_reply(f) : NULL;
}

void failure(relock_future_t *f, char *why, size_t size) {
  snprintf(why, size, "%s", f != NULL ? relock_future_message(f) : "out of memory");
}

relock_future_t *masters_of(relock_client_t *c, const relock_reply_t **masters, char *why, size_t size) {
  relock_future_t *f = relock_client_masters_async(c);
  *masters = await_reply(f);
  if (*masters == NULL)
    failure(f, why, size);
  else if ((*masters)->type != RELOCK_REPLY_ARRAY) {
    snprintf(why, size, "unexpected list of masters");
    *masters = NULL;
  }
  return f;
}

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
 * TYPE filter; *typed is then cleared, and the keys of other types fall
 * out later (the commands that read them fail with WRONGTYPE). */
static int scan_step(relock_client_t *c, const char *node, const char *pattern, const char *type, char *cursor,
                     size_t size, int *typed, int *done, names_t *v, char *why, size_t wsize) {
  const char *argv[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", SCAN_COUNT, "TYPE", type};
  relock_future_t *f = relock_client_command_at_async(c, node, *typed ? 8 : 6, argv, NULL);
  const relock_reply_t *r = await_reply(f);
  int code = 0;
  if (r == NULL && *typed && strcmp(cursor, "0") == 0 && relock_future_error(f) == RELOCK_ESERVER) {
    *typed = 0;
  } else if (r == NULL) {
    failure(f, why, wsize);
    code = -1;
  } else if (r->type != RELOCK_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != RELOCK_REPLY_STRING ||
             r->element[0]->len >= size || r->element[1]->type != RELOCK_REPLY_ARRAY) {
    snprintf(why, wsize, "unexpected reply to SCAN");
    code = -1;
  } else {
    for (size_t i = 0; i < r->element[1]->elements && code == 0; i++)
      if (add_name(v, r->element[1]->element[i]) != 0) {
        failure(NULL, why, wsize);
        code = -1;
      }
    memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
    *done = strcmp(cursor, "0") == 0;
  }
  relock_future_release(f);
  return code;
}

int scan_names(relock_client_t *c, const relock_reply_t *masters, const char *pattern, const char *const *types,
               names_t *v, char *why, size_t size) {
  int typed = 1, code = 0;
  for (size_t m = 0; code == 0 && m < masters->elements; m++) {
    if (masters->element[m]->type != RELOCK_REPLY_STRING)
      continue;
    /* untyped (old Redis), one pass finds every type */
    for (size_t t = 0; code == 0 && types[t] != NULL && (t == 0 || typed); t++) {
      char cursor[32] = "0";
      int done = 0;
      while (code == 0 && !done)
        code = scan_step(c, masters->element[m]->str, pattern, types[t], cursor, sizeof cursor, &typed, &done, v,
                         why, size);
    }
  }
  sort_unique(v); /* SCAN's order is no order: sorted, the output can be compared */
  return code;
}

void names_free(names_t *v) {
  for (size_t i = 0; i < v->n; i++)
    free(v->at[i].s);
  free(v->at);
  v->at = NULL;
  v->n = v->cap = 0;
}
