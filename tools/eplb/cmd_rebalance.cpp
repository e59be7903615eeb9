// eplb rebalance: run a policy on a load matrix and print the placement it chooses.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "eplb/formats/load_file.h"
#include "eplb/io/placement_files.h"
#include "eplb/model/metrics.h"
#include "eplb/policy/policy.h"
#include "eplb/usecases/rebalance.h"

namespace eplb::cli {
namespace {

struct RebalanceArgs {
  std::string policy = "deepseek";
  std::string load_path;
  std::string current_path;
  std::string physical_map_path;
  int experts = 0;  // 0: any
  int replicas = 0;
  int groups = 1;
  int nodes = 0;  // 0: not given (one node, where nodes do not change the result)
  int gpus = 0;
  std::string format = "json";
  int layer = -1;                    // table: only this layer; -1 for all
  int first_layer = 0;               // trtllm: the model's layer index of MoE layer 0
  std::vector<std::string> options;  // NAME=VALUE, `eplb policies` lists them
  std::vector<int> lost_ranks;       // GPUs to place around
};

// --format's values: eplb's own two, then the engines' files.
std::vector<std::string> FormatNames() {
  std::vector<std::string> names = {"json", "table"};
  for (const std::string& engine : kEngineFormatNames.List()) names.push_back(engine);
  return names;
}

void PrintTable(const RebalanceArgs& args, const Placement& placement, const Topology& topology,
                const LoadMatrix& gpu_loads, const LoadMatrix& before_loads, bool had_current,
                double elapsed_ms, std::span<const int> lost) {
  fmt::print("policy {}: {} layers, {} experts, {} slots on {} GPUs ({} nodes, {} slots per GPU)\n",
             args.policy, placement.num_layers(), placement.num_experts(), placement.num_slots(),
             topology.num_ranks(), topology.nodes(), topology.slots_per_gpu());
  fmt::print(
      "balancedness {:.4f} (1 is perfect), imbalance ratio {:.4f} (0 is perfect), "
      "policy time {:.3f} ms\n",
      Balancedness(gpu_loads, lost), ImbalanceRatio(gpu_loads, lost), elapsed_ms);
  if (!lost.empty()) {
    fmt::print("lost GPUs {} take no part in the balance: their slots are empty\n",
               fmt::join(lost, ", "));
  }
  fmt::print("before: balancedness {:.4f}, imbalance ratio {:.4f} with {}\n",
             Balancedness(before_loads, lost), ImbalanceRatio(before_loads, lost),
             had_current ? "the current placement"
                         : "vLLM's initial placement (slot s holds expert s % E)");
  for (int layer = 0; layer < placement.num_layers(); ++layer) {
    if (args.layer >= 0 && layer != args.layer) continue;
    const auto row = gpu_loads.row(layer);
    const double mean = row.sum() / static_cast<double>(topology.num_ranks() - lost.size());
    fmt::print("\nlayer {}: balancedness {:.4f}, max GPU load {:.1f}, mean {:.1f}\n", layer,
               mean / std::max(row.maxCoeff(), 1e-300), row.maxCoeff(), mean);
    fmt::print("  {:>4} {:>4} {:>12}  {}\n", "gpu", "node", "load", "experts in slots");
    for (int rank = 0; rank < topology.num_ranks(); ++rank) {
      const auto slots =
          placement.phy2log(layer).subspan(static_cast<size_t>(topology.first_slot_of_rank(rank)),
                                           static_cast<size_t>(topology.slots_per_gpu()));
      fmt::print("  {:>4} {:>4} {:>12.1f}  {}\n", rank, topology.node_of_rank(rank),
                 gpu_loads(layer, rank), fmt::join(slots, " "));
    }
  }
}

Status RunRebalance(const RebalanceArgs& args) {
  // Nodes change where DeepSeek's hierarchical policy packs groups; say so rather than assume.
  if (args.nodes == 0 && args.groups > 1) {
    return Status::InvalidArgument(
        fmt::format("--groups is {} but --nodes is not given; with expert groups the "
                    "hierarchical policies pack groups onto nodes, so give --nodes "
                    "(1 for a single node)",
                    args.groups));
  }
  std::optional<Placement> physical_map;
  if (!args.physical_map_path.empty()) {
    auto read = ReadAnyPlacementFile(args.physical_map_path, args.experts);
    if (!read.ok()) return read.status();
    physical_map = std::move(read).value();
  }
  LoadReadOptions options;
  options.experts = args.experts;
  options.physical_map = physical_map ? &*physical_map : nullptr;
  auto series = ReadLoadSeries(args.load_path, options);
  if (!series.ok()) return series.status();
  auto topology = Topology::FromReplicas(args.replicas, std::max(1, args.nodes), args.gpus);
  if (!topology.ok()) return topology.status();
  std::optional<Placement> current;
  if (!args.current_path.empty()) {
    auto read = ReadAnyPlacementFile(args.current_path, series->experts());
    if (!read.ok()) return read.status();
    current = std::move(read).value();
  }
  if (args.format == kEngineFormatNames.Name(EngineFormat::kTrtllm) && !args.lost_ranks.empty()) {
    // Each format must read back as written, and TensorRT-LLM's file lists an expert in every
    // slot.
    return Status::InvalidArgument(
        "--format trtllm cannot hold --lost-ranks: TensorRT-LLM's "
        "initial_global_assignments has no empty slot; use json, vllm or "
        "sglang");
  }
  RebalanceOptions run;
  run.current = current ? &*current : nullptr;
  run.num_groups = args.groups;
  run.lost_ranks = args.lost_ranks;
  for (const std::string& option : args.options) {
    const size_t eq = option.find('=');
    if (eq == std::string::npos) {
      return Status::InvalidArgument(
          fmt::format("--option is '{}'; expected NAME=VALUE (eplb policies lists them)", option));
    }
    run.policy_options.emplace_back(option.substr(0, eq), option.substr(eq + 1));
  }
  auto rebalanced = RebalanceRecordedLoad(args.policy, *series, *topology, run);
  if (!rebalanced.ok()) return rebalanced.status();
  const LoadMatrix* load = &rebalanced->window;
  const Placement* placement = &rebalanced->placement;
  const double elapsed_ms = rebalanced->policy_ms;
  std::vector<int> lost = args.lost_ranks;
  std::sort(lost.begin(), lost.end());

  const LoadMatrix gpu_loads = GpuLoads(*load, *placement, *topology);
  if (const auto format = kEngineFormatNames.Find(args.format)) {
    fmt::print("{}", EnginePlacementFile(*format, *placement, args.first_layer));
    return Status::Ok();
  }
  if (args.format == "table") {
    if (args.layer >= placement->num_layers()) {
      return Status::InvalidArgument(fmt::format("--layer is {}; the load has layers 0..{}",
                                                 args.layer, placement->num_layers() - 1));
    }
    const Placement before =
        current ? *current
                : *Placement::Initial(placement->num_layers(), placement->num_experts(),
                                      placement->num_slots());
    PrintTable(args, *placement, *topology, gpu_loads, GpuLoads(*load, before, *topology, lost),
               current.has_value(), elapsed_ms, lost);
    return Status::Ok();
  }
  // The placement's arrays are written as text (io/placement_files.h); the scalars through
  // nlohmann, so that every number reads as its dump() writes it.
  std::string out = "{\"policy\":" + nlohmann::json(args.policy).dump() + ",";
  AppendPlacementJsonMembers(out, *placement, {topology->num_ranks(), topology->nodes()});
  out += ",\"balancedness\":" + nlohmann::json(Balancedness(gpu_loads)).dump();
  out += ",\"imbalance_ratio\":" + nlohmann::json(ImbalanceRatio(gpu_loads)).dump();
  out += ",\"elapsed_ms\":" + nlohmann::json(elapsed_ms).dump() + "}\n";
  fmt::print("{}", out);
  return Status::Ok();
}

}  // namespace

void AddRebalanceCommand(CommandLine& line) {
  auto args = std::make_shared<RebalanceArgs>();
  Command& sub = line.Add("rebalance",
                          "Run a rebalancing policy on a load matrix and print the new placement");
  sub.Option("--policy", &args->policy, "Policy name (eplb policies lists them)").ShowDefault();
  sub.Option("--option", &args->options,
             "A policy option NAME=VALUE (repeatable; eplb policies lists each policy's)");
  sub.Option("--load", &args->load_path,
             "Recorded load: CSV (a line per layer, or long step,layer,expert,tokens), JSON "
             "([layer][expert] or [step][layer][expert], or under 'load', 'logical_count', "
             "'steps'), an SGLang or vLLM .pt dump, or TensorRT-LLM's statistics folder; "
             "steps reach time-aware policies as chunks")
      .Required();
  sub.Option("--experts", &args->experts,
             "Logical experts of the model: a load of another width is refused")
      .Check(Positive());
  sub.Option("--physical-map", &args->physical_map_path,
             "The load counts physical slots (vLLM's windows): fold them to logical experts "
             "through this placement (JSON with 'phy2log' or 'physical_to_logical_map')");
  sub.Option("--replicas", &args->replicas,
             "Physical expert slots per layer (a multiple of --gpus)")
      .Required();
  sub.Option("--groups", &args->groups, "Expert groups of the model").ShowDefault();
  sub.Option("--nodes", &args->nodes,
             "Nodes (required with --groups > 1, where it changes the placement; 1 otherwise)")
      .Check(Positive());
  sub.Option("--gpus", &args->gpus, "GPUs in all (a multiple of --nodes)").Required();
  sub.Option("--current", &args->current_path, "Placement in force (JSON with 'phy2log')");
  sub.Option("--lost-ranks", &args->lost_ranks,
             "GPUs lost or drained, e.g. 3,5: their slots stay empty (deepseek, "
             "replicate-lpt, timeseries and fault-tolerant place around them)")
      .SplitOn(',');
  sub.Option("--format", &args->format,
             "Output format: json (eplb's placement file), table, or an engine's own file: "
             "sglang (for --init-expert-location), vllm (its EPLB state's maps), trtllm "
             "(moe_load_balancer.yaml)")
      .Check(OneOf(FormatNames()))
      .ShowDefault();
  sub.Option("--layer", &args->layer, "With --format table: show only this layer")
      .Check(AtLeast(0));
  sub.Option("--first-layer", &args->first_layer,
             "With --format trtllm: the model's layer index of the first MoE layer (3 for "
             "DeepSeek-V3/R1, whose first three layers are dense)")
      .Check(AtLeast(0))
      .ShowDefault();
  sub.SetAction([args] { return RunRebalance(*args); });
}

}  // namespace eplb::cli
