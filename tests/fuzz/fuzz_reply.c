/* libFuzzer target: relock__reply_copy (a hiredis reply into a
 * relock_reply_t tree in one allocation) on every reply hiredis's own reader
 * parses from the input, read as RESP.
 *
 * Each copy is compared with its source field by field: the mapped type, the
 * integer, the string bytes with their length and a terminating NUL, the
 * elements; and every node, element array and string of the copy must lie in
 * the one block that starts at the root (as ASan measures it). Then the
 * hiredis replies are freed before the copies are read again, so a copy that
 * still pointed into them would be a use after free.
 *
 * hiredis 0.14 never nests deeper than 7, hands out no NULL elements and
 * knows no reply types newer than it, which leaves the copy's stack growth
 * (past 16 levels), its NULL-as-nil rule and its rule for unknown types
 * unreached; so the replies of each input are also copied inside a made-up
 * array of them, a NULL and a reply of an unknown type (the first reply's
 * fields under another type number), itself nested 17 to 80 levels deep. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <sanitizer/allocator_interface.h>

#include <relock/client.h>

#include "fuzz.h"
#include "redis/reply.h"

/* hiredis 0.14 allocates an array's element vector as soon as it reads the
 * count (up to INT_MAX elements, 16 GiB), before the elements arrive: above
 * libFuzzer's malloc limit. Larger arrays are refused here, as if out of
 * memory, which the reader reports as an error. */
#define MAX_ELEMENTS 4096
#define MAX_REPLIES 64
#define UNKNOWN_TYPE 1000 /* no hiredis has it */

static redisReplyObjectFunctions functions;
static void *(*hiredis_create_array)(const redisReadTask *, int);

static void *create_array(const redisReadTask *task, int elements) {
  if (elements > MAX_ELEMENTS)
    return NULL;
  return hiredis_create_array(task, elements);
}

static relock_reply_type_t expected_type(const redisReply *r) {
  if (r == NULL)
    return RELOCK_REPLY_NIL;
  if (r->type == UNKNOWN_TYPE) /* reply.h: it keeps what it carries */
    return r->element != NULL ? RELOCK_REPLY_ARRAY : r->str != NULL ? RELOCK_REPLY_STRING : RELOCK_REPLY_NIL;
  switch (r->type) {
  case REDIS_REPLY_STRING: return RELOCK_REPLY_STRING;
  case REDIS_REPLY_STATUS: return RELOCK_REPLY_STATUS;
  case REDIS_REPLY_ERROR: return RELOCK_REPLY_ERROR;
  case REDIS_REPLY_INTEGER: return RELOCK_REPLY_INTEGER;
  case REDIS_REPLY_NIL: return RELOCK_REPLY_NIL;
  case REDIS_REPLY_ARRAY: return RELOCK_REPLY_ARRAY;
  default:
    fprintf(stderr, "reply type %d: one hiredis 0.14 does not make\n", r->type);
    abort();
  }
}

/* The copy's block: [root, root + size). */
typedef struct block {
  const char *start;
  size_t size;
} block_t;

static int inside(const block_t *b, const void *p, size_t n) {
  const char *c = p;
  return c >= b->start && n <= b->size && (size_t)(c - b->start) <= b->size - n;
}

/* src (NULL: a nil) and its copy, field by field. */
static void compare(const redisReply *src, const relock_reply_t *copy, const block_t *b) {
  FUZZ_CHECK(copy != NULL && inside(b, copy, sizeof *copy));
  relock_reply_type_t type = expected_type(src);
  FUZZ_CHECK(copy->type == type);
  FUZZ_CHECK(copy->integer == (type == RELOCK_REPLY_INTEGER ? src->integer : 0));
  if (type == RELOCK_REPLY_STRING || type == RELOCK_REPLY_STATUS || type == RELOCK_REPLY_ERROR) {
    FUZZ_CHECK(copy->str != NULL && copy->len == src->len && inside(b, copy->str, copy->len + 1));
    FUZZ_CHECK(memcmp(copy->str, src->str, src->len) == 0 && copy->str[copy->len] == '\0');
  } else {
    FUZZ_CHECK(copy->str == NULL && copy->len == 0);
  }
  if (type == RELOCK_REPLY_ARRAY) {
    FUZZ_CHECK(copy->elements == src->elements);
    FUZZ_CHECK((copy->element == NULL) == (copy->elements == 0));
    if (copy->elements > 0)
      FUZZ_CHECK(inside(b, copy->element, copy->elements * sizeof copy->element[0]));
    for (size_t i = 0; i < copy->elements; i++)
      compare(src->element[i], copy->element[i], b);
  } else {
    FUZZ_CHECK(copy->element == NULL && copy->elements == 0);
  }
}

/* Reads every byte of a copy (after its source is gone). */
static size_t touch(const relock_reply_t *r) {
  size_t sum = (size_t)r->type + (size_t)r->integer + r->len;
  for (size_t i = 0; r->str != NULL && i <= r->len; i++)
    sum += (unsigned char)r->str[i];
  for (size_t i = 0; i < r->elements; i++)
    sum += touch(r->element[i]);
  return sum;
}

static relock_reply_t *copy_and_compare(const redisReply *src) {
  relock_reply_t *copy = relock__reply_copy(src);
  FUZZ_CHECK(copy != NULL); /* only out of memory makes NULL */
  block_t b = {(const char *)copy, __sanitizer_get_allocated_size(copy)};
  compare(src, copy, &b);
  return copy;
}

/* A made-up reply: an array of the replies, a NULL and one of an unknown
 * type, nested depth deep in one-element arrays. Freed with free_nest(top,
 * depth). */
static redisReply *nest(redisReply **replies, size_t n, size_t depth) {
  redisReply *all = calloc(1, sizeof *all), *unknown = calloc(1, sizeof *unknown);
  FUZZ_CHECK(all != NULL && unknown != NULL);
  if (n > 0)
    *unknown = *replies[0]; /* its str and element stay replies[0]'s */
  unknown->type = UNKNOWN_TYPE;
  all->type = REDIS_REPLY_ARRAY;
  all->elements = n + 2;
  all->element = calloc(n + 2, sizeof *all->element);
  FUZZ_CHECK(all->element != NULL);
  memcpy(all->element, replies, n * sizeof *replies); /* element[n] stays NULL */
  all->element[n + 1] = unknown;
  redisReply *top = all;
  for (size_t i = 0; i < depth; i++) {
    redisReply *outer = calloc(1, sizeof *outer);
    FUZZ_CHECK(outer != NULL);
    outer->type = REDIS_REPLY_ARRAY;
    outer->elements = 1;
    outer->element = calloc(1, sizeof *outer->element);
    FUZZ_CHECK(outer->element != NULL);
    outer->element[0] = top;
    top = outer;
  }
  return top;
}

static void free_nest(redisReply *top, size_t depth) {
  for (size_t i = 0; i <= depth; i++) {
    redisReply *inner = i < depth ? top->element[0] : NULL;
    if (i == depth)
      free(top->element[top->elements - 1]); /* the unknown one */
    free(top->element);
    free(top);
    top = inner;
  }
}

static volatile size_t sink; /* keeps touch's reads */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (hiredis_create_array == NULL) {
    redisReader *probe = redisReaderCreate();
    FUZZ_CHECK(probe != NULL);
    functions = *probe->fn;
    hiredis_create_array = functions.createArray;
    functions.createArray = create_array;
    redisReaderFree(probe);
  }
  redisReader *reader = redisReaderCreateWithFunctions(&functions);
  FUZZ_CHECK(reader != NULL);
  FUZZ_CHECK(redisReaderFeed(reader, (const char *)data, size) == REDIS_OK);

  redisReply *replies[MAX_REPLIES];
  relock_reply_t *copies[MAX_REPLIES];
  size_t n = 0;
  while (n < MAX_REPLIES) {
    void *reply = NULL;
    if (redisReaderGetReply(reader, &reply) != REDIS_OK || reply == NULL)
      break;
    replies[n] = reply;
    copies[n] = copy_and_compare(reply);
    n++;
  }
  redisReaderFree(reader);

  FUZZ_CHECK(relock__reply_copy(NULL) == NULL);
  size_t depth = 17 + size % 64;
  redisReply *top = nest(replies, n, depth);
  relock_reply_t *nested = copy_and_compare(top);
  free_nest(top, depth);

  for (size_t i = 0; i < n; i++)
    freeReplyObject(replies[i]);
  size_t sum = touch(nested);
  for (size_t i = 0; i < n; i++) {
    sum += touch(copies[i]);
    relock__reply_free(copies[i]);
  }
  relock__reply_free(nested);
  sink = sum;
  return 0;
}
