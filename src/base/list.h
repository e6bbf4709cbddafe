/* Intrusive circular doubly-linked lists with a sentinel head. A node can be
 * unlinked in O(1) without knowing which list holds it. */
#ifndef RELOCK__BASE_LIST_H
#define RELOCK__BASE_LIST_H

#include <stddef.h>

typedef struct relock__link {
  struct relock__link *next;
  struct relock__link *prev;
} relock__link_t;

static inline void relock__list_init(relock__link_t *head) { head->next = head->prev = head; }

static inline int relock__list_empty(const relock__link_t *head) { return head->next == head; }

static inline void relock__list_push_back(relock__link_t *head, relock__link_t *node) {
  node->prev = head->prev;
  node->next = head;
  head->prev->next = node;
  head->prev = node;
}

static inline void relock__list_remove(relock__link_t *node) {
  node->prev->next = node->next;
  node->next->prev = node->prev;
  node->next = node->prev = node;
}

/* The structure of type `type` whose member `member` is the link at ptr. */
#define relock__container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#endif /* RELOCK__BASE_LIST_H */
