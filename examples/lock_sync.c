/* The smallest lock program: connect, take the distributed lock
 * "example:lock" (blocking; the watchdog renews its lease while it is held),
 * do something only one holder may do at a time, unlock.
 *
 *   examples/lock_sync [redis://host:port/db]      (default redis://127.0.0.1:6379)
 *
 * Start several at once: each waits for the lock in turn, and the counter
 * goes up by one per run. */
#include <stdio.h>

#include <relock/relock.h>

int main(int argc, char **argv) {
  relock_error_t err;
  relock_options_t *opts = relock_options_new(&err);
  if (opts == NULL) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  if (relock_options_set_url(opts, argc > 1 ? argv[1] : "redis://127.0.0.1:6379", &err) != 0) {
    fprintf(stderr, "bad URL: %s\n", err.message);
    relock_options_free(opts);
    return 2;
  }
  relock_client_t *client = relock_client_new(NULL, opts, &err); /* on a loop of its own */
  relock_options_free(opts); /* the client copied what it needs */
  if (client == NULL) {
    fprintf(stderr, "cannot create client: %s\n", err.message);
    return 1;
  }

  relock_lock_t *lock = relock_lock_new(client, "example:lock", &err);
  int rc = lock != NULL ? relock_lock_lock(lock, RELOCK_INFINITE) : err.code;
  if (rc == 0) {
    /* The critical section: one holder of example:lock at a time. */
    relock_future_t *f = relock_client_commandf_async(client, "INCR example:lock:counter");
    if ((rc = relock_future_wait(f, 5000)) == 0)
      printf("counter: %lld\n", (long long)relock_future_reply(f)->integer);
    else
      fprintf(stderr, "INCR failed: %s\n", relock_future_message(f));
    relock_future_release(f);

    int unlocked = relock_lock_unlock(lock);
    if (unlocked != 0)
      fprintf(stderr, "cannot unlock: %s\n", relock_strerror(unlocked));
    rc = rc != 0 ? rc : unlocked;
  } else {
    fprintf(stderr, "cannot lock: %s\n", relock_strerror(rc));
  }
  relock_lock_free(lock);
  relock_client_free(client); /* closes and waits for it */
  return rc == 0 ? 0 : 1;
}
