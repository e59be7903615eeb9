#!/usr/bin/env bash
# device/check.sh on a machine without a GPU: the preflight and the packing run, and every GPU
# step is a failure of the check, never a pass (a skipped GPU test counts as failed).
# Usage: device_check_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
if nvidia-smi -L >/dev/null 2>&1; then
  echo "a GPU is here: device/check.sh itself is the test"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
OUT=$out BUILD_DIR=$build CHECK_BUDGET_S=240 bash "$src/device/check.sh" >"$out/stdout" 2>&1
rc=$?
fail() { echo "FAIL: $*"; cat "$out/stdout"; exit 1; }
[ $rc -ne 0 ] || fail "the check passed without a GPU"
[ -s "$out/summary.txt" ] || fail "no summary.txt"
grep -q "^GPU  *FAILED: no GPU" "$out/summary.txt" || fail "the summary does not say there is no GPU"
grep -q "^GPU tests, virtual ranks  *FAILED: .* skipped" "$out/summary.txt" ||
  fail "skipped GPU tests were not counted as a failure"
grep -q "^check: FAILED" "$out/summary.txt" || fail "the summary's verdict is not FAILED"
# Benchmarks that stop (no GPU) print their names and exit 0: they must still fail the step.
grep -Eq "^device benchmark +FAILED: [1-9][0-9]* stopped" "$out/summary.txt" ||
  fail "stopped benchmarks were not counted as a failure"
# Listed to a file first: with pipefail, grep -q ending early would fail tar with SIGPIPE.
tar -tzf "$out/check.tar.gz" >"$out/listing" || fail "the archive cannot be read"
grep -q "check/virtual-tests.log" "$out/listing" || fail "the archive lacks the logs"
[ "$(ls "$out" | grep -cv -e stdout -e listing)" -eq 2 ] ||
  fail "more than summary.txt and check.tar.gz in \$OUT"
echo "ok: the check fails without a GPU, with its table and archive"
