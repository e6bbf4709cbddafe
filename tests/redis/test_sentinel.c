/* The library against real Redis Sentinel (tests/support/sentinel.h: a
 * master, two replicas, three sentinels): discovery by option and by
 * redis+sentinel:// URL; a lock held across SENTINEL FAILOVER (synced
 * replicas) keeps being renewed on the new master and its waiter is woken;
 * kill -9 of the master under a held lock never leaves two silent holders;
 * the errors (no sentinel, unknown master, sentinels down after discovery,
 * a sentinel that lies); a split brain (the master frozen while the
 * sentinels fail over, then thawed); TLS with passwords on both sides;
 * and relock top through the sentinels.
 *
 * The clients are threaded (their own loop thread), so renewals and
 * failover handling go on while the test waits on futures or polls the
 * servers directly (relock_test_redis_cmd, never through the library). */
#define _GNU_SOURCE /* memmem */
#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/sentinel.h"
#include "support/threaded_fixture.h"

static relock_test_sentinel_t *topo; /* for the whole group */

/* Renewed every 3.3 s: a lease must outlive a failover (about 2 s after a
 * kill -9, up to 5 s after a freeze) plus the time since the last renewal,
 * or the hold is rightly lost while no master can be reached. */
#define WATCHDOG_MS 10000

/* Options for a client that finds the master through the topology's
 * sentinels, with short timeouts. */
static relock_options_t *sentinel_options(int min_replicas_acked) {
  relock_options_t *opts = relock_options_new(NULL);
  assert_non_null(opts);
  fx_set_str(opts, RELOCK_OPT_SENTINELS, relock_test_sentinel_addrs(topo));
  fx_set_str(opts, RELOCK_OPT_SENTINEL_MASTER, relock_test_sentinel_master_name(topo));
  fx_set_ms(opts, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(1000));
  fx_set_ms(opts, RELOCK_OPT_CONNECT_TIMEOUT, fx_slack_ms(1000));
  fx_set_ms(opts, RELOCK_OPT_RECONNECT_MIN, 10);
  fx_set_ms(opts, RELOCK_OPT_RECONNECT_MAX, 200);
  fx_set_ms(opts, RELOCK_OPT_WATCHDOG_TIMEOUT, WATCHDOG_MS);
  if (min_replicas_acked > 0) {
    fx_set_int(opts, RELOCK_OPT_MIN_REPLICAS_ACKED, min_replicas_acked);
    fx_set_ms(opts, RELOCK_OPT_MIN_REPLICAS_TIMEOUT, 500);
  }
  return opts;
}

static relock_client_t *sentinel_client(int min_replicas_acked) {
  relock_options_t *opts = sentinel_options(min_replicas_acked);
  relock_client_t *c = client_of(opts);
  relock_options_free(opts);
  return c;
}

/* -- fixtures -----------------------------------------------------------------*/

static int group_setup(void **state) {
  (void)state;
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("no redis-server (set REDIS_SERVER or install redis-server)");
  if ((topo = relock_test_sentinel_start(NULL)) == NULL)
    RELOCK_TEST_CANNOT_RUN("the Sentinel topology did not start (see above)");
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  relock_test_sentinel_free(topo);
  return 0;
}

/* Every test starts from a whole topology: every process running, the old
 * masters replicas again, the sentinels agreeing; no keys. */
static int setup(void **state) {
  (void)state;
  for (int s = 0; s < relock_test_sentinel_sentinels(topo); s++) {
    relock_test_redis_t *r = relock_test_sentinel_sentinel(topo, s);
    if (!relock_test_redis_running(r) && relock_test_redis_restart(r) != 0)
      return -1;
    relock_test_redis_resume(r);
  }
  for (int i = 0; i < relock_test_sentinel_nodes(topo); i++) {
    relock_test_redis_t *r = relock_test_sentinel_node(topo, i);
    relock_test_redis_resume(r);
    if (!relock_test_redis_running(r) && relock_test_sentinel_restart_node(topo, i) != 0)
      return -1;
  }
  if (relock_test_sentinel_settle(topo, 30000) < 0)
    return -1;
  relock_test_redis_cmd(relock_test_sentinel_master_node(topo), NULL, 0, "FLUSHALL", NULL);
  return 0;
}

/* -- a. discovery ---------------------------------------------------------------*/

static void lock_unlock_on_master(relock_client_t *c, const char *name) {
  relock_lock_t *l = lock_of(c, name);
  assert_int_equal(ACQUIRE(l, 1, 0), 1);
  relock_test_redis_t *m = relock_test_sentinel_master_node(topo);
  assert_int_equal(field_on(m, l, 1), 1);
  assert_int_equal(RELEASE(l, 1), 1);
  assert_int_equal(fx_raw_int(m, "EXISTS", name, NULL), 0);
}

static void test_discovery_by_option(void **state) {
  (void)state;
  relock_client_t *c = sentinel_client(0);
  lock_unlock_on_master(c, "disc-opt");
}

static void test_discovery_by_url(void **state) {
  (void)state;
  char url[512];
  relock_error_t err;
  snprintf(url, sizeof url, "redis+sentinel://%s/%s", relock_test_sentinel_addrs(topo),
           relock_test_sentinel_master_name(topo));
  relock_options_t *opts = relock_options_new(NULL);
  if (relock_options_set_url(opts, url, &err) != 0)
    fail_msg("%s: %s", url, err.message);
  fx_set_ms(opts, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(1000));
  relock_client_t *c = client_of(opts);
  relock_options_free(opts);
  lock_unlock_on_master(c, "disc-url");
}

/* -- b. SENTINEL FAILOVER under a held lock -------------------------------------*/

static void test_held_across_sentinel_failover(void **state) {
  (void)state;
  relock_client_t *a = sentinel_client(1), *b = sentinel_client(1);
  relock_lock_t *la = lock_of(a, "fo-lock"), *lb = lock_of(b, "fo-lock");
  static lost_t lost; /* static: the callback may come until teardown */
  memset(&lost, 0, sizeof lost);
  relock_lock_on_lost(la, on_lost, &lost);
  assert_int_equal(ACQUIRE(la, 1, 0), 1);
  /* b waits for it, blocked in its acquisition */
  relock_future_t *waiter = relock_lock_lock_async(lb, 2, RELOCK_INFINITE, RELOCK_INFINITE);
  assert_non_null(waiter);
  int old = relock_test_sentinel_master(topo);
  /* b waits subscribed to the lock's unlock channel on the master */
  int64_t t_sub = now_ms();
  while (numsub(relock_test_sentinel_node(topo, old), "redisson_lock__channel:{fo-lock}") != 1 && now_ms() - t_sub < 2000)
    pause_ms(10);
  assert_int_equal(numsub(relock_test_sentinel_node(topo, old), "redisson_lock__channel:{fo-lock}"), 1);
  int64_t took = relock_test_sentinel_failover(topo, 15000, NULL);
  assert_true(took >= 0);
  int m = relock_test_sentinel_master(topo);
  printf("# SENTINEL FAILOVER %d -> %d in %lld ms\n", old, m, (long long)took);
  relock_test_redis_t *nm = relock_test_sentinel_master_node(topo);
  /* Synced: the new master has the hold. */
  assert_int_equal(field_on(nm, la, 1), 1);
  /* Renewed there (every third of the lease). */
  assert_true(renewed_on(nm, "fo-lock", WATCHDOG_MS));
  assert_int_equal(lost_count(&lost), 0);
  assert_true(followed_failover(a, 5000)); /* counted: the master moved */
  assert_false(relock_future_is_done(waiter));
  /* Where b listens for the release (its unlock channel). */
  for (int i = 0; i < relock_test_sentinel_nodes(topo); i++)
    printf("# node %d (%s): %lld subscriber(s) on the unlock channel\n", i, i == m ? "new master" : i == old ? "old master" : "replica",
           numsub(relock_test_sentinel_node(topo, i), "redisson_lock__channel:{fo-lock}"));
  /* The release on the new master wakes b at once (through its unlock
   * channel: without the message it would try again only when the lease
   * it last saw ran out, seconds later). */
  int64_t t0 = now_ms();
  assert_int_equal(RELEASE(la, 1), 1);
  int64_t got = -1;
  char msg[256];
  int r = outcome(relock_future_retain(waiter), 2000, &got, msg, sizeof msg);
  if (r == RELOCK_EPENDING) {
    /* Not woken: say when (if ever) it gets the lock without the message. */
    r = outcome(waiter, 15000, &got, msg, sizeof msg);
    printf("# NOT woken by the release; the acquisition ended %lld ms after it: %s (%s), acquired %lld\n",
           (long long)(now_ms() - t0), msg, relock_err_name(r), (long long)got);
    fail_msg("the waiter was not woken within 2 s of the release on the new master");
  }
  relock_future_release(waiter);
  assert_int_equal(r, 0);
  assert_int_equal(got, 1);
  printf("# waiter woken %lld ms after the release\n", (long long)(now_ms() - t0));
  assert_int_equal(field_on(nm, lb, 2), 1);
  assert_int_equal(RELEASE(lb, 2), 1);
  assert_int_equal(lost_count(&lost), 0);
}

/* -- c. kill -9 of the master under a held lock --------------------------------*/

/* After the failover the first client either still holds the lock on the
 * new master (and renews it there), or reports it lost; never silently held
 * by two: when the second client gets it, the first must say it lost it
 * within a renewal interval. With synced replicas it must be kept. */
static void kill_master_with_lock(int synced) {
  relock_client_t *a = sentinel_client(synced), *b = sentinel_client(synced);
  relock_lock_t *la = lock_of(a, "kill-lock"), *lb = lock_of(b, "kill-lock");
  static lost_t lost; /* static: the callback may come until teardown */
  memset(&lost, 0, sizeof lost);
  relock_lock_on_lost(la, on_lost, &lost);
  assert_int_equal(ACQUIRE(la, 1, 0), 1);
  /* b has found the master too before the kill */
  assert_int_equal(ACQUIRE(lb, 2, 0), 0);
  int64_t sw = -1, took = relock_test_sentinel_kill_master(topo, 20000, &sw);
  assert_true(took >= 0);
  printf("# kill -9: new master agreed after %lld ms (+switch-master at %lld ms)\n", (long long)took, (long long)sw);
  relock_test_redis_t *nm = relock_test_sentinel_master_node(topo);
  int kept = field_on(nm, la, 1) == 1;
  printf("# the new master %s the hold\n", kept ? "has" : "lacks");
  if (synced)
    assert_true(kept);
  if (kept) {
    assert_true(renewed_on(nm, "kill-lock", WATCHDOG_MS));
  }
  /* b tries (for a renewal interval and a bit): it may get it only if a
   * lacked it, and then a must hear of the loss. */
  int64_t got = -1;
  char msg[256];
  int r = outcome(relock_lock_lock_async(lb, 2, WATCHDOG_MS / 3 + 500, RELOCK_INFINITE), 10000, &got, msg,
                  sizeof msg);
  assert_int_equal(r, 0);
  printf("# second client: %s\n", got ? "acquired" : "not acquired (held)");
  if (got) {
    assert_false(kept);
    int64_t t0 = now_ms();
    while (lost_count(&lost) == 0 && now_ms() - t0 < fx_slack_ms(WATCHDOG_MS / 3 + 1000))
      pause_ms(10);
    assert_int_equal(lost_count(&lost), 1);
    assert_int_equal(RELEASE(lb, 2), 1);
  } else {
    assert_true(kept);
    assert_int_equal(lost_count(&lost), 0);
    assert_int_equal(RELEASE(la, 1), 1);
  }
}

static void test_kill_master_unsynced(void **state) {
  (void)state;
  kill_master_with_lock(0);
}

static void test_kill_master_synced(void **state) {
  (void)state;
  kill_master_with_lock(1);
}

/* -- d. errors ------------------------------------------------------------------*/

/* The error of one try on lock name through a client made from opts, and
 * how long it took (from the client's creation). */
static int first_try(relock_options_t *opts, const char *name, char *msg, size_t msglen, int64_t *ms) {
  int64_t t0 = now_ms(), v = -1;
  relock_client_t *c = client_of(opts);
  relock_lock_t *l = lock_of(c, name);
  int r = outcome(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE), 10000, &v, msg, msglen);
  *ms = now_ms() - t0;
  if (r == 0 && v == 1)
    RELEASE(l, 1);
  return r;
}

static void test_no_sentinel_reachable(void **state) {
  (void)state;
  char addrs[128], msg[1024];
  int p[3] = {dead_port(), dead_port(), dead_port()};
  snprintf(addrs, sizeof addrs, "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", p[0], p[1], p[2]);
  relock_options_t *opts = sentinel_options(0);
  fx_set_str(opts, RELOCK_OPT_SENTINELS, addrs);
  int64_t ms;
  int r = first_try(opts, "nobody", msg, sizeof msg, &ms);
  relock_options_free(opts);
  printf("# %s (%s) after %lld ms\n", msg, relock_err_name(r), (long long)ms);
  assert_int_equal(r, RELOCK_ECONNREFUSED);
  for (int i = 0; i < 3; i++) {
    char a[32];
    snprintf(a, sizeof a, "127.0.0.1:%d", p[i]);
    assert_non_null(strstr(msg, a));
  }
  assert_true(ms < fx_slack_ms(3000));
}

static void test_unknown_master_name(void **state) {
  (void)state;
  char msg[1024];
  relock_options_t *opts = sentinel_options(0);
  fx_set_str(opts, RELOCK_OPT_SENTINEL_MASTER, "no-such-master");
  int64_t ms;
  int r = first_try(opts, "nomaster", msg, sizeof msg, &ms);
  relock_options_free(opts);
  printf("# %s (%s) after %lld ms\n", msg, relock_err_name(r), (long long)ms);
  assert_int_equal(r, RELOCK_ENOMASTER);
  assert_non_null(strstr(msg, "no-such-master"));
  assert_true(ms < fx_slack_ms(3000));
}

static void test_sentinels_down_after_discovery(void **state) {
  (void)state;
  relock_client_t *c = sentinel_client(0);
  lock_unlock_on_master(c, "before");
  for (int s = 0; s < relock_test_sentinel_sentinels(topo); s++)
    assert_int_equal(relock_test_redis_stop(relock_test_sentinel_sentinel(topo, s)), 0);
  /* The master is up and known: locking goes on, also with a hold renewed
   * a few times. */
  lock_unlock_on_master(c, "after");
  relock_lock_t *l = lock_of(c, "held");
  static lost_t lost; /* static: the callback may come until teardown */
  memset(&lost, 0, sizeof lost);
  relock_lock_on_lost(l, on_lost, &lost);
  assert_int_equal(ACQUIRE(l, 1, 0), 1);
  relock_test_redis_t *m = relock_test_sentinel_master_node(topo);
  assert_true(renewed_on(m, "held", WATCHDOG_MS));
  assert_int_equal(lost_count(&lost), 0);
  assert_int_equal(RELEASE(l, 1), 1);
  /* setup restarts the sentinels for the next test */
}

/* A fake sentinel on a thread: answers SENTINEL get-master-addr-by-name with
 * a replica's address, empty lists for sentinels and replicas, PONG to
 * PING, a confirmation to SUBSCRIBE, +OK to anything else. */
typedef struct {
  int listen_fd, port, lie_port;
  int stop_pipe[2];
  pthread_t thread;
  int asked; /* get-master-addr-by-name questions answered */
} liar_t;

static int resp_args(const char *buf, size_t len, char args[][64], int *nargs, size_t *used) {
  const char *p = buf, *end = buf + len, *eol;
  if (len == 0 || *p != '*')
    return len == 0 ? 0 : -1;
  if ((eol = memmem(p, (size_t)(end - p), "\r\n", 2)) == NULL)
    return 0;
  int n = atoi(p + 1);
  p = eol + 2;
  for (int i = 0; i < n; i++) {
    if (p >= end || (eol = memmem(p, (size_t)(end - p), "\r\n", 2)) == NULL)
      return 0;
    size_t l = (size_t)atol(p + 1);
    p = eol + 2;
    if ((size_t)(end - p) < l + 2)
      return 0;
    if (i < 8)
      snprintf(args[i], 64, "%.*s", (int)l, p);
    p += l + 2;
  }
  *nargs = n < 8 ? n : 8;
  *used = (size_t)(p - buf);
  return 1;
}

static void liar_answer(liar_t *lr, int fd, char args[][64], int n) {
  char out[256];
  int len;
  if (n >= 2 && strcasecmp(args[0], "SENTINEL") == 0 && strcasecmp(args[1], "get-master-addr-by-name") == 0) {
    len = snprintf(out, sizeof out, "*2\r\n$9\r\n127.0.0.1\r\n$%d\r\n%d\r\n", lr->lie_port > 9999 ? 5 : 4, lr->lie_port);
    __atomic_add_fetch(&lr->asked, 1, __ATOMIC_SEQ_CST);
  } else if (n >= 1 && strcasecmp(args[0], "SENTINEL") == 0) {
    len = snprintf(out, sizeof out, "*0\r\n");
  } else if (n >= 2 && strcasecmp(args[0], "SUBSCRIBE") == 0) {
    len = snprintf(out, sizeof out, "*3\r\n$9\r\nsubscribe\r\n$%zu\r\n%s\r\n:1\r\n", strlen(args[1]), args[1]);
  } else if (n >= 1 && strcasecmp(args[0], "PING") == 0) {
    len = snprintf(out, sizeof out, "+PONG\r\n");
  } else {
    len = snprintf(out, sizeof out, "+OK\r\n");
  }
  if (send(fd, out, (size_t)len, MSG_NOSIGNAL) < 0) {
    /* the client went away: its connection is closed on the next read */
  }
}

static void *liar_main(void *arg) {
  liar_t *lr = arg;
  struct pollfd p[34];
  char bufs[32][4096];
  size_t lens[32];
  int n = 0;
  for (;;) {
    p[0] = (struct pollfd){lr->stop_pipe[0], POLLIN, 0};
    p[1] = (struct pollfd){lr->listen_fd, POLLIN, 0};
    for (int i = 0; i < n; i++)
      p[2 + i].events = POLLIN, p[2 + i].revents = 0;
    if (poll(p, (nfds_t)(2 + n), -1) < 0 && errno != EINTR)
      break;
    if (p[0].revents)
      break;
    if ((p[1].revents & POLLIN) && n < 32) {
      int fd = accept(lr->listen_fd, NULL, NULL);
      if (fd >= 0) {
        p[2 + n] = (struct pollfd){fd, POLLIN, 0}; /* polled from the next round */
        lens[n++] = 0;
      }
    }
    for (int i = 0; i < n; i++) {
      if (!(p[2 + i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      ssize_t got = recv(p[2 + i].fd, bufs[i] + lens[i], sizeof bufs[i] - lens[i], 0);
      if (got <= 0) {
        close(p[2 + i].fd);
        p[2 + i] = p[2 + n - 1];
        memcpy(bufs[i], bufs[n - 1], lens[n - 1]);
        lens[i] = lens[n - 1];
        n--;
        i--;
        continue;
      }
      lens[i] += (size_t)got;
      char args[8][64];
      int nargs;
      size_t used;
      while (resp_args(bufs[i], lens[i], args, &nargs, &used) == 1) {
        liar_answer(lr, p[2 + i].fd, args, nargs);
        memmove(bufs[i], bufs[i] + used, lens[i] - used);
        lens[i] -= used;
      }
    }
  }
  for (int i = 0; i < n; i++)
    close(p[2 + i].fd);
  return NULL;
}

static void liar_start(liar_t *lr, int lie_port) {
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  memset(lr, 0, sizeof *lr);
  lr->lie_port = lie_port;
  lr->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(lr->listen_fd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(lr->listen_fd, 16), 0);
  assert_int_equal(getsockname(lr->listen_fd, (struct sockaddr *)&sa, &len), 0);
  lr->port = ntohs(sa.sin_port);
  assert_int_equal(pipe(lr->stop_pipe), 0);
  assert_int_equal(pthread_create(&lr->thread, NULL, liar_main, lr), 0);
}

static void liar_stop(liar_t *lr) {
  assert_int_equal(write(lr->stop_pipe[1], "x", 1), 1);
  pthread_join(lr->thread, NULL);
  close(lr->stop_pipe[0]);
  close(lr->stop_pipe[1]);
  close(lr->listen_fd);
}

/* The index of a running replica. */
static int a_replica(void) {
  for (int i = 0; i < relock_test_sentinel_nodes(topo); i++) {
    if (i != relock_test_sentinel_master(topo) && relock_test_redis_running(relock_test_sentinel_node(topo, i)))
      return i;
  }
  fail_msg("no replica running");
  return -1;
}

static void test_lying_sentinel(void **state) {
  (void)state;
  liar_t lr;
  relock_test_redis_t *replica = relock_test_sentinel_node(topo, a_replica());
  liar_start(&lr, relock_test_redis_port(replica));
  /* The liar and one honest sentinel: whichever is asked first, the client
   * ends up on the real master (it checks ROLE). Several clients, so both
   * orders come up. */
  char addrs[128];
  snprintf(addrs, sizeof addrs, "127.0.0.1:%d,127.0.0.1:%d", lr.port,
           relock_test_redis_port(relock_test_sentinel_sentinel(topo, 0)));
  for (int k = 0; k < 6; k++) {
    relock_options_t *opts = sentinel_options(0);
    fx_set_str(opts, RELOCK_OPT_SENTINELS, addrs);
    relock_client_t *c = client_of(opts);
    relock_options_free(opts);
    int64_t t0 = now_ms();
    lock_unlock_on_master(c, "liar-lock");
    assert_true(now_ms() - t0 < fx_slack_ms(3000));
  }
  printf("# the liar was asked %d times over 6 clients\n", __atomic_load_n(&lr.asked, __ATOMIC_SEQ_CST));
  /* The replica got no lock key (read-only anyway, but nothing slipped). */
  assert_int_equal(fx_raw_int(replica, "EXISTS", "liar-lock", NULL), 0);
  /* The liar alone: a clear error, at once. */
  snprintf(addrs, sizeof addrs, "127.0.0.1:%d", lr.port);
  relock_options_t *opts = sentinel_options(0);
  fx_set_str(opts, RELOCK_OPT_SENTINELS, addrs);
  char msg[1024];
  int64_t ms;
  int r = first_try(opts, "liar-only", msg, sizeof msg, &ms);
  relock_options_free(opts);
  printf("# liar alone: %s (%s) after %lld ms\n", msg, relock_err_name(r), (long long)ms);
  assert_int_equal(r, RELOCK_ENOMASTER);
  assert_true(ms < fx_slack_ms(3000));
  liar_stop(&lr);
}

/* -- e. split brain ------------------------------------------------------------*/

/* The master frozen (SIGSTOP) until the sentinels have promoted a replica,
 * then thawed: it is a master again, writable, until Sentinel converts it
 * (~10 s). The clients must be on the new master by then: one that held a
 * lock across the freeze, one made before it, one made after. What each
 * does is printed; what must hold is asserted. */
static void test_split_brain(void **state) {
  (void)state;
  relock_client_t *a = sentinel_client(0), *b = sentinel_client(0);
  relock_lock_t *la = lock_of(a, "split"), *lb = lock_of(b, "split");
  static lost_t lost; /* static: the callback may come until teardown */
  memset(&lost, 0, sizeof lost);
  relock_lock_on_lost(la, on_lost, &lost);
  int old = relock_test_sentinel_master(topo);
  relock_test_redis_t *om = relock_test_sentinel_node(topo, old);
  assert_int_equal(ACQUIRE(la, 1, 0), 1);
  assert_int_equal(ACQUIRE(lb, 2, 0), 0);
  /* replicated before the freeze, so the new master has it too */
  assert_int_equal(fx_raw_int(om, "WAIT", "2", "2000", NULL), 2);
  int64_t t0 = now_ms();
  assert_int_equal(relock_test_redis_pause(om), 0);
  int m = -1;
  while (now_ms() - t0 < fx_slack_ms(20000)) {
    int x = relock_test_sentinel_agree_now(topo);
    if (x >= 0 && x != old) {
      m = x;
      break;
    }
    pause_ms(10);
  }
  assert_true(m >= 0);
  printf("# master %d frozen; %d promoted after %lld ms\n", old, m, (long long)(now_ms() - t0));
  relock_test_redis_t *nm = relock_test_sentinel_node(topo, m);
  assert_int_equal(relock_test_redis_resume(om), 0);
  char role[256];
  relock_test_redis_cmd(om, role, sizeof role, "ROLE", NULL);
  int old_is_master = strstr(role, "master") != NULL;
  printf("# thawed old master says it is a %s\n", old_is_master ? "master (split brain)" : "replica");
  /* a still holds it, on the new master, renewed there. */
  assert_true(renewed_on(nm, "split", WATCHDOG_MS));
  assert_int_equal(field_on(nm, la, 1), 1);
  assert_int_equal(lost_count(&lost), 0);
  /* b (made before) and c (made after the thaw) are on the new master: the
   * lock is held for them, while the old master would grant it. */
  relock_client_t *c = sentinel_client(0);
  relock_lock_t *lc = lock_of(c, "split");
  assert_int_equal(ACQUIRE(lb, 2, 0), 0);
  assert_int_equal(ACQUIRE(lc, 3, 0), 0);
  if (old_is_master) {
    char buf[256];
    relock_test_redis_cmd(om, buf, sizeof buf, "SET", "split-probe", "written on the old master", NULL);
    printf("# a plain SET on the old master now: %.40s", buf);
    printf("# the old master %s the lock key\n", fx_raw_int(om, "EXISTS", "split", NULL) ? "has" : "lacks");
  }
  /* After the release, b gets it, on the new master. */
  assert_int_equal(RELEASE(la, 1), 1);
  assert_int_equal(ACQUIRE(lb, 2, 5000), 1);
  assert_int_equal(field_on(nm, lb, 2), 1);
  if (old_is_master)
    assert_int_equal(field_on(om, lb, 2), 0);
  assert_int_equal(RELEASE(lb, 2), 1);
}

/* min-replicas-acked above the replicas there are: every acquisition fails
 * with RELOCK_ENOTREPLICATED, nothing stays held, and the message says how
 * many replicas the sentinels see. */
static void test_more_replicas_asked_than_there_are(void **state) {
  (void)state;
  relock_client_t *c = sentinel_client(3); /* the topology has 2 */
  relock_lock_t *l = lock_of(c, "too-many");
  char msg[512];
  int r = outcome(relock_lock_lock_async(l, 1, 0, RELOCK_INFINITE), 10000, NULL, msg, sizeof msg);
  printf("# %s\n", msg);
  assert_int_equal(r, RELOCK_ENOTREPLICATED);
  assert_non_null(strstr(msg, "of 3 replicas"));
  assert_non_null(strstr(msg, "(the sentinels see 2 replicas up)"));
  /* the hold is given back right after the failure is reported */
  int64_t deadline = now_ms() + fx_slack_ms(2000);
  while (fx_raw_int(relock_test_sentinel_master_node(topo), "EXISTS", "too-many", NULL) != 0 && now_ms() < deadline)
    pause_ms(5);
  assert_int_equal(fx_raw_int(relock_test_sentinel_master_node(topo), "EXISTS", "too-many", NULL), 0);
}

/* -- f. TLS and passwords -------------------------------------------------------*/

/* A topology of its own with TLS on every port, a password on the data
 * nodes and another on the sentinels: the client finds the master over
 * rediss+sentinel:// with each side's credentials, and follows a kill -9
 * of it. A build without TLS refuses the URL (RELOCK_ETLS). */
/* -- relock top ------------------------------------------------------------------*/

/* The relock tool with args (argv[0] included, NULL-terminated), its
 * standard output and error into out: its exit status, -1 if it did not
 * exit. */
static int run_tool_out(const char *const *args, char *out, size_t size) {
  FILE *tmp = tmpfile();
  assert_non_null(tmp);
  const char *bin = getenv("RELOCK") != NULL ? getenv("RELOCK") : "tools/relock";
  fflush(stdout);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fileno(tmp), 1);
    dup2(fileno(tmp), 2);
    execv(bin, (char *const *)args);
    _exit(127);
  }
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  ssize_t n = pread(fileno(tmp), out, size - 1, 0);
  out[n > 0 ? n : 0] = '\0';
  fclose(tmp);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* relock top --once through the sentinels: the master they name, found
 * before top asks for the masters to SCAN (on its first look, not only
 * from its second), a held lock and its waiter's subscription. */
static void test_tool_top(void **state) {
  (void)state;
  relock_client_t *a = sentinel_client(0), *b = sentinel_client(0);
  assert_int_equal(ACQUIRE(lock_of(a, "st-held"), 1, 0), 1);
  assert_int_equal(ACQUIRE(lock_of(a, "st-idle"), 1, 0), 1);
  relock_future_t *waiter = relock_lock_lock_async(lock_of(b, "st-held"), 2, RELOCK_INFINITE, RELOCK_INFINITE);
  assert_non_null(waiter);
  relock_test_redis_t *m = relock_test_sentinel_master_node(topo);
  int64_t deadline = now_ms() + fx_slack_ms(3000);
  char buf[256] = "";
  while (now_ms() < deadline &&
         (relock_test_redis_cmd(m, buf, sizeof buf, "PUBSUB", "NUMSUB", "redisson_lock__channel:{st-held}", NULL) != 0 ||
          strstr(buf, ":1") == NULL))
    pause_ms(10);
  char url[512], out[4096];
  snprintf(url, sizeof url, "redis+sentinel://%s/%s", relock_test_sentinel_addrs(topo),
           relock_test_sentinel_master_name(topo));
  const char *top[] = {"relock", "-u", url, "top", "--once", "st-*", NULL};
  int code = run_tool_out(top, out, sizeof out);
  printf("# relock top --once:\n%s", out);
  assert_int_equal(code, 0);
  assert_non_null(strstr(out, "relock top st-*: 2 locks\n"));
  assert_null(strstr(out, "# error"));
  const char *held = strstr(out, "\nst-held kind=lock holds=1 "), *idle = strstr(out, "\nst-idle kind=lock holds=1 ");
  assert_non_null(held);
  assert_non_null(idle);
  assert_true(held < idle); /* the waited-for first */
  assert_true(strstr(held, " waiters=1 ") != NULL && strstr(held, " waiters=1 ") < idle);
  assert_non_null(strstr(idle, " waiters=0 "));
  relock_future_cancel(waiter);
  relock_future_release(waiter);
}

static void test_tls_and_passwords(void **state) {
  (void)state;
  relock_options_t *opts = relock_options_new(NULL);
  assert_non_null(opts);
  relock_error_t err;
  if (!relock_tls_available()) {
    assert_int_equal(relock_options_set_url(opts, "rediss+sentinel://127.0.0.1:1/m", &err), RELOCK_ETLS);
    printf("# no TLS in this build: rediss+sentinel:// is refused (%s)\n", err.message);
    relock_options_free(opts);
    return;
  }
  char certs[128], cmd[512], url[640], ca[160];
  const char *base = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
  snprintf(certs, sizeof certs, "%s/relock-tls-XXXXXX", base);
  assert_non_null(mkdtemp(certs));
  snprintf(cmd, sizeof cmd, "sh '%s' '%s' >/dev/null 2>&1", RELOCK_TLS_SH, certs);
  assert_int_equal(system(cmd), 0);
  relock_test_sentinel_opts_t o = {.replicas = 1, .password = "data-secret", .sentinel_password = "sentinel-secret",
                                   .tls_dir = certs};
  relock_test_sentinel_t *t = relock_test_sentinel_start(&o);
  assert_non_null(t);
  snprintf(url, sizeof url, "rediss+sentinel://:data-secret@%s/%s?sentinel-password=sentinel-secret",
           relock_test_sentinel_addrs(t), relock_test_sentinel_master_name(t));
  snprintf(ca, sizeof ca, "%s/ca.crt", certs);
  if (relock_options_set_url(opts, url, &err) != 0)
    fail_msg("%s", err.message);
  fx_set_str(opts, RELOCK_OPT_TLS_CA_FILE, ca);
  fx_set_ms(opts, RELOCK_OPT_COMMAND_TIMEOUT, fx_slack_ms(1000));
  fx_set_ms(opts, RELOCK_OPT_RECONNECT_MAX, 200);
  fx_set_ms(opts, RELOCK_OPT_WATCHDOG_TIMEOUT, WATCHDOG_MS);
  relock_client_t *c = client_of(opts);
  relock_options_free(opts);
  relock_lock_t *l = lock_of(c, "tls-held");
  assert_int_equal(ACQUIRE(l, 1, 0), 1);
  assert_int_equal(field_on(relock_test_sentinel_master_node(t), l, 1), 1);
  int64_t switched = -1;
  int64_t took = relock_test_sentinel_kill_master(t, 15000, &switched);
  assert_true(took >= 0);
  printf("# over TLS: kill -9, new master agreed after %lld ms\n", (long long)took);
  /* the hold was replicated long before: renewed on the new master, and a
   * second lock is taken there */
  relock_test_redis_t *nm = relock_test_sentinel_master_node(t);
  assert_int_equal(renewed_on(nm, "tls-held", WATCHDOG_MS), 1);
  relock_lock_t *l2 = lock_of(c, "tls-after");
  assert_int_equal(ACQUIRE(l2, 1, 5000), 1);
  assert_int_equal(field_on(nm, l2, 1), 1);
  assert_int_equal(RELEASE(l2, 1), 1);
  assert_int_equal(RELEASE(l, 1), 1);
  teardown(NULL); /* the client goes before its servers */
  relock_test_sentinel_free(t);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", certs);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_discovery_by_option, setup, teardown),
      cmocka_unit_test_setup_teardown(test_discovery_by_url, setup, teardown),

      cmocka_unit_test_setup_teardown(test_held_across_sentinel_failover, setup, teardown),
      cmocka_unit_test_setup_teardown(test_kill_master_unsynced, setup, teardown),
      cmocka_unit_test_setup_teardown(test_kill_master_synced, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_sentinel_reachable, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unknown_master_name, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sentinels_down_after_discovery, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lying_sentinel, setup, teardown),
      cmocka_unit_test_setup_teardown(test_split_brain, setup, teardown),
      cmocka_unit_test_setup_teardown(test_more_replicas_asked_than_there_are, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tool_top, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tls_and_passwords, NULL, teardown),
  };
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name(__FILE__, tests, group_setup, group_teardown);
}
