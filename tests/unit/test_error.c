/* Error codes and the version: the table is complete, the numbers are the
 * ones promised (append-only), and every code has a name and a description. */
#include <config.h>

#include <string.h>

#include <relock/relock.h>

#include "support/test.h"

static void test_codes_keep_their_numbers(void **state) {
  (void)state;
  /* Released numbers never change: programs and other languages store them. */
  assert_int_equal(RELOCK_OK, 0);
  assert_int_equal(RELOCK_EINVAL, -1);
  assert_int_equal(RELOCK_ENOMEM, -2);
  assert_int_equal(RELOCK_ENOTOWNER, -3);
  assert_int_equal(RELOCK_ETIMEDOUT, -4);
  assert_int_equal(RELOCK_ENOTACQUIRED, -5);
  assert_int_equal(RELOCK_ECONNLOST, -6);
  assert_int_equal(RELOCK_ECONNREFUSED, -7);
  assert_int_equal(RELOCK_ESERVER, -8);
  assert_int_equal(RELOCK_EPROTO, -9);
  assert_int_equal(RELOCK_ECANCELED, -10);
  assert_int_equal(RELOCK_ECLOSED, -11);
  assert_int_equal(RELOCK_EWOULDBLOCK, -12);
  assert_int_equal(RELOCK_EPENDING, -13);
  assert_int_equal(RELOCK_EAUTH, -14);
  assert_int_equal(RELOCK_ELOST, -15);
  assert_int_equal(RELOCK_EIO, -16);
  assert_int_equal(RELOCK_EWRONGTHREAD, -17);
  assert_int_equal(RELOCK_EFORKED, -18);
  assert_int_equal(RELOCK_EINTERRUPTED, -19);
  assert_int_equal(RELOCK_ENOPERM, -20);
  assert_int_equal(RELOCK_ETLS, -21);
  assert_int_equal(RELOCK_ENOTREPLICATED, -22);
  assert_int_equal(RELOCK_ENOMASTER, -23);
  assert_int_equal(RELOCK_EUPGRADE, -24);
  assert_int_equal(RELOCK_EWRONGKIND, -25);
}

static void test_every_code_has_a_distinct_name_and_description(void **state) {
  (void)state;
  static const struct {
    int code;
    const char *name;
  } codes[] = {
#define XX(name, num, desc) {RELOCK_##name, "RELOCK_" #name},
      RELOCK_ERRNO_MAP(XX)
#undef XX
  };
  size_t n = sizeof codes / sizeof codes[0];
  for (size_t i = 0; i < n; i++) {
    assert_true(codes[i].code < 0);
    assert_string_equal(relock_err_name(codes[i].code), codes[i].name);
    const char *desc = relock_strerror(codes[i].code);
    assert_non_null(desc);
    assert_string_not_equal(desc, "unknown error");
    for (size_t j = 0; j < i; j++) {
      assert_int_not_equal(codes[i].code, codes[j].code);
      assert_string_not_equal(desc, relock_strerror(codes[j].code));
    }
  }
  /* append-only and dense: the codes run -1, -2, ... with no gaps */
  for (size_t i = 0; i < n; i++)
    assert_int_equal(codes[i].code, -(int)(i + 1));
}

static void test_unknown_codes(void **state) {
  (void)state;
  assert_string_equal(relock_strerror(0), "success");
  assert_string_equal(relock_err_name(0), "RELOCK_OK");
  assert_string_equal(relock_strerror(-9999), "unknown error");
  assert_string_equal(relock_err_name(-9999), "RELOCK_EUNKNOWN");
  assert_string_equal(relock_strerror(5), "unknown error");
}

static void test_version(void **state) {
  (void)state;
  char expect[32];
  snprintf(expect, sizeof expect, "%d.%d.%d", RELOCK_VERSION_MAJOR, RELOCK_VERSION_MINOR,
           RELOCK_VERSION_PATCH);
  assert_string_equal(relock_version_string(), expect);
  assert_string_equal(relock_version_string(), PACKAGE_VERSION); /* configure read the header */
  assert_int_equal(relock_version(), RELOCK_VERSION_HEX);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_codes_keep_their_numbers),
    cmocka_unit_test(test_every_code_has_a_distinct_name_and_description),
    cmocka_unit_test(test_unknown_codes),
    cmocka_unit_test(test_version),
};

RELOCK_TEST_MAIN(tests, NULL, NULL)
