// eplb a2a: one MoE layer's dispatch and combine on a scenario's cluster, printed as DeepEP's
// benchmarks print theirs (engine/all_to_all.h defines every number), so that the
// communication model can be laid beside their measurements.
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "eplb/engine/all_to_all.h"
#include "eplb/io/run_folder.h"
#include "eplb/io/scenario_file.h"

namespace eplb::cli {
namespace {

struct A2aArgs {
  std::string scenario;
  std::vector<std::string> overrides;
  int tokens = 0;
  std::string mode;
  bool json = false;
};

Status RunA2a(const A2aArgs& a) {
  auto scenario = LoadScenarioOrDefault(a.scenario, a.overrides);
  if (!scenario.ok()) return scenario.status();
  AllToAllMode mode = scenario->compute.all_to_all;
  if (!a.mode.empty()) {
    auto m = ParseAllToAllMode(a.mode);
    if (!m.ok()) {
      return Status::InvalidArgument(
          fmt::format("--mode is '{}'; valid modes: bulk, normal, low-latency", a.mode));
    }
    mode = *m;
  }
  // DeepEP's benchmark sizes: 4,096 tokens per GPU for the normal kernels, 128 for low latency.
  const int tokens = a.tokens > 0 ? a.tokens : (mode == AllToAllMode::kLowLatency ? 128 : 4096);
  auto r = SimulateAllToAll(*scenario, tokens, mode);
  if (!r.ok()) return r.status();
  if (a.json) {
    nlohmann::ordered_json doc = {{"tool", ToolVersion()},
                                  {"scenario", scenario->name},
                                  {"mode", AllToAllModeName(mode)},
                                  {"ranks", r->ranks},
                                  {"nodes", r->nodes},
                                  {"tokens_per_gpu", r->tokens_per_gpu},
                                  {"bottleneck", r->bottleneck},
                                  {"dispatch_us", r->dispatch_s * 1e6},
                                  {"dispatch_gbps", r->dispatch_gbps},
                                  {"dispatch_counted_bytes", r->dispatch_bytes},
                                  {"combine_us", r->combine_s * 1e6},
                                  {"combine_gbps", r->combine_gbps},
                                  {"combine_counted_bytes", r->combine_bytes}};
    fmt::print("{}\n", doc.dump(2));
    return Status::Ok();
  }
  fmt::print("{}: EP{} ({} node{} x {} GPUs), {} tokens per GPU, {} kernels, hidden {}\n",
             scenario->name, r->ranks, r->nodes, r->nodes == 1 ? "" : "s",
             scenario->cluster.gpus_per_node, tokens, AllToAllModeName(mode),
             scenario->model.hidden);
  fmt::print("{:<9} {:>10} {:>12}\n", "phase", "time (us)", "bandwidth");
  fmt::print("{:<9} {:>10.1f} {:>7.1f} GB/s ({})\n", "dispatch", r->dispatch_s * 1e6,
             r->dispatch_gbps, r->bottleneck);
  fmt::print("{:<9} {:>10.1f} {:>7.1f} GB/s ({})\n", "combine", r->combine_s * 1e6, r->combine_gbps,
             r->bottleneck);
  fmt::print(
      "bandwidth: counted bytes / time, as DeepEP prints it ({}: {}); time: one phase of one "
      "layer on idle links\n",
      r->bottleneck,
      mode == AllToAllMode::kLowLatency ? "every token-expert message"
      : r->bottleneck == "NVL"          ? "tokens each GPU receives, its own included"
                                        : "tokens x nodes each reaches, the GPU's own included");
  return Status::Ok();
}

}  // namespace

void AddA2aCommand(CommandLine& line) {
  auto args = std::make_shared<A2aArgs>();
  Command& sub = line.Add(
      "a2a", "Simulate one MoE layer's dispatch and combine, printed as DeepEP reports them");
  AddScenarioOptions(sub, args->scenario, args->overrides);
  sub.Option("--tokens", &args->tokens,
             "Tokens per GPU (default: 4096 for normal and bulk, 128 for low-latency)")
      .Check(Positive());
  sub.Option("--mode", &args->mode,
             "bulk, normal or low-latency (default: the scenario's compute.all_to_all)");
  sub.Flag("--json", &args->json, "Print the result as JSON");
  sub.SetAction([args] { return RunA2a(*args); });
}

}  // namespace eplb::cli
