/* relock status NAME and relock release --force NAME: what Redis says of a
 * lock, and deleting it whoever holds it. */
#include <stdio.h>

#include <relock/relock.h>

#include "cli.h"

static int wait_reply(relock_future_t *f, const relock_reply_t **reply) {
  int err = relock_future_wait(f, RELOCK_INFINITE);
  if (err != 0) {
    say(0, "%s", relock_future_message(f));
    return EXIT_REDIS;
  }
  *reply = relock_future_reply(f);
  return 0;
}

int show_status(cli_t *r) {
  const char *argv[] = {"HGETALL", r->name};
  relock_future_t *all = relock_client_command_async(r->client, 2, argv, NULL);
  const char *pttl_argv[] = {"PTTL", r->name};
  relock_future_t *ttl = relock_client_command_async(r->client, 2, pttl_argv, NULL);
  const relock_reply_t *fields = NULL, *left = NULL;
  int code = wait_reply(all, &fields);
  if (code == 0)
    code = wait_reply(ttl, &left);
  if (code == 0) {
    if (fields->elements == 0) {
      printf("%s: free\n", r->name);
    } else {
      for (size_t i = 0; i + 1 < fields->elements; i += 2)
        printf("%s: held by %s, hold count %s, expires in %lld ms\n", r->name, fields->element[i]->str,
               fields->element[i + 1]->str, (long long)left->integer);
    }
  }
  relock_future_release(all);
  relock_future_release(ttl);
  return code;
}

int force_release(cli_t *r) {
  relock_future_t *f = relock_lock_force_release_async(r->lock);
  if (f == NULL)
    return EXIT_REDIS;
  int err = relock_future_wait(f, RELOCK_INFINITE);
  int code = 0;
  if (err != 0) {
    say(0, "cannot release %s: %s", r->name, relock_future_message(f));
    code = EXIT_REDIS;
  } else {
    say(1, "%s: %s", r->name, relock_future_bool(f) ? "released" : "was not held");
  }
  relock_future_release(f);
  return code;
}

