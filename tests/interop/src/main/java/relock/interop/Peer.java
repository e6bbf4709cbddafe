package relock.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * A Redisson peer for relock's interop tests: a C test starts it, writes
 * commands on its standard input and reads what it observed on its standard
 * output, one line each.
 *
 * <pre>
 *   java relock.interop.Peer REDIS_URL [WATCHDOG_MS [FAIR_WAIT_MS]]
 *   -> ready CLIENT_ID          (the uuid Redisson's lock fields start with)
 *   <- TAG OP ARGS...           (TAG: a thread of the peer's, made on first use)
 *   -> TAG thread ID            (once per tag: the thread id in its fields)
 *   -> TAG OP RESULT NANOTIME   (RESULT: ok, true, false, a number, or
 *                                "error CLASS MESSAGE"; NANOTIME:
 *                                System.nanoTime() as the operation returned,
 *                                CLOCK_MONOTONIC on Linux, as C's)
 * </pre>
 *
 * OPs: lock KIND NAME LEASE_MS (-1: the watchdog), trylock KIND NAME WAIT_MS
 * LEASE_MS, unlock KIND NAME, forceunlock KIND NAME, held KIND NAME, locked
 * KIND NAME, token KIND NAME (a fenced lock's latest token), sleep MS, quit.
 * KIND: lock, fair, read, write, fenced, spin. The semaphore: semacquire
 * NAME N, semtry NAME N WAIT_MS, semrelease NAME N, semset NAME N
 * (trySetPermits), semavail NAME. The permit-expirable semaphore: pesset
 * NAME N (trySetPermits), pesacquire NAME LEASE_MS (-1: none; answers the
 * permit id), pestry NAME WAIT_MS LEASE_MS (the id, or "null"), pesrelease
 * NAME ID (tryRelease: true or false), pesupdate NAME ID LEASE_MS (updateLeaseTime: true or
 * false), pesavail NAME. The count-down latch: latchset NAME N
 * (trySetCount), latchdown NAME, latchawait NAME WAIT_MS, latchcount NAME.
 * A tag's commands run in
 * order on its own thread (Redisson's locks belong to threads); tags run
 * concurrently.
 */
public final class Peer {
  private final RedissonClient redisson;
  private final PrintStream out;
  private final Map<String, ExecutorService> threads = new HashMap<>();

  private Peer(RedissonClient redisson, PrintStream out) {
    this.redisson = redisson;
    this.out = out;
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: Peer REDIS_URL [WATCHDOG_MS [FAIR_WAIT_MS]]");
      System.exit(2);
    }
    Config config = new Config();
    config.useSingleServer().setAddress(args[0]);
    if (args.length > 1) {
      config.setLockWatchdogTimeout(Long.parseLong(args[1]));
    }
    if (args.length > 2) {
      config.setFairLockWaitTimeout(Long.parseLong(args[2]));
    }
    RedissonClient redisson = Redisson.create(config);
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    Peer peer = new Peer(redisson, out);
    peer.say("ready " + redisson.getId());
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      if (!peer.dispatch(line.trim())) {
        break;
      }
    }
    peer.stop();
  }

  private synchronized void say(String line) {
    out.println(line);
    out.flush();
  }

  private void stop() throws InterruptedException {
    for (ExecutorService t : threads.values()) {
      t.shutdown();
    }
    for (ExecutorService t : threads.values()) {
      t.awaitTermination(10, TimeUnit.SECONDS);
    }
    redisson.shutdown();
  }

  /** Queues one command on its tag's thread; false for quit. */
  private boolean dispatch(String line) {
    if (line.isEmpty()) {
      return true;
    }
    String[] w = line.split("\\s+");
    if (w[0].equals("quit")) {
      return false;
    }
    String tag = w[0];
    if (w.length < 2) {
      say(tag + " error parse missing OP");
      return true;
    }
    ExecutorService thread = threads.computeIfAbsent(tag, t -> {
      ExecutorService e = Executors.newSingleThreadExecutor();
      e.submit(() -> say(t + " thread " + Thread.currentThread().getId()));
      return e;
    });
    thread.submit(() -> {
      String result;
      try {
        result = run(w);
      } catch (Throwable e) {
        result = "error " + e.getClass().getSimpleName() + " " + String.valueOf(e.getMessage()).replace('\n', ' ');
      }
      say(tag + " " + w[1] + " " + result + " " + System.nanoTime());
    });
    return true;
  }

  private String run(String[] w) throws Exception {
    String op = w[1];
    if (op.equals("sleep")) {
      Thread.sleep(Long.parseLong(arg(w, 2)));
      return "ok";
    }
    if (op.startsWith("pes")) {
      return permitSemaphore(op, redisson.getPermitExpirableSemaphore(arg(w, 2)), w);
    }
    if (op.startsWith("sem")) {
      return semaphore(op, redisson.getSemaphore(arg(w, 2)), w);
    }
    if (op.startsWith("latch")) {
      return latch(op, redisson.getCountDownLatch(arg(w, 2)), w);
    }
    String kind = arg(w, 2);
    String name = arg(w, 3);
    RLock lock = lockOf(kind, name);
    switch (op) {
      case "lock": {
        long lease = Long.parseLong(arg(w, 4));
        if (lock instanceof RFencedLock) {
          RFencedLock f = (RFencedLock) lock;
          return String.valueOf(lease < 0 ? f.lockAndGetToken() : f.lockAndGetToken(lease, TimeUnit.MILLISECONDS));
        }
        if (lease < 0) {
          lock.lock();
        } else {
          lock.lock(lease, TimeUnit.MILLISECONDS);
        }
        return "ok";
      }
      case "trylock": {
        long wait = Long.parseLong(arg(w, 4));
        long lease = Long.parseLong(arg(w, 5));
        if (lock instanceof RFencedLock) {
          Long token = ((RFencedLock) lock).tryLockAndGetToken(wait, lease, TimeUnit.MILLISECONDS);
          return token == null ? "false" : String.valueOf(token);
        }
        boolean got = lease < 0 ? lock.tryLock(wait, TimeUnit.MILLISECONDS)
                                : lock.tryLock(wait, lease, TimeUnit.MILLISECONDS);
        return String.valueOf(got);
      }
      case "unlock":
        lock.unlock();
        return "ok";
      case "forceunlock":
        return String.valueOf(lock.forceUnlock());
      case "held":
        return String.valueOf(lock.isHeldByCurrentThread());
      case "locked":
        return String.valueOf(lock.isLocked());
      case "token":
        return String.valueOf(((RFencedLock) lock).getToken());
      default:
        return "error parse unknown OP " + op;
    }
  }

  private static String semaphore(String op, RSemaphore s, String[] w) throws Exception {
    switch (op) {
      case "semacquire":
        s.acquire(Integer.parseInt(arg(w, 3)));
        return "ok";
      case "semtry":
        return String.valueOf(s.tryAcquire(Integer.parseInt(arg(w, 3)), Long.parseLong(arg(w, 4)),
                                           TimeUnit.MILLISECONDS));
      case "semrelease":
        s.release(Integer.parseInt(arg(w, 3)));
        return "ok";
      case "semset":
        return String.valueOf(s.trySetPermits(Integer.parseInt(arg(w, 3))));
      case "semavail":
        return String.valueOf(s.availablePermits());
      default:
        return "error parse unknown OP " + op;
    }
  }

  private static String permitSemaphore(String op, RPermitExpirableSemaphore s, String[] w) throws Exception {
    switch (op) {
      case "pesset":
        return String.valueOf(s.trySetPermits(Integer.parseInt(arg(w, 3))));
      case "pesacquire": {
        long lease = Long.parseLong(arg(w, 3));
        return lease < 0 ? s.acquire() : s.acquire(lease, TimeUnit.MILLISECONDS);
      }
      case "pestry": {
        long lease = Long.parseLong(arg(w, 4));
        String id = lease < 0 ? s.tryAcquire(Long.parseLong(arg(w, 3)), TimeUnit.MILLISECONDS)
                              : s.tryAcquire(Long.parseLong(arg(w, 3)), lease, TimeUnit.MILLISECONDS);
        return String.valueOf(id);
      }
      case "pesrelease":
        return String.valueOf(s.tryRelease(arg(w, 3)));
      case "pesupdate":
        return String.valueOf(s.updateLeaseTime(arg(w, 3), Long.parseLong(arg(w, 4)), TimeUnit.MILLISECONDS));
      case "pesavail":
        return String.valueOf(s.availablePermits());
      default:
        return "error parse unknown OP " + op;
    }
  }

  private static String latch(String op, RCountDownLatch l, String[] w) throws Exception {
    switch (op) {
      case "latchset":
        return String.valueOf(l.trySetCount(Long.parseLong(arg(w, 3))));
      case "latchdown":
        l.countDown();
        return "ok";
      case "latchawait":
        return String.valueOf(l.await(Long.parseLong(arg(w, 3)), TimeUnit.MILLISECONDS));
      case "latchcount":
        return String.valueOf(l.getCount());
      default:
        return "error parse unknown OP " + op;
    }
  }

  private static String arg(String[] w, int i) {
    if (i >= w.length) {
      throw new IllegalArgumentException("missing argument " + i);
    }
    return w[i];
  }

  private RLock lockOf(String kind, String name) {
    switch (kind) {
      case "lock": return redisson.getLock(name);
      case "fair": return redisson.getFairLock(name);
      case "read": return redisson.getReadWriteLock(name).readLock();
      case "write": return redisson.getReadWriteLock(name).writeLock();
      case "fenced": return redisson.getFencedLock(name);
      case "spin": return redisson.getSpinLock(name);
      default: throw new IllegalArgumentException("unknown KIND " + kind);
    }
  }
}
