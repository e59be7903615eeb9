// eplb plan: the transfers, local copies and rounds that move one placement to another. The
// planning is usecases/plan.h, shared with Python's eplb.plan; this file reads the options and
// prints.
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "eplb/migrate/names.h"
#include "eplb/migrate/schedule.h"
#include "eplb/migrate/transfer_plan.h"
#include "eplb/usecases/plan.h"

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
  PlanFilesRequest request;
  request.old_path = args.old_path;
  request.new_path = args.new_path;
  request.gpus = args.gpus;
  request.nodes = args.nodes;
  request.links.expert_bytes = args.expert_bytes;
  request.links.nvlink = {args.nvlink_gbps * 1e9, args.nvlink_latency_us * 1e-6};
  request.links.nic = {args.nic_gbps * 1e9, args.nic_latency_us * 1e-6};
  request.options.sender_rule = args.sender_rule;
  request.options.schedule = args.schedule;
  request.options.preserve_slots = args.preserve_slots;
  request.options.compare_schedules = args.format == "table";
  // The planner's own messages say "expert bytes": named here as the option that set them.
  auto planned = PlanPlacementFiles(request);
  if (!planned.ok() && planned.status().message().find("expert bytes") != std::string::npos) {
    return planned.status().WithContext(fmt::format("--expert-bytes {}: ", args.expert_bytes));
  }
  EPLB_ASSIGN_OR_RETURN(const PlannedMigration m, std::move(planned));

  if (args.format == "table") {
    fmt::print(
        "{} of {} layers change: {} transfers ({:.3f} GB over NVLink, {:.3f} GB over NICs), "
        "{} local copies\n",
        m.plans.size(), m.num_layers, m.transfers,
        static_cast<double>(m.bytes[LinkClass::kNvlink]) / 1e9,
        static_cast<double>(m.bytes[LinkClass::kNic]) / 1e9, m.local_copies);
    fmt::print(
        "sender rule {}, schedule {}: {} rounds, makespan {:.3f} ms, lower bound {:.3f} ms "
        "({:.3f}x)\n",
        SenderRuleName(m.sender_rule), ScheduleStrategyName(m.schedule), m.rounds,
        m.makespan_s * 1e3, m.lower_bound_s * 1e3,
        m.lower_bound_s > 0 ? m.makespan_s / m.lower_bound_s : 1.0);
    fmt::print("\n  {:<14} {:>14} {:>10}\n", "schedule", "makespan (ms)", "x bound");
    for (size_t k = 0; k < m.strategy_makespan_s.size(); ++k) {
      fmt::print("  {:<14} {:>14.3f} {:>10.3f}\n",
                 ScheduleStrategyName(static_cast<ScheduleStrategy>(k)),
                 m.strategy_makespan_s[k] * 1e3,
                 m.lower_bound_s > 0 ? m.strategy_makespan_s[k] / m.lower_bound_s : 1.0);
    }
    return Status::Ok();
  }
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (size_t i = 0; i < m.plans.size(); ++i)
    layers.push_back(LayerJson(m.plans[i], m.schedules[i]));
  nlohmann::ordered_json out;
  out["sender_rule"] = SenderRuleName(m.sender_rule);
  out["schedule"] = ScheduleStrategyName(m.schedule);
  out["layers"] = std::move(layers);
  out["bytes"] = {{"nvlink", m.bytes[LinkClass::kNvlink]}, {"nic", m.bytes[LinkClass::kNic]}};
  out["rounds"] = m.rounds;
  out["lower_bound_s"] = m.lower_bound_s;
  out["makespan_s"] = m.makespan_s;
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
