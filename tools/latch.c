/* relock latch NAME count|down|await|set N: a count-down latch shared with
 * Redisson's RCountDownLatch, for scripts: one job counts down as it
 * finishes, another awaits them all. */
#include <stdio.h>

#include <relock/relock.h>

#include "cli.h"

int latch_command(cli_t *c) {
  relock_error_t err;
  relock_latch_t *l = relock_latch_new(c->client, c->name, &err);
  if (l == NULL) {
    say(0, "invalid latch name: %s", err.message);
    return EXIT_USAGE;
  }
  int rc, flag = 0, code = 0;
  int64_t n = 0;
  switch (c->latch_op[0]) {
  case 'c': /* count */
  case 'd': /* down */
    rc = c->latch_op[0] == 'c' ? relock_latch_count(l, &n) : relock_latch_count_down(l, &n);
    if (rc == 0)
      printf("%lld\n", (long long)n);
    break;
  case 'a': /* await */
    rc = relock_latch_await(l, c->opt.wait_ms, &flag);
    if (rc == 0 && !flag) {
      say(1, "latch %s is not open%s", c->name, c->opt.wait_ms > 0 ? ": not in time" : "");
      code = EXIT_BUSY;
    }
    break;
  default: /* set */
    rc = relock_latch_try_set_count(l, c->latch_count, &flag);
    if (rc == 0 && !flag) {
      say(1, "latch %s has a count already", c->name);
      code = EXIT_FREE;
    }
    break;
  }
  if (rc != 0) {
    say(0, "latch %s %s: %s", c->name, c->latch_op, relock_last_error_message());
    code = rc == RELOCK_EINVAL ? EXIT_USAGE : EXIT_REDIS;
  }
  relock_latch_free(l);
  return code;
}
