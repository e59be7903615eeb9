#!/usr/bin/env bash
# The GPU check, fitted to the machine the device tool lends (one H200, driver 580, nvcc 13,
# NCCL only as PyTorch's pip wheel nvidia-nccl-cu13, compute-sanitizer, no installs, at most
# 10 minutes a command, a few files back from $OUT). In the order a 15-minute budget wants:
#   1 preflight     GPU, driver, every library the programs need (NCCL from the wheel's folder)
#   2 virtual       the GPU tests on virtual ranks (all ranks on one GPU: everything runs)
#   3 nccl          the NCCL tests: one rank per GPU (a one-rank communicator sending to itself
#                   on one GPU; multi-rank NCCL and real NVLink need more GPUs than one)
#   4 sanitizer     compute-sanitizer memcheck on the event-protocol test
#   5 device-run    a short device run of the default scenario on 32 virtual ranks, then the
#                   same losing rank 5 in the middle of its second rearrangement (--fail-rank)
#   6 benchmark     migration bandwidth against a plain copy, step slowdown; from its JSON the
#                   one-GPU model's calibration file (tools/bench/one_gpu_calibration.py)
#   7 torch-ops     vLLM's per-layer rearrangement operations timed with torch on the GPU
#                   (tools/bench/torch_eplb_ops.py), if a Python here has torch with CUDA
#   8 vllm-cuda     vLLM's test_device_compatibility[cuda] on eplb's vLLM policy (a CPU map)
#   9 validate      the one-GPU simulation against the measured run, calibrated as in 6
#  10 heldout       validate on three configurations the calibration never saw (other expert
#                   bytes, fewer virtual ranks, stop-the-world), if time remains
# Every step has its own timeout, so a hang loses that step only. A skipped GPU test is a
# failure: the check exists to run them. $OUT receives two files: summary.txt (the table) and
# check.tar.gz (every log and run folder).
#
# The programs come from build-device/bundle (device/bundle.sh, carried over), else an existing
# build in $BUILD_DIR (default build-device), else a fresh sm_90 build into it.
# CHECK_BUDGET_S (default 360) bounds the whole check, so that with the machine's start a rerun
# after a fix still fits in the 15 minutes a session gets; each step's timeout is its share of
# those 6 minutes, and steps that no longer fit are reported as not run. A failed preflight (no
# GPU, a library or program missing) stops the check there: every GPU step would only fail
# slowly. CHECK_AFTER_PREFLIGHT_FAILURE=run runs them anyway (the no-GPU test of the gating).
# CHECK_STEPS (default all) names the steps after the preflight to run, for a rerun of some:
# a comma list of virtual, nccl, sanitizer, device-run, benchmark, torch-ops, vllm-cuda,
# validate, heldout (validate and heldout read the calibration that benchmark writes: a rerun of
# them alone runs uncalibrated, saying so).
set -uo pipefail
cd "$(dirname "$0")/.."
# The steps, checked before anything is made: spaces dropped, every name known, at least one.
all_steps=virtual,nccl,sanitizer,device-run,benchmark,torch-ops,vllm-cuda,validate,heldout
steps=${CHECK_STEPS-$all_steps}
steps=${steps//[[:space:]]/}
chosen=0
for step in ${steps//,/ }; do
  case $step in
    virtual | nccl | sanitizer | device-run | benchmark | torch-ops | vllm-cuda | validate | \
      heldout) chosen=$((chosen + 1)) ;;
    *)
      echo "check.sh: CHECK_STEPS: unknown step '$step' (valid: ${all_steps//,/, })" >&2
      exit 2
      ;;
  esac
done
if [ $chosen -eq 0 ]; then
  echo "check.sh: CHECK_STEPS='${CHECK_STEPS-}' names no step (valid: ${all_steps//,/, })" >&2
  exit 2
fi
wanted() { [[ ",$steps," == *",$1,"* ]]; }
build=${BUILD_DIR:-build-device}
out=${OUT:-out-check}
budget=${CHECK_BUDGET_S:-360}
work=$(mktemp -d "${TMPDIR:-/tmp}/eplb-check.XXXXXX")
logs=$work/check
mkdir -p "$out" "$logs"
start=$SECONDS
status=0
preflight_ok=1
summary=()
note() {  # name, result
  summary+=("$(printf '%-46s %s' "$1" "$2")")
  echo "-- $1: $2"
}
fail() {
  status=1
  note "$1" "FAILED: $2"
}
left() { echo $((budget - (SECONDS - start))); }
# Runs a step under a timeout of at most its share and what is left; returns its exit code,
# 124 on timeout, 125 when no time is left to start it.
run_step() {  # seconds, log name, command...
  local want=$1 log=$2
  shift 2
  local t
  t=$(left)
  [ "$t" -gt "$want" ] && t=$want
  if [ "$t" -lt 20 ]; then return 125; fi
  echo "== $log (timeout ${t}s): $*"
  timeout --kill-after=10 "$t" "$@" >"$logs/$log.log" 2>&1
}
finish() {
  {
    printf '%s\n' "${summary[@]}"
    echo
    [ $status -eq 0 ] && echo "check: all passed" || echo "check: FAILED (logs in check.tar.gz)"
  } | tee "$out/summary.txt"
  tar -czf "$out/check.tar.gz" -C "$work" check
  rm -rf "$work"
  exit $status
}
# A kill (the device tool's limit, Ctrl-C) still leaves the table and the archive of what ran:
# bash runs this once the step in the foreground has ended, which its own timeout bounds.
on_kill() {
  trap - TERM INT HUP
  fail "check" "killed after $((SECONDS - start)) s; the steps above ran, the rest did not"
  finish
}
trap on_kill TERM INT HUP

# 1. Preflight --------------------------------------------------------------------------------
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${gpus:-0}" -lt 1 ]; then
  fail "GPU" "no GPU (nvidia-smi: ${gpu:-not found})"
  preflight_ok=0
else
  note "GPU" "$gpus × $gpu"
fi
# NCCL is not bundled (218 MB): the machine's PyTorch brings it as the wheel nvidia-nccl-cu13.
nccl_dir=""
# The wheel is a namespace package (no __init__.py, so no __file__): look through its __path__,
# then through each site-packages folder of the interpreter, for lib/libnccl.so.2.
find_nccl='
import importlib.util, os, site, sys
places = []
try:
    spec = importlib.util.find_spec("nvidia.nccl")
    places += list(spec.submodule_search_locations or []) if spec else []
except (ImportError, ValueError):
    pass
roots = list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()] + sys.path
places += [os.path.join(r, "nvidia", "nccl") for r in roots if r]
for p in places:
    if os.path.isfile(os.path.join(p, "lib", "libnccl.so.2")):
        print(os.path.join(p, "lib"))
        break
'
for py in python3 /usr/bin/python3 /opt/torch/.venv/bin/python3; do
  command -v "$py" >/dev/null 2>&1 || continue
  d=$("$py" -c "$find_nccl" 2>/dev/null) || continue
  [ -n "$d" ] && [ -d "$d" ] && nccl_dir=$d && break
done
if [ -x "$build/bundle/bin/eplb" ]; then
  bin=$build/bundle/bin
  libs=$PWD/$build/bundle/lib
  note "programs" "$bin (bundle)"
else
  if [ ! -x "$build/tools/eplb" ] || [ ! -x "$build/tests/device_test" ]; then
    # Within the budget too: a build that cannot finish in time leaves the rest to report.
    build_s=$(left)
    [ "$build_s" -ge 1 ] || build_s=1  # timeout 0 would mean none
    echo "== build ($build, sm_90, timeout ${build_s}s)"
    if ! { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DEPLB_WITH_GUI=OFF && timeout --kill-after=10 "$build_s" cmake --build "$build" \
      -j "$(nproc)" --target eplb device_test eplb_bench_device eplb_python; } >"$logs/build.log" 2>&1; then
      fail "build" "failed or out of time after $((SECONDS - start)) s; see build.log"
      finish
    fi
  fi
  bin=$build/tools
  libs=""
  note "programs" "$build (a build here)"
fi
export LD_LIBRARY_PATH="${libs:+$libs:}${nccl_dir:+$nccl_dir:}/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
device_test=$bin/device_test
bench=$bin/eplb_bench_device
[ -x "$device_test" ] || device_test=$build/tests/device_test
[ -x "$bench" ] || bench=$build/tools/bench/eplb_bench_device
missing=$(for p in "$bin/eplb" "$bin/eplb-device" "$device_test" "$bench"; do
  [ -e "$p" ] || { echo "$p"; continue; }
  ldd "$p" 2>/dev/null | awk '/not found/ {print $1}'
done | sort -u | tr '\n' ' ')
if [ -n "$missing" ]; then
  fail "preflight: libraries and programs" "missing $missing(NCCL from the wheel: ${nccl_dir:-not found})"
  preflight_ok=0
else
  note "preflight: libraries and programs" "all found (NCCL: ${nccl_dir:-no wheel, the linked one})"
fi

[ "$steps" = "$all_steps" ] || note "steps (CHECK_STEPS)" "$steps only"

if [ $preflight_ok -eq 0 ] && [ "${CHECK_AFTER_PREFLIGHT_FAILURE:-}" != run ]; then
  fail "GPU steps (tests, sanitizer, runs, benchmark, validate)" "not run: the preflight failed"
  finish
fi

# 2–4. GPU tests -------------------------------------------------------------------------------
# One line per result: failures and skips are both failures of the check.
gpu_tests() {  # label, log name, seconds, gtest filter
  local label=$1 log=$2 seconds=$3 filter=$4 rc
  run_step "$seconds" "$log" "$device_test" --gtest_filter="$filter" --gtest_brief=0
  rc=$?
  local passed skipped failed
  passed=$(grep -c '^\[       OK \]' "$logs/$log.log" 2>/dev/null)
  skipped=$(grep -c '^\[  SKIPPED \]' "$logs/$log.log" 2>/dev/null)
  failed=$(grep -c '^\[  FAILED  \] [A-Z]' "$logs/$log.log" 2>/dev/null)
  if [ $rc -eq 125 ]; then fail "$label" "not run: out of time"; return; fi
  if [ $rc -eq 124 ]; then fail "$label" "timed out (a hang?) after $passed passed"; return; fi
  local why
  why=$(grep -m1 -A1 ': Skipped$' "$logs/$log.log" | tail -1)
  if [ "$failed" -gt 0 ] || [ "$skipped" -gt 0 ] || [ $rc -ne 0 ] || [ "$passed" -eq 0 ]; then
    fail "$label" "$passed passed, $failed failed, $skipped skipped${why:+ ($why)}"
  else
    note "$label" "$passed passed"
  fi
}
wanted virtual && gpu_tests "GPU tests, virtual ranks" virtual-tests 70 \
  'DeviceSizing.*:DeviceBackend.*-*Nccl*'
wanted nccl && gpu_tests "GPU tests, NCCL (one rank per GPU)" nccl-tests 40 '*Nccl*'
if wanted nccl && [ "${gpus:-0}" -lt 2 ]; then
  note "  not testable with $gpus GPU" "multi-rank NCCL, real NVLink; MPI runs 1 process"
fi
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if ! wanted sanitizer; then
  :
elif [ -x "$sanitizer" ]; then
  run_step 60 sanitizer "$sanitizer" --tool memcheck --error-exitcode 3 "$device_test" \
    --gtest_filter='DeviceBackend.TheForegroundNeverReadsAStagedBufferEarly'
  rc=$?
  if [ $rc -eq 0 ] && grep -q '^\[       OK \]' "$logs/sanitizer.log"; then
    note "compute-sanitizer memcheck, event protocol" "no errors"
  else
    fail "compute-sanitizer memcheck, event protocol" "exit $rc ($(tail -1 "$logs/sanitizer.log" 2>/dev/null))"
  fi
else
  fail "compute-sanitizer" "not found"
fi

# 5. A short device run ----------------------------------------------------------------------
if wanted device-run; then
  run_step 45 device-run "$bin/eplb" device-run --virtual --set run.steps=600 \
    --set eplb.step_interval=200 --set eplb.window_size=100 --step-scale 0.1 \
    --out "$logs/device-run"
  rc=$?
  if [ $rc -eq 0 ]; then
    note "device run (32 virtual ranks, 600 steps)" "$(grep -E -m1 'run folder|steps' "$logs/device-run.log")"
  else
    fail "device run (32 virtual ranks, 600 steps)" "exit $rc: $(grep -m1 -i error "$logs/device-run.log")"
  fi

  # 5b. A rank lost mid-rearrangement: cancelled, recovered (H2D reloads), every layer checked ----
  # The second rearrangement starts after step 249 (the first after 49) and commits a layer per
  # step; rank 5 is lost 10 layers into it.
  run_step 45 device-fail "$bin/eplb" device-run --virtual --set run.steps=600 \
    --set eplb.step_interval=200 --set eplb.window_size=100 --step-scale 0.1 \
    --fail-rank 5 --at 260 --out "$logs/device-fail"
  rc=$?
  if [ $rc -eq 0 ]; then
    note "device run losing rank 5 at step 260" "$(grep -E -m1 'run folder|steps' "$logs/device-fail.log")"
    note "  recovery (summary.json)" "$(grep -Eo '"recovery_s": [-0-9.e+]+|"bytes_reloaded": [0-9]+' \
      "$logs/device-fail/summary.json" 2>/dev/null | tr '\n' ' ')"
  else
    fail "device run losing rank 5 at step 260" "exit $rc: $(grep -m1 -i error "$logs/device-fail.log")"
  fi
fi

# 6. Benchmark -------------------------------------------------------------------------------
if wanted benchmark; then
  run_step 60 benchmark "$bench" --benchmark_counters_tabular=true \
    --benchmark_out="$logs/bench.json" --benchmark_out_format=json
  rc=$?
  # A counter of one benchmark (the first whose name starts so), from the JSON, to 4 digits.
  counter() {  # benchmark, counter
    local py
    py=$(command -v python3 || echo /usr/bin/python3)
    "$py" -c 'import json, sys
d = json.load(open(sys.argv[1]))
v = next((b[sys.argv[3]] for b in d.get("benchmarks", [])
          if b["name"].startswith(sys.argv[2]) and sys.argv[3] in b), None)
print("?" if v is None else f"{v:.4g}")' "$logs/bench.json" "$1" "$2" 2>/dev/null || echo "?"
  }
  # Every benchmark gates: one that stopped (SkipWithError) still prints its name and exits 0, so
  # the JSON's error_occurred and the three names decide.
  stopped=$(grep -c '"error_occurred": true' "$logs/bench.json" 2>/dev/null)
  absent=$(for b in BM_PlainCopy/8192 BM_LayerMigration BM_StepSlowdown; do
    grep -q "\"name\": \"$b" "$logs/bench.json" 2>/dev/null || printf ' %s' "$b"
  done)
  if [ $rc -eq 0 ] && { [ "${stopped:-0}" -gt 0 ] || [ -n "$absent" ]; }; then
    fail "device benchmark" "${stopped:-0} stopped ($(grep -m1 -Eo '"error_message": "[^"]*"' \
      "$logs/bench.json" 2>/dev/null))${absent:+; no result for$absent}"
  elif [ $rc -eq 0 ]; then
    note "plain D2D copy, 8 GiB" "$(grep -E '^BM_PlainCopy/8192' "$logs/benchmark.log" | grep -Eo '[0-9.]+[GT]i?/s' | head -1)"
    note "layer migration, 32 virtual ranks" "$(grep -E '^BM_LayerMigration' "$logs/benchmark.log" | grep -Eo '[0-9.]+[GT]i?/s' | head -1)"
    note "  / plain copy of as many bytes (goal ≥ 0.9)" "$(counter BM_LayerMigration vs_plain_copy)"
    note "  ms in Start (BeginRearrangement) / rounds / commit (host part); GPU span of the transfers" \
      "$(counter BM_LayerMigration start_ms) ($(counter BM_LayerMigration begin_ms)) / $(counter BM_LayerMigration staged_ms) / $(counter BM_LayerMigration commit_ms) ($(counter BM_LayerMigration committed_ms)); $(counter BM_LayerMigration gpu_span_ms) (most rounds on a rank: $(counter BM_LayerMigration rounds))"
    note "  the same copies, nothing between them / plain copy" \
      "$(counter BM_MigrationCopies vs_plain_copy)"
    note "emulated step slowdown during migration" "$(counter BM_StepSlowdown slowdown)"
    note "  HBM read by the emulated steps, idle / during migration (GB/s)" \
      "$(counter BM_StepSlowdown idle_read_GBps) / $(counter BM_StepSlowdown busy_read_GBps)"
    # The one-GPU model's start, commit, shared copy rate and step reads, for validate.
    if "$(command -v python3 || echo /usr/bin/python3)" tools/bench/one_gpu_calibration.py \
      "$logs/bench.json" >"$logs/one_gpu.json" 2>"$logs/one_gpu.log"; then
      calibration=$logs/one_gpu.json
      note "  one-GPU calibration (one_gpu.json)" "$(tr -d ' \n' <"$calibration")"
    else
      fail "one-GPU calibration" "$(head -1 "$logs/one_gpu.log")"
    fi
  else
    fail "device benchmark" "exit $rc"
  fi
fi

# 7–8. PyTorch on the GPU: vLLM's per-layer operations, and vLLM's device test -------------------
# The first Python whose torch sees a GPU (the machine's PyTorch brings NCCL too).
torch_py=""
for py in python3 /usr/bin/python3 /opt/torch/.venv/bin/python3; do
  command -v "$py" >/dev/null 2>&1 || continue
  if [ "$("$py" -c 'import torch; print(torch.cuda.is_available())' 2>/dev/null)" = True ]; then
    torch_py=$(command -v "$py")
    break
  fi
done
if wanted torch-ops; then
  if [ -z "$torch_py" ]; then
    fail "torch per-operation costs (vLLM's layer)" "not run: no Python here has torch with CUDA"
  else
    run_step 40 torch-ops "$torch_py" tools/bench/torch_eplb_ops.py --device cuda \
      --json "$logs/torch-ops.json"
    rc=$?
    if [ $rc -eq 0 ]; then
      note "torch per-operation costs (vLLM's layer)" "$(head -1 "$logs/torch-ops.log")"
      # ms a layer (GB/s) per operation, from the JSON.
      note "  ms a layer (GB/s)" "$(grep -E -m1 '^per layer:' "$logs/torch-ops.log")"
    elif [ $rc -eq 125 ]; then
      note "torch per-operation costs (vLLM's layer)" "not run: out of time"
    else
      fail "torch per-operation costs (vLLM's layer)" "exit $rc: $(tail -1 "$logs/torch-ops.log")"
    fi
  fi
fi
if wanted vllm-cuda; then
  # eplb's Python module: the bundle's (device/bundle.sh), else the build's.
  pydir=$build/bundle/python
  [ -d "$pydir/eplb" ] || pydir=$build/python
  if [ -z "$torch_py" ]; then
    fail "vLLM test_device_compatibility[cuda]" "not run: no Python here has torch with CUDA"
  elif ! why=$(PYTHONPATH=$PWD/$pydir "$torch_py" -c 'import eplb.vllm' 2>&1); then
    fail "vLLM test_device_compatibility[cuda]" "eplb's module ($pydir) does not import under $torch_py: $(echo "$why" | tail -1)"
  else
    run_step 30 vllm-cuda env PYTHONPATH="$PWD/$pydir" EPLB_TEST_DATA="$PWD/tests/data" \
      "$torch_py" -m unittest discover -s python/tests -p test_vllm_policy.py \
      -k DeviceConvention -v
    rc=$?
    if [ $rc -eq 0 ] && ! grep -q 'skipped' "$logs/vllm-cuda.log"; then
      note "vLLM test_device_compatibility[cuda]" "passed ($(grep -Ec ' ok$' "$logs/vllm-cuda.log") tests)"
    elif [ $rc -eq 125 ]; then
      fail "vLLM test_device_compatibility[cuda]" "not run: out of time"
    else
      fail "vLLM test_device_compatibility[cuda]" "exit $rc: $(grep -m1 -E 'skipped|Error|FAIL' "$logs/vllm-cuda.log")"
    fi
  fi
fi

# 9–10. Validate, and held-out configurations, if time remains ---------------------------------
# validate LABEL LOG [options...]: the one-GPU simulation of a short device run against it.
validate() {
  local label=$1 log=$2
  shift 2
  run_step 40 "$log" "$bin/eplb" validate --virtual --set eplb.step_interval=200 \
    --set eplb.window_size=100 --step-scale 0.1 ${calibration:+--calibration "$calibration"} \
    --out "$logs/$log" "$@"
  rc=$?
  if [ $rc -eq 0 ]; then
    note "$label, simulated as" "$(grep -E '^simulated as' "$logs/$log.log")"
    note "  measured" "$(grep -E '^measured:' "$logs/$log.log")"
    note "  per layer" "$(grep -E '^per layer' "$logs/$log.log")"
    note "  per transfer" "$(grep -E '^per transfer' "$logs/$log.log")"
    note "  start to last commit" "$(grep -E '^start to commit' "$logs/$log.log")"
  elif [ $rc -eq 125 ]; then
    note "$label" "not run: out of time"
  else
    fail "$label" "exit $rc: $(grep -m1 -i error "$logs/$log.log")"
  fi
}
calibration=${calibration:-}
if wanted validate || wanted heldout; then
  [ -n "$calibration" ] || note "validate calibration" "none (benchmark not run or failed): start, commit and step reads unpriced"
fi
wanted validate && validate "validate (32 virtual ranks)" validate
if wanted heldout; then
  validate "held out: 8 MiB experts" heldout-bytes --expert-bytes 8388608
  validate "held out: 16 virtual ranks" heldout-ranks --ranks 16
  validate "held out: stop-the-world" heldout-sync --set eplb.use_async=false
fi

note "check time" "$((SECONDS - start)) s of $budget"
finish
