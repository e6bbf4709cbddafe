/* Unit tests of the reply guard (src/redis/reply_guard.h) on hiredis's own
 * reader: the guard is asked once per reply, at its top, with the reply's
 * type, for every kind of reply this hiredis parses; a refusal fails the
 * reader instead of handing the reply out; the guarded table is one, built
 * once even when two threads guard their first readers at the same time;
 * and a reader with functions of someone else's is not taken over. */
#include <config.h>

#include <pthread.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis/reply_guard.h"
#include "support/test.h"

typedef struct counting_guard {
  relock__reply_guard_t guard;
  int refuse_type; /* refuse replies of this type; -1: none */
  int asked;
  int types[16];
} counting_guard_t;

static int count_and_judge(relock__reply_guard_t *g, int type) {
  counting_guard_t *cg = (counting_guard_t *)g;
  if (cg->asked < 16)
    cg->types[cg->asked] = type;
  cg->asked++;
  return type == cg->refuse_type;
}

static redisReader *guarded_reader(counting_guard_t *cg, int refuse_type) {
  memset(cg, 0, sizeof(*cg));
  cg->guard.refuse = count_and_judge;
  cg->refuse_type = refuse_type;
  redisReader *r = redisReaderCreate();
  assert_non_null(r);
  assert_int_equal(relock__reply_guard_install(r, &cg->guard), 0);
  return r;
}

/* Feeds resp and takes every reply it holds: their number, or -1 when the
 * reader failed. */
static int replies_in(redisReader *r, const char *resp) {
  assert_int_equal(redisReaderFeed(r, resp, strlen(resp)), REDIS_OK);
  int n = 0;
  for (;;) {
    void *reply = NULL;
    if (redisReaderGetReply(r, &reply) != REDIS_OK)
      return -1;
    if (reply == NULL)
      return n;
    freeReplyObject(reply);
    n++;
  }
}

static void test_asked_once_per_reply_with_its_type(void **state) {
  (void)state;
  counting_guard_t cg;
  redisReader *r = guarded_reader(&cg, -1);
  /* a status, an integer, an array of a string and a nested array, a nil
   * (asked as what it starts as: a string), an error, a string */
  int n = replies_in(r, "+OK\r\n:1\r\n*2\r\n$1\r\na\r\n*1\r\n:2\r\n$-1\r\n-ERR x\r\n$2\r\nhi\r\n");
  assert_int_equal(n, 6);
  assert_int_equal(cg.asked, 6); /* the array's elements are not asked */
  const int want[] = {REDIS_REPLY_STATUS, REDIS_REPLY_INTEGER, REDIS_REPLY_ARRAY,
                      REDIS_REPLY_STRING, REDIS_REPLY_ERROR,   REDIS_REPLY_STRING};
  for (int i = 0; i < 6; i++)
    assert_int_equal(cg.types[i], want[i]);
  redisReaderFree(r);
}

#ifdef HAVE_REDISREPLYOBJECTFUNCTIONS_CREATEDOUBLE
/* hiredis 1.x parses RESP3 too: its doubles, booleans, nulls, maps, sets
 * and pushes each pass the guard. */
static void test_resp3_replies_are_asked_too(void **state) {
  (void)state;
  counting_guard_t cg;
  redisReader *r = guarded_reader(&cg, -1);
  int n = replies_in(r, ",1.5\r\n#t\r\n_\r\n%1\r\n+k\r\n:1\r\n~1\r\n:1\r\n>2\r\n+message\r\n+x\r\n");
  assert_int_equal(n, 6);
  assert_int_equal(cg.asked, 6);
  const int want[] = {REDIS_REPLY_DOUBLE, REDIS_REPLY_BOOL, REDIS_REPLY_NIL,
                      REDIS_REPLY_MAP,    REDIS_REPLY_SET,  REDIS_REPLY_PUSH};
  for (int i = 0; i < 6; i++)
    assert_int_equal(cg.types[i], want[i]);
  redisReaderFree(r);
}
#endif

/* Every kind of reply can be refused, and a refusal fails the reader:
 * nothing is handed out, whatever came before it was. */
static void test_a_refused_reply_fails_the_reader(void **state) {
  (void)state;
  static const struct {
    int type;
    const char *resp;
  } cases[] = {
      {REDIS_REPLY_STATUS, "+OK\r\n"},   {REDIS_REPLY_INTEGER, ":7\r\n"},
      {REDIS_REPLY_STRING, "$1\r\nx\r\n"}, {REDIS_REPLY_STRING, "$-1\r\n"},
      {REDIS_REPLY_ARRAY, "*1\r\n:1\r\n"}, {REDIS_REPLY_ERROR, "-ERR no\r\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    counting_guard_t cg;
    redisReader *r = guarded_reader(&cg, cases[i].type);
    const char *other = cases[i].type == REDIS_REPLY_INTEGER ? "+OK\r\n" : ":1\r\n";
    assert_int_equal(replies_in(r, other), 1); /* another type passes */
    assert_int_equal(replies_in(r, cases[i].resp), -1);
    assert_int_not_equal(r->err, 0);
    redisReaderFree(r);
  }
}

typedef struct racer {
  counting_guard_t cg;
  redisReader *reader;
  pthread_barrier_t *start;
} racer_t;

static void *guard_first_reader(void *arg) {
  racer_t *rc = arg;
  rc->reader = redisReaderCreate();
  rc->cg.guard.refuse = count_and_judge;
  rc->cg.refuse_type = -1;
  pthread_barrier_wait(rc->start);
  if (rc->reader != NULL && relock__reply_guard_install(rc->reader, &rc->cg.guard) != 0) {
    redisReaderFree(rc->reader);
    rc->reader = NULL;
  }
  return NULL;
}

/* Run first in its program: the table is built by whichever thread comes
 * first, once, and both readers share it (ThreadSanitizer watches). */
static void test_two_threads_share_one_table(void **state) {
  (void)state;
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, 2);
  racer_t racers[2];
  pthread_t threads[2];
  memset(racers, 0, sizeof racers);
  for (int i = 0; i < 2; i++) {
    racers[i].start = &start;
    assert_int_equal(pthread_create(&threads[i], NULL, guard_first_reader, &racers[i]), 0);
  }
  for (int i = 0; i < 2; i++)
    pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&start);
  assert_non_null(racers[0].reader);
  assert_non_null(racers[1].reader);
  assert_ptr_equal(racers[0].reader->fn, racers[1].reader->fn);
  assert_ptr_equal(racers[0].reader->privdata, &racers[0].cg.guard);
  assert_ptr_equal(racers[1].reader->privdata, &racers[1].cg.guard);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(replies_in(racers[i].reader, "+OK\r\n"), 1);
    assert_int_equal(racers[i].cg.asked, 1);
    redisReaderFree(racers[i].reader);
  }
}

/* Guarding twice is harmless; a reader with functions of someone else's
 * is refused, and left as it was. */
static void test_only_hiredis_defaults_are_taken_over(void **state) {
  (void)state;
  counting_guard_t cg;
  redisReader *r = guarded_reader(&cg, -1);
  assert_int_equal(relock__reply_guard_install(r, &cg.guard), 0);
  assert_int_equal(replies_in(r, ":1\r\n"), 1);
  assert_int_equal(cg.asked, 1);
  redisReaderFree(r);

  redisReplyObjectFunctions theirs;
  redisReader *plain = redisReaderCreate();
  assert_non_null(plain);
  theirs = *plain->fn;
  redisReaderFree(plain);
  redisReader *other = redisReaderCreateWithFunctions(&theirs);
  assert_non_null(other);
  assert_int_equal(relock__reply_guard_install(other, &cg.guard), -1);
  assert_ptr_equal(other->fn, &theirs);
  redisReaderFree(other);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_threads_share_one_table),
      cmocka_unit_test(test_asked_once_per_reply_with_its_type),
#ifdef HAVE_REDISREPLYOBJECTFUNCTIONS_CREATEDOUBLE
      cmocka_unit_test(test_resp3_replies_are_asked_too),
#endif
      cmocka_unit_test(test_a_refused_reply_fails_the_reader),
      cmocka_unit_test(test_only_hiredis_defaults_are_taken_over),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("reply_guard", tests, NULL, NULL);
}
