# TAP for the shell tests: source it, then call ok / not_ok / expect. Each
# numbers its line from $n; the script prints its plan.
n=0

ok() { n=$((n + 1)); echo "ok $n - $1"; }

# not_ok NAME [DIAGNOSTIC...]: each diagnostic, every line of it, as "# ..."
not_ok() {
  n=$((n + 1))
  echo "not ok $n - $1"
  shift
  for line in "$@"; do printf '%s\n' "$line" | sed 's/^/# /'; done
}

# expect NAME WANT GOT [DIAGNOSTIC...]
expect() {
  if [ "$2" = "$3" ]; then ok "$1"; else
    _name=$1 _want=$2 _got=$3
    shift 3
    not_ok "$_name" "wanted: $_want" "got: $_got" "$@"
  fi
}
