#!/usr/bin/env bash
# Whole-process time of the commands people run most, start to exit: `eplb --version` and
# `eplb rebalance` on the DeepSeek-V3 shape (58 layers × 256 experts onto 288 slots, 32 GPUs on
# 4 nodes). What it measures is mostly loading: the dynamic loader's work for every library the
# executable links, then the policy. Needs hyperfine (apt-get install hyperfine).
#   tools/bench/process_time.sh [EPLB_BINARY]     (default: build/tools/eplb)
set -euo pipefail
cd "$(dirname "$0")/../.."
eplb=${1:-build/tools/eplb}
load=scenarios/data/deepseek-v3-like-load.csv
command -v hyperfine >/dev/null || { echo "process_time: needs hyperfine (apt-get install hyperfine)" >&2; exit 1; }
hyperfine -N --warmup 10 --runs 200 \
  -n "eplb --version" "$eplb --version" \
  -n "eplb rebalance 58x256->288" \
  "$eplb rebalance --load $load --replicas 288 --groups 8 --nodes 4 --gpus 32"
echo "dynamic loader, eplb --version:"
LD_DEBUG=statistics "$eplb" --version 2>&1 | grep -E "total startup time|final number of relocations:" | sed 's/^ *[0-9]*:\s*/  /'
