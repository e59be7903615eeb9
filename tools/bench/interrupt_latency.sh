#!/usr/bin/env bash
# How long `compare` and `run` take to stop after SIGINT/SIGTERM, and what they leave: the time
# from the signal to the process's exit (children stopped, partial folder removed), three times
# each. A measurement, not a test (tests never assert on time).
# Usage: tools/bench/interrupt_latency.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/../.."
eplb=${1:-build}/tools/eplb
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stop() {  # signal, label, after seconds, command...
  local sig=$1 label=$2 after=$3
  shift 3
  "$@" >/dev/null 2>"$tmp/err" &
  local pid=$!
  sleep "$after"
  local t0 t1 rc
  t0=$(date +%s%N)
  kill "-$sig" "$pid"
  wait "$pid"
  rc=$?
  t1=$(date +%s%N)
  printf '%-44s exit %d after %6.1f ms; left behind: %d\n' "$label" "$rc" \
    "$(echo "($t1 - $t0) / 1000000" | bc -l)" "$(find "$tmp" -maxdepth 1 -name 'out*' | wc -l)"
}
for i in 1 2 3; do
  stop INT "compare tiny, 2 children, SIGINT" 1.5 "$eplb" compare scenarios/tiny.yaml \
    --set run.steps=1000000 --policies static,deepseek --jobs 2 --out "$tmp/out-cmp"
  stop TERM "run default scenario, SIGTERM" 1.0 "$eplb" run --set run.steps=3000 \
    --out "$tmp/out-run"
done
