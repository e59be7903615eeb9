// eplb: expert-parallel load balancing toolkit. See README.md.
//
// The front end. Commands that need only the core (rebalance, plan) run here; the others run in
// an executable of their part, beside this one, so that `eplb --version` or `eplb rebalance`
// never loads SimGrid, CUDA, NCCL or MPI (the dynamic loader's work for those libraries was most
// of such a process's time). `eplb run ...` replaces this process with `eplb-sim run ...` —
// same arguments, same output, same exit code. A part that was not built has no executable, and
// the command says which part is missing and why.
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "cli_util.h"
#include "commands.h"

namespace {

namespace fs = std::filesystem;
using eplb::Status;
namespace cli = eplb::cli;

// One row per command: where it runs and what the build needs for it.
struct Runner {
  std::string_view command;
  std::string_view executable;  // empty: in this process
  std::string_view about;       // for --help
  std::string_view missing;     // why the executable may be absent
};

constexpr std::string_view kNoSim =
    "this eplb was built without the SimGrid simulator (SimGrid >= 3.32 was not found at build "
    "time; install libsimgrid-dev and rebuild)";
constexpr std::string_view kNoDevice =
    "this eplb was built without the GPU backend (no CUDA compiler was found at build time; "
    "install CUDA under /usr/local/cuda and rebuild)";
constexpr std::string_view kNoValidate =
    "this eplb was built without the GPU backend or the SimGrid simulator, which validate both "
    "needs (CUDA under /usr/local/cuda and libsimgrid-dev; rebuild with both)";

constexpr std::array<Runner, 9> kRunners = {{
    {"rebalance", "", "", ""},
    {"a2a", "", "", ""},
    {"plan", "", "", ""},
    {"policies", "", "", ""},
    {cli::kRunName, "eplb-sim", cli::kRunAbout, kNoSim},
    {cli::kCompareName, "eplb-sim", cli::kCompareAbout, kNoSim},
    {cli::kSweepName, "eplb-sim", cli::kSweepAbout, kNoSim},
    {cli::kDeviceRunName, "eplb-device", cli::kDeviceRunAbout, kNoDevice},
    {cli::kValidateName, "eplb-validate", cli::kValidateAbout, kNoValidate},
}};

// The part's executable: beside this one (the build tree), or in ../libexec/eplb (an install).
std::string FindExecutable(std::string_view name) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const fs::path& dir : {self.parent_path(), self.parent_path() / "../libexec/eplb"}) {
    const fs::path candidate = dir / name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

[[noreturn]] void Dispatch(const Runner& runner, char** argv) {
  const std::string path = FindExecutable(runner.executable);
  const std::string command(runner.command);
  if (path.empty()) {
    std::_Exit(eplb::cli::ReportError(command, Status::Unavailable(std::string(runner.missing))));
  }
  execv(path.c_str(), argv);
  std::_Exit(eplb::cli::ReportError(
      command,
      Status::Unavailable(fmt::format("cannot start {}: {}", path, std::strerror(errno)))));
}

// `validate --published` needs only the core: it runs here, with or without the GPU part.
bool IsPublishedValidation(int argc, char** argv) {
  if (argc < 2 || std::string_view(argv[1]) != cli::kValidateName) return false;
  for (int i = 2; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--published") return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const bool published = IsPublishedValidation(argc, argv);
  if (argc >= 2 && !published) {
    for (const Runner& r : kRunners) {
      if (!r.executable.empty() && argv[1] == r.command) Dispatch(r, argv);
    }
  }
  cli::CommandLine line;
  for (cli::AddCommand add : {cli::AddRebalanceCommand, cli::AddPlanCommand,
                              cli::AddPoliciesCommand, cli::AddA2aCommand}) {
    add(line);
  }
  if (published) cli::AddPublishedCommand(line);
  // The other parts' commands, listed in --help; they never get here (Dispatch).
  for (const Runner& r : kRunners) {
    if (r.executable.empty() || (published && r.command == cli::kValidateName)) continue;
    line.Add(std::string(r.command), std::string(r.about));
  }
  return line.Run(argc, argv);
}
