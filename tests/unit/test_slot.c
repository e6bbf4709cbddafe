/* Unit tests of Redis Cluster's key -> slot function: CRC16 against the
 * check value of the Cluster specification, and slots against what a real
 * redis-server 7.0 answered to CLUSTER KEYSLOT for the same keys (hash tags,
 * empty tags, braces without a tag, an empty key). */
#include <config.h>

#include <string.h>

#include "redis/slot.h"
#include "support/test.h"

static void test_crc16_check_value(void **state) {
  (void)state;
  /* The specification's reference: CRC16/XMODEM("123456789") = 0x31C3. */
  assert_int_equal(relock__crc16("123456789", 9), 0x31C3);
  assert_int_equal(relock__crc16("", 0), 0);
}

static void test_slots_as_redis_computes_them(void **state) {
  (void)state;
  static const struct {
    const char *key;
    int slot;
  } vectors[] = {
      {"123456789", 12739},
      {"foo", 12182},
      {"bar", 5061},
      {"{user1000}.following", 3443}, /* the tag alone is hashed... */
      {"{user1000}.followers", 3443}, /* ...so both share a slot */
      {"foo{}{bar}", 8363},           /* an empty first tag: the whole key */
      {"foo{{bar}}zap", 4015},        /* the tag is "{bar" */
      {"foo{bar}{zap}", 5061},        /* the first tag only: "bar" */
      {"a{b", 13340},                 /* no closing brace: the whole key */
      {"a}b{c}", 7365},               /* a '}' before the '{' does not count */
      {"", 0},
      {"{", 4092},
      {"redisson_lock__channel:{foo}", 12182}, /* a lock's channel shares its name's slot */
  };
  for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
    int slot = relock__key_slot(vectors[i].key, strlen(vectors[i].key));
    if (slot != vectors[i].slot)
      fail_msg("slot of \"%s\": %d, Redis says %d", vectors[i].key, slot, vectors[i].slot);
  }
}

static void test_binary_keys(void **state) {
  (void)state;
  /* Keys are byte strings: a NUL inside counts, and a tag may hold one. */
  assert_int_not_equal(relock__key_slot("a\0b", 3), relock__key_slot("a", 1));
  assert_int_equal(relock__key_slot("x{a\0b}y", 7), relock__key_slot("a\0b", 3));
  for (int i = 0; i < 256; i++) {
    char c = (char)i;
    int slot = relock__key_slot(&c, 1);
    assert_true(slot >= 0 && slot < RELOCK__SLOTS);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crc16_check_value),
      cmocka_unit_test(test_slots_as_redis_computes_them),
      cmocka_unit_test(test_binary_keys),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, NULL, NULL);
}
