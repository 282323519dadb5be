#!/usr/bin/env bash
# Times parking_lot's 15 `webkit_queue_test` cases (producers and consumers on a bounded queue
# with a mutex and condition variables) for each lock of numa_locks beside parking_lot itself,
# in the same invocation, and prints a Markdown table of the medians and ratios.
#
#   upstream_tests/webkit_times.sh [RUNS] [LOCKS...]     (defaults: 3; mcs cna hq)
#
# Each case runs alone (`--exact`, one test thread) in a release build, the locks one after the
# other for each case, RUNS times over; a cell is the median of its RUNS wall times (seconds).
# `ratio` is ours / parking_lot's (lower is better; 1.00 = as fast as parking_lot).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
shift || true
if [ $# -gt 0 ]; then locks=("$@"); else locks=(mcs cna hq); fi

bin=$(cargo test -p upstream_tests --release --no-run --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*suites[^"]*\)".*/\1/p' | tail -1)
[ -x "$bin" ] || { echo "could not build the upstream_tests suites binary" >&2; exit 1; }
cases=$("$bin" --list 2>/dev/null | sed -n 's/^parking_lot::condvar::webkit_queue_test::\(.*\): test$/\1/p')

echo "machine: $(nproc) CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ); runs: $runs; binary: $bin"
times=$(mktemp)
for run in $(seq "$runs"); do
  for case in $cases; do
    for lock in "${locks[@]}" parking_lot; do
      start=$(date +%s.%N)
      "$bin" --exact "$lock::condvar::webkit_queue_test::$case" --test-threads=1 -q >/dev/null
      end=$(date +%s.%N)
      echo "$case $lock $(echo "$end - $start" | bc)" >>"$times"
    done
  done
  echo "run $run done" >&2
done

# Medians per (case, lock), then the table.
awk -v locks="${locks[*]}" '
  { t[$1" "$2] = t[$1" "$2] " " $3; if (!($1 in seen)) { seen[$1] = 1; order[n++] = $1 } }
  function median(list,   a, k, i, j, x) {
    k = split(list, a, " ")
    for (i = 2; i <= k; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x }
    return (k % 2) ? a[(k+1)/2] : (a[k/2] + a[k/2+1]) / 2
  }
  END {
    m = split(locks, L, " ")
    printf "| case | parking_lot s |"; for (i = 1; i <= m; i++) printf " %s s | ratio |", L[i]; print ""
    printf "|---|---:|"; for (i = 1; i <= m; i++) printf "---:|---:|"; print ""
    for (c = 0; c < n; c++) {
      p = median(t[order[c]" parking_lot"]); tp += p
      printf "| `%s` | %.2f |", order[c], p
      for (i = 1; i <= m; i++) { o = median(t[order[c]" "L[i]]); to[i] += o; printf " %.2f | %.2f |", o, o / p }
      print ""
    }
    printf "| **all 15** | %.2f |", tp; for (i = 1; i <= m; i++) printf " %.2f | %.2f |", to[i], to[i] / tp; print ""
  }' "$times"
rm -f "$times"
