# Sourced by bench/run: the rows of the table, arithmetic, the server's
# counters, pinning to a CPU, the machine's load.

# row PART FIGURE RELOCK REFERENCE RATIO TARGET MET(yes|no|empty)
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$rows"; }

# meets VALUE OP LIMIT: yes or no
meets() {
  awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN {
    ok = (op == "<=") ? v <= l : (op == ">=") ? v >= l : (op == ">") ? v > l : v == l
    print (v == "" || v == "n/a") ? "no" : ok ? "yes" : "no" }'
}

calc() { awk "BEGIN { printf \"$1\", $2 }"; }

# raw NAME JSON: keeps a program's output for the JSON file
raw() { printf '%s\n' "$2" >"$tmp/raw.$1"; }

server_cpu() { redis-cli -p "$port" INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ { t += $2 } END { print t }'; }

flush() { redis-cli -p "$port" FLUSHALL >/dev/null; }

# calls_per N: "EVALSHA / SUBSCRIBE" calls since the last CONFIG RESETSTAT, per N
calls_per() {
  redis-cli -p "$port" INFO commandstats | tr -d '\r' | awk -F'[:=,]' -v n="$1" '
    $1 == "cmdstat_evalsha" { e = $3 } $1 == "cmdstat_subscribe" { s = $3 }
    END { printf "%.2f / %.2f", e / n, s / n }'
}

sha=
# The acquire script as Redis runs it: its "--#include" lines replaced by
# their files, as src/redis/embed-scripts.sh embeds it into the library.
acquire_script() {
  sh "$src/src/redis/embed-scripts.sh" --print "$src" lua/lock_acquire.lua
}

acquire_sha() {
  [ -n "$sha" ] || sha=$(redis-cli -p "$port" SCRIPT LOAD "$(acquire_script)")
}

# A round trip between two processes costs about 3x more when they sit on
# different CPUs of this VM than on the same one, and the scheduler picks
# either from run to run: the latency figures and their floor run with the
# server and the client pinned to CPU 0 (when taskset is there), so both
# always pay the same. on_cpu0 CMD...: runs CMD pinned like that.
pinning=false
command -v taskset >/dev/null && [ "$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)" -gt 1 ] && pinning=true
on_cpu0() {
  if $pinning; then
    taskset -pc 0 "$redis_pid" >/dev/null
    taskset -c 0 "$@"
    taskset -pc "0-$(($(getconf _NPROCESSORS_ONLN) - 1))" "$redis_pid" >/dev/null
  else
    "$@"
  fi
}

# on_cpu1 CMD...: CMD pinned to CPU 1, the server to CPU 0 (a cross-CPU round
# trip, as the processes of the handoff benchmark mostly make).
on_cpu1() {
  if $pinning; then
    taskset -pc 0 "$redis_pid" >/dev/null
    taskset -c 1 "$@"
    taskset -pc "0-$(($(getconf _NPROCESSORS_ONLN) - 1))" "$redis_pid" >/dev/null
  else
    "$@"
  fi
}

# median: of the numbers on stdin
median() { sort -n | awk '{ v[NR] = $1 } END { printf "%.1f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# The figures assume the machine is otherwise idle: the share of all CPUs
# busy over one second (from /proc/stat) before and after, and a warning.
busy() {
  [ -r /proc/stat ] || { echo 0; return; }
  a=$(head -n 1 /proc/stat)
  sleep 1
  b=$(head -n 1 /proc/stat)
  printf '%s\n%s\n' "$a" "$b" | awk '{ t = 0; for (i = 2; i <= NF; i++) t += $i; tot[NR] = t; idle[NR] = $5 + $6 }
    END { d = tot[2] - tot[1]; printf "%.2f", (d > 0 ? 1 - (idle[2] - idle[1]) / d : 0) }'
}
