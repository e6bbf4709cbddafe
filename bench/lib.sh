# Shared by the benchmark scripts: the private redis-server of tests/support/redis.sh,
# and a few number helpers.
. "$(dirname "$0")/../tests/support/redis.sh"

# ratio A B: A / B with two decimals
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# json_field JSON NAME: a value from a flat JSON object
json_field() { printf '%s\n' "$1" | sed -n "s/.*\"$2\":\([-0-9.a-z]*\).*/\1/p"; }
