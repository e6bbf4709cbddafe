/* Pipelined command rate of relock_client_command_async: N commands issued at
 * once on one connection, all completions counted, best of R rounds.
 *
 *   bench/command HOST PORT [N=100000] [ROUNDS=5] [ping|set]
 *
 * Prints one line: "relock <cmd> <rate> commands/s". bench/command.sh runs it
 * next to redis-benchmark on a private server and prints the ratio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <relock/relock.h>

typedef struct {
  long done;
  long failed;
} count_t;

static void on_done(relock_future_t *f, void *arg) {
  count_t *c = arg;
  c->done++;
  if (relock_future_error(f) != 0)
    c->failed++;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s HOST PORT [N] [ROUNDS] [ping|set]\n", argv[0]);
    return 2;
  }
  long n = argc > 3 ? atol(argv[3]) : 100000;
  int rounds = argc > 4 ? atoi(argv[4]) : 5;
  int set = argc > 5 && strcmp(argv[5], "set") == 0;

  relock_error_t err;
  relock_options_t *opts = relock_options_new(&err);
  if (opts == NULL || relock_options_set_string(opts, RELOCK_OPT_HOST, argv[1], &err) != 0 ||
      relock_options_set(opts, RELOCK_OPT_PORT, argv[2], &err) != 0 ||
      relock_options_set_ms(opts, RELOCK_OPT_COMMAND_TIMEOUT, 30000, &err) != 0) {
    fprintf(stderr, "options: %s\n", err.message);
    return 1;
  }
  relock_client_t *client = relock_client_new(NULL, opts, &err);
  relock_options_free(opts);
  if (client == NULL) {
    fprintf(stderr, "client: %s\n", err.message);
    return 1;
  }
  const char *ping[] = {"PING"};
  const char *setv[] = {"SET", "key:__rand_int__", "xxx"}; /* redis-benchmark's SET, 3-byte value */

  /* warm up: connect, and let the allocator settle */
  relock_future_t *w = relock_client_command_async(client, 1, ping, NULL);
  relock_future_wait(w, 10000);
  relock_future_release(w);

  double best = 0;
  for (int r = 0; r < rounds; r++) {
    count_t c = {0, 0};
    relock_future_t *last = NULL;
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
      relock_future_t *f = set ? relock_client_command_async(client, 3, setv, NULL)
                               : relock_client_command_async(client, 1, ping, NULL);
      relock_future_on_done(f, on_done, &c);
      if (i == n - 1)
        last = f;
      else
        relock_future_release(f);
    }
    relock_future_wait(last, 60000); /* replies come in order: the last is last */
    double rate = (double)n / (now_s() - t0);
    relock_future_release(last);
    if (c.done != n || c.failed != 0) {
      fprintf(stderr, "round %d: %ld of %ld completed, %ld failed\n", r, c.done, n, c.failed);
      relock_client_free(client);
      return 1;
    }
    if (rate > best)
      best = rate;
  }
  printf("relock %s %.0f commands/s\n", set ? "SET" : "PING", best);
  relock_client_free(client);
  return 0;
}
