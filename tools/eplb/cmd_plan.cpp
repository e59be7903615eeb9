// eplb plan: the transfers, local copies and rounds that move one placement to another.
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "eplb/formats/placement_file.h"
#include "eplb/io/placement_files.h"
#include "eplb/migrate/names.h"
#include "eplb/migrate/schedule.h"
#include "eplb/migrate/transfer_plan.h"
#include "eplb/model/slot_preservation.h"

namespace eplb::cli {
namespace {

struct PlanArgs {
  std::string old_path, new_path;
  int gpus = 0;   // 0: as the placement files record it
  int nodes = 0;  // 0: as the placement files record it
  std::string sender_rule = "local";
  std::string schedule = "best";
  int64_t expert_bytes = TopologyConfig{}.expert_bytes;
  double nvlink_gbps = TopologyConfig{}.nvlink.bandwidth_bytes_per_s / 1e9;
  double nic_gbps = TopologyConfig{}.nic.bandwidth_bytes_per_s / 1e9;
  double nvlink_latency_us = TopologyConfig{}.nvlink.latency_s * 1e6;
  double nic_latency_us = TopologyConfig{}.nic.latency_s * 1e6;
  bool preserve_slots = false;
  std::string format = "json";
};

// Totals over layers moved one after another, as the rearranger moves them.
struct Totals {
  int rounds = 0;
  double lower_bound_s = 0, makespan_s = 0;
  PerLink<int64_t> bytes;
  size_t transfers = 0, local_copies = 0;
};

nlohmann::ordered_json LayerJson(const LayerPlan& plan, const Schedule& s) {
  using Json = nlohmann::ordered_json;
  Json transfers = Json::array(), copies = Json::array();
  for (size_t i = 0; i < plan.transfers.size(); ++i) {
    const Transfer& t = plan.transfers[i];
    transfers.push_back({{"expert", t.expert},
                         {"src_rank", t.src_rank},
                         {"src_slot", t.src_slot},
                         {"dst_rank", t.dst_rank},
                         {"dst_slot", t.dst_slot},
                         {"bytes", t.bytes},
                         {"link", LinkClassName(t.link)},
                         {"round", s.round_of_transfer[i]}});
  }
  for (const LocalCopy& c : plan.local_copies) {
    copies.push_back({{"rank", c.rank},
                      {"expert", c.expert},
                      {"src_slot", c.src_slot},
                      {"dst_slot", c.dst_slot},
                      {"after_receive", c.after_receive}});
  }
  return {{"layer", plan.layer},
          {"transfers", std::move(transfers)},
          {"local_copies", std::move(copies)},
          {"bytes", {{"nvlink", s.bytes[LinkClass::kNvlink]}, {"nic", s.bytes[LinkClass::kNic]}}},
          {"rounds", s.num_rounds()},
          {"lower_bound_s", s.lower_bound_s},
          {"makespan_s", s.makespan_s}};
}

Status RunPlan(const PlanArgs& args) {
  RecordedTopology old_topo, new_topo;
  auto old_p = ReadAnyPlacementFile(args.old_path, 0, &old_topo);
  if (!old_p.ok()) return old_p.status();
  auto new_p = ReadAnyPlacementFile(args.new_path, old_p->num_experts(), &new_topo);
  if (!new_p.ok()) return new_p.status();
  // The cluster: from the options, else from the files; where both say, they must agree, since
  // a plan for the wrong cluster routes transfers over the wrong links.
  int gpus = args.gpus, nodes = args.nodes;
  for (const auto& [path, topo] : {std::pair{args.old_path, old_topo}, {args.new_path, new_topo}}) {
    for (const auto& [option, given, recorded] :
         {std::tuple{"--gpus", &gpus, topo.gpus}, {"--nodes", &nodes, topo.nodes}}) {
      if (recorded == 0) continue;
      if (*given != 0 && *given != recorded) {
        return Status::InvalidArgument(fmt::format(
            "{} was made for {} {} but {} is {}; plan it for the "
            "cluster it was made for",
            path, recorded, option == std::string("--gpus") ? "GPUs" : "nodes", option, *given));
      }
      *given = recorded;
    }
  }
  if (gpus == 0 || nodes == 0) {
    return Status::InvalidArgument(
        fmt::format("{} not given and the placement files do not record {}; nodes "
                    "decide which transfers cross NICs, so give them",
                    gpus == 0 ? "--gpus is" : "--nodes is", gpus == 0 ? "num_gpus" : "num_nodes"));
  }
  auto rule = ParseSenderRule(args.sender_rule);
  if (!rule.ok()) return rule.status();
  auto strategy = ParseScheduleStrategy(args.schedule);
  if (!strategy.ok()) return strategy.status();
  TopologyConfig links;
  links.expert_bytes = args.expert_bytes;
  links.nvlink = {args.nvlink_gbps * 1e9, args.nvlink_latency_us * 1e-6};
  links.nic = {args.nic_gbps * 1e9, args.nic_latency_us * 1e-6};
  // The slots per layer are the old file's; the check is every front end's (FromReplicas).
  auto topology = Topology::FromReplicas(old_p->num_slots(), nodes, gpus, links);
  if (!topology.ok()) {
    return topology.status().WithContext(
        fmt::format("--gpus {} --nodes {} for {} ({} slots per layer): ", gpus, nodes,
                    args.old_path, old_p->num_slots()));
  }
  if (new_p->num_slots() != old_p->num_slots() || new_p->num_layers() != old_p->num_layers()) {
    return Status::InvalidArgument(
        fmt::format("{} has {} layers × {} slots but {} has {} × {}; they must match",
                    args.old_path, old_p->num_layers(), old_p->num_slots(), args.new_path,
                    new_p->num_layers(), new_p->num_slots()));
  }
  const Placement target = args.preserve_slots ? PreserveSlots(*old_p, *new_p, *topology) : *new_p;
  auto plans = PlanMigration(*old_p, target, *topology, *rule);
  if (!plans.ok()) return plans.status();

  Totals totals;
  // Every strategy's totals, for the table's comparison.
  double strategy_makespan[3] = {0, 0, 0};
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const LayerPlan& plan : *plans) {
    const Schedule s = ScheduleTransfers(plan.transfers, *topology, *strategy);
    totals.rounds += s.num_rounds();
    totals.lower_bound_s += s.lower_bound_s;
    totals.makespan_s += s.makespan_s;
    totals.transfers += plan.transfers.size();
    totals.local_copies += plan.local_copies.size();
    for (LinkClass link : kLinkClasses) totals.bytes[link] += s.bytes[link];
    if (args.format == "json") {
      layers.push_back(LayerJson(plan, s));
    } else {
      for (int k = 0; k < 3; ++k) {
        strategy_makespan[k] +=
            ScheduleTransfers(plan.transfers, *topology, static_cast<ScheduleStrategy>(k))
                .makespan_s;
      }
    }
  }

  if (args.format == "table") {
    fmt::print(
        "{} of {} layers change: {} transfers ({:.3f} GB over NVLink, {:.3f} GB over NICs), "
        "{} local copies\n",
        plans->size(), old_p->num_layers(), totals.transfers,
        static_cast<double>(totals.bytes[LinkClass::kNvlink]) / 1e9,
        static_cast<double>(totals.bytes[LinkClass::kNic]) / 1e9, totals.local_copies);
    fmt::print(
        "sender rule {}, schedule {}: {} rounds, makespan {:.3f} ms, lower bound {:.3f} ms "
        "({:.3f}x)\n",
        SenderRuleName(*rule), ScheduleStrategyName(*strategy), totals.rounds,
        totals.makespan_s * 1e3, totals.lower_bound_s * 1e3,
        totals.lower_bound_s > 0 ? totals.makespan_s / totals.lower_bound_s : 1.0);
    fmt::print("\n  {:<14} {:>14} {:>10}\n", "schedule", "makespan (ms)", "x bound");
    for (int k = 0; k < 3; ++k) {
      fmt::print("  {:<14} {:>14.3f} {:>10.3f}\n",
                 ScheduleStrategyName(static_cast<ScheduleStrategy>(k)), strategy_makespan[k] * 1e3,
                 totals.lower_bound_s > 0 ? strategy_makespan[k] / totals.lower_bound_s : 1.0);
    }
    return Status::Ok();
  }
  nlohmann::ordered_json out;
  out["sender_rule"] = SenderRuleName(*rule);
  out["schedule"] = ScheduleStrategyName(*strategy);
  out["layers"] = std::move(layers);
  out["bytes"] = {{"nvlink", totals.bytes[LinkClass::kNvlink]},
                  {"nic", totals.bytes[LinkClass::kNic]}};
  out["rounds"] = totals.rounds;
  out["lower_bound_s"] = totals.lower_bound_s;
  out["makespan_s"] = totals.makespan_s;
  fmt::print("{}\n", out.dump());
  return Status::Ok();
}

}  // namespace

void AddPlanCommand(CommandLine& line) {
  auto args = std::make_shared<PlanArgs>();
  Command& sub =
      line.Add("plan", "Plan and schedule the expert transfers that move one placement to another");
  sub.Option("--old", &args->old_path, "Placement in force (JSON with 'phy2log')").Required();
  sub.Option("--new", &args->new_path, "Placement to reach (JSON with 'phy2log')").Required();
  sub.Option("--gpus", &args->gpus,
             "GPUs in all (required unless the placement files record num_gpus)")
      .Check(Positive());
  sub.Option("--nodes", &args->nodes,
             "Nodes (required unless the placement files record num_nodes)")
      .Check(Positive());
  sub.Option("--sender-rule", &args->sender_rule, "Who sends each expert")
      .Check(OneOf(kSenderRuleNames.List()))
      .ShowDefault();
  sub.Option("--schedule", &args->schedule, "How transfers are cut into rounds")
      .Check(OneOf(kScheduleStrategyNames.List()))
      .ShowDefault();
  sub.Option("--expert-bytes", &args->expert_bytes, "Bytes of one expert in one layer")
      .Check(Positive())
      .ShowDefault();
  sub.Option("--nvlink-bw", &args->nvlink_gbps, "NVLink GB/s (10^9 B/s) per direction per GPU")
      .Check(Positive())
      .ShowDefault();
  sub.Option("--nic-bw", &args->nic_gbps, "NIC GB/s (10^9 B/s) per direction per GPU")
      .Check(Positive())
      .ShowDefault();
  sub.Option("--nvlink-latency-us", &args->nvlink_latency_us, "NVLink start-up latency (µs)")
      .Check(AtLeast(0))
      .ShowDefault();
  sub.Option("--nic-latency-us", &args->nic_latency_us, "NIC start-up latency (µs)")
      .Check(AtLeast(0))
      .ShowDefault();
  sub.Flag("--preserve-slots", &args->preserve_slots,
           "Keep experts that stay on a GPU in their old slots (vLLM's preserve_intragpu_slots)");
  sub.Option("--format", &args->format, "Output format")
      .Check(OneOf({"json", "table"}))
      .ShowDefault();
  sub.SetAction([args] { return RunPlan(*args); });
}

}  // namespace eplb::cli
