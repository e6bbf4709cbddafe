/* A small intrusive hash table with chaining: nodes live in the caller's
 * structures; the caller hashes and compares keys. It grows by doubling and
 * never shrinks. */
#ifndef RELOCK__BASE_HASHTAB_H
#define RELOCK__BASE_HASHTAB_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/list.h" /* relock__container_of, for the callers */

/* A chain is singly linked from its bucket, so that a bucket is one
 * pointer (the renewal registry has a bucket per held lock: 8 bytes each,
 * not a list head's 16); pprev still unlinks a node in O(1). */
typedef struct relock__hnode {
  struct relock__hnode *next;
  struct relock__hnode **pprev; /* what points to this node: its bucket or the node before */
  uint64_t hash;
} relock__hnode_t;

typedef struct relock__htab {
  relock__hnode_t **buckets; /* each the first node of its chain, NULL for none */
  size_t nbuckets;           /* a power of two */
  size_t count;
} relock__htab_t;

/* A keyed hash (SipHash-1-3, key random per process: hash.c) of len bytes,
 * continuing from h: start with RELOCK__HASH_SEED, pass an earlier result
 * to hash a key made of several parts. */
#define RELOCK__HASH_SEED 0u
uint64_t relock__hash_bytes(uint64_t h, const void *data, size_t len);

static inline int relock__htab_init(relock__htab_t *t, size_t nbuckets) {
  t->buckets = calloc(nbuckets, sizeof(*t->buckets));
  if (t->buckets == NULL)
    return -1;
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
static inline relock__hnode_t **relock__htab_bucket(const relock__htab_t *t, uint64_t hash) {
  return &t->buckets[hash & (t->nbuckets - 1)];
}

/* Puts node first in *head. (Order within a chain means nothing: the hash
 * is keyed per process.) */
static inline void relock__htab_link_(relock__hnode_t **head, relock__hnode_t *node) {
  node->next = *head;
  node->pprev = head;
  if (*head != NULL)
    (*head)->pprev = &node->next;
  *head = node;
}

static inline void relock__htab_grow(relock__htab_t *t) {
  size_t n = t->nbuckets * 2;
  relock__hnode_t **b = calloc(n, sizeof(*b));
  if (b == NULL)
    return; /* longer chains: slower, still correct */
  for (size_t i = 0; i < t->nbuckets; i++) {
    for (relock__hnode_t *node = t->buckets[i], *next; node != NULL; node = next) {
      next = node->next;
      relock__htab_link_(&b[node->hash & (n - 1)], node);
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
  relock__htab_link_(relock__htab_bucket(t, hash), node);
  t->count++;
}

static inline void relock__htab_remove(relock__htab_t *t, relock__hnode_t *node) {
  *node->pprev = node->next;
  if (node->next != NULL)
    node->next->pprev = node->pprev;
  node->next = NULL;
  node->pprev = NULL;
  t->count--;
}

/* Iterates the nodes of one chain: for (RELOCK__HTAB_EACH(t, hash, n)) ... */
#define RELOCK__HTAB_EACH(t, h, n) (n) = *relock__htab_bucket((t), (h)); (n) != NULL; (n) = (n)->next

#endif /* RELOCK__BASE_HASHTAB_H */
