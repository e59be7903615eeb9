#!/usr/bin/python3
"""The one-GPU model's calibration file (sim/one_gpu.h) from bench_device's JSON output.

    eplb_bench_device --benchmark_out=bench.json --benchmark_out_format=json
    tools/bench/one_gpu_calibration.py bench.json > one_gpu.json
    eplb validate --virtual --calibration one_gpu.json ...

Each number is a measurement of the device's own, taken from the benchmark that isolates it,
never fitted to the layer times `validate` predicts:

  start_us        BM_LayerMigration start_ms: Rearranger::Start (planning, a stream sync per
                  rank, one anchor event per GPU, waking the workers)
  commit_us       BM_LayerMigration committed_ms: from the layer staged on every rank to it
                  committed, the host's part (the drain of the local copies after it is the
                  model's local copies, priced apart); from an older benchmark without it,
                  commit_ms (the drain included), saying so
  copy_gbps       BM_MigrationCopies bytes_per_second: the layer's copies issued together with
                  nothing between them, the rate all the ranks' copies share
  step_read_gbps  BM_StepSlowdown idle_read_GBps: the HBM read rate of the emulated steps

validate measures the rest itself on the same GPU (stream_gbps, local_copy_gbps, round_us) and
takes from the file what it gives. A benchmark that stopped or is missing leaves its keys out,
named on stderr.
"""

import json
import sys

# key: (benchmark name prefix, counter, factor to the key's unit)
SOURCES = {
    "start_us": ("BM_LayerMigration", "start_ms", 1e3),
    "commit_us": ("BM_LayerMigration", "committed_ms", 1e3),
    "copy_gbps": ("BM_MigrationCopies", "bytes_per_second", 1e-9),
    "step_read_gbps": ("BM_StepSlowdown", "idle_read_GBps", 1.0),
}


def calibration(bench):
    """(the calibration dict, notes: the keys left out with why, and fallbacks)."""
    out, missing = {}, []
    runs = bench.get("benchmarks", []) if isinstance(bench, dict) else []
    for key, (prefix, counter, factor) in SOURCES.items():
        run = next((b for b in runs if isinstance(b, dict)
                    and str(b.get("name", "")).startswith(prefix)
                    and not b.get("error_occurred")), None)
        if run is None:
            missing.append(f"left out {key}: no {prefix} result")
            continue
        value = run.get(counter)
        if key == "commit_us" and value is None and "commit_ms" in run:
            value = run["commit_ms"]
            missing.append("commit_us: BM_LayerMigration has no committed_ms (an older "
                           "benchmark): commit_ms instead, the local copies' drain included")
        if not isinstance(value, (int, float)) or not value >= 0:
            missing.append(f"left out {key}: {prefix} has no {counter} (got {value!r})")
            continue
        out[key] = value * factor
    return out, missing


def main(argv):
    if len(argv) != 2:
        print("usage: one_gpu_calibration.py BENCH_JSON", file=sys.stderr)
        return 2
    try:
        with open(argv[1]) as f:
            bench = json.load(f)
    except (OSError, ValueError) as e:
        print(f"one_gpu_calibration.py: {argv[1]}: {e}", file=sys.stderr)
        return 1
    out, missing = calibration(bench)
    for m in missing:
        print(f"one_gpu_calibration.py: {argv[1]}: {m}", file=sys.stderr)
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
