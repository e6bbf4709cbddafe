package relock.interop;

import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.LongCodec;
import org.redisson.config.Config;

/**
 * Redisson itself, timed on the workloads relock's bench/lock times, for
 * bench/run's side-by-side part (relock/Redisson ratios in one run, on one
 * redis-server). One JSON object on standard output, as bench/lock prints.
 *
 * <pre>
 *   java relock.interop.Bench REDIS_URL latency PAIRS
 *       one thread, RLock lock()/unlock() pairs (the watchdog lease), after
 *       5000 pairs of JIT warm-up: p50/p99/mean in microseconds
 *   java relock.interop.Bench REDIS_URL throughput NAMES SECONDS
 *       the async API, NAMES locks each in a chain of lockAsync/unlockAsync
 *       (its own thread id), all in flight at once: pairs per second
 *   java relock.interop.Bench REDIS_URL handoff CLIENTS SECTIONS
 *       CLIENTS threads, each with a Redisson client of its own (its own
 *       connections, as processes would), SECTIONS back-to-back sections on
 *       one name (lock, GET, SET, unlock): acquisitions per second, owner
 *       switches, the counter exact
 * </pre>
 */
public final class Bench {
  private Bench() {}

  private static RedissonClient client(String url) {
    Config config = new Config();
    config.useSingleServer().setAddress(url);
    return Redisson.create(config);
  }

  private static double pct(long[] v, double p) {
    int i = (int) Math.min(v.length - 1, Math.max(0, Math.round(p * (v.length - 1))));
    return v[i] / 1e3;
  }

  private static void latency(String url, int pairs) {
    RedissonClient r = client(url);
    RLock lock = r.getLock("bench:redisson:latency");
    long[] t = new long[pairs];
    for (int i = -5000; i < pairs; i++) {
      long t0 = System.nanoTime();
      lock.lock();
      lock.unlock();
      if (i >= 0) {
        t[i] = System.nanoTime() - t0;
      }
    }
    double mean = Arrays.stream(t).average().orElse(0) / 1e3;
    Arrays.sort(t);
    System.out.printf("{\"pairs\":%d,\"p50_us\":%.1f,\"p99_us\":%.1f,\"mean_us\":%.1f}%n", pairs, pct(t, 0.5),
                      pct(t, 0.99), mean);
    r.shutdown();
  }

  private static void throughput(String url, int names, double seconds) throws InterruptedException {
    RedissonClient r = client(url);
    AtomicLong pairs = new AtomicLong();
    AtomicBoolean running = new AtomicBoolean(true);
    CountDownLatch stopped = new CountDownLatch(names);
    for (int i = 0; i < names; i++) {
      RLock lock = r.getLock("bench:redisson:tp:" + i);
      chain(lock, i + 1, pairs, running, stopped);
    }
    Thread.sleep(500); /* warm-up */
    long p0 = pairs.get(), t0 = System.nanoTime();
    Thread.sleep((long) (seconds * 1000));
    long p1 = pairs.get(), t1 = System.nanoTime();
    running.set(false);
    stopped.await(30, TimeUnit.SECONDS);
    System.out.printf("{\"names\":%d,\"pairs_per_s\":%.0f}%n", names, (p1 - p0) / ((t1 - t0) / 1e9));
    r.shutdown();
  }

  private static void chain(RLock lock, long threadId, AtomicLong pairs, AtomicBoolean running,
                            CountDownLatch stopped) {
    lock.lockAsync(-1, TimeUnit.MILLISECONDS, threadId).whenComplete((v, e) -> {
      if (e != null) {
        stopped.countDown();
        return;
      }
      lock.unlockAsync(threadId).whenComplete((u, e2) -> {
        pairs.incrementAndGet();
        if (e2 == null && running.get()) {
          chain(lock, threadId, pairs, running, stopped);
        } else {
          stopped.countDown();
        }
      });
    });
  }

  private static void handoff(String url, int clients, int sections) throws Exception {
    RedissonClient admin = client(url);
    admin.getKeys().delete("bench:redisson:counter", "bench:redisson:handoff");
    RedissonClient[] rs = new RedissonClient[clients];
    for (int i = 0; i < clients; i++) {
      rs[i] = client(url);
    }
    long[][] got = new long[clients][sections];
    Thread[] threads = new Thread[clients];
    CountDownLatch start = new CountDownLatch(1);
    for (int i = 0; i < clients; i++) {
      final int c = i;
      threads[i] = new Thread(() -> {
        RLock lock = rs[c].getLock("bench:redisson:handoff");
        RBucket<Long> counter = rs[c].getBucket("bench:redisson:counter", LongCodec.INSTANCE);
        try {
          start.await();
        } catch (InterruptedException e) {
          return;
        }
        for (int s = 0; s < sections; s++) {
          lock.lock();
          got[c][s] = System.nanoTime();
          Long v = counter.get();
          counter.set(v == null ? 1 : v + 1);
          lock.unlock();
        }
      });
      threads[i].start();
    }
    long t0 = System.nanoTime();
    start.countDown();
    for (Thread t : threads) {
      t.join();
    }
    long t1 = System.nanoTime();
    /* owner switches: acquisitions in time order, from another client than the one before */
    int n = clients * sections;
    long[][] all = new long[n][2];
    for (int c = 0, k = 0; c < clients; c++) {
      for (int s = 0; s < sections; s++, k++) {
        all[k][0] = got[c][s];
        all[k][1] = c;
      }
    }
    Arrays.sort(all, (a, b) -> Long.compare(a[0], b[0]));
    int switches = 0;
    for (int k = 1; k < n; k++) {
      if (all[k][1] != all[k - 1][1]) {
        switches++;
      }
    }
    Long counter = admin.<Long>getBucket("bench:redisson:counter", LongCodec.INSTANCE).get();
    System.out.printf("{\"clients\":%d,\"sections\":%d,\"acquisitions_per_s\":%.0f,\"owner_switches\":%d,"
                      + "\"counter\":%d,\"exact\":%s}%n",
                      clients, n, n / ((t1 - t0) / 1e9), switches, counter, counter != null && counter == n);
    for (RedissonClient r : rs) {
      r.shutdown();
    }
    admin.shutdown();
  }

  public static void main(String[] args) throws Exception {
    if (args.length >= 3 && args[1].equals("latency")) {
      latency(args[0], Integer.parseInt(args[2]));
    } else if (args.length >= 4 && args[1].equals("throughput")) {
      throughput(args[0], Integer.parseInt(args[2]), Double.parseDouble(args[3]));
    } else if (args.length >= 4 && args[1].equals("handoff")) {
      handoff(args[0], Integer.parseInt(args[2]), Integer.parseInt(args[3]));
    } else {
      System.err.println("usage: Bench REDIS_URL latency PAIRS | throughput NAMES SECONDS | handoff CLIENTS SECTIONS");
      System.exit(2);
    }
    System.exit(0);
  }
}
