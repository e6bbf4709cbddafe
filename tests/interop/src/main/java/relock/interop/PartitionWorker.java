package relock.interop;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.RedissonRedLock;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.BaseConfig;
import org.redisson.config.Config;
import org.redisson.config.ConstantDelay;
import org.redisson.config.ClusterServersConfig;
import org.redisson.config.SentinelServersConfig;

/**
 * The Redisson worker of the partition harness (tests/partition/): the same
 * command line, loop and output as the relock worker (tests/partition/worker.c),
 * on real Redisson, so that the checker judges both under the same nemesis.
 *
 * <pre>
 *   java relock.interop.PartitionWorker --id ID --resource HOST:PORT --res NAME
 *       --object lock|fenced|redlock --name LOCKNAME --topology single|sentinel|cluster|redlock
 *       --nodes A,B,... [--master-name mymaster] [--synced 0] [--lease-ms 3000] [--wait-ms 5000]
 *       [--hold-min-ms 20] [--hold-max-ms 300] --seconds S --seed N
 * </pre>
 *
 * One thread takes the lock (tryLock with the watchdog lease, never a fixed
 * one), reads the checked resource, holds the lock a random time, writes the
 * value it read plus one and unlocks, until --seconds have passed. Every event
 * is one line on standard output (START, ACQ, TIMEOUT, ERR, ABANDON, WROTE,
 * REL, END; each with System.nanoTime(), CLOCK_MONOTONIC on Linux, so the
 * supervisor merges them with the resource's log; END counts the acquisitions
 * and the writes the resource accepted); nothing else goes there.
 * Redisson's errors are normal under the nemesis: they are printed and the
 * loop goes on. Exit 64 on a bad command line, 2 when the resource is
 * unreachable, 3 when Redis could not be reached at all during the run.
 */
public final class PartitionWorker {
  private static final int EXIT_USAGE = 64;
  private static final int EXIT_RESOURCE = 2;
  private static final int EXIT_NO_REDIS = 3;

  /* Both workers use the same connection settings (the contract's). */
  private static final int TIMEOUT_MS = 1000;
  private static final int CONNECT_TIMEOUT_MS = 1000;
  private static final int RETRY_ATTEMPTS = 3;
  private static final int RETRY_INTERVAL_MS = 200;
  private static final long SLAVES_SYNC_TIMEOUT_MS = 500;
  private static final int CLUSTER_SCAN_INTERVAL_MS = 1000;

  private static final int RESOURCE_TIMEOUT_MS = 2000;
  private static final long AFTER_FAILURE_MS = 50;
  private static final int PAUSE_MAX_MS = 30;

  /** The parsed command line. */
  private static final class Options {
    String id;
    String resource;
    String res;
    String object;
    String name;
    String topology;
    String[] nodes;
    String masterName = "mymaster";
    int synced;
    long leaseMs = 3000;
    long waitMs = 5000;
    long holdMinMs = 20;
    long holdMaxMs = 300;
    long seconds;
    long seed;
  }

  private final Options opt;
  private final PrintStream out;
  private final Resource resource;
  private final Random random;
  private final List<RedissonClient> clients = new ArrayList<>();
  private RLock lock;
  private long acquisitions;
  private long writes;

  private PartitionWorker(Options opt, PrintStream out, Resource resource) {
    this.opt = opt;
    this.out = out;
    this.resource = resource;
    this.random = new Random(opt.seed);
  }

  public static void main(String[] args) throws InterruptedException {
    Options opt = parse(args);
    /* Only the events go to standard output: anything a library prints
     * there would break the supervisor's parsing, so it goes to stderr. */
    PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
    System.setOut(System.err);
    Resource resource = new Resource(opt.resource, opt.res, opt.id);
    resource.connectOrExit();
    PartitionWorker w = new PartitionWorker(opt, out, resource);
    w.connect(System.nanoTime() + TimeUnit.SECONDS.toNanos(opt.seconds));
    w.say("START " + System.nanoTime() + " " + opt.id + " " + opt.object);
    w.run(System.nanoTime() + TimeUnit.SECONDS.toNanos(opt.seconds));
    w.say("END " + System.nanoTime() + " " + w.acquisitions + " " + w.writes);
    w.shutdown();
    System.exit(0);
  }

  private synchronized void say(String line) {
    out.println(line);
  }

  /* ---- the loop ---- */

  private void run(long deadline) throws InterruptedException {
    while (System.nanoTime() - deadline < 0) {
      long token;
      try {
        Long got = acquire();
        if (got == null) {
          say("TIMEOUT " + System.nanoTime());
          Thread.sleep(AFTER_FAILURE_MS);
          continue;
        }
        token = got;
      } catch (InterruptedException e) {
        throw e;
      } catch (Exception e) {
        say("ERR " + System.nanoTime() + " " + describe(e));
        Thread.sleep(AFTER_FAILURE_MS);
        continue;
      }
      acquisitions++;
      say("ACQ " + System.nanoTime() + " " + token);
      section(token);
      release();
      Thread.sleep(random.nextInt(PAUSE_MAX_MS + 1));
    }
  }

  /** The token (0 unless fenced) once acquired; null when --wait-ms passed. */
  private Long acquire() throws InterruptedException {
    if (lock instanceof RFencedLock) {
      return ((RFencedLock) lock).tryLockAndGetToken(opt.waitMs, TimeUnit.MILLISECONDS);
    }
    return lock.tryLock(opt.waitMs, TimeUnit.MILLISECONDS) ? Long.valueOf(0) : null;
  }

  /* Redisson has no call saying how long the lease still runs, so this worker
   * always writes after its hold, as Redisson's users do. */
  private void section(long token) throws InterruptedException {
    Resource.Reply read = resource.read(token);
    if (!read.ok) {
      say("ABANDON " + System.nanoTime() + " refused-read");
      return;
    }
    long hold = opt.holdMinMs + (long) random.nextInt((int) (opt.holdMaxMs - opt.holdMinMs + 1));
    Thread.sleep(hold);
    Resource.Reply wrote = resource.write(token, read.value + 1);
    if (wrote.ok) {
      writes++;
    }
    say("WROTE " + System.nanoTime() + " " + (wrote.ok ? "ok" : "refused"));
  }

  private void release() {
    try {
      lock.unlock();
      say("REL " + System.nanoTime() + " ok");
    } catch (Exception e) {
      say("REL " + System.nanoTime() + " error " + describe(e));
    }
  }

  /* Redisson wraps what went wrong ("Unexpected exception while processing
   * command"): the innermost cause, when there is one, says what it was
   * (a chain can loop: a bounded walk). */
  private static String describe(Throwable e) {
    e.printStackTrace();
    String text = e.getClass().getSimpleName() + " " + e.getMessage();
    Throwable root = e;
    for (int depth = 0; depth < 16 && root.getCause() != null && root.getCause() != root; depth++) {
      root = root.getCause();
    }
    if (root != e) {
      text += " (cause: " + root.getClass().getSimpleName() + " " + root.getMessage() + ")";
    }
    return text.replace('\r', ' ').replace('\n', ' ');
  }

  /* ---- Redisson ---- */

  /* Redisson.create fails when no server answers: at the start of a run
   * that is a server still starting (or the nemesis already at work), so it
   * tries again until the run's time is over. */
  private void connect(long deadline) throws InterruptedException {
    for (String address : clientAddresses()) {
      clients.add(createUntil(address, deadline));
    }
    lock = lockOf();
  }

  /** One entry per client: redlock has one per master, the others one. */
  private List<String> clientAddresses() {
    List<String> a = new ArrayList<>();
    if (opt.topology.equals("redlock")) {
      for (String node : opt.nodes) {
        a.add(node);
      }
    } else {
      a.add(null);
    }
    return a;
  }

  private RedissonClient createUntil(String redlockNode, long deadline) throws InterruptedException {
    while (true) {
      try {
        return Redisson.create(config(redlockNode));
      } catch (Exception e) {
        System.err.println(opt.id + ": cannot connect to Redis yet: " + e);
        if (System.nanoTime() - deadline >= 0) {
          System.err.println(opt.id + ": Redis never answered during the run");
          System.exit(EXIT_NO_REDIS);
        }
        Thread.sleep(500);
      }
    }
  }

  private Config config(String redlockNode) {
    Config config = new Config();
    config.setLockWatchdogTimeout(opt.leaseMs);
    config.setCheckLockSyncedSlaves(opt.synced > 0);
    if (opt.synced > 0) {
      config.setSlavesSyncTimeout(SLAVES_SYNC_TIMEOUT_MS);
    }
    switch (opt.topology) {
      case "single":
        timeouts(config.useSingleServer().setAddress(url(opt.nodes[0])));
        break;
      case "redlock":
        timeouts(config.useSingleServer().setAddress(url(redlockNode)));
        break;
      case "sentinel": {
        SentinelServersConfig s = config.useSentinelServers().setMasterName(opt.masterName);
        for (String node : opt.nodes) {
          s.addSentinelAddress(url(node));
        }
        /* The nemesis cuts some sentinels off: Redisson's check that every
         * listed sentinel is reachable (and that there are at least two)
         * would refuse to start or fail its rescans then. It still finds
         * the other sentinels and follows the failovers they announce. */
        s.setCheckSentinelsList(false);
        timeouts(s);
        break;
      }
      case "cluster": {
        ClusterServersConfig c = config.useClusterServers().setScanInterval(CLUSTER_SCAN_INTERVAL_MS);
        for (String node : opt.nodes) {
          c.addNodeAddress(url(node));
        }
        timeouts(c);
        break;
      }
      default:
        throw new IllegalStateException(opt.topology);
    }
    return config;
  }

  private static void timeouts(BaseConfig<?> c) {
    c.setTimeout(TIMEOUT_MS);
    c.setConnectTimeout(CONNECT_TIMEOUT_MS);
    c.setRetryAttempts(RETRY_ATTEMPTS);
    /* setRetryInterval is deprecated in 4.x: this is what it did */
    c.setRetryDelay(new ConstantDelay(Duration.ofMillis(RETRY_INTERVAL_MS)));
  }

  private static String url(String node) {
    return "redis://" + node;
  }

  /* RedissonRedLock is deprecated in Redisson 4.x, but it is still shipped
   * and still used, and relock's RedLock is checked beside it under the same
   * nemesis: the harness tests it as it is. */
  @SuppressWarnings("deprecation")
  private RLock lockOf() {
    switch (opt.object) {
      case "lock":
        return clients.get(0).getLock(opt.name);
      case "fenced":
        return clients.get(0).getFencedLock(opt.name);
      case "redlock": {
        RLock[] locks = new RLock[clients.size()];
        for (int i = 0; i < locks.length; i++) {
          locks[i] = clients.get(i).getLock(opt.name);
        }
        return new RedissonRedLock(locks);
      }
      default:
        throw new IllegalStateException(opt.object);
    }
  }

  /* Bounded: a server cut off must not hold up the exit. */
  private void shutdown() {
    for (RedissonClient c : clients) {
      try {
        c.shutdown(0, 2, TimeUnit.SECONDS);
      } catch (Exception e) {
        e.printStackTrace();
      }
    }
  }

  /* ---- the checked resource ---- */

  /**
   * The resource's client: one persistent connection, a line out and a line
   * back. A failed exchange is tried once more on a new connection; if that
   * fails too the resource is unreachable, which the harness never does on
   * purpose, so the worker exits 2.
   */
  private static final class Resource {
    static final class Reply {
      final boolean ok;
      final long value;

      Reply(boolean ok, long value) {
        this.ok = ok;
        this.value = value;
      }
    }

    private final String host;
    private final int port;
    private final String res;
    private final String id;
    private Socket socket;
    private BufferedReader in;
    private BufferedWriter out;

    Resource(String hostPort, String res, String id) {
      int colon = hostPort.lastIndexOf(':');
      this.host = hostPort.substring(0, colon);
      this.port = Integer.parseInt(hostPort.substring(colon + 1));
      this.res = res;
      this.id = id;
    }

    void connectOrExit() {
      try {
        connect();
      } catch (IOException e) {
        unreachable(e);
      }
    }

    /** OK VALUE, or REFUSED NEWEST (value: the newest token). */
    Reply read(long token) {
      return parse(exchange("READ " + res + " " + id + " " + token), true);
    }

    /** OK, or REFUSED NEWEST. */
    Reply write(long token, long value) {
      return parse(exchange("WRITE " + res + " " + id + " " + token + " " + value), false);
    }

    private Reply parse(String reply, boolean withValue) {
      String[] w = reply.split(" ");
      try {
        if (w[0].equals("OK")) {
          return new Reply(true, withValue ? Long.parseLong(w[1]) : 0);
        }
        if (w[0].equals("REFUSED")) {
          return new Reply(false, Long.parseLong(w[1]));
        }
      } catch (RuntimeException e) {
        /* below */
      }
      System.err.println(id + ": the resource answered \"" + reply + "\"");
      System.exit(EXIT_RESOURCE);
      return null;
    }

    private String exchange(String request) {
      try {
        return tryExchange(request);
      } catch (IOException first) {
        System.err.println(id + ": resource: " + first + ", connecting again");
        try {
          close();
          connect();
          return tryExchange(request);
        } catch (IOException e) {
          unreachable(e);
          return null;
        }
      }
    }

    private String tryExchange(String request) throws IOException {
      if (socket == null) {
        connect();
      }
      out.write(request);
      out.write('\n');
      out.flush();
      String reply = in.readLine();
      if (reply == null) {
        throw new IOException("the resource closed the connection");
      }
      return reply;
    }

    private void connect() throws IOException {
      Socket s = new Socket();
      try {
        s.connect(new InetSocketAddress(host, port), RESOURCE_TIMEOUT_MS);
        s.setSoTimeout(RESOURCE_TIMEOUT_MS);
        s.setTcpNoDelay(true);
        in = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.UTF_8));
        out = new BufferedWriter(new OutputStreamWriter(s.getOutputStream(), StandardCharsets.UTF_8));
      } catch (IOException e) {
        s.close();
        throw e;
      }
      socket = s;
    }

    private void close() {
      if (socket != null) {
        try {
          socket.close();
        } catch (IOException e) {
          /* it is being replaced anyway */
        }
        socket = null;
      }
    }

    private void unreachable(IOException e) {
      System.err.println(id + ": the resource " + host + ":" + port + " is unreachable: " + e);
      System.exit(EXIT_RESOURCE);
    }
  }

  /* ---- the command line ---- */

  private static final String USAGE =
      "usage: PartitionWorker --id ID --resource HOST:PORT --res NAME --object lock|fenced|redlock\n"
      + "         --name LOCKNAME --topology single|sentinel|cluster|redlock --nodes A,B,...\n"
      + "         [--master-name mymaster] [--synced 0] [--lease-ms 3000] [--wait-ms 5000]\n"
      + "         [--hold-min-ms 20] [--hold-max-ms 300] --seconds S --seed N";

  private static Options parse(String[] args) {
    Map<String, String> v = new HashMap<>();
    for (int i = 0; i < args.length; i += 2) {
      if (!args[i].startsWith("--") || i + 1 >= args.length) {
        usage("bad argument " + args[i]);
      }
      v.put(args[i].substring(2), args[i + 1]);
    }
    Options o = new Options();
    try {
      o.id = required(v, "id");
      o.resource = required(v, "resource");
      o.res = required(v, "res");
      o.object = oneOf(required(v, "object"), "lock", "fenced", "redlock");
      o.name = required(v, "name");
      o.topology = oneOf(required(v, "topology"), "single", "sentinel", "cluster", "redlock");
      o.nodes = required(v, "nodes").split(",");
      o.masterName = optional(v, "master-name", o.masterName);
      o.synced = Integer.parseInt(optional(v, "synced", "0"));
      o.leaseMs = Long.parseLong(optional(v, "lease-ms", String.valueOf(o.leaseMs)));
      o.waitMs = Long.parseLong(optional(v, "wait-ms", String.valueOf(o.waitMs)));
      o.holdMinMs = Long.parseLong(optional(v, "hold-min-ms", String.valueOf(o.holdMinMs)));
      o.holdMaxMs = Long.parseLong(optional(v, "hold-max-ms", String.valueOf(o.holdMaxMs)));
      o.seconds = Long.parseLong(required(v, "seconds"));
      o.seed = Long.parseLong(required(v, "seed"));
    } catch (NumberFormatException e) {
      usage("not a number: " + e.getMessage());
    }
    if (!v.isEmpty()) {
      usage("unknown option --" + v.keySet().iterator().next());
    }
    check(o);
    return o;
  }

  private static void check(Options o) {
    if (o.object.equals("redlock") != o.topology.equals("redlock")) {
      usage("--object redlock goes with --topology redlock, and only with it");
    }
    if (o.topology.equals("single") && o.nodes.length != 1) {
      usage("--topology single takes one node");
    }
    for (String node : o.nodes) {
      if (node.lastIndexOf(':') <= 0) {
        usage("not HOST:PORT: " + node);
      }
    }
    if (o.resource.lastIndexOf(':') <= 0) {
      usage("--resource is not HOST:PORT: " + o.resource);
    }
    if (o.synced < 0 || o.leaseMs <= 0 || o.waitMs < 0 || o.holdMinMs < 0 || o.holdMaxMs < o.holdMinMs
        || o.holdMaxMs - o.holdMinMs >= Integer.MAX_VALUE || o.seconds < 0) {
      usage("a value out of range");
    }
  }

  /* Each option is taken out of the map, so what is left is unknown. */
  private static String required(Map<String, String> v, String key) {
    String s = v.remove(key);
    if (s == null) {
      usage("--" + key + " is required");
    }
    return s;
  }

  private static String optional(Map<String, String> v, String key, String dflt) {
    String s = v.remove(key);
    return s == null ? dflt : s;
  }

  private static String oneOf(String s, String... allowed) {
    for (String a : allowed) {
      if (a.equals(s)) {
        return s;
      }
    }
    usage("bad value " + s);
    return s;
  }

  private static void usage(String why) {
    System.err.println("PartitionWorker: " + why);
    System.err.println(USAGE);
    System.exit(EXIT_USAGE);
  }
}
