/* A small intrusive hash table with chaining: nodes live in the caller's
 * structures; the caller hashes and compares keys. It grows by doubling and
 * never shrinks. */
#ifndef RELOCK__BASE_HASHTAB_H
#define RELOCK__BASE_HASHTAB_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/list.h"

typedef struct relock__hnode {
  relock__link_t link;
  uint64_t hash;
} relock__hnode_t;

typedef struct relock__htab {
  relock__link_t *buckets;
  size_t nbuckets; /* a power of two */
  size_t count;
} relock__htab_t;

/* A keyed hash (SipHash-1-3, key random per process: hash.c) of len bytes,
 * continuing from h: start with RELOCK__HASH_SEED, pass an earlier result
 * to hash a key made of several parts. */
#define RELOCK__HASH_SEED 0u
uint64_t relock__hash_bytes(uint64_t h, const void *data, size_t len);

static inline int relock__htab_init(relock__htab_t *t, size_t nbuckets) {
  t->buckets = malloc(nbuckets * sizeof(*t->buckets));
  if (t->buckets == NULL)
    return -1;
  for (size_t i = 0; i < nbuckets; i++)
    relock__list_init(&t->buckets[i]);
  t->nbuckets = nbuckets;
  t->count = 0;
  return 0;
}

static inline void relock__htab_cleanup(relock__htab_t *t) {
  free(t->buckets);
  t->buckets = NULL;
  t->nbuckets = t->count = 0;
}

/* The chain that holds nodes of this hash. */
static inline relock__link_t *relock__htab_bucket(const relock__htab_t *t, uint64_t hash) {
  return &t->buckets[hash & (t->nbuckets - 1)];
}

static inline void relock__htab_grow(relock__htab_t *t) {
  size_t n = t->nbuckets * 2;
  relock__link_t *b = malloc(n * sizeof(*b));
  if (b == NULL)
    return; /* longer chains: slower, still correct */
  for (size_t i = 0; i < n; i++)
    relock__list_init(&b[i]);
  for (size_t i = 0; i < t->nbuckets; i++) {
    while (!relock__list_empty(&t->buckets[i])) {
      relock__link_t *link = t->buckets[i].next;
      relock__hnode_t *node = relock__container_of(link, relock__hnode_t, link);
      relock__list_remove(link);
      relock__list_push_back(&b[node->hash & (n - 1)], link);
    }
  }
  free(t->buckets);
  t->buckets = b;
  t->nbuckets = n;
}

static inline void relock__htab_insert(relock__htab_t *t, relock__hnode_t *node, uint64_t hash) {
  if (t->count >= t->nbuckets)
    relock__htab_grow(t);
  node->hash = hash;
  relock__list_push_back(relock__htab_bucket(t, hash), &node->link);
  t->count++;
}

static inline void relock__htab_remove(relock__htab_t *t, relock__hnode_t *node) {
  relock__list_remove(&node->link);
  t->count--;
}

/* Iterates the nodes of one chain: for (RELOCK__HTAB_EACH(t, hash, n)) ... */
#define RELOCK__HTAB_EACH(t, h, n)                                                       \
  relock__link_t *n##_head_ = relock__htab_bucket((t), (h)), *n##_l_ = n##_head_->next;  \
  n##_l_ != n##_head_ && ((n) = relock__container_of(n##_l_, relock__hnode_t, link), 1); \
  n##_l_ = n##_l_->next

#endif /* RELOCK__BASE_HASHTAB_H */
