// An embedder running a scenario through an installed eplb, with one header of each public area
// (cmake/install.cmake): the scenario file, a workload, the EPLB loop on the host backend with
// the embedder's own step runner, the run folder written and read back, and the run's last
// placement checked by the model's metrics and written as a placement file. Exits 0 when every
// step ran, the weights moved are right and the folder reads back; prints why otherwise.
// Usage: runs_scenario SCENARIO.yaml WORK_DIR
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "eplb/base/status.h"
#include "eplb/engine/run_loop.h"
#include "eplb/engine/workload.h"
#include "eplb/io/placement_files.h"
#include "eplb/io/run_folder.h"
#include "eplb/io/scenario_file.h"
#include "eplb/migrate/host_backend.h"
#include "eplb/migrate/rearranger.h"
#include "eplb/model/metrics.h"
#include "eplb/policy/policy.h"

namespace {

// The embedder's inference: here, steps that take no time.
class InstantSteps final : public eplb::StepRunner {
 public:
  eplb::Status RunStep(const eplb::StepCost& /*cost*/, bool /*contended*/) override {
    return eplb::Status::Ok();
  }
};

int Fail(const std::string& what, const eplb::Status& status) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), status.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: runs_scenario SCENARIO.yaml WORK_DIR\n");
    return 2;
  }
  const std::string work = argv[2];
  // 120 steps: the first rearrangement comes at step 75 (a quarter interval early).
  auto scenario = eplb::LoadScenarioFile(argv[1], {"run.steps=120"});
  if (!scenario.ok()) return Fail("scenario", scenario.status());
  if (auto policy = eplb::MakePolicy(scenario->eplb.policy); !policy.ok()) {
    return Fail("policy", policy.status());
  }
  auto workload = eplb::MakeWorkload(*scenario);
  if (!workload.ok()) return Fail("workload", workload.status());
  eplb::HostBackend backend(scenario->topology(), scenario->model.layers, scenario->model.layers,
                            /*expert_bytes=*/4096);
  InstantSteps steps;
  eplb::Status verified = eplb::Status::Ok();
  std::optional<eplb::Placement> last;
  eplb::RunHooks hooks;
  hooks.before = [&](eplb::EplbLoop& loop) {
    backend.Fill(loop.placement());
    return eplb::Status::Ok();
  };
  hooks.after = [&](eplb::EplbLoop& loop) {
    verified = backend.Verify(loop.placement());
    last = loop.placement();
    return eplb::Status::Ok();
  };
  auto run = eplb::RunLoop(*scenario, **workload, backend, steps, "host", hooks);
  if (!run.ok()) return Fail("run", run.status());
  if (!verified.ok()) return Fail("weights", verified);
  if (run->steps.size() != 120 || run->rearrangements.empty()) {
    std::fprintf(stderr, "run: %zu steps, %zu rearrangements\n", run->steps.size(),
                 run->rearrangements.size());
    return 1;
  }

  const std::string folder = work + "/run";
  eplb::RunFolderOptions options;
  options.trace = false;
  if (auto s = eplb::WriteRunFolder(folder, *run, options); !s.ok()) return Fail("write", s);
  auto back = eplb::ReadRunFolder(folder);
  if (!back.ok()) return Fail("read", back.status());

  // The last placement as a placement file and back, and its balance on an even load.
  std::string json = "{";
  eplb::AppendPlacementJsonMembers(json, *last);
  json += "}";
  auto parsed = eplb::ParsePlacementJson(json, "placement.json", last->num_experts());
  if (!parsed.ok()) return Fail("placement", parsed.status());
  for (int l = 0; l < last->num_layers(); ++l) {
    const auto a = last->phy2log(l), b = parsed->phy2log(l);
    if (!std::equal(a.begin(), a.end(), b.begin(), b.end())) {
      std::fprintf(stderr, "placement: layer %d differs when read back\n", l);
      return 1;
    }
  }
  eplb::LoadMatrix even = eplb::LoadMatrix::Ones(last->num_layers(), last->num_experts());
  const double balance = eplb::Balancedness(eplb::GpuLoads(even, *last, scenario->topology()));
  if (!(balance > 0 && balance <= 1)) {
    std::fprintf(stderr, "metrics: balancedness %g\n", balance);
    return 1;
  }

  std::printf("%zu steps, %zu rearrangements read back; an even load's balancedness %.3f\n",
              back->run.steps.size(), back->run.rearrangements.size(), balance);
  return 0;
}
