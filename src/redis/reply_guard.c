/* Replies nobody asked for, refused as they start (reply_guard.h). */
#include <config.h>

#include <pthread.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#include "redis/reply_guard.h"

static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static redisReplyObjectFunctions *hiredis_fns; /* hiredis's defaults; NULL: the table could not be built */
static redisReplyObjectFunctions guarded_fns;  /* the same, each creator asking the guard first */

/* Whether the reply that task starts is refused: asked once a reply, at its
 * top (the elements of an array are not asked again). */
static int refused(const redisReadTask *task) {
  relock__reply_guard_t *g = task->privdata;
  return task->parent == NULL && g != NULL && g->refuse(g, task->type);
}

static void *guard_string(const redisReadTask *t, char *s, size_t len) {
  return refused(t) ? NULL : hiredis_fns->createString(t, s, len);
}
#ifdef HAVE_REDISREPLYOBJECTFUNCTIONS_CREATEDOUBLE /* hiredis >= 1.0 */
static void *guard_array(const redisReadTask *t, size_t n) {
  return refused(t) ? NULL : hiredis_fns->createArray(t, n);
}
static void *guard_double(const redisReadTask *t, double v, char *s, size_t len) {
  return refused(t) ? NULL : hiredis_fns->createDouble(t, v, s, len);
}
static void *guard_bool(const redisReadTask *t, int v) {
  return refused(t) ? NULL : hiredis_fns->createBool(t, v);
}
#else
static void *guard_array(const redisReadTask *t, int n) {
  return refused(t) ? NULL : hiredis_fns->createArray(t, n);
}
#endif
static void *guard_integer(const redisReadTask *t, long long v) {
  return refused(t) ? NULL : hiredis_fns->createInteger(t, v);
}
static void *guard_nil(const redisReadTask *t) { return refused(t) ? NULL : hiredis_fns->createNil(t); }

/* hiredis's defaults are not exported: a reader of its own making has them. */
static void build_table(void) {
  redisReader *r = redisReaderCreate();
  if (r == NULL)
    return;
  guarded_fns = *r->fn;
  guarded_fns.createString = guard_string;
  guarded_fns.createArray = guard_array;
  guarded_fns.createInteger = guard_integer;
  guarded_fns.createNil = guard_nil;
#ifdef HAVE_REDISREPLYOBJECTFUNCTIONS_CREATEDOUBLE
  guarded_fns.createDouble = guard_double;
  guarded_fns.createBool = guard_bool;
#endif
  hiredis_fns = r->fn;
  redisReaderFree(r);
}

int relock__reply_guard_install(struct redisReader *reader, relock__reply_guard_t *g) {
  pthread_once(&table_once, build_table);
  if (hiredis_fns == NULL || (reader->fn != hiredis_fns && reader->fn != &guarded_fns))
    return -1;
  reader->fn = &guarded_fns;
  reader->privdata = g;
  return 0;
}
