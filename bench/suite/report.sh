# Sourced by bench/run: report prints the table (markdown, on stdout) and
# writes the JSON ($out): the rows, the run's conditions, each program's raw
# output.
report() {
  awk -F'\t' '
    { t = $6; if ($7 == "yes") t = t " ✓"; else if ($7 == "no") t = t " **missed**"
      printf "| %s | %s | %s | %s | %s |\n", $2, $3, $4, $5, t }
    BEGIN { print "| figure | relock | reference | ratio | target |"; print "|---|---|---|---|---|" }
  ' "$rows"

  {
    esc() { sed 's/\\/\\\\/g; s/"/\\"/g'; }
    printf '{"date":"%s","cpus":%s,"redis":"%s","seconds":%s,"cpu_busy_before":%s,"cpu_busy_after":%s,"niced":%s,"pinned":%s,"rows":[' \
      "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 0)" \
      "$(redis-server --version | sed 's/.* v=\([^ ]*\).*/\1/')" "$elapsed" "$load_start" "$load_end" "$niced" "$pinning"
    esc <"$rows" | awk -F'\t' '{
      ratio = ($5 == "" || $5 == "n/a") ? "null" : $5
      met = ($7 == "yes") ? "true" : ($7 == "no") ? "false" : "null"
      printf "%s{\"part\":\"%s\",\"figure\":\"%s\",\"relock\":\"%s\",\"reference\":\"%s\",\"ratio\":%s,\"target\":\"%s\",\"met\":%s}",
        (NR > 1 ? "," : ""), $1, $2, $3, $4, ratio, $6, met }'
    printf '],"raw":{'
    first=1
    for f in "$tmp"/raw.*; do
      [ -f "$f" ] || continue
      [ $first = 1 ] || printf ','
      first=0
      printf '"%s":%s' "${f##*/raw.}" "$(cat "$f")"
    done
    printf '}}\n'
  } >"$out"
}
