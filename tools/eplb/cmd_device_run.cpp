// eplb device-run: run a scenario's rearrangements on real GPUs and write a run folder.
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli_util.h"
#include "commands.h"
#include "device_args.h"
#include "device_run.h"
#include "eplb/base/file_io.h"
#include "eplb/io/output_folders.h"
#include "eplb/io/run_folder.h"
#include "mpi_session.h"

namespace eplb::cli {
namespace {

Status RunDeviceRun(const DeviceArgs& a) {
  auto scenario = LoadDeviceScenario(a);
  if (!scenario.ok()) return scenario.status();
  auto options = DeviceOptions(a, *scenario);
  if (!options.ok()) return options.status();
  const std::string dir = a.out.empty() ? "runs/" + scenario->name + "-device" : a.out;
  if (device::mpi::Rank() == 0) {
    if (Status s = CheckOutputFolder(dir, kRunFolderKind); !s.ok()) return s;
  }
  const bool lead = device::mpi::Rank() == 0;  // under MPI, rank 0 reports and writes
  auto run = device::RunOnDevice(*scenario, *options,
                                 lead ? Progress("eplb device-run", *scenario) : nullptr);
  if (!run.ok()) {
    // Under MPI every process reports its own failure: say which.
    return device::mpi::Size() > 1
               ? run.status().WithContext(fmt::format("rank {}: ", device::mpi::Rank()))
               : run.status();
  }
  if (!lead) return Status::Ok();
  if (Status s = WriteRunFolder(dir, *run); !s.ok()) return s;
  fmt::print("  expert bytes   {} on the device\n", run->scenario.model.expert_bytes);
  PrintRunSummary(*run, dir);
  return Status::Ok();
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
