#!/usr/bin/env bash
# The GPU check, in one go (about 3–4 minutes on an H200): the GPU tests, one of them under
# compute-sanitizer, the device benchmark, a short device run of the default scenario and a
# validation of the simulator against it, then a short table last. Run folders and logs go to
# $OUT (or out-check/).
#
# The programs come from, in this order: build-device/bundle (made by device/bundle.sh on a
# machine with the build dependencies, carried over with its libraries), an existing build in
# $BUILD_DIR (default build-device), or a fresh build for sm_90 into it.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-device}
out=${OUT:-out-check}
mkdir -p "$out"
status=0
step() { echo; echo "== $*"; }

step "GPU"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

if [ -x "$build/bundle/bin/eplb" ]; then
  bin=$build/bundle/bin
  export LD_LIBRARY_PATH="$PWD/$build/bundle/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "programs: $bin (bundled libraries)"
else
  if [ ! -x "$build/tools/eplb" ]; then
    step "build ($build, sm_90)"
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DEPLB_WITH_GUI=OFF >"$out/configure.log" 2>&1 || { cat "$out/configure.log"; exit 1; }
    grep -E "eplb(:| parts)" "$out/configure.log"
    cmake --build "$build" -j "$(nproc)" --target eplb device_test eplb_bench_device \
      >"$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
  fi
  mkdir -p "$out/bin"
  ln -sf "$PWD/$build/tools/eplb" "$PWD/$build/tests/device_test" \
    "$PWD/$build/tools/bench/eplb_bench_device" "$out/bin/"
  bin=$out/bin
fi

step "GPU tests"
"$bin/device_test" 2>&1 | tee "$out/gpu-tests.log" | grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|Failure" | tail -25
grep -q "^\[  PASSED  \]" "$out/gpu-tests.log" && ! grep -q "^\[  FAILED  \]" "$out/gpu-tests.log" || status=1

step "compute-sanitizer on the event protocol test"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$sanitizer" ]; then
  "$sanitizer" --tool memcheck --error-exitcode 3 "$bin/device_test" \
    --gtest_filter='DeviceBackend.TheForegroundNeverReadsAStagedBufferEarly' >"$out/sanitizer.log" 2>&1
  sanitizer_rc=$?
  tail -5 "$out/sanitizer.log"
  [ $sanitizer_rc -eq 0 ] || status=1
else
  sanitizer_rc="absent"
  echo "compute-sanitizer not found"
fi

step "device benchmark"
"$bin/eplb_bench_device" --benchmark_counters_tabular=true \
  --benchmark_out="$out/bench.json" --benchmark_out_format=json 2>&1 | tee "$out/bench.log"

step "device run: default scenario, 32 virtual ranks, 600 steps"
"$bin/eplb" device-run --virtual --set run.steps=600 --set eplb.step_interval=200 \
  --set eplb.window_size=100 --step-scale 0.1 --out "$out/device-run" 2>&1 | tee "$out/device-run.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

step "device run under MPI: one process per GPU (as many as this machine has)"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
mpi_rc="skipped (no mpirun, or no GPU)"
if command -v mpirun >/dev/null && [ "$gpus" -ge 1 ]; then
  mpirun --allow-run-as-root --oversubscribe -np "$gpus" "$bin/eplb" device-run scenarios/tiny.yaml \
    --mpi --ranks "$gpus" --set run.steps=300 --step-scale 0.1 --out "$out/mpi-run" 2>&1 |
    tee "$out/mpi-run.log" | head -3
  mpi_rc=${PIPESTATUS[0]}
  [ "$mpi_rc" = 0 ] || status=1
fi

step "validate: simulated against measured"
"$bin/eplb" validate --virtual --set eplb.step_interval=200 --set eplb.window_size=100 \
  --step-scale 0.1 --out "$out/validate" 2>&1 | tee "$out/validate.log" | tail -8
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

step "summary"
counter() {  # a counter's value from the benchmark's JSON (each counter name is unique to one)
  grep -Eo "\"$1\": [-0-9.e+]+" "$out/bench.json" 2>/dev/null | head -1 | awk '{print $2}'
}
printf '%-44s %s\n' "GPU tests" "$(grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?[,.]' "$out/gpu-tests.log" | tr -s ' ' | tr '\n' ' ')"
printf '%-44s %s\n' "compute-sanitizer (exit code)" "$sanitizer_rc"
printf '%-44s %s\n' "plain D2D copy, 8 GiB" "$(grep -E '^BM_PlainCopy/8192' "$out/bench.log" | grep -Eo '[0-9.]+[GT]i?/s' | head -1)"
printf '%-44s %s\n' "layer migration, 32 virtual ranks" "$(grep -E '^BM_LayerMigration' "$out/bench.log" | grep -Eo '[0-9.]+[GT]i?/s' | head -1)"
printf '%-44s %s\n' "  / plain copy of as many bytes (goal ≥ 0.9)" "$(counter vs_plain_copy)"
printf '%-44s %s\n' "emulated step slowdown during migration" "$(counter slowdown)"
printf '%-44s %s\n' "device run" "$(head -1 "$out/device-run.log")"
printf '%-44s %s\n' "device run under MPI (exit code)" "$mpi_rc"
printf '%-44s %s\n' "validate, per layer" "$(grep -E '^per layer' "$out/validate.log")"
printf '%-44s %s\n' "validate, per transfer" "$(grep -E '^per transfer' "$out/validate.log")"
echo
[ $status -eq 0 ] && echo "check: all passed" || echo "check: FAILED (see $out/)"
exit $status
