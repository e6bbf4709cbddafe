/* Connection health: a silent peer (a network black hole) is noticed by the
 * PING health check and the connection replaced, with a held lock kept and a
 * waiter still woken; idle connections are pinged, busy ones are not, and
 * ping_interval_ms = 0 pings nothing. And a server that answers what nobody
 * asked, twice, or with malformed pub/sub messages makes a protocol error
 * and a reconnect, never an abort (a fake server on loopback). */
#include <config.h>

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/client_fixture.h"
#include "objects/lock_impl.h"
#include "support/proxy.h"
#include "redis/pubsub.h"

/* -- helpers ----------------------------------------------------------------*/

typedef struct {
  relock_test_redis_t *redis;
} fx_t;

static int setup(void **state) {
  fx_t *fx = calloc(1, sizeof(*fx));
  fx->redis = relock_test_redis_start(NULL);
  if (fx->redis == NULL)
    return -1;
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fx_t *fx = *state;
  relock_test_redis_free(fx->redis);
  free(fx);
  return 0;
}

static int64_t value_of(relock_future_t *f) {
  assert_non_null(f);
  int r = relock_future_wait(f, fx_slack_ms(10000));
  if (r != 0)
    fail_msg("operation failed: %s (%s)", relock_future_message(f), relock_err_name(r));
  int64_t v = relock_future_value_type(f) == RELOCK_VALUE_BOOL ? relock_future_bool(f) : relock_future_int(f);
  relock_future_release(f);
  return v;
}

/* calls of PING the server has counted since the last CONFIG RESETSTAT */
static long long server_pings(relock_test_redis_t *r) {
  char buf[8192];
  assert_int_equal(relock_test_redis_cmd(r, buf, sizeof buf, "INFO", "commandstats", NULL), 0);
  const char *p = strstr(buf, "cmdstat_ping:calls=");
  return p != NULL ? atoll(p + strlen("cmdstat_ping:calls=")) : 0;
}

static void reset_stats(relock_test_redis_t *r) {
  assert_int_equal(relock_test_redis_cmd(r, NULL, 0, "CONFIG", "RESETSTAT", NULL), 0);
}

static int sleeping_(void *arg) {
  (void)arg;
  return 0;
}

static void run_for(relock_client_t *c, int64_t ms) {
  fx_run_until(relock_client_loop(c), sleeping_, NULL, ms);
}

typedef struct {
  relock_client_t *c;
  uint64_t cmd_connects, sub_connects;
} replaced_t;

static int both_replaced(void *arg) {
  replaced_t *r = arg;
  return r->c->redis.cmd.connects > r->cmd_connects && r->c->redis.cmd.state == RELOCK__CONN_READY &&
         r->c->redis.pubsub.conn.connects > r->sub_connects && r->c->redis.pubsub.conn.state == RELOCK__CONN_READY;
}

static int lost_calls;
static void on_lost(relock_lock_t *l, uint64_t owner, int reason, const char *message, void *arg) {
  (void)l;
  (void)owner;
  (void)reason;
  (void)arg;
  lost_calls++;
  print_message("# lost: %s\n", message);
}

/* -- A: a black hole is noticed -----------------------------------------------*/

static void test_blackhole_replaces_connections(void **state) {
  fx_t *fx = *state;
  relock_test_proxy_t *proxy =
      relock_test_proxy_start(relock_test_redis_host(fx->redis), relock_test_redis_port(fx->redis));
  assert_non_null(proxy);
  relock_options_t *cfg;
  cfg = fx_options(fx->redis, 0);
  fx_set_int(cfg, RELOCK_OPT_PORT, relock_test_proxy_port(proxy));
  fx_set_ms(cfg, RELOCK_OPT_WATCHDOG_TIMEOUT, 3000);
  fx_set_ms(cfg, RELOCK_OPT_PING_INTERVAL, 200);
  fx_set_ms(cfg, RELOCK_OPT_COMMAND_TIMEOUT, 500);
  fx_set_ms(cfg, RELOCK_OPT_RETRY_INTERVAL, 100);
  relock_client_t *a = fx_client(cfg); /* through the proxy */
  relock_options_free(cfg);
  relock_options_t *direct;
  direct = fx_options(fx->redis, 1);
  relock_client_t *b = fx_client(direct);
  relock_options_free(direct);

  relock_lock_t *held = relock_lock_new(a, "held", NULL);
  relock_lock_t *wanted_a = relock_lock_new(a, "wanted", NULL);
  relock_lock_t *wanted_b = relock_lock_new(b, "wanted", NULL);
  lost_calls = 0;
  relock_lock_on_lost(held, on_lost, NULL);
  assert_int_equal(value_of(relock_lock_lock_async(held, 1, 0, RELOCK_INFINITE)), 1);
  assert_int_equal(value_of(relock_lock_lock_async(wanted_b, 1, 0, 60000)), 1);
  /* a waiter of a on the subscriber connection */
  relock_future_t *wait = relock_lock_lock_async(wanted_a, 2, 30000, RELOCK_INFINITE);
  assert_non_null(wait);
  run_for(a, 300);
  assert_int_equal(relock_future_state(wait), RELOCK_FUTURE_PENDING);
  assert_int_equal(a->redis.pubsub.conn.state, RELOCK__CONN_READY);
  uint64_t batches = a->renewal.batches;

  replaced_t r = {a, a->redis.cmd.connects, a->redis.pubsub.conn.connects};
  uint64_t t0 = relock__now_ns();
  relock_test_proxy_blackhole_current(proxy);
  int ok = fx_run_until(relock_client_loop(a), both_replaced, &r, 5000);
  double ms = fx_ms_since(t0);
  print_message("# connection replaced after blackhole in %.0f ms\n", ms);
  assert_true(ok);
  assert_true(a->redis.cmd.dead >= 1);
  assert_true(a->redis.pubsub.conn.dead >= 1);
  if (!relock_test_under_valgrind())
    assert_true(ms <= 200 + 500 + 600); /* ping interval + command timeout + slack */

  /* the waiter, subscribed on the replaced connection, hears the unlock */
  assert_int_equal(value_of(relock_lock_unlock_async(wanted_b, 1)), 1);
  assert_int_equal(relock_future_wait(wait, fx_slack_ms(5000)), 0);
  assert_true(relock_future_bool(wait));
  relock_future_release(wait);
  assert_int_equal(value_of(relock_lock_unlock_async(wanted_a, 2)), 1);

  /* the held lock stayed held, and is renewed on the new connection */
  run_for(a, 3500); /* longer than the watchdog lease */
  assert_int_equal(lost_calls, 0);
  assert_true(a->renewal.batches > batches + 2);
  char field[128];
  relock_lock_field(held, 1, field, sizeof field);
  assert_int_equal(fx_raw_int(fx->redis, "HEXISTS", "held", field, NULL), 1);
  assert_true(fx_raw_int(fx->redis, "PTTL", "held", NULL) > 1000);
  assert_int_equal(value_of(relock_lock_unlock_async(held, 1)), 1);

  relock_lock_free(held);
  relock_lock_free(wanted_a);
  relock_lock_free(wanted_b);
  relock_client_free(a);
  relock_client_free(b);
  relock_test_proxy_stop(proxy);
}

/* Pending commands fail with RELOCK_ECONNLOST and say why. */
static void test_blackhole_fails_pending_with_connlost(void **state) {
  fx_t *fx = *state;
  relock_test_proxy_t *proxy =
      relock_test_proxy_start(relock_test_redis_host(fx->redis), relock_test_redis_port(fx->redis));
  assert_non_null(proxy);
  relock_options_t *cfg;
  cfg = fx_options(fx->redis, 0);
  fx_set_int(cfg, RELOCK_OPT_PORT, relock_test_proxy_port(proxy));
  fx_set_ms(cfg, RELOCK_OPT_PING_INTERVAL, 200);
  fx_set_ms(cfg, RELOCK_OPT_COMMAND_TIMEOUT, 5000); /* the request's own timeout must not win */
  relock_client_t *a = fx_client(cfg);
  relock_options_free(cfg);
  relock_future_t *ping = FX_CMD(a, "PING");
  fx_ok(ping);
  relock_future_release(ping);
  relock_test_proxy_blackhole_current(proxy);
  uint64_t t0 = relock__now_ns();
  /* A command sent before the PING has the same timeout, and times out
   * first; one sent after it is failed by the health check. */
  run_for(a, 400);
  assert_int_equal(a->redis.cmd.ping_pending, 1);
  relock_future_t *f = relock_client_command_async(a, 2, (const char *const[]){"GET", "k"}, NULL);
  assert_int_equal(relock_future_wait(f, fx_slack_ms(10000)), RELOCK_ECONNLOST);
  print_message("# pending command failed after %.0f ms: %s\n", fx_ms_since(t0), relock_future_message(f));
  assert_non_null(strstr(relock_future_message(f), "no reply to PING within 5000 ms"));
  assert_non_null(strstr(relock_future_message(f), "presumed dead"));
  if (!relock_test_under_valgrind())
    assert_true(fx_ms_since(t0) < 200 + 5000 + 1000);
  relock_future_release(f);
  relock_client_free(a);
  relock_test_proxy_stop(proxy);
}

static void count_nothing(relock__listener_t *l, const char *payload, size_t len, void *arg) {
  (void)l;
  (void)payload;
  (void)len;
  (void)arg;
}

static void test_idle_connections_are_pinged(void **state) {
  fx_t *fx = *state;
  relock_options_t *cfg;
  cfg = fx_options(fx->redis, 0);
  fx_set_ms(cfg, RELOCK_OPT_PING_INTERVAL, 100);
  relock_client_t *a = fx_client(cfg);
  relock_options_free(cfg);
  relock_future_release(FX_CMD(a, "SET", "k", "v"));
  /* the subscriber connection, subscribed (RESP2: PING answers ["pong", ""]) */
  relock__listener_t l;
  relock_future_t *sub = relock__pubsub_subscribe(&a->redis.pubsub, &l, "chan", 4, 0, count_nothing, NULL);
  assert_int_equal(relock_future_wait(sub, fx_slack_ms(5000)), 0);
  relock_future_release(sub);
  reset_stats(fx->redis);
  run_for(a, 1000);
  long long pings = server_pings(fx->redis);
  print_message("# %lld PINGs in 1 s at a 100 ms interval; command %llu, subscriber %llu\n", pings,
                (unsigned long long)a->redis.cmd.pings, (unsigned long long)a->redis.pubsub.conn.pings);
  assert_true(a->redis.cmd.pings >= 4);
  assert_true(a->redis.pubsub.conn.pings >= 4);
  assert_true(pings >= 8);
  /* every PING was answered: nothing was presumed dead or replaced */
  assert_int_equal(a->redis.cmd.dead + a->redis.pubsub.conn.dead, 0);
  assert_int_equal(a->redis.cmd.connects, 1);
  assert_int_equal(a->redis.pubsub.conn.connects, 1);
  relock__pubsub_unsubscribe(&l);
  relock_client_free(a);
}

static void test_ping_interval_zero_pings_nothing(void **state) {
  fx_t *fx = *state;
  relock_options_t *cfg;
  cfg = fx_options(fx->redis, 0);
  fx_set_ms(cfg, RELOCK_OPT_PING_INTERVAL, 0);
  relock_client_t *a = fx_client(cfg);
  relock_options_free(cfg);
  relock_future_release(FX_CMD(a, "SET", "k", "v"));
  reset_stats(fx->redis);
  run_for(a, 600);
  assert_int_equal(server_pings(fx->redis), 0);
  assert_int_equal(a->redis.cmd.pings, 0);
  relock_client_free(a);
}

static void test_busy_connection_is_not_pinged(void **state) {
  fx_t *fx = *state;
  relock_options_t *cfg;
  cfg = fx_options(fx->redis, 0);
  fx_set_ms(cfg, RELOCK_OPT_PING_INTERVAL, 200);
  relock_client_t *a = fx_client(cfg);
  relock_options_free(cfg);
  uint64_t t0 = relock__now_ns();
  while (fx_ms_since(t0) < 1000) /* one command after another: never idle for 200 ms */
    relock_future_release(FX_CMD(a, "GET", "k"));
  assert_int_equal(a->redis.cmd.pings, 0);
  relock_client_free(a);
}

static void test_ping_interval_validated(void **state) {
  (void)state;
  relock_options_t *cfg = relock_options_new(NULL);
  assert_non_null(cfg);
  int64_t ms = 0;
  assert_int_equal(relock_options_get_ms(cfg, RELOCK_OPT_PING_INTERVAL, &ms, NULL), 0);
  assert_int_equal(ms, 1000);
  relock_error_t err;
  assert_int_equal(relock_options_set_ms(cfg, RELOCK_OPT_PING_INTERVAL, -1, &err), RELOCK_EINVAL);
  assert_non_null(strstr(err.message, "ping-interval"));
  fx_set_ms(cfg, RELOCK_OPT_PING_INTERVAL, 0);
  assert_int_equal(relock_options_validate(cfg, &err), 0);
  relock_options_free(cfg);
}

/* -- B: a server that answers what nobody asked ---------------------------------
 * A fake server in a thread of this process; the client runs in a forked
 * child, so that an abort (the bug) fails one test rather than the program.
 * The fake answers the first GET or SUBSCRIBE as the case says, and
 * everything else properly (so the reconnect can be seen working). */

typedef struct {
  const char *name;
  const char *get_reply;       /* the first connection's answer to GET ("" = proper) */
  const char *subscribe_reply; /* the first connection's answer to SUBSCRIBE chan */
  int want_err;                /* what the pending request (GET or the confirmation) gets */
} bad_case_t;

typedef struct {
  int lfd, port;
  int wake[2];
  pthread_t thread;
  const bad_case_t *bc;
  int connections;
  int misbehaved; /* the first GET or SUBSCRIBE had its bad answer */
} fake_t;

typedef struct {
  int fd, index;
  char buf[4096];
  size_t len;
} peer_t;

static void send_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
    if (w <= 0)
      return;
    s += w;
    n -= (size_t)w;
  }
}

/* Parses one RESP command at the start of p->buf; its length, 0 if incomplete. */
static size_t parse_command(const peer_t *p, char argv[4][64], int *argc) {
  const char *s = p->buf, *end = p->buf + p->len;
  const char *nl = memchr(s, '\n', (size_t)(end - s));
  if (nl == NULL || s[0] != '*')
    return 0;
  int n = atoi(s + 1);
  s = nl + 1;
  *argc = 0;
  for (int i = 0; i < n; i++) {
    nl = memchr(s, '\n', (size_t)(end - s));
    if (nl == NULL)
      return 0;
    size_t len = (size_t)atol(s + 1);
    s = nl + 1;
    if ((size_t)(end - s) < len + 2)
      return 0;
    if (i < 4) {
      size_t k = len < 63 ? len : 63;
      memcpy(argv[i], s, k);
      argv[i][k] = '\0';
      (*argc)++;
    }
    s += len + 2;
  }
  return (size_t)(s - p->buf);
}

static void answer(fake_t *f, peer_t *p, char argv[4][64], int argc) {
  char out[512];
  int first = !f->misbehaved;
  if (argc >= 1 && strcasecmp(argv[0], "PING") == 0) {
    send_all(p->fd, "+PONG\r\n", 7);
  } else if (argc >= 1 && strcasecmp(argv[0], "GET") == 0) {
    const char *r = first && f->bc->get_reply[0] ? f->bc->get_reply : "$1\r\na\r\n";
    f->misbehaved |= f->bc->get_reply[0] != '\0';
    send_all(p->fd, r, strlen(r));
  } else if (argc >= 2 && strcasecmp(argv[0], "SUBSCRIBE") == 0) {
    if (first && f->bc->subscribe_reply[0]) {
      send_all(p->fd, f->bc->subscribe_reply, strlen(f->bc->subscribe_reply));
      f->misbehaved = 1;
    } else {
      int n = snprintf(out, sizeof out, "*3\r\n$9\r\nsubscribe\r\n$%zu\r\n%s\r\n:1\r\n", strlen(argv[1]), argv[1]);
      send_all(p->fd, out, (size_t)n);
    }
  } else if (argc >= 2 && strcasecmp(argv[0], "UNSUBSCRIBE") == 0) {
    int n = snprintf(out, sizeof out, "*3\r\n$11\r\nunsubscribe\r\n$%zu\r\n%s\r\n:0\r\n", strlen(argv[1]), argv[1]);
    send_all(p->fd, out, (size_t)n);
  } else {
    send_all(p->fd, "+OK\r\n", 5);
  }
}

static void *fake_main(void *arg) {
  fake_t *f = arg;
  enum { MAXP = 16 };
  peer_t peers[MAXP];
  int np = 0;
  for (;;) {
    struct pollfd pfds[2 + MAXP];
    pfds[0] = (struct pollfd){f->wake[0], POLLIN, 0};
    pfds[1] = (struct pollfd){f->lfd, POLLIN, 0};
    for (int i = 0; i < np; i++)
      pfds[2 + i] = (struct pollfd){peers[i].fd, POLLIN, 0};
    if (poll(pfds, (nfds_t)(2 + np), -1) < 0)
      continue;
    if (pfds[0].revents)
      break;
    for (int i = 0; i < np; i++) {
      if (!pfds[2 + i].revents)
        continue;
      peer_t *p = &peers[i];
      ssize_t n = recv(p->fd, p->buf + p->len, sizeof p->buf - p->len, 0);
      if (n <= 0) {
        close(p->fd);
        peers[i] = peers[--np];
        pfds[2 + i] = pfds[2 + np];
        i--;
        continue;
      }
      p->len += (size_t)n;
      char argv[4][64];
      int argc;
      size_t used;
      while ((used = parse_command(p, argv, &argc)) > 0) {
        answer(f, p, argv, argc);
        memmove(p->buf, p->buf + used, p->len - used);
        p->len -= used;
      }
    }
    if ((pfds[1].revents & POLLIN) && np < MAXP) {
      int fd = accept(f->lfd, NULL, NULL);
      if (fd >= 0) {
        peers[np] = (peer_t){.fd = fd, .index = f->connections++};
        np++;
      }
    }
  }
  for (int i = 0; i < np; i++)
    close(peers[i].fd);
  return NULL;
}

/* The fake's listening socket, its thread not started yet: fake_serve
 * starts it after the fork (see run_bad_case). */
static fake_t *fake_listen(const bad_case_t *bc) {
  fake_t *f = calloc(1, sizeof(*f));
  f->bc = bc;
  f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
  socklen_t len = sizeof sa;
  assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&sa, &len), 0);
  f->port = ntohs(sa.sin_port);
  assert_int_equal(listen(f->lfd, 16), 0);
  assert_int_equal(pipe(f->wake), 0);
  return f;
}

/* Answers on the listening socket; connections made before it starts wait
 * in the listen backlog. */
static void fake_serve(fake_t *f) { assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0); }

static void fake_stop(fake_t *f) {
  close(f->wake[1]);
  pthread_join(f->thread, NULL);
  close(f->wake[0]);
  close(f->lfd);
  free(f);
}

#define CHILD_CHECK(cond)                                                                     \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      fprintf(stderr, "# %s:%d: %s: check failed: %s\n", __FILE__, __LINE__, bc->name, #cond); \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

static int conn_down(void *arg) { return ((relock__conn_t *)arg)->state != RELOCK__CONN_READY; }
static int conn_back(void *arg) {
  relock__conn_t *c = arg;
  return c->connects >= 2 && c->state == RELOCK__CONN_READY;
}

static int gaps;
static void ignore_message(relock__listener_t *l, const char *payload, size_t len, void *arg) {
  (void)l;
  (void)len;
  (void)arg;
  if (payload == NULL)
    gaps++;
}

/* the listener's subscription is confirmed on the new connection */
static int resubscribed(void *arg) {
  relock__listener_t *l = arg;
  return l->confirmed && l->confirm == NULL && gaps > 0;
}

/* The listener is the caller's: a failed check returns with it still
 * subscribed, and relock_client_free, which detaches it, runs after. */
static int bad_case_child(const bad_case_t *bc, relock_client_t *a, relock__listener_t *lp) {
  struct ev_loop *loop = relock_client_loop(a);
  int command = bc->get_reply[0] != '\0';
  relock__conn_t *c = command ? &a->redis.cmd : &a->redis.pubsub.conn;
  relock_future_t *f;
  if (command) {
    f = relock_client_command_async(a, 2, (const char *const[]){"GET", "k"}, NULL);
  } else {
    f = relock__pubsub_subscribe(&a->redis.pubsub, lp, "chan", 4, 0, ignore_message, NULL);
  }
  CHILD_CHECK(f != NULL);
  int r = relock_future_wait(f, fx_slack_ms(5000));
  fprintf(stderr, "# %s: pending request: %s: %s\n", bc->name, relock_err_name(r), relock_future_message(f));
  CHILD_CHECK(r == bc->want_err);
  int was_confirmed = !command && lp->confirmed;
  gaps = 0;
  relock_future_release(f);
  /* the connection drops with a protocol error (reconnects are slow here) */
  CHILD_CHECK(fx_run_until(loop, conn_down, c, 3000)); /* scaled under valgrind */
  fprintf(stderr, "# %s: dropped: %s: %s\n", bc->name, relock_err_name(c->last_err), c->last_msg);
  CHILD_CHECK(c->last_err == RELOCK_EPROTO);
  /* and comes back, working */
  CHILD_CHECK(fx_run_until(loop, conn_back, c, 5000));
  if (command) {
    f = relock_client_command_async(a, 2, (const char *const[]){"GET", "k"}, NULL);
    CHILD_CHECK(relock_future_wait(f, fx_slack_ms(5000)) == 0);
    relock_future_release(f);
  } else {
    if (!was_confirmed)
      gaps = 1; /* no gap to tell: it never was subscribed */
    CHILD_CHECK(fx_run_until(loop, resubscribed, lp, 5000));
    relock__pubsub_unsubscribe(lp);
  }
  return 0;
}

/* 0 if the client survived and saw what it should, else -1 (reported). */
static int run_bad_case(const bad_case_t *bc) {
  /* The fake's thread starts after the fork: a process forked while another
   * of its threads runs inherits the locks that thread held at that moment,
   * held forever. ASan's allocator (gcc 12's has no fork handler) hung a
   * child so, in its first malloc, on a size class lock that the fake
   * thread, just started, held at the fork. Forked from a process of one
   * thread, the child is safe. */
  fake_t *f = fake_listen(bc);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    relock_options_t *cfg;
    cfg = relock_options_new(NULL);
    fx_set_int(cfg, RELOCK_OPT_PORT, f->port);
    /* the child's copies: the fake runs in the parent */
    close(f->lfd);
    close(f->wake[0]);
    close(f->wake[1]);
    free(f);
    fx_set_ms(cfg, RELOCK_OPT_PING_INTERVAL, 0);
    fx_set_ms(cfg, RELOCK_OPT_COMMAND_TIMEOUT, 3000);
    fx_set_ms(cfg, RELOCK_OPT_RECONNECT_MIN, 500); /* time to look at the dropped connection */
    fx_set_ms(cfg, RELOCK_OPT_RECONNECT_MAX, 1000);
    /* Embedded, on a loop of the child's own: the child runs it
     * (fx_run_until) and reads the connections' state between turns. */
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    relock_error_t err;
    relock_client_t *a = loop != NULL ? relock_client_new(loop, cfg, &err) : NULL;
    relock_options_free(cfg);
    relock__listener_t l;
    int rc = a != NULL ? bad_case_child(bc, a, &l) : 1;
    relock_client_free(a);
    /* The loop too: under valgrind the child's leak check at _exit counts
     * a loop left behind as a definite leak and exits 99. */
    if (loop != NULL)
      ev_loop_destroy(loop);
    fflush(NULL);
    _exit(rc);
  }
  fake_serve(f);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  fake_stop(f);
  if (WIFSIGNALED(status)) {
    print_message("# FAILED: %s: the client died of signal %d (an abort inside hiredis?)\n", bc->name,
                  WTERMSIG(status));
    return -1;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    /* CHILD_CHECK exits 1; valgrind's --error-exitcode (99 in make
     * check-valgrind) means a memory error or leak in the child, reported
     * above, whatever its checks said. */
    if (WEXITSTATUS(status) == 1)
      print_message("# FAILED: %s: the client's checks failed (exit 1)\n", bc->name);
    else
      print_message("# FAILED: %s: the client exited %d (%s)\n", bc->name, WEXITSTATUS(status),
                    relock_test_under_valgrind() ? "valgrind found an error or a leak in it: see its report above"
                                                 : "not a failed check");
    return -1;
  }
  return 0;
}

#define SUBSCRIBED "*3\r\n$9\r\nsubscribe\r\n$4\r\nchan\r\n:1\r\n"

static const bad_case_t bad_cases[] = {
    /* the command connection */
    {"extra reply after the answer", "$1\r\na\r\n+EXTRA\r\n", "", 0},
    {"duplicate reply", "$1\r\na\r\n$1\r\na\r\n", "", 0},
    {"unsolicited message on the command connection", "$1\r\na\r\n*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nx\r\n", "",
     0},
    {"malformed reply to a pending command", "?what\r\n", "", RELOCK_EPROTO},
    /* the subscriber connection */
    {"subscribe confirmation with a non-integer count", "", "*3\r\n$9\r\nsubscribe\r\n$4\r\nchan\r\n$1\r\nx\r\n",
     RELOCK_EPROTO},
    {"subscribe confirmation of the wrong shape", "", "*2\r\n$9\r\nsubscribe\r\n$4\r\nchan\r\n", RELOCK_EPROTO},
    {"unsubscribe with a non-integer count", "", SUBSCRIBED "*3\r\n$11\r\nunsubscribe\r\n$1\r\nx\r\n$1\r\nx\r\n", 0},
    {"unsubscribe of our channel with a non-integer count", "",
     SUBSCRIBED "*3\r\n$11\r\nunsubscribe\r\n$4\r\nchan\r\n$1\r\nx\r\n", 0},
    {"unsolicited message for another channel", "", SUBSCRIBED "*3\r\n$7\r\nmessage\r\n$5\r\nother\r\n$1\r\np\r\n",
     0},
    {"smessage push", "", SUBSCRIBED "*3\r\n$8\r\nsmessage\r\n$4\r\nchan\r\n$1\r\np\r\n", 0},
    {"a plain reply on the subscriber connection", "", SUBSCRIBED ":42\r\n", 0},
};

static void test_bad_replies_are_protocol_errors(void **state) {
  (void)state;
  int failed = 0;
  for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
    print_message("# case: %s\n", bad_cases[i].name);
    failed += run_bad_case(&bad_cases[i]) != 0;
  }
  assert_int_equal(failed, 0);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ping_interval_validated),
      T(test_blackhole_replaces_connections),
      T(test_blackhole_fails_pending_with_connlost),
      T(test_idle_connections_are_pinged),
      T(test_ping_interval_zero_pings_nothing),
      T(test_busy_connection_is_not_pinged),
      cmocka_unit_test(test_bad_replies_are_protocol_errors),
  };
#undef T
  if (!relock_test_redis_available())
    RELOCK_TEST_CANNOT_RUN("redis-server not found: install the Debian package redis-server");
  cmocka_set_message_output(CM_OUTPUT_TAP);
  return cmocka_run_group_tests_name("health", tests, NULL, NULL);
}
