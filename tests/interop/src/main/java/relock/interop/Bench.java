package relock.interop;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntFunction;

import com.sun.management.OperatingSystemMXBean;

import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.LongCodec;
import org.redisson.client.codec.StringCodec;
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
 *   java relock.interop.Bench REDIS_URL throughput NAMES SECONDS [WARMUP_S]
 *       the async API, NAMES locks each in a chain of lockAsync/unlockAsync
 *       (its own thread id), all in flight at once: pairs per second over
 *       SECONDS, after WARMUP_S (default 0.5) of them unmeasured
 *   java relock.interop.Bench REDIS_URL handoff CLIENTS SECTIONS [OUTSIDE_US]
 *       CLIENTS threads, each with a Redisson client of its own (its own
 *       connections, as processes would), SECTIONS sections on one name
 *       (lock, GET, SET, unlock), OUTSIDE_US of spinning outside the lock
 *       between them (0: back to back), after 250 sections each on another
 *       name of JIT warm-up: acquisitions per second, owner switches, the
 *       counter exact, and the handoffs as bench/lock counts them (a release
 *       to another client's acquisition while it was waiting, one JVM's
 *       System.nanoTime for every thread): p50/p99 in microseconds
 *   java relock.interop.Bench REDIS_URL contender SECTIONS
 *       one of the contending processes of bench/run part peers' B3 (each
 *       a JVM of its own): 250 sections of JIT warm-up on a name of its own,
 *       then it counts itself ready (INCR bench:peers:b3:ready), waits for
 *       the go (BLPOP bench:peers:b3:go) and runs SECTIONS sections on
 *       bench:peers:b3 (lock, GET, SET, unlock): the times of its first
 *       acquisition and its last release in microseconds (System.nanoTime,
 *       CLOCK_MONOTONIC on Linux: one clock for every process), as
 *       bench/peers/common.js prints them
 *   java relock.interop.Bench REDIS_URL watchdog LOCKS WATCHDOG_MS SECONDS
 *       one client (its watchdog timeout WATCHDOG_MS) takes LOCKS locks with
 *       the watchdog lease (4096 in flight) and holds them until two whole
 *       renewal cycles are counted, SECONDS at most: script calls per cycle
 *       (EVALSHA + EVAL in the server's INFO commandstats), the process's CPU
 *       time per cycle, heap per held lock (the Java heap in use after
 *       System.gc(), before the lock objects and after the acquisitions), as
 *       bench/watchdog prints them; the locks no longer held at the end
 *       (lost: their names gone from the server); then gives them back
 * </pre>
 */
public final class Bench {
  private Bench() {}

  /* Sections per client before the measured ones, on another name. */
  private static final int HANDOFF_WARMUP = 250;

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

  private static void throughput(String url, int names, double seconds, double warmupS)
      throws InterruptedException {
    RedissonClient r = client(url);
    AtomicLong pairs = new AtomicLong();
    AtomicBoolean running = new AtomicBoolean(true);
    CountDownLatch stopped = new CountDownLatch(names);
    for (int i = 0; i < names; i++) {
      RLock lock = r.getLock("bench:redisson:tp:" + i);
      chain(lock, i + 1, pairs, running, stopped);
    }
    Thread.sleep((long) (warmupS * 1000)); /* warm-up */
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

  /* One contender's sections: per section, System.nanoTime() (one clock for
   * every thread of the JVM) as it asked for the lock, as it had it, and as
   * it called unlock (the release about to go on the wire, where bench/lock
   * stamps its own). */
  private static void sections(RedissonClient r, String name, String counterName, int sections, int outsideUs,
                               long[] asked, long[] got, long[] freed) {
    RLock lock = r.getLock(name);
    RBucket<Long> counter = r.getBucket(counterName, LongCodec.INSTANCE);
    for (int s = 0; s < sections; s++) {
      long a = System.nanoTime();
      lock.lock();
      long g = System.nanoTime();
      Long v = counter.get();
      counter.set(v == null ? 1 : v + 1);
      long f = System.nanoTime();
      lock.unlock();
      if (asked != null) {
        asked[s] = a;
        got[s] = g;
        freed[s] = f;
      }
      for (long until = System.nanoTime() + outsideUs * 1000L; System.nanoTime() < until;) {
        /* work outside the lock, spun as bench/lock spins it */
      }
    }
  }

  private static void handoff(String url, int clients, int sections, int outsideUs) throws Exception {
    RedissonClient admin = client(url);
    admin.getKeys().delete("bench:redisson:counter", "bench:redisson:handoff", "bench:redisson:warmup",
                           "bench:redisson:warmup:counter");
    RedissonClient[] rs = new RedissonClient[clients];
    for (int i = 0; i < clients; i++) {
      rs[i] = client(url);
    }
    long[][] asked = new long[clients][sections], got = new long[clients][sections],
             freed = new long[clients][sections];
    Thread[] threads = new Thread[clients];
    CountDownLatch warmed = new CountDownLatch(clients), start = new CountDownLatch(1);
    for (int i = 0; i < clients; i++) {
      final int c = i;
      threads[i] = new Thread(() -> {
        /* the same workload on another name first, unmeasured: the JIT
         * compiles the contended paths (latency warms up the same way) */
        sections(rs[c], "bench:redisson:warmup", "bench:redisson:warmup:counter", HANDOFF_WARMUP, outsideUs, null,
                 null, null);
        warmed.countDown();
        try {
          start.await();
        } catch (InterruptedException e) {
          return;
        }
        sections(rs[c], "bench:redisson:handoff", "bench:redisson:counter", sections, outsideUs, asked[c], got[c],
                 freed[c]);
      });
      threads[i].start();
    }
    warmed.await();
    long t0 = System.nanoTime();
    start.countDown();
    for (Thread t : threads) {
      t.join();
    }
    long t1 = System.nanoTime();
    /* in acquisition order: owner switches, waits, handoffs (as bench/lock
     * counts them) */
    int n = clients * sections;
    long[][] all = new long[n][];
    for (int c = 0, k = 0; c < clients; c++) {
      for (int s = 0; s < sections; s++, k++) {
        all[k] = new long[] {got[c][s], c, asked[c][s], freed[c][s]};
      }
    }
    Arrays.sort(all, (a, b) -> Long.compare(a[0], b[0]));
    int switches = 0, nhand = 0;
    long[] waits = new long[n], hand = new long[n];
    for (int k = 0; k < n; k++) {
      waits[k] = all[k][0] - all[k][2];
      if (k > 0 && all[k][1] != all[k - 1][1]) {
        switches++;
        /* a real handoff: the next holder was already waiting at the release */
        if (all[k][2] < all[k - 1][3] && all[k][0] > all[k - 1][3]) {
          hand[nhand++] = all[k][0] - all[k - 1][3];
        }
      }
    }
    Arrays.sort(waits);
    hand = Arrays.copyOf(hand, nhand);
    Arrays.sort(hand);
    Long counter = admin.<Long>getBucket("bench:redisson:counter", LongCodec.INSTANCE).get();
    System.out.printf("{\"clients\":%d,\"sections\":%d,\"outside_us\":%d,\"warmup_sections\":%d,"
                      + "\"acquisitions_per_s\":%.0f,\"owner_switches\":%d,\"counter\":%d,\"exact\":%s,"
                      + "\"wait_p99_us\":%.1f,\"handoffs\":%d,\"handoff_p50_us\":%.1f,\"handoff_p99_us\":%.1f}%n",
                      clients, n, outsideUs, HANDOFF_WARMUP * clients, n / ((t1 - t0) / 1e9), switches, counter,
                      counter != null && counter == n, pct(waits, 0.99), nhand, nhand > 0 ? pct(hand, 0.5) : 0.0,
                      nhand > 0 ? pct(hand, 0.99) : 0.0);
    for (RedissonClient r : rs) {
      r.shutdown();
    }
    admin.shutdown();
  }

  private static void contender(String url, int sections) throws InterruptedException {
    RedissonClient r = client(url);
    /* uncontended, on a name of its own: the JIT, without waiting for the others */
    String warm = "bench:peers:b3warm:" + ProcessHandle.current().pid();
    sections(r, warm, warm + ":counter", HANDOFF_WARMUP, 0, null, null, null);
    r.getAtomicLong("bench:peers:b3:ready").incrementAndGet();
    r.<String>getBlockingQueue("bench:peers:b3:go", StringCodec.INSTANCE).take();
    long[] asked = new long[sections], got = new long[sections], freed = new long[sections];
    sections(r, "bench:peers:b3", "bench:peers:b3:counter", sections, 0, asked, got, freed);
    System.out.printf("{\"sections\":%d,\"warmup\":%d,\"first_got_us\":%d,\"last_freed_us\":%d}%n", sections,
                      HANDOFF_WARMUP, got[0] / 1000, freed[sections - 1] / 1000);
    r.shutdown();
  }

  /* -- the watchdog at scale ------------------------------------------------ */

  /* The server's script calls so far (EVALSHA + EVAL, INFO commandstats), on
   * a plain connection of its own: no Redisson client, no script call. */
  private static final class ScriptCalls implements AutoCloseable {
    private final Socket socket;
    private final DataInputStream in;
    private final OutputStream out;

    ScriptCalls(String url) throws IOException {
      URI u = URI.create(url);
      socket = new Socket(u.getHost(), u.getPort());
      socket.setTcpNoDelay(true);
      in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
      out = socket.getOutputStream();
    }

    long get() throws IOException {
      out.write("*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n".getBytes(StandardCharsets.US_ASCII));
      out.flush();
      String head = line();
      if (!head.startsWith("$")) {
        throw new IOException("INFO: " + head);
      }
      byte[] body = new byte[Integer.parseInt(head.substring(1)) + 2];
      in.readFully(body);
      long calls = 0;
      for (String l : new String(body, StandardCharsets.US_ASCII).split("\r\n")) {
        if (l.startsWith("cmdstat_evalsha:calls=") || l.startsWith("cmdstat_eval:calls=")) {
          String v = l.substring(l.indexOf('=') + 1);
          calls += Long.parseLong(v.substring(0, v.indexOf(',')));
        }
      }
      return calls;
    }

    private String line() throws IOException {
      StringBuilder b = new StringBuilder();
      for (int ch; (ch = in.read()) != '\n';) {
        if (ch < 0) {
          throw new EOFException("INFO: connection closed");
        }
        if (ch != '\r') {
          b.append((char) ch);
        }
      }
      return b.toString();
    }

    @Override
    public void close() throws IOException {
      socket.close();
    }
  }

  /* The Java heap in use after full collections. */
  private static long usedHeap() throws InterruptedException {
    Runtime rt = Runtime.getRuntime();
    long used = Long.MAX_VALUE;
    for (int i = 0; i < 3; i++) {
      System.gc();
      Thread.sleep(50);
      used = Math.min(used, rt.totalMemory() - rt.freeMemory());
    }
    return used;
  }

  /* In flight at once while taking and giving back the locks, as bench/watchdog. */
  private static final int WATCHDOG_WINDOW = 4096;

  /* Whole renewal cycles the watchdog mode measures, at most. */
  private static final int HOLD_CYCLES = 2;

  /* Runs op(i) for i in [0, n) with at most WATCHDOG_WINDOW in flight; the
   * number that failed. */
  private static int windowed(int n, IntFunction<CompletionStage<?>> op) throws InterruptedException {
    Semaphore window = new Semaphore(WATCHDOG_WINDOW);
    AtomicInteger failed = new AtomicInteger();
    for (int i = 0; i < n; i++) {
      window.acquire();
      op.apply(i).whenComplete((v, e) -> {
        if (e != null) {
          failed.incrementAndGet();
        }
        window.release();
      });
    }
    window.acquire(WATCHDOG_WINDOW); /* every one answered */
    return failed.get();
  }

  private static void watchdog(String url, int n, long watchdogMs, double seconds) throws Exception {
    Config config = new Config();
    config.useSingleServer().setAddress(url);
    config.setLockWatchdogTimeout(watchdogMs);
    RedissonClient r = Redisson.create(config);
    r.getBucket("bench:redisson:ping").isExists(); /* connected */
    OperatingSystemMXBean os = (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    RLock[] locks = new RLock[n];

    long heap0 = usedHeap();
    for (int i = 0; i < n; i++) {
      locks[i] = r.getLock("bench:redisson:watchdog:" + i);
    }
    long heap1 = usedHeap();
    long a0 = System.nanoTime();
    /* one owner (thread id 1) holds them all, with the watchdog's lease */
    int notAcquired = windowed(n, i -> locks[i].lockAsync(-1, TimeUnit.MILLISECONDS, 1));
    double acquireS = (System.nanoTime() - a0) / 1e9;
    if (notAcquired > 0) {
      throw new IllegalStateException(notAcquired + " locks not acquired");
    }
    long heap2 = usedHeap();

    /* Holding: every 10 ms, the server's script-call count and the
     * process's CPU time (all its threads but this one, which only samples).
     * A renewal cycle is a burst of script calls (its batches, sent one
     * after the other) and then a quiet watchdog/3: a burst is over once a
     * quarter of that passed without a call. The figures go from the end of
     * one burst to the end of a later one (bench/watchdog: from the end of
     * one cycle's batching to a later one's), over HOLD_CYCLES cycles or as
     * many as SECONDS holds. */
    long quietNs = watchdogMs * 1_000_000L / 3 / 4;
    int cap = (int) (seconds * 1000 / 10) + 16;
    long[] t = new long[cap], calls = new long[cap], cpu = new long[cap];
    int[] ends = new int[cap];
    int m = 0, bursts = 0, last = -1;
    try (ScriptCalls sc = new ScriptCalls(url)) {
      long deadline = System.nanoTime() + (long) (seconds * 1e9);
      while (m < cap && bursts <= HOLD_CYCLES) {
        t[m] = System.nanoTime();
        calls[m] = sc.get();
        cpu[m] = os.getProcessCpuTime() - threads.getCurrentThreadCpuTime();
        if (m > 0 && calls[m] > calls[m - 1]) {
          last = m;
        } else if (last >= 0 && t[m] - t[last] >= quietNs) {
          ends[bursts++] = last;
          last = -1;
        }
        if (t[m++] >= deadline) {
          break;
        }
        Thread.sleep(10);
      }
    }
    /* fewer than two cycles seen (e.g. every lock lost): no figures, but
     * still how many were lost */
    int cycles = Math.max(0, bursts - 1);
    String figures = "\"calls_per_cycle\":null,\"cpu_per_cycle_ms\":null,\"cpu_fraction\":null,"
                     + "\"cpu_fraction_default_30s\":null,\"span_s\":null";
    if (cycles > 0) {
      int f = ends[0], l = ends[bursts - 1];
      double spanS = (t[l] - t[f]) / 1e9, cpuS = (cpu[l] - cpu[f]) / 1e9;
      figures = String.format("\"calls_per_cycle\":%.1f,\"cpu_per_cycle_ms\":%.2f,\"cpu_fraction\":%.4f,"
                              + "\"cpu_fraction_default_30s\":%.5f,\"span_s\":%.2f",
                              (double) (calls[l] - calls[f]) / cycles, cpuS / cycles * 1e3, cpuS / spanS,
                              cpuS / cycles / 10.0, spanS);
    } else {
      System.err.println("bench: fewer than two renewal cycles in " + seconds + " s");
    }

    /* still held at the end of the hold: nobody else takes these names, so
     * a name that exists is a lock still held */
    String[] names = new String[n];
    for (int i = 0; i < n; i++) {
      names[i] = locks[i].getName();
    }
    long held = r.getKeys().countExists(names);
    /* give them back (a lock the watchdog let expire meanwhile fails) */
    int unlockFailed = windowed(n, i -> locks[i].unlockAsync(1));
    System.out.printf("{\"locks\":%d,\"watchdog_ms\":%d,\"acquire_s\":%.2f,\"cycles\":%d,%s,\"held_at_end\":%d,"
                      + "\"lost\":%d,\"unlock_failed\":%d,"
                      + "\"heap_per_lock_bytes\":%.1f,\"heap_per_lock_object_bytes\":%.1f,\"heap_per_hold_bytes\":%.1f,"
                      + "\"heap_source\":\"Runtime used after System.gc()\",\"max_heap_mb\":%d}%n",
                      n, watchdogMs, acquireS, cycles, figures, held, n - held, unlockFailed, (double) (heap2 - heap0) / n,
                      (double) (heap1 - heap0) / n, (double) (heap2 - heap1) / n, Runtime.getRuntime().maxMemory() >> 20);
    r.shutdown();
  }

  public static void main(String[] args) throws Exception {
    if (args.length >= 3 && args[1].equals("latency")) {
      latency(args[0], Integer.parseInt(args[2]));
    } else if (args.length >= 4 && args[1].equals("throughput")) {
      throughput(args[0], Integer.parseInt(args[2]), Double.parseDouble(args[3]),
                 args.length >= 5 ? Double.parseDouble(args[4]) : 0.5);
    } else if (args.length >= 4 && args[1].equals("handoff")) {
      handoff(args[0], Integer.parseInt(args[2]), Integer.parseInt(args[3]),
              args.length >= 5 ? Integer.parseInt(args[4]) : 0);
    } else if (args.length >= 3 && args[1].equals("contender")) {
      contender(args[0], Integer.parseInt(args[2]));
    } else if (args.length >= 5 && args[1].equals("watchdog")) {
      watchdog(args[0], Integer.parseInt(args[2]), Long.parseLong(args[3]), Double.parseDouble(args[4]));
    } else {
      System.err.println("usage: Bench REDIS_URL latency PAIRS | throughput NAMES SECONDS [WARMUP_S]"
                         + " | handoff CLIENTS SECTIONS [OUTSIDE_US] | contender SECTIONS | watchdog LOCKS WATCHDOG_MS SECONDS");
      System.exit(2);
    }
    System.exit(0);
  }
}
