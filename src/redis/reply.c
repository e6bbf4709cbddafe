/* Deep copies of hiredis replies (and of our own) into relock_reply_t trees,
 * one allocation each; views of scalar replies; relock_future_reply, which
 * hands a copy out from a future.
 *
 * The copy is made in two passes over the reply with the same walk: the first
 * only counts nodes, element pointers and string bytes, the second lays them
 * out in one block: [nodes][element arrays][string bytes]. The walk keeps its
 * own stack rather than recursing: hiredis 1.x bounds the nesting of a reply
 * only by its size. */
#include <config.h>

#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include <relock/client.h>
#include <relock/error.h>

#include "future/promise.h"
#include "redis/reply.h"

typedef struct layout {
  int fill; /* 0: count only; 1: write the copy */
  /* counted in the first pass */
  size_t nodes;
  size_t ptrs;
  size_t bytes;
  int overflow;
  /* where the next node, element array and string go, in the second pass */
  relock_reply_t *node;
  relock_reply_t **ptr;
  char *byte;
} layout_t;

/* A node to copy: one of hiredis's, or one of ours (at most one is set;
 * neither is a NULL element of a hiredis array, copied as NIL). */
typedef struct src {
  const redisReply *h;
  const relock_reply_t *own;
} src_t;

/* An aggregate whose elements are being visited. */
typedef struct frame {
  src_t src;
  relock_reply_t **dst; /* its copy's element array (second pass) */
  size_t next;          /* the element to visit next */
} frame_t;

static relock_reply_type_t map_type(const redisReply *r) {
  switch (r->type) {
  case REDIS_REPLY_STRING: return RELOCK_REPLY_STRING;
  case REDIS_REPLY_STATUS: return RELOCK_REPLY_STATUS;
  case REDIS_REPLY_ERROR: return RELOCK_REPLY_ERROR;
  case REDIS_REPLY_INTEGER: return RELOCK_REPLY_INTEGER;
  case REDIS_REPLY_NIL: return RELOCK_REPLY_NIL;
  case REDIS_REPLY_ARRAY: return RELOCK_REPLY_ARRAY;
  /* RESP3, hiredis 1.x */
#ifdef REDIS_REPLY_DOUBLE
  case REDIS_REPLY_DOUBLE: return RELOCK_REPLY_STRING;
#endif
#ifdef REDIS_REPLY_BIGNUM
  case REDIS_REPLY_BIGNUM: return RELOCK_REPLY_STRING;
#endif
#ifdef REDIS_REPLY_VERB
  case REDIS_REPLY_VERB: return RELOCK_REPLY_STRING;
#endif
#ifdef REDIS_REPLY_BOOL
  case REDIS_REPLY_BOOL: return RELOCK_REPLY_INTEGER;
#endif
#ifdef REDIS_REPLY_MAP
  case REDIS_REPLY_MAP: return RELOCK_REPLY_ARRAY;
#endif
#ifdef REDIS_REPLY_SET
  case REDIS_REPLY_SET: return RELOCK_REPLY_ARRAY;
#endif
#ifdef REDIS_REPLY_ATTR
  case REDIS_REPLY_ATTR: return RELOCK_REPLY_ARRAY;
#endif
#ifdef REDIS_REPLY_PUSH
  case REDIS_REPLY_PUSH: return RELOCK_REPLY_ARRAY;
#endif
  default:
    /* A type newer than this code: keep what it carries. */
    if (r->element != NULL)
      return RELOCK_REPLY_ARRAY;
    return r->str != NULL ? RELOCK_REPLY_STRING : RELOCK_REPLY_NIL;
  }
}

static int has_text(relock_reply_type_t t) {
  return t == RELOCK_REPLY_STRING || t == RELOCK_REPLY_STATUS || t == RELOCK_REPLY_ERROR;
}

static relock_reply_type_t src_type(src_t s) {
  return s.h != NULL ? map_type(s.h) : s.own != NULL ? s.own->type : RELOCK_REPLY_NIL;
}

/* The number of elements s's copy will have. */
static size_t children(src_t s) {
  if (src_type(s) != RELOCK_REPLY_ARRAY)
    return 0;
  if (s.h != NULL)
    return s.h->element != NULL ? s.h->elements : 0;
  return s.own->element != NULL ? s.own->elements : 0;
}

static src_t child(src_t s, size_t i) {
  return s.h != NULL ? (src_t){s.h->element[i], NULL} : (src_t){NULL, s.own->element[i]};
}

/* s's text (a has_text type), NULL for none. */
static const char *text(src_t s, size_t *len) {
  const char *str = s.h != NULL ? s.h->str : s.own != NULL ? s.own->str : NULL;
  *len = str == NULL ? 0 : s.h != NULL ? s.h->len : s.own->len;
  return str;
}

static int64_t integer(src_t s) { return s.h != NULL ? s.h->integer : s.own != NULL ? s.own->integer : 0; }

static void count(size_t *total, size_t n, layout_t *l) {
  if (*total > SIZE_MAX - n)
    l->overflow = 1;
  else
    *total += n;
}

/* Counts (first pass) or copies (second pass) one node, not its elements.
 * In the second pass *elems receives the copy's element array. */
static relock_reply_t *visit(src_t r, layout_t *l, relock_reply_t ***elems) {
  relock_reply_type_t type = src_type(r);
  size_t n = children(r);
  size_t len = 0;
  const char *str = has_text(type) ? text(r, &len) : NULL;
  if (!l->fill) {
    count(&l->nodes, 1, l);
    count(&l->ptrs, n, l);
    if (has_text(type)) {
      count(&l->bytes, len, l);
      count(&l->bytes, 1, l); /* its NUL */
    }
    return NULL;
  }

  relock_reply_t *copy = l->node++;
  *copy = (relock_reply_t){.type = type, .integer = 0, .str = NULL, .len = 0, .element = NULL, .elements = n};
  if (type == RELOCK_REPLY_INTEGER)
    copy->integer = integer(r); /* a RESP3 boolean holds 0 or 1 here too */
  if (has_text(type)) {
    char *s = l->byte;
    l->byte += len + 1;
    if (len > 0)
      memcpy(s, str, len);
    s[len] = '\0';
    copy->str = s;
    copy->len = len;
  }
  *elems = NULL;
  if (n > 0) {
    *elems = l->ptr;
    l->ptr += n;
    copy->element = *elems;
  }
  return copy;
}

/* Visits root and everything under it in pre-order, so the root's copy comes
 * first in the block. Returns the root's copy (second pass), or NULL with
 * l->overflow set when the walk's stack could not grow. */
static relock_reply_t *walk(src_t root, layout_t *l) {
  frame_t inline_stack[16]; /* hiredis 0.14 nests 7 deep at most */
  frame_t *stack = inline_stack;
  size_t cap = sizeof inline_stack / sizeof inline_stack[0];
  size_t depth = 0;
  relock_reply_t **elems = NULL;

  relock_reply_t *copy = visit(root, l, &elems);
  if (children(root) > 0)
    stack[depth++] = (frame_t){root, elems, 0};
  while (depth > 0) {
    frame_t *top = &stack[depth - 1];
    if (top->next == children(top->src)) {
      depth--;
      continue;
    }
    src_t kid = child(top->src, top->next);
    relock_reply_t *child_copy = visit(kid, l, &elems);
    if (l->fill)
      top->dst[top->next] = child_copy;
    top->next++;
    if (children(kid) == 0)
      continue;
    if (depth == cap) {
      frame_t *grown = cap > SIZE_MAX / 2 / sizeof(*stack) ? NULL : malloc(2 * cap * sizeof(*stack));
      if (grown == NULL) {
        l->overflow = 1;
        copy = NULL;
        break;
      }
      memcpy(grown, stack, depth * sizeof(*stack));
      if (stack != inline_stack)
        free(stack);
      stack = grown;
      cap *= 2;
    }
    stack[depth++] = (frame_t){kid, elems, 0};
  }
  if (stack != inline_stack)
    free(stack);
  return copy;
}

static relock_reply_t *copy_tree(src_t r) {
  layout_t l = {0};
  walk(r, &l);
  if (l.overflow)
    return NULL;

  /* [nodes][element arrays][string bytes]: a node's size is a multiple of
   * its alignment, which is at least a pointer's, so the arrays that follow
   * are aligned; bytes need none. */
  _Static_assert(alignof(relock_reply_t) % alignof(relock_reply_t *) == 0, "element arrays follow the nodes");
  size_t node_bytes, ptr_bytes, total;
  if (l.nodes > SIZE_MAX / sizeof(relock_reply_t) || l.ptrs > SIZE_MAX / sizeof(relock_reply_t *))
    return NULL;
  node_bytes = l.nodes * sizeof(relock_reply_t);
  ptr_bytes = l.ptrs * sizeof(relock_reply_t *);
  if (node_bytes > SIZE_MAX - ptr_bytes || node_bytes + ptr_bytes > SIZE_MAX - l.bytes)
    return NULL;
  total = node_bytes + ptr_bytes + l.bytes;

  char *block = malloc(total);
  if (block == NULL)
    return NULL;
  l.fill = 1;
  l.node = (relock_reply_t *)(void *)block;
  l.ptr = (relock_reply_t **)(void *)(block + node_bytes);
  l.byte = block + node_bytes + ptr_bytes;
  relock_reply_t *copy = walk(r, &l);
  if (copy == NULL) {
    free(block);
    return NULL;
  }
  return copy; /* == block */
}

relock_reply_t *relock__reply_copy(const redisReply *r) { return r != NULL ? copy_tree((src_t){r, NULL}) : NULL; }

relock_reply_t *relock__reply_dup(const relock_reply_t *r) { return r != NULL ? copy_tree((src_t){NULL, r}) : NULL; }

int relock__reply_view(const redisReply *r, relock_reply_t *view) {
  relock_reply_type_t type = map_type(r);
  if (type == RELOCK_REPLY_ARRAY)
    return -1;
  *view = (relock_reply_t){.type = type};
  if (type == RELOCK_REPLY_INTEGER)
    view->integer = r->integer;
  if (has_text(type)) {
    view->str = r->str != NULL ? r->str : "";
    view->len = r->str != NULL ? r->len : 0;
  }
  return 0;
}

void relock__reply_free(void *reply) { free(reply); }

const relock_reply_t *relock_future_reply(const relock_future_t *future) {
  if (relock_future_state(future) != RELOCK_FUTURE_SUCCEEDED || relock__future_ptr_dtor(future) != relock__reply_free)
    return NULL;
  return relock_future_ptr(future);
}

static int starts(const char *s, size_t len, const char *prefix) {
  size_t n = strlen(prefix);
  return len >= n && memcmp(s, prefix, n) == 0;
}

/* Skips one "@user_script:<line>: " (or "@user_script: <line>: ") at
 * *str: where Redis 6 says a script's command failed. 1 if there was one. */
static int skip_script_line(const char **str, size_t *len) {
  static const char at[] = "@user_script:";
  if (!starts(*str, *len, at))
    return 0;
  const char *p = *str + strlen(at), *end = *str + *len;
  while (p < end && *p == ' ')
    p++;
  const char *digits = p;
  while (p < end && *p >= '0' && *p <= '9')
    p++;
  if (p == digits || p >= end || *p != ':')
    return 0;
  for (p++; p < end && *p == ' ';)
    p++;
  *len = (size_t)(end - p);
  *str = p;
  return 1;
}

/* Where Redis 7 says a command inside a script failed, " script: <sha>,
 * on @user_script:<line>.", is Redis's and the library's business, not
 * the user's: the text before it. Redis 6 puts it in front: "ERR Error
 * running script (call to f_<sha>): @user_script:<line>: <error>", where
 * the <error> of a refusal by the server (ACL, OOM, READONLY) starts with
 * "@user_script: <line>: " again - the form a script's redis.pcall
 * returns it in - and its code word with the '-' of the protocol. */
int relock__reply_script_error(const char **str, size_t *len) {
  const char *at = NULL;
  for (const char *p = *str; p + 9 <= *str + *len; p++)
    if (memcmp(p, " script: ", 9) == 0)
      at = p;
  if (at != NULL) {
    *len = (size_t)(at - *str);
    return 1;
  }
  static const char old[] = "ERR Error running script";
  if (starts(*str, *len, old)) {
    const char *end = *str + *len, *p = memchr(*str, ')', *len);
    if (p == NULL || end - p < 2 || memcmp(p, "):", 2) != 0)
      return 0;
    for (p += 2; p < end && *p == ' ';)
      p++;
    *len = (size_t)(end - p);
    *str = p;
  } else if (!starts(*str, *len, "@user_script:")) {
    return 0;
  }
  while (skip_script_line(str, len))
    ;
  if (*len > 0 && **str == '-') {
    ++*str;
    --*len;
  }
  return 1;
}

int relock__reply_error_is(const char *str, size_t len, const char *code) {
  relock__reply_script_error(&str, &len);
  size_t n = strlen(code);
  return len > n && memcmp(str, code, n) == 0 && str[n] == ' ';
}

/* Our scripts' tags: the code, and the message after the tag. */
static const struct {
  const char *tag;
  int code;
} tags[] = {
    {"RELOCK_UPGRADE ", RELOCK_EUPGRADE},
    {"RELOCK_WRONGKIND ", RELOCK_EWRONGKIND},
};

int relock__reply_error_code(const char *str, size_t len) {
  /* "NOPERM" outside a script; inside one, Redis 7.0's "ERR The user
   * executing the script can't", once script_error has taken Redis 6's
   * wrapping off "The user executing the script can't", and Redis 7.2+'s
   * and Valkey's "ERR ACL failure in script" */
  static const char *const acl[] = {"NOPERM", "ERR The user executing the script can't",
                                    "The user executing the script can't", "ERR ACL failure in script"};
  relock__reply_script_error(&str, &len);
  for (size_t i = 0; i < sizeof acl / sizeof acl[0]; i++) {
    size_t n = strlen(acl[i]);
    if (len >= n && memcmp(str, acl[i], n) == 0)
      return RELOCK_ENOPERM;
  }
  /* ours: lua/rwlock_write_acquire.lua refusing an upgrade */
  if (len >= 15 && memcmp(str, "RELOCK_UPGRADE ", 15) == 0)
    return RELOCK_EUPGRADE;
  return RELOCK_ESERVER;
}

int relock__reply_error_words(const char *str, size_t len, char *buf, size_t size) {
  /* the code from the text as sent: stripped twice, "ERR ACL failure in
   * script: ..." would be cut at its own " script: " */
  int code = relock__reply_error_code(str, len);
  int in_script = relock__reply_script_error(&str, &len);
  for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++)
    if (starts(str, len, tags[i].tag)) {
      size_t n = strlen(tags[i].tag);
      snprintf(buf, size, "%.*s", (int)(len - n), str + n);
      return tags[i].code;
    }
  if (starts(str, len, "WRONGTYPE ")) {
    snprintf(buf, size, "a key of it holds a Redis value of another type: the name is used by another kind of "
                        "object (one name holds one kind at a time)");
    return RELOCK_EWRONGKIND;
  }
  if (!in_script) {
    snprintf(buf, size, "%.*s", (int)len, str);
    return code;
  }
  /* Redis's error code word ("ERR", "OOM", "READONLY") in front of a
   * command's failure inside the script: said after the words, the plain
   * "ERR" not at all */
  size_t caps = 0;
  while (caps < len && ((str[caps] >= 'A' && str[caps] <= 'Z') || str[caps] == '_'))
    caps++;
  if (caps >= 2 && caps < len && str[caps] == ' ') {
    int plain = caps == 3 && memcmp(str, "ERR", 3) == 0;
    snprintf(buf, size, "Redis refused one of relock's commands%s%.*s%s: %.*s", plain ? "" : " (",
             plain ? 0 : (int)caps, str, plain ? "" : ")", (int)(len - caps - 1), str + caps + 1);
  } else {
    snprintf(buf, size, "Redis refused one of relock's commands: %.*s", (int)len, str);
  }
  /* A server older than the kind (Redis before 6.0.6 has no LPOS, which
   * the fair lock's waiters call): the server's words ("Unknown Redis
   * command called from ...", Valkey's "Unknown command called from ...")
   * do not say which command, so say what it means and where the needs
   * are listed */
  if (in_script && (strstr(buf, "Unknown Redis command called from") != NULL ||
                    strstr(buf, "Unknown command called from") != NULL)) {
    size_t n = strlen(buf);
    snprintf(buf + n, size - n, ": the server lacks a command this kind of object needs (what each kind needs of a "
                                "server: relock's README, \"Servers\")");
  }
  return code;
}

void relock__reply_fail(relock_future_t *f, const char *str, size_t len) {
  char words[512];
  int code = relock__reply_error_words(str, len, words, sizeof words);
  relock__future_fail(f, code, "%s", words);
}

int relock__cluster_error(const char *str) {
  static const char *const kinds[] = {"MOVED ", "ASK ", "CLUSTERDOWN ", "TRYAGAIN "};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strncmp(str, kinds[i], strlen(kinds[i])) == 0)
      return 1;
  return 0;
}
