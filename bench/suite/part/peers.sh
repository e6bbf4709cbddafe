# Sourced by bench/run: part peers (bench/run peers), the function part_peers.

# 15. relock against the best lock of every ecosystem (issue 35), on the same
# server in the same run, five rounds interleaved (each round runs every
# client once per workload, the order rotated by one each round; the rows
# are medians of the rounds), nothing pinned:
#   B1  one key, sequential acquire+release pairs, one client: p50, p99
#   B2  64 keys, 64 acquire+release chains in flight from one process: pairs/s
#   B3  4 processes x 250 sections (acquire, GET, SET counter+1, release) on
#       one key: acquisitions/s, and the counter, which must come out 1000
# The clients: relock (bench/lock latency, throughput and handoff), Redisson
# (tests/interop's Bench.java: latency, throughput, and contender - one JVM
# per process), and from bench/peers/ (versions pinned there; its install
# script puts them in bench/peers/node_modules and bench/peers/.venv):
# redis-semaphore's Mutex, redlock (one instance) and node-redisson on
# ioredis, and redis-py's Lock. Each peer as shipped but for what
# bench/peers/*.js and redis-py.py say (leases of 30 s where the default is
# none, no give-up in B3's waits). Every process but relock's warms up
# first (the JIT; relock's bench/lock warms up B1 too): B1 1000 pairs
# (Redisson 5000), B2 half a second (Redisson 2.5 s: a JVM compiles its
# paths during its first seconds), B3 100 sections alone (Redisson 250).
#
# B3's processes of the peers and Redisson are started by this part and
# wait at a gate on the server (INCR bench:peers:b3:ready, BLPOP
# bench:peers:b3:go) until all four are warm; acquisitions/s is the 1000
# sections over the first acquisition to the last release, as bench/lock
# handoff counts its own (CLOCK_MONOTONIC in every language).
#
# A client whose B3 run takes more than peers_b3_slow_s seconds (seen here
# on a busy machine: Redisson's four JVMs, at under 100 acquisitions/s, and
# node-redisson at 30) runs B3 in that round only, so that the part keeps
# to about four minutes; its row says so.
#
# And per client, Redis's own time per B1 pair: the time inside the
# commands the client sent (the server's clock around each, INFO
# commandstats' usec; a script's own commands inside its EVALSHA's), over
# the pairs, their warm-up included: INFO commandstats after each B1 run
# (CONFIG RESETSTAT before it), the median of the rounds. But commandstats
# counts the commands a script makes (redis.call) as well, and their time is
# already inside the EVALSHA's: summed, it would count twice. So one more B1
# run per client after the rounds logs every command in the slow log
# (slowlog-log-slower-than 0), where a script's commands come from client
# ?:0: how many of each name a pair's scripts make, which the rounds' sums
# leave out (at each name's mean time per call). That run's own figures are
# not used: the log's entries for a script's commands are made inside the
# script, and would count in its time.
peers_dir=$src/bench/peers
peers_clients="relock redisson redis-semaphore redlock node-redisson redis-py"
peers_b1_pairs=2000
peers_b2_seconds=1
peers_b3_sections=250
peers_b3_slow_s=15

# peer_cmd CLIENT: the command line of a bench/peers client (empty: none)
peer_cmd() {
  case $1 in
    redis-semaphore | redlock | node-redisson) echo "node $peers_dir/$1.js $port" ;;
    redis-py) echo "$peers_dir/.venv/bin/python $peers_dir/redis-py.py $port" ;;
  esac
}

# peer_run CLIENT WORKLOAD: one run, its JSON on stdout (nothing when it
# failed; the reason in $tmp/peers.CLIENT.err)
peer_run() {
  err=$tmp/peers.$1.err
  case $1:$2 in
    relock:b1) $tmo "$lock" 127.0.0.1 "$port" latency $peers_b1_pairs 2>>"$err" ;;
    relock:b2) $tmo "$lock" 127.0.0.1 "$port" throughput 64 $peers_b2_seconds 2>>"$err" ;;
    relock:b3) $tmo "$lock" 127.0.0.1 "$port" handoff 4 $peers_b3_sections 0 2>>"$err" ;;
    redisson:b1) $tmo java -cp "$peers_java" relock.interop.Bench "redis://127.0.0.1:$port" latency $peers_b1_pairs 2>>"$err" ;;
    redisson:b2) $tmo java -cp "$peers_java" relock.interop.Bench "redis://127.0.0.1:$port" throughput 64 $peers_b2_seconds 2.5 2>>"$err" ;;
    *:b1) $tmo $(peer_cmd "$1") b1 $peers_b1_pairs 2>>"$err" ;;
    *:b2) $tmo $(peer_cmd "$1") b2 64 $peers_b2_seconds 2>>"$err" ;;
    *:b3) peer_b3 "$1" ;;
  esac || echo "$1 $2: exit $?" >>"$err"
}

# peer_b3 CLIENT: B3 through the gate: four processes, started now, each
# counting itself ready once warm; the go for all at once; their first and
# last times together
peer_b3() {
  c=$1
  redis-cli -p "$port" DEL bench:peers:b3:ready bench:peers:b3:go bench:peers:b3:counter >/dev/null
  rm -f "$tmp"/peers.b3.*
  for i in 1 2 3 4; do
    # each leaves its exit status behind: one gone before the go is seen
    if [ "$c" = redisson ]; then
      (rc=0
        $tmo java -cp "$peers_java" relock.interop.Bench "redis://127.0.0.1:$port" contender $peers_b3_sections \
          >"$tmp/peers.b3.$i" 2>>"$err" || rc=$?
        echo $rc >"$tmp/peers.b3.$i.rc") &
    else
      (rc=0
        $tmo $(peer_cmd "$c") b3 $peers_b3_sections >"$tmp/peers.b3.$i" 2>>"$err" || rc=$?
        echo $rc >"$tmp/peers.b3.$i.rc") &
    fi
  done
  # all four ready, or one gone (it failed: the others are let go too)
  waited=0
  while [ "$(redis-cli -p "$port" GET bench:peers:b3:ready)" != 4 ] && [ $waited -lt 1200 ]; do
    ls "$tmp"/peers.b3.*.rc >/dev/null 2>&1 && break
    sleep 0.1
    waited=$((waited + 1))
  done
  redis-cli -p "$port" RPUSH bench:peers:b3:go 1 1 1 1 >/dev/null
  wait
  for i in 1 2 3 4; do
    [ "$(cat "$tmp/peers.b3.$i.rc" 2>/dev/null)" = 0 ] || { echo "$c b3: process $i failed" >>"$err"; return 1; }
  done
  counter=$(redis-cli -p "$port" GET bench:peers:b3:counter)
  cat "$tmp"/peers.b3.1 "$tmp"/peers.b3.2 "$tmp"/peers.b3.3 "$tmp"/peers.b3.4 | awk -v n=$((4 * peers_b3_sections)) -v counter="${counter:-0}" '
    { f = $0; sub(/.*"first_got_us":/, "", f); sub(/[,}].*/, "", f)
      l = $0; sub(/.*"last_freed_us":/, "", l); sub(/[,}].*/, "", l)
      if (NR == 1 || f + 0 < first) first = f + 0
      if (NR == 1 || l + 0 > last) last = l + 0 }
    END { if (NR != 4 || last <= first) exit 1
          printf "{\"procs\":4,\"sections\":%d,\"acquisitions_per_s\":%.0f,\"counter\":%d,\"exact\":%s}\n",
            n, n / ((last - first) / 1e6), counter, counter == n ? "true" : "false" }'
}

# peer_server_time CLIENT PAIRS: the slow log (every command since SLOWLOG
# RESET, of a B1 run of PAIRS pairs) says how many of each command a pair's
# scripts make; with the rounds' commandstats (peers.CLIENT.stats.ROUND:
# the pairs, then INFO commandstats), the time inside the commands the
# client sent, per pair (the bench's own INFO, CONFIG and SLOWLOG left out),
# the median of the rounds. Two lines: "USEC:COMMANDS:SCRIPT_COMMANDS" per
# pair, then the same as JSON.
peer_server_time() {
  redis-cli -p "$port" --json SLOWLOG GET -1 | python3 -c '
import glob, json, statistics, sys
client, n = sys.argv[1], int(sys.argv[2])
own = ("info", "config", "slowlog")
sent, inner = 0, {}
for _id, _ts, _dur, args, addr, *_ in json.load(sys.stdin):
    name = str(args[0]).lower()
    if addr == "?:0":
        inner[name] = inner.get(name, 0) + 1 / n
    elif name not in own:
        sent += 1
per_round = []
for f in sorted(glob.glob(sys.argv[3] + "/peers.%s.stats.*" % client)):
    lines = open(f).read().split("\n")
    pairs, usec = int(lines[0]), 0.0
    for l in lines[1:]:
        if not l.startswith("cmdstat_"):
            continue
        name, rest = l[len("cmdstat_"):].split(":", 1)
        f = dict(kv.split("=") for kv in rest.split(","))
        calls, u = int(f["calls"]), int(f["usec"])
        base = name.split("|")[0]
        if base in own or calls == 0:
            continue
        # the share of this name that a client sent, not a script
        usec += u * max(0.0, 1 - inner.get(base, 0) * pairs / calls)
    per_round.append(usec / pairs)
if not per_round:
    sys.exit(1)
usec = statistics.median(per_round)
print("%.1f:%.2f:%.2f" % (usec, sent / n, sum(inner.values())))
print(json.dumps({"usec_per_pair": round(usec, 1), "each_round": [round(u, 1) for u in per_round],
                  "commands_per_pair": round(sent / n, 2),
                  "script_commands_per_pair": {k: round(v, 2) for k, v in sorted(inner.items())}},
                 separators=(",", ":")))' "$1" "$2" "$tmp"
}

# peer_warmup CLIENT JSON: the pairs a B1 run made before the measured ones
peer_warmup() {
  case $1 in
    relock) echo 1000 ;;  # bench/lock latency
    redisson) echo 5000 ;; # Bench.java latency
    *) json_field "$2" warmup ;;
  esac
}

# peer_median CLIENT FIELD: the median of FIELD over the rounds (empty: none)
peer_median() {
  [ -s "$tmp/peers.$1.$2" ] && median <"$tmp/peers.$1.$2"
  return 0
}

# peer_why CLIENT: the last line of what a failed client said
peer_why() { tail -n 1 "$tmp/peers.$1.err" 2>/dev/null | cut -c1-200 | tr '\t|' '  '; }

part_peers() {
  say "15. peers: installing them (bench/peers/install), building Redisson's runner (tests/interop/build.sh)"
  tmp_rounds=$tmp/peers.rounds
  : >"$tmp_rounds"
  # what cannot run: its rows say why
  usable=
  install_why=$(sh "$peers_dir/install" 2>&1 >/dev/null) || true
  peer=$build/tests/interop/peer
  peers_java="$peer/classes:$peer/lib/*"
  for c in $peers_clients; do
    : >"$tmp/peers.$c.err"
    case $c in
      relock) usable="$usable $c" ;;
      redisson)
        if why=$(sh "$src/tests/interop/build.sh" "$peer" 2>&1 >/dev/null); then usable="$usable $c"
        else echo "Redisson's runner did not build: $why" >"$tmp/peers.$c.err"; fi ;;
      redis-py)
        if [ -x "$peers_dir/.venv/bin/python" ]; then usable="$usable $c"
        else echo "not installed: $install_why" >"$tmp/peers.$c.err"; fi ;;
      *)
        if [ -d "$peers_dir/node_modules/$c" ]; then usable="$usable $c"
        else echo "not installed: $install_why" >"$tmp/peers.$c.err"; fi ;;
    esac
  done
  set -- $usable
  n=$#
  for round in 1 2 3 4 5; do
    # this round's order: the clients rotated by round - 1
    order=
    i=0
    for c in $usable; do
      [ $i -ge $(((round - 1) % n)) ] && order="$order $c"
      i=$((i + 1))
    done
    i=0
    for c in $usable; do
      [ $i -lt $(((round - 1) % n)) ] && order="$order $c"
      i=$((i + 1))
    done
    say "15. round $round of 5:$order"
    for c in $order; do
      redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
      j=$(peer_run "$c" b1)
      if [ -n "$j" ]; then
        json_field "$j" p50_us >>"$tmp/peers.$c.p50"
        json_field "$j" p99_us >>"$tmp/peers.$c.p99"
        # the pairs (with the warm-up), then the server's counts
        { echo $(($(json_field "$j" pairs) + $(peer_warmup "$c" "$j")))
          redis-cli -p "$port" INFO commandstats | tr -d '\r'; } >"$tmp/peers.$c.stats.$round"
      fi
      printf '"%s_b1_%s":%s,' "$c" "$round" "${j:-null}" >>"$tmp_rounds"
      flush
    done
    for c in $order; do
      j=$(peer_run "$c" b2)
      [ -z "$j" ] || json_field "$j" pairs_per_s >>"$tmp/peers.$c.b2"
      printf '"%s_b2_%s":%s,' "$c" "$round" "${j:-null}" >>"$tmp_rounds"
      flush
    done
    for c in $order; do
      [ ! -f "$tmp/peers.$c.b3slow" ] || continue
      t0=$(date +%s)
      j=$(peer_run "$c" b3)
      took=$(($(date +%s) - t0))
      [ $took -le $peers_b3_slow_s ] || echo "$took" >"$tmp/peers.$c.b3slow"
      if [ -n "$j" ]; then
        json_field "$j" counter >>"$tmp/peers.$c.counter"
        # a wrong counter: the figure does not count
        [ "$(json_field "$j" counter)" != $((4 * peers_b3_sections)) ] ||
          json_field "$j" acquisitions_per_s >>"$tmp/peers.$c.b3"
      fi
      printf '"%s_b3_%s":%s,' "$c" "$round" "${j:-null}" >>"$tmp_rounds"
      flush
    done
  done
  say "15. server time per B1 pair: one more B1 run each, every command logged (the scripts' own commands)"
  slow_was=$(redis-cli -p "$port" CONFIG GET slowlog-log-slower-than | tail -n 1)
  len_was=$(redis-cli -p "$port" CONFIG GET slowlog-max-len | tail -n 1)
  redis-cli -p "$port" CONFIG SET slowlog-max-len 1000000 >/dev/null
  redis-cli -p "$port" CONFIG SET slowlog-log-slower-than 0 >/dev/null
  for c in $usable; do
    redis-cli -p "$port" SLOWLOG RESET >/dev/null
    j=$(peer_run "$c" b1)
    if [ -n "$j" ]; then
      if s=$(peer_server_time "$c" $(($(json_field "$j" pairs) + $(peer_warmup "$c" "$j")))); then
        echo "$s" >"$tmp/peers.$c.server"
        printf '"%s_server":%s,' "$c" "$(tail -n 1 "$tmp/peers.$c.server")" >>"$tmp_rounds"
      else
        echo "the server's time per pair: not worked out (redis-cli --json needs Redis 7)" >>"$tmp/peers.$c.err"
      fi
    fi
    redis-cli -p "$port" SLOWLOG RESET >/dev/null
    flush
  done
  redis-cli -p "$port" CONFIG SET slowlog-log-slower-than "$slow_was" >/dev/null
  redis-cli -p "$port" CONFIG SET slowlog-max-len "$len_was" >/dev/null
  raw peers "{$(sed 's/,$//' "$tmp_rounds")}"
  peers_rows
}

# peers_row FIGURE FILE UNIT BEST(min|max) TARGET: relock's median against
# the best peer's, every peer's in the reference
peers_row() {
  figure=$1 f=$2 unit=$3 best=$4 target=$5
  rel=$(peer_median relock "$f")
  list= bname= bval=
  for c in $peers_clients; do
    [ "$c" = relock ] && continue
    v=$(peer_median "$c" "$f")
    if [ -z "$v" ]; then
      list="$list; $c: failed ($(peer_why "$c"))"
      continue
    fi
    note=
    [ "$f" != b3 ] || [ ! -f "$tmp/peers.$c.b3slow" ] ||
      note=" (1 round: a run took $(cat "$tmp/peers.$c.b3slow") s)"
    list="$list; $c $v$unit$note"
    if [ -z "$bval" ] || [ "$(meets "$v" "$([ "$best" = min ] && echo "<=" || echo ">=")" "$bval")" = yes ]; then
      bname=$c bval=$v
    fi
  done
  if [ -z "$rel" ]; then
    row peers "$figure" "FAILED: $(peer_why relock)" "${list#; }" "n/a" "$target" no
    return
  fi
  if [ -z "$bval" ]; then
    row peers "$figure" "$rel$unit" "no peer ran${list}" "n/a" "$target" no
    return
  fi
  r=$(ratio "$rel" "$bval")
  op=${target%% *}
  [ "$op" = "≤" ] && op="<=" || op=">="
  row peers "$figure" "$rel$unit" "best peer ($bname) $bval$unit${list}" "$r" "$target" "$(meets "$r" "$op" 1)"
}

peers_rows() {
  peers_row "15. B1: one key, sequential pairs, one client: p50 (median of 5 rounds)" p50 " µs" min "≤ 1"
  peers_row "15. B1: one key, sequential pairs, one client: p99" p99 " µs" min "≤ 1"
  peers_row "15. B2: 64 keys, 64 pair chains in flight from one process: pairs/s" b2 "" max "≥ 1"
  peers_row "15. B3: 4 processes × 250 sections (acquire, GET, SET+1, release) on one key: acquisitions/s" b3 "" max "≥ 1"
  # the counters, every round: 1000 each time, or the row fails
  list= ok=yes
  for c in $peers_clients; do
    got=$(tr '\n' ' ' <"$tmp/peers.$c.counter" 2>/dev/null | sed 's/ $//')
    [ -n "$got" ] || got="none ($(peer_why "$c"))"
    for v in $got; do [ "$v" = $((4 * peers_b3_sections)) ] || ok=no; done
    case $got in none*) ok=no ;; esac
    [ "$c" = relock ] && rel=$got || list="$list; $c $got"
  done
  row peers "15. B3: final counter, each round (4 × 250 increments under the lock)" "$rel" "${list#; }" "" \
    "$((4 * peers_b3_sections)) each" "$ok"
  # Redis's own time per B1 pair: relock against Redisson's scripts
  list=
  for c in $peers_clients; do
    v="failed ($(peer_why "$c"))"
    if [ -s "$tmp/peers.$c.server" ]; then
      IFS=: read -r u k i <"$tmp/peers.$c.server"
      v="$u µs ($k commands + $i by scripts)"
    fi
    [ "$c" = relock ] && rel=$v || list="$list; $c $v"
  done
  r=$(ratio "$(head -n 1 "$tmp/peers.relock.server" 2>/dev/null | cut -d: -f1)" \
    "$(head -n 1 "$tmp/peers.redisson.server" 2>/dev/null | cut -d: -f1)")
  row peers "15. B1: server µs per pair (inside the commands sent, their scripts' included; INFO commandstats, median of 5 rounds, warm-up included)" \
    "$rel" "${list#; }" "$r" "≤ 1 (relock ÷ Redisson)" "$(meets "$r" "<=" 1)"
}
