/* Why a fenced lock: a holder that stalls past its lease (a long GC-like
 * pause, SIGSTOP, a frozen VM) wakes up believing it still holds the lock,
 * while another holder has taken it since. A lock alone cannot stop the
 * stale holder's write; storage that checks fencing tokens can.
 *
 *   examples/fenced_storage [redis://host:port/db]   (default redis://127.0.0.1:6379)
 *
 * The toy storage server below keeps the highest token it has seen and
 * rejects a write that carries an older one. Two clients (two services)
 * take the fenced lock "example:fenced" in turn: A with a short lease, then
 * A stalls past it; B takes the lock (a newer token) and writes; A wakes and
 * writes with its old token - rejected. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <relock/relock.h>

/* -- the toy storage server ---------------------------------------------------*/

typedef struct storage {
  int64_t highest_token; /* the newest holder it has heard from */
  char value[64];
} storage_t;

/* Accepts a write only from a holder at least as new as every one before. */
static int storage_write(storage_t *s, int64_t token, const char *value) {
  if (token < s->highest_token) {
    printf("storage: REJECTED \"%s\": token %lld is older than %lld\n", value, (long long)token,
           (long long)s->highest_token);
    return -1;
  }
  s->highest_token = token;
  snprintf(s->value, sizeof s->value, "%s", value);
  printf("storage: accepted \"%s\" (token %lld)\n", value, (long long)token);
  return 0;
}

/* -- two services ----------------------------------------------------------------*/

static relock_client_t *open_client(const char *url) {
  relock_error_t err;
  relock_options_t *opts = relock_options_new(&err);
  if (opts == NULL || relock_options_set_url(opts, url, &err) != 0) {
    fprintf(stderr, "options: %s\n", err.message);
    relock_options_free(opts);
    return NULL;
  }
  relock_client_t *c = relock_client_new(NULL, opts, &err);
  relock_options_free(opts);
  if (c == NULL)
    fprintf(stderr, "cannot create client: %s\n", err.message);
  return c;
}

int main(int argc, char **argv) {
  const char *url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
  relock_client_t *a = open_client(url), *b = open_client(url);
  relock_lock_t *la = a != NULL ? relock_fenced_lock_new(a, "example:fenced", NULL) : NULL;
  relock_lock_t *lb = b != NULL ? relock_fenced_lock_new(b, "example:fenced", NULL) : NULL;
  if (la == NULL || lb == NULL)
    return 1;
  storage_t storage = {0, ""};
  int64_t token_a = 0, token_b = 0;
  int rc = relock_fenced_lock_try_lock(la, 5000, 300, &token_a); /* a 300 ms lease */
  if (rc != 0 || token_a == 0) {
    fprintf(stderr, "A: cannot lock: %s\n", rc != 0 ? relock_last_error_message() : "busy");
    return 1;
  }
  printf("A: holds the lock, token %lld; then stalls for 600 ms, past its 300 ms lease\n", (long long)token_a);
  nanosleep(&(struct timespec){0, 600 * 1000000L}, NULL);

  if ((rc = relock_fenced_lock_try_lock(lb, 5000, RELOCK_INFINITE, &token_b)) != 0 || token_b == 0) {
    fprintf(stderr, "B: cannot lock: %s\n", rc != 0 ? relock_last_error_message() : "busy");
    return 1;
  }
  printf("B: holds the lock, token %lld\n", (long long)token_b);
  storage_write(&storage, token_b, "written by B");

  printf("A: wakes up and writes, still believing it holds the lock\n");
  int stale = storage_write(&storage, token_a, "written by A") != 0;
  int64_t valid = relock_lock_validity_ms(la, relock_thread_owner());
  if (valid < 0)
    printf("A: (had it asked its lock first: %s)\n", relock_strerror((int)valid));

  relock_lock_unlock(lb);
  printf("storage holds \"%s\"\n", storage.value);
  relock_lock_free(la);
  relock_lock_free(lb);
  relock_client_free(a);
  relock_client_free(b);
  return stale ? 0 : 1; /* 0: the stale write was refused, as it must be */
}
