# Sourced by bench/run: stopping what a run starts (tests/support/redis.sh,
# through bench/lib.sh, starts each server and stops it by its pid).

# also the main server while part tls or replicas runs its own (main_pid: see
# there), and part replicas' replica
cleanup() {
  stop_redis
  stop_extra_nodes
  [ -z "${main_pid:-}" ] || { redis_pid=$main_pid redis_dir=$main_dir; stop_redis; }
  [ -z "${replica_pid:-}" ] || { redis_pid=$replica_pid redis_dir=$replica_dir; stop_redis; }
  rm -rf "$tmp"
}

# part sync's 4 more servers
stop_extra_nodes() {
  keep_pid=${redis_pid:-} keep_dir=${redis_dir:-}
  for e in ${extra_nodes:-}; do
    redis_pid=${e%%:*} redis_dir=${e#*:}
    stop_redis || true
  done
  extra_nodes=
  redis_pid=$keep_pid redis_dir=$keep_dir
}
