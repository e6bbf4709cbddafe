/* Shared by every test program: cmocka with TAP output (so the automake
 * harness counts test cases), and small helpers for tests on a libev loop. */
#ifndef RELOCK_TEST_H
#define RELOCK_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

/* Runs a cmocka group with TAP output. cmocka reports each failure with its
 * file and line. */
#define RELOCK_TEST_MAIN(tests, setup, teardown)                           \
  int main(void) {                                                          \
    cmocka_set_message_output(CM_OUTPUT_TAP);                               \
    return cmocka_run_group_tests_name(__FILE__, tests, setup, teardown);   \
  }

/* A program that cannot run (no redis-server, no perl...) fails, never
 * skips: TAP's "Bail out!" is an ERROR for the harness, with the reason in
 * the log. ./bootstrap --deps installs everything the tests need. */
#define RELOCK_TEST_CANNOT_RUN(reason)                                      \
  do {                                                                      \
    printf("Bail out! cannot run: %s\n", reason);                           \
    exit(1);                                                                \
  } while (0)

/* Non-zero when the suite runs under valgrind (make check-valgrind), where
 * everything is 20-50x slower: tests scale their sizes, never their
 * assertions. */
static inline int relock_test_under_valgrind(void) { return getenv("RELOCK_UNDER_VALGRIND") != NULL; }

/* How many times slower than a plain build this test runs: valgrind about
 * ten, a sanitizer build about three. Tests stretch bounds that the
 * library keeps by its own timers (a loop running late runs them late),
 * never what they check. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) /* gcc */
#define RELOCK_TEST_SANITIZED 1
#elif defined(__has_feature) /* clang */
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RELOCK_TEST_SANITIZED 1
#endif
#endif
#ifndef RELOCK_TEST_SANITIZED
#define RELOCK_TEST_SANITIZED 0
#endif
static inline int relock_test_slowdown(void) {
  return relock_test_under_valgrind() ? 10 : RELOCK_TEST_SANITIZED ? 3 : 1;
}

#endif /* RELOCK_TEST_H */
