#!/usr/bin/env bash
# device/check.sh on a machine without a GPU: the preflight fails and ends the check with its
# table and archive; forced on past it, every GPU step is a failure of the check, never a pass (a
# skipped GPU test counts as failed); CHECK_STEPS picks the steps.
# Usage: device_check_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
if nvidia-smi -L >/dev/null 2>&1; then
  echo "a GPU is here: device/check.sh itself is the test"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out/stdout"; exit 1; }

# By default a failed preflight ends the check at once: the GPU steps are reported as not run.
OUT=$out BUILD_DIR=$build CHECK_BUDGET_S=240 bash "$src/device/check.sh" >"$out/stdout" 2>&1
rc=$?
[ $rc -ne 0 ] || fail "the check passed without a GPU"
grep -q "^GPU  *FAILED: no GPU" "$out/summary.txt" || fail "the summary does not say there is no GPU"
grep -q "^GPU steps .* FAILED: not run: the preflight failed" "$out/summary.txt" ||
  fail "the GPU steps ran after a failed preflight"
grep -q "^GPU tests, virtual ranks" "$out/summary.txt" && fail "a GPU test ran after a failed preflight"
grep -q "^check: FAILED" "$out/summary.txt" || fail "the summary's verdict is not FAILED"
[ -s "$out/check.tar.gz" ] || fail "no archive after a failed preflight"
rm -f "$out/summary.txt" "$out/check.tar.gz"

# Forced past the preflight, every GPU step still fails: a skipped test or a stopped benchmark
# is never a pass.
OUT=$out BUILD_DIR=$build CHECK_BUDGET_S=240 CHECK_AFTER_PREFLIGHT_FAILURE=run \
  bash "$src/device/check.sh" >"$out/stdout" 2>&1
rc=$?
[ $rc -ne 0 ] || fail "the check passed without a GPU"
[ -s "$out/summary.txt" ] || fail "no summary.txt"
grep -q "^GPU tests, virtual ranks  *FAILED: .* skipped" "$out/summary.txt" ||
  fail "skipped GPU tests were not counted as a failure"
grep -q "^check: FAILED" "$out/summary.txt" || fail "the summary's verdict is not FAILED"
# Benchmarks that stop (no GPU) print their names and exit 0: they must still fail the step.
grep -Eq "^device benchmark +FAILED: [1-9][0-9]* stopped" "$out/summary.txt" ||
  fail "stopped benchmarks were not counted as a failure"
# The PyTorch steps need torch with CUDA: without it they fail, never pass or vanish.
grep -Eq "^torch per-operation costs \(vLLM's layer\) +FAILED" "$out/summary.txt" ||
  fail "the torch benchmark step did not fail without a GPU"
grep -Eq "^vLLM test_device_compatibility\[cuda\] +FAILED" "$out/summary.txt" ||
  fail "vLLM's CUDA test step did not fail without a GPU"
grep -Eq "^held out: 16 virtual ranks +FAILED" "$out/summary.txt" ||
  fail "the held-out validations did not run (and fail) without a GPU"
# Listed to a file first: with pipefail, grep -q ending early would fail tar with SIGPIPE.
tar -tzf "$out/check.tar.gz" >"$out/listing" || fail "the archive cannot be read"
grep -q "check/virtual-tests.log" "$out/listing" || fail "the archive lacks the logs"
[ "$(ls "$out" | grep -cv -e stdout -e listing)" -eq 2 ] ||
  fail "more than summary.txt and check.tar.gz in \$OUT"
rm -f "$out/summary.txt" "$out/check.tar.gz"

# CHECK_STEPS runs the steps it names and no other, spaces or not; a step it does not know, or
# no step at all, is refused before anything is made.
OUT=$out BUILD_DIR=$build CHECK_BUDGET_S=240 CHECK_AFTER_PREFLIGHT_FAILURE=run \
  CHECK_STEPS="nccl, benchmark" bash "$src/device/check.sh" >"$out/stdout" 2>&1
grep -q "^GPU tests, NCCL" "$out/summary.txt" || fail "CHECK_STEPS did not run the NCCL tests"
grep -q "^device benchmark" "$out/summary.txt" || fail "CHECK_STEPS did not run the benchmark"
grep -q "^steps (CHECK_STEPS) *nccl,benchmark only" "$out/summary.txt" ||
  fail "the summary does not say which steps ran"
grep -Eq "^(GPU tests, virtual ranks|compute-sanitizer|device run|validate)" "$out/summary.txt" &&
  fail "CHECK_STEPS ran other steps"
rm -f "$out/summary.txt" "$out/check.tar.gz"
tmp=$out/tmp
mkdir -p "$tmp"
for bad in "virtual,benchmrk" "," ""; do
  TMPDIR=$tmp OUT=$out BUILD_DIR=$build CHECK_STEPS=$bad bash "$src/device/check.sh" \
    >"$out/stdout" 2>&1
  rc=$?
  [ $rc -eq 2 ] || fail "CHECK_STEPS='$bad' exited $rc, not 2"
  [ -e "$out/summary.txt" ] && fail "a refused CHECK_STEPS='$bad' still ran the check"
  [ -z "$(ls -A "$tmp")" ] || fail "a refused CHECK_STEPS='$bad' left files in \$TMPDIR"
done
grep -q "names no step" "$out/stdout" || fail "an empty CHECK_STEPS is not named as such"
TMPDIR=$tmp OUT=$out BUILD_DIR=$build CHECK_STEPS=virtual,benchmrk bash "$src/device/check.sh" \
  >"$out/stdout" 2>&1
grep -q "unknown step 'benchmrk'" "$out/stdout" || fail "the unknown step is not named"
rmdir "$tmp"
echo "ok: the check stops after a failed preflight, and fails without a GPU when forced on"
