#!/usr/bin/env bash
# Builds the GPU programs here for sm_90 and bundles them, with the shared libraries they need
# that the device tool's machine lacks (SimGrid, yaml-cpp, fmt, MPI, libcudart, ...; not the
# driver's libcuda, not libc, and not NCCL: check.sh finds the machine's, PyTorch's wheel
# nvidia-nccl-cu13, instead of carrying 218 MB), into build-device/bundle/{bin,lib}. The device
# tool can then carry that one folder and run device/check.sh there without building:
#   device/bundle.sh
#   (device tool) run: device/check.sh   with carry: ["build-device/bundle"]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-device
mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DEPLB_WITH_GUI=OFF \
  >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target eplb device_test eplb_bench_device eplb_python
bundle=$build/bundle
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
cp "$build/tools/eplb" "$build/tests/device_test" "$build/tools/bench/eplb_bench_device" "$bundle/bin/"
# eplb starts the parts' executables from its own folder (device-run, validate, run).
for part in eplb-device eplb-validate eplb-sim; do
  if [ -x "$build/tools/$part" ]; then cp "$build/tools/$part" "$bundle/bin/"; fi
done
# eplb's Python module, for check.sh's vLLM device test (it imports under a Python of the
# version built for; check.sh says so when the machine's differs).
mkdir -p "$bundle/python"
cp -r "$build/python/eplb" "$bundle/python/"
for bin in "$bundle"/bin/* "$bundle"/python/eplb/_eplb*.so; do ldd "$bin" | awk '/=> \// {print $3}'; done | sort -u |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|libcuda|libnccl)\.so' |
  while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
du -sh "$bundle"
