#!/usr/bin/env bash
# The what-ifs of docs/rearrangement_cost.md, on vLLM PR #43219's set-up (DeepSeek-R1 decode on
# 32 GB200, one NVLink domain, 32 redundant experts, vLLM's orchestration priced:
# migration.engine vllm): each a sweep, its table printed, its folder kept under OUT.
#   tools/whatif/rearrangement_cost.sh [OUT]      (default: runs/whatif-rearrangement-cost)
# Needs the simulator (build/tools/eplb with SimGrid); about a minute on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
eplb=${EPLB:-build/tools/eplb}
out=${1:-runs/whatif-rearrangement-cost}
scenario=scenarios/published/gb200-deepseek-r1.yaml
# R1's NVFP4 checkpoint (#43219): 24 MiB and 6 tensors per expert.
nvfp4=(--set model.expert_bytes=25165824 --set model.expert_tensors=6)
base=(--set migration.engine=vllm --set run.steps=4000 --no-trace)

sweep() {
  local name=$1
  shift
  echo "== $name"
  rm -rf "${out:?}/$name"
  "$eplb" sweep "$scenario" "${base[@]}" "$@" --out "$out/$name" 2> >(grep -v '^eplb sweep: point' >&2)
}
mkdir -p "$out"
# 1. Synchronous or asynchronous, and over which communicator.
sweep sync-async-transport "${nvfp4[@]}" --vary eplb.use_async=false,true \
  --vary migration.transport=nccl,nixl,gloo
# 2. vLLM's migration batching, on the transports it changes (synchronous).
sweep batching "${nvfp4[@]}" --set eplb.use_async=false --vary migration.batching=false,true \
  --vary migration.transport=nccl,nixl
# 3. FP8 block-quantized experts (42 MiB, 4 tensors) against NVFP4 (24 MiB, 6), over NIXL.
sweep fp8 --set migration.transport=nixl --vary eplb.use_async=false,true
sweep nvfp4 "${nvfp4[@]}" --set migration.transport=nixl --vary eplb.use_async=false,true
# 4. How often one can rebalance before the stalls eat the gain from balance.
sweep interval "${nvfp4[@]}" --set migration.transport=nixl --set run.steps=16000 \
  --vary eplb.step_interval=250,500,1000,2000,4000 --vary eplb.use_async=false,true
# 5. The default scenario (DeepSeek-V3 prefill, EP32 over 4 nodes), eplb's own backend against
#    vLLM's orchestration, asynchronous (the scenario's) and synchronous.
echo "== default"
rm -rf "${out:?}/default"
"$eplb" sweep --no-trace --vary migration.engine=eplb,vllm --vary eplb.use_async=true,false \
  --out "$out/default" 2> >(grep -v '^eplb sweep: point' >&2)
