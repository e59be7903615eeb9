// The options `device-run` and `validate` share, and what they turn into: the scenario (with
// --ranks applied) and the device run's options. Part of the executables that link the GPU
// backend.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "command.h"
#include "device_run.h"
#include "eplb/base/status.h"
#include "eplb/engine/eplb_loop.h"
#include "eplb/engine/scenario.h"

namespace eplb::cli {

struct DeviceArgs {
  std::string scenario_path;
  std::vector<std::string> overrides;
  std::string out;
  int ranks = 0;
  bool force_virtual = false;
  bool force_nccl = false;
  bool mpi = false;
  int device = 0;
  int64_t expert_bytes = 0;
  double memory_fraction = 0.8;
  double step_scale = 1.0;
  bool no_check = false;
  int steps = 0;  // validate only
  // device-run: lose this rank at step `fail_at` (a gpu_lost fault); −1: none.
  int fail_rank = -1;
  int fail_at = -1;
};

void AddDeviceOptions(Command& sub, DeviceArgs& a, bool allow_mpi);
// The scenario with --set and --ranks applied.
Result<Scenario> LoadDeviceScenario(const DeviceArgs& a);
// Virtual, NCCL or MPI mode and the other device options, from the flags and the GPUs present.
Result<device::DeviceRunOptions> DeviceOptions(const DeviceArgs& a, const Scenario& s);
// Progress lines for a run of `scenario` on stderr (progress.h), prefixed by `command`.
std::function<void(const StepRecord&)> Progress(const std::string& command,
                                                const Scenario& scenario);

}  // namespace eplb::cli
