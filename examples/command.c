/* relock is also a small asynchronous Redis client: commands return futures.
 * This program connects (on a loop of the client's own), runs commands with
 * completion callbacks, then waits on one.
 *
 *   examples/command [redis://host:port/db]      (default redis://127.0.0.1:6379)
 */
#include <stdio.h>
#include <stdlib.h>

#include <relock/relock.h>

static char set_name[] = "SET", incr_name[] = "INCR", get_name[] = "GET";

static void print_reply(relock_future_t *f, void *arg) {
  const char *what = arg;
  const relock_reply_t *r = relock_future_reply(f);
  if (r == NULL)
    printf("%s: failed: %s\n", what, relock_future_message(f));
  else if (r->type == RELOCK_REPLY_INTEGER)
    printf("%s: %lld\n", what, (long long)r->integer);
  else if (r->type == RELOCK_REPLY_NIL)
    printf("%s: (nil)\n", what);
  else
    printf("%s: %.*s\n", what, (int)r->len, r->str);
}

int main(int argc, char **argv) {
  relock_error_t err;
  relock_options_t *opts = relock_options_new(&err);
  if (opts == NULL) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  if (argc > 1 && relock_options_set_url(opts, argv[1], &err) != 0) {
    fprintf(stderr, "bad URL: %s\n", err.message);
    relock_options_free(opts);
    return 2;
  }
  relock_client_t *client = relock_client_new(NULL, opts, &err);
  relock_options_free(opts); /* the client copied what it needs */
  if (client == NULL) {
    fprintf(stderr, "cannot create client: %s\n", err.message);
    return 1;
  }

  /* Fire three commands; the callbacks run in order as the replies come. */
  relock_future_t *f;
  f = relock_client_commandf_async(client, "SET example:greeting %s", "hello");
  relock_future_on_done(f, print_reply, set_name);
  relock_future_release(f); /* the callback still runs */
  f = relock_client_commandf_async(client, "INCR example:counter");
  relock_future_on_done(f, print_reply, incr_name);
  relock_future_release(f);

  /* ... and block on the last one: this runs the loop, so the others
   * complete (and print) first. */
  const char *get[] = {"GET", "example:greeting"};
  f = relock_client_command_async(client, 2, get, NULL);
  int rc = relock_future_wait(f, 5000);
  print_reply(f, get_name);
  relock_future_release(f);

  relock_client_free(client); /* closes and waits for it */
  return rc == 0 ? 0 : 1;
}
