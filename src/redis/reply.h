/* hiredis replies as the public relock_reply_t (private to the library):
 * copies, which a command future carries so that its reply outlives
 * hiredis's, and views, which the reply handlers above src/redis/ read
 * without an allocation and without seeing hiredis. */
#ifndef RELOCK__REDIS_REPLY_H
#define RELOCK__REDIS_REPLY_H

#include <relock/client.h>

struct redisReply;

/* A deep copy of r in a single allocation (nodes, element arrays and string
 * bytes together), to be freed with relock__reply_free. NULL when out of
 * memory (or when r is NULL). Types hiredis 1.x adds for RESP3 map onto the RESP2 ones: double,
 * big number and verbatim string become STRING (their text), boolean becomes
 * INTEGER (0 or 1), map, set, push and attribute become ARRAY (a map as
 * key, value, key, value ...). An empty ARRAY has element NULL; only STRING,
 * STATUS and ERROR have a str (never NULL for them). */
relock_reply_t *relock__reply_copy(const struct redisReply *r);

/* The same copy of one of ours (a view, or another copy). */
relock_reply_t *relock__reply_dup(const relock_reply_t *r);

/* Fills *view with r (not NULL) as relock__reply_copy would, but pointing
 * into r, valid while r is: no allocation. Only for a reply without
 * elements: returns -1 (and fills nothing) when r is an aggregate. */
int relock__reply_view(const struct redisReply *r, relock_reply_t *view);

/* Whether the error reply str (len bytes) is one of a script: 1 if so,
 * and then *str and *len are the error alone, as Redis 7 puts it in front
 * ("READONLY You can't write ...", without the " script: <sha>, on
 * @user_script:1." after it) - Redis 6's "ERR Error running script (call
 * to f_<sha>): @user_script:1: @user_script: 1: -READONLY You can't write
 * ..." taken off around it. 0 (nothing changed) for any other error. */
int relock__reply_script_error(const char **str, size_t *len);

/* Whether the error reply str (len bytes) is code ("READONLY", "BUSY")
 * followed by a space: said by the server, or by a command inside a script
 * as relock__reply_script_error finds it. */
int relock__reply_error_is(const char *str, size_t len, const char *code);

/* The code for a Redis error reply whose text is str (len bytes):
 * RELOCK_ENOPERM when the server's ACL refused it ("NOPERM ...", and inside
 * a script, where Redis 7.0 says "ERR The user executing the script can't
 * ..." and Redis 6 "ERR Error running script (call to f_<sha>):
 * @user_script:1: @user_script: 1: The user executing the script can't
 * ..."), else RELOCK_ESERVER. A missing permission is the operator's to
 * fix, not a failure to retry or to poll around: callers tell it apart. */
int relock__reply_error_code(const char *str, size_t len);

/* The code and the words for an error reply to an object's command or
 * script, written to buf (size bytes): what happened in the user's words,
 * never where a script failed (its SHA and line) nor our scripts' tags -
 * "RELOCK_UPGRADE <message>" is RELOCK_EUPGRADE with <message>,
 * "RELOCK_WRONGKIND <message>" RELOCK_EWRONGKIND; Redis's WRONGTYPE (a key
 * of another type) is RELOCK_EWRONGKIND too; a command refused inside a
 * script says so, its error code word after the words. Other replies keep
 * their text (a plain command's error is Redis's: relock__reply_error_code). */
int relock__reply_error_words(const char *str, size_t len, char *buf, size_t size);

/* Fails f with an error reply to an object's command or script: its code
 * and words (relock__reply_error_words). */
void relock__reply_fail(relock_future_t *f, const char *str, size_t len);

/* Whether an error reply (NUL-terminated text) is Redis Cluster's "not
 * here" or "not now" for a key: MOVED, ASK, CLUSTERDOWN or TRYAGAIN. */
int relock__cluster_error(const char *str);

/* Frees a copy (NULL is fine); fits relock__future_succeed_ptr's dtor. */
void relock__reply_free(void *reply);

#endif /* RELOCK__REDIS_REPLY_H */
