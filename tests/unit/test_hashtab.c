/* Unit tests of the intrusive hash table (base/hashtab.h): every node is
 * found by its hash after the table has grown, a node is unlinked from the
 * head, the middle or the end of its chain, and chains of colliding hashes
 * stay whole. */
#include <config.h>

#include <stdint.h>
#include <stdlib.h>

#include "base/hashtab.h"
#include "support/test.h"

#define N 1000

typedef struct item {
  relock__hnode_t node;
  int key;
  int present;
} item_t;

/* colliding: every hash lands in one chain of a table of up to 1024
 * buckets (the key only differs above bit 10). */
static uint64_t hash_of(int key, int colliding) {
  return colliding ? (uint64_t)key << 11 : relock__hash_bytes(RELOCK__HASH_SEED, &key, sizeof key);
}

static item_t *find(relock__htab_t *t, int key, int colliding) {
  uint64_t h = hash_of(key, colliding);
  relock__hnode_t *n;
  for (RELOCK__HTAB_EACH(t, h, n)) {
    item_t *it = relock__container_of(n, item_t, node);
    if (n->hash == h && it->key == key)
      return it;
  }
  return NULL;
}

static size_t walk_count(const relock__htab_t *t) {
  size_t n = 0;
  for (size_t i = 0; i < t->nbuckets; i++)
    for (relock__hnode_t *node = t->buckets[i]; node != NULL; node = node->next) {
      assert_ptr_equal(*node->pprev, node); /* every back link points at its node */
      n++;
    }
  return n;
}

static void check(relock__htab_t *t, item_t *items, int colliding) {
  size_t present = 0;
  for (int i = 0; i < N; i++) {
    item_t *it = find(t, i, colliding);
    assert_ptr_equal(it, items[i].present ? &items[i] : NULL);
    present += items[i].present != 0;
  }
  assert_int_equal(t->count, present);
  assert_int_equal(walk_count(t), present);
}

static void run(int colliding) {
  relock__htab_t t = {0};
  assert_int_equal(relock__htab_init(&t, 4), 0);
  item_t *items = calloc(N, sizeof(*items));
  assert_non_null(items);
  for (int i = 0; i < N; i++) {
    items[i].key = i;
    items[i].present = 1;
    relock__htab_insert(&t, &items[i].node, hash_of(i, colliding));
  }
  assert_true(t.nbuckets >= N); /* grown: at most one node per bucket on average */
  check(&t, items, colliding);
  for (int i = 0; i < N; i += 3) { /* heads, middles and ends of chains alike */
    relock__htab_remove(&t, &items[i].node);
    items[i].present = 0;
  }
  check(&t, items, colliding);
  for (int i = 0; i < N; i++)
    if (items[i].present) {
      relock__htab_remove(&t, &items[i].node);
      items[i].present = 0;
    }
  check(&t, items, colliding);
  for (size_t i = 0; i < t.nbuckets; i++)
    assert_null(t.buckets[i]);
  relock__htab_cleanup(&t);
  free(items);
}

static void test_spread_hashes(void **state) {
  (void)state;
  run(0);
}

static void test_colliding_hashes(void **state) {
  (void)state;
  run(1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spread_hashes),
      cmocka_unit_test(test_colliding_hashes),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, NULL, NULL);
}
