#!/usr/bin/env bash
# Simulation cost: user CPU time and peak memory of `eplb run` as the cluster and the run grow.
# SimGrid allows one engine per process, so this times whole runs instead of a Google Benchmark
# loop. Numbers:
#   user (s)    CPU time of the process in user mode (one core: SimGrid runs actors one at a time)
#   peak (MB)   maximum resident set size
#   slope       log(user time ratio) / log(GPU ratio) between consecutive rows of the GPU table:
#               1 is linear in GPUs
# The GPU table scales the default DeepSeek-V3 EP32 scenario with cluster.nodes, keeping 9 slots
# per GPU (num_redundant_experts = 9 × GPUs − 256), for 3,000 steps: one rearrangement of every
# layer, overlapped with inference (async). The step table runs the default scenario as shipped.
# The floor table (eplb_bench_sim_flow, beside eplb in the build) runs 50 rounds of bare flows
# of one expert, a permutation per round, on the same platform: CPU time per flow (µs) with a
# sender actor per flow (pair) and with the workers' Courier. A run's migration and contended steps
# are made of such flows (transfers + 4 per GPU per contended a2a phase), so this is the least
# CPU a simulation of that many flows can take at that size.
#   tools/bench/sim_scaling.sh [path/to/eplb] [max GPUs, default 4096]
set -euo pipefail
cd "$(dirname "$0")/../.."
eplb=${1:-build/tools/eplb}
max_gpus=${2:-4096}
floor=$(dirname "$eplb")/bench/eplb_bench_sim_flow
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

measure() {  # prints "user peak_mb transfers"; args: eplb run arguments
  /usr/bin/time -f "%U %M" -o "$out/time" "$eplb" run "$@" --out "$out/run" >/dev/null 2>"$out/log" ||
    { cat "$out/log" >&2; exit 1; }
  read -r user rss <"$out/time"
  transfers=$(/usr/bin/python3 -c "import json;print(json.load(open('$out/run/summary.json'))['transfers'])")
  echo "$user $((rss / 1024)) $transfers"
}

printf "%-8s %8s %10s %10s %10s %7s\n" "GPUs" "steps" "user (s)" "peak (MB)" "transfers" "slope"
prev_gpus="" prev_user=""
for gpus in 32 64 128 256 512 1024 2048 4096; do
  [ "$gpus" -le "$max_gpus" ] || break
  read -r user peak transfers < <(measure --set cluster.nodes=$((gpus / 8)) \
    --set eplb.num_redundant_experts=$((9 * gpus - 256)) --set run.steps=3000 --no-trace)
  slope=$([ -n "$prev_gpus" ] && /usr/bin/python3 -c \
    "import math;print(f'{math.log($user/$prev_user)/math.log($gpus/$prev_gpus):.2f}')" || echo "")
  printf "%-8s %8s %10s %10s %10s %7s\n" "$gpus" 3000 "$user" "$peak" "$transfers" "$slope"
  prev_gpus=$gpus prev_user=$user
done
echo
printf "%-44s %8s %10s %10s %10s\n" "default EP32 scenario" "steps" "user (s)" "peak (MB)" "transfers"
for steps in 3000 10000 30000; do
  read -r user peak transfers < <(measure --set run.steps=$steps)
  printf "%-44s %8s %10s %10s %10s\n" "" "$steps" "$user" "$peak" "$transfers"
done
read -r user peak transfers < <(measure scenarios/deepseek-v3-decode-ep144.yaml)
printf "%-44s %8s %10s %10s %10s\n" "DeepSeek-V3 decode EP144 (as shipped)" "-" "$user" "$peak" "$transfers"
echo
if [ -x "$floor" ]; then
  printf "%-8s %10s %10s %16s %16s\n" "GPUs" "flows" "rounds" "pair (us/flow)" "courier (us/flow)"
  rounds=50
  for gpus in 256 1024 4096; do
    [ "$gpus" -le "$max_gpus" ] || break
    pair=$("$floor" "$gpus" "$rounds" pair | sed -E 's/.* ([0-9.]+) us per flow.*/\1/')
    courier=$("$floor" "$gpus" "$rounds" courier | sed -E 's/.* ([0-9.]+) us per flow.*/\1/')
    printf "%-8s %10s %10s %16s %16s\n" "$gpus" $((gpus * rounds)) "$rounds" "$pair" "$courier"
  done
else
  echo "floor table skipped: $floor not built (it needs SimGrid)"
fi
