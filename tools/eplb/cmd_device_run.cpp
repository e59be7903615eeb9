// eplb device-run: run a scenario's rearrangements on real GPUs and write a run folder.
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli_util.h"
#include "commands.h"
#include "device_args.h"
#include "device_run.h"
#include "eplb/base/file_io.h"
#include "eplb/io/run_folder.h"
#include "mpi_session.h"

namespace eplb::cli {
namespace {

int RunDeviceRun(const DeviceArgs& a) {
  const std::string cmd = "device-run";
  auto scenario = LoadDeviceScenario(a);
  if (!scenario.ok()) return ReportError(cmd, scenario.status());
  auto options = DeviceOptions(a, *scenario);
  if (!options.ok()) return ReportError(cmd, options.status());
  const std::string dir = a.out.empty() ? "runs/" + scenario->name + "-device" : a.out;
  if (device::mpi::Rank() == 0) {
    if (Status s = CheckOutputFolder(dir, "run"); !s.ok()) return ReportError(cmd, s);
  }
  const bool lead = device::mpi::Rank() == 0;  // under MPI, rank 0 reports and writes
  auto run = device::RunOnDevice(*scenario, *options,
                                 lead ? Progress("eplb device-run", *scenario) : nullptr);
  if (!run.ok()) {
    return ReportError(
        device::mpi::Size() > 1 ? fmt::format("{} (rank {})", cmd, device::mpi::Rank()) : cmd,
        run.status());
  }
  if (!lead) return kExitOk;
  if (const Status s = WriteRunFolder(dir, *run); !s.ok()) return ReportError(cmd, s);
  fmt::print("  expert bytes   {} on the device\n", run->scenario.model.expert_bytes);
  PrintRunSummary(*run, dir);
  return kExitOk;
}

}  // namespace

void AddDeviceRunCommand(CommandLine& line) {
  auto args = std::make_shared<DeviceArgs>();
  Command& sub = line.Add(kDeviceRunName, kDeviceRunAbout);
  AddDeviceOptions(sub, *args, /*allow_mpi=*/true);
  sub.Option("--out", &args->out, "Run folder to write (default: runs/<scenario>-device)");
  sub.Option("--fail-rank", &args->fail_rank,
             "Lose this rank at step --at (a gpu_lost fault): its transfers fail, the "
             "rearrangement in flight is cancelled (NCCL: communicators aborted), recovery "
             "reloads what only it held, and every layer is checked on the GPU")
      .Check(AtLeast(0));
  sub.Option("--at", &args->fail_at, "The step --fail-rank loses its rank at").Check(AtLeast(0));
  sub.SetAction([args] { return RunDeviceRun(*args); });
}

}  // namespace eplb::cli
