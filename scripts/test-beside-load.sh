#!/usr/bin/env bash
# `make test` N times in a row (3 unless given) beside two CPU-bound processes, one per core of a 2-core machine, as a
# shared runner has them: the suite must pass every time. Each run's output goes to LOGDIR (a new temporary directory
# unless given), one line a run here: passed or failed, and its wall time.
#   scripts/test-beside-load.sh [RUNS] [LOGDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
logs="${2:-$(mktemp -d /var/tmp/refbench-beside-load-XXXXXX)}"
mkdir -p "$logs"

spinners=()
stop_spinners() { kill "${spinners[@]}" 2>/dev/null || true; wait "${spinners[@]}" 2>/dev/null || true; }
trap stop_spinners EXIT
for _ in 1 2; do
  python3 -c 'while True: pass' &
  spinners+=($!)
done
echo "beside two CPU-bound processes (pids ${spinners[*]}); logs in $logs"

failed=0
for i in $(seq 1 "$runs"); do
  started=$(date +%s)
  if make test >"$logs/run-$i.log" 2>&1; then outcome=passed; else outcome=failed; failed=$((failed + 1)); fi
  took=$(($(date +%s) - started))
  printf 'run %d: %s in %d min %02d s (%s)\n' "$i" "$outcome" $((took / 60)) $((took % 60)) \
    "$(grep -E '[0-9]+ (passed|failed)' "$logs/run-$i.log" | tail -1 | tr -d '=' | xargs)"
done
echo "$((runs - failed)) of $runs runs passed"
[ "$failed" -eq 0 ]
