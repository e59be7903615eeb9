#!/usr/bin/env bash
# Simulation speed: wall time and peak memory of `eplb run` on the DeepSeek-V3 scenarios, and
# how cost grows with the number of GPUs. SimGrid allows one engine per process, so this times
# whole runs instead of a Google Benchmark loop.
#   tools/bench/sim_scaling.sh [path/to/eplb]
set -euo pipefail
cd "$(dirname "$0")/../.."
eplb=${1:-build/tools/eplb}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

measure() {  # label, args...
  local label=$1
  shift
  /usr/bin/time -f "%e %M" -o "$out/time" "$eplb" run "$@" --out "$out/run" >/dev/null
  read -r wall rss <"$out/time"
  local steps moved
  steps=$(python3 -c "import json;print(json.load(open('$out/run/summary.json'))['steps'])")
  moved=$(python3 -c "import json;s=json.load(open('$out/run/summary.json'));print(s['transfers'])")
  printf "%-44s %8s %9.2f %10.0f %10s\n" "$label" "$steps" "$wall" "$((rss / 1024))" "$moved"
}

printf "%-44s %8s %9s %10s %10s\n" "run" "steps" "wall (s)" "peak (MB)" "transfers"
measure "DeepSeek-V3 prefill EP32 (default)"
measure "DeepSeek-V3 decode EP144" scenarios/deepseek-v3-decode-ep144.yaml
for gpus in 32 64 128 256; do
  nodes=$((gpus / 8))
  measure "EP32 scenario on $gpus GPUs, 6000 steps" --set cluster.nodes=$nodes \
    --set eplb.num_redundant_experts=$gpus --set run.steps=6000
done
