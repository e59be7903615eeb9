#include "eplb/usecases/plan.h"

#include <string>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "eplb/io/placement_files.h"
#include "eplb/model/slot_preservation.h"

namespace eplb {

Result<PlannedMigration> PlanPlacementChange(const Placement& old_placement,
                                             const Placement& new_placement,
                                             const Topology& topology, const PlanOptions& options) {
  PlannedMigration out;
  EPLB_ASSIGN_OR_RETURN(out.sender_rule, ParseSenderRule(options.sender_rule));
  EPLB_ASSIGN_OR_RETURN(out.schedule, ParseScheduleStrategy(options.schedule));
  if (new_placement.num_slots() != old_placement.num_slots() ||
      new_placement.num_layers() != old_placement.num_layers()) {
    return Status::InvalidArgument(
        fmt::format("{} has {} layers × {} slots but {} has {} × {}; they must match",
                    options.old_name, old_placement.num_layers(), old_placement.num_slots(),
                    options.new_name, new_placement.num_layers(), new_placement.num_slots()));
  }
  out.num_layers = old_placement.num_layers();
  const Placement target = options.preserve_slots
                               ? PreserveSlots(old_placement, new_placement, topology)
                               : new_placement;
  EPLB_ASSIGN_OR_RETURN(out.plans, PlanMigration(old_placement, target, topology, out.sender_rule));
  out.schedules.reserve(out.plans.size());
  for (const LayerPlan& plan : out.plans) {
    const Schedule& s =
        out.schedules.emplace_back(ScheduleTransfers(plan.transfers, topology, out.schedule));
    out.rounds += s.num_rounds();
    out.lower_bound_s += s.lower_bound_s;
    out.makespan_s += s.makespan_s;
    out.transfers += plan.transfers.size();
    out.local_copies += plan.local_copies.size();
    for (LinkClass link : kLinkClasses) out.bytes[link] += s.bytes[link];
    if (options.compare_schedules) {
      for (size_t k = 0; k < out.strategy_makespan_s.size(); ++k) {
        out.strategy_makespan_s[k] +=
            ScheduleTransfers(plan.transfers, topology, static_cast<ScheduleStrategy>(k))
                .makespan_s;
      }
    }
  }
  return out;
}

Result<PlannedMigration> PlanPlacementFiles(const PlanFilesRequest& request) {
  RecordedTopology old_topo, new_topo;
  EPLB_ASSIGN_OR_RETURN(const Placement old_placement,
                        ReadAnyPlacementFile(request.old_path, 0, &old_topo));
  EPLB_ASSIGN_OR_RETURN(
      const Placement new_placement,
      ReadAnyPlacementFile(request.new_path, old_placement.num_experts(), &new_topo));
  // The cluster: from the request, else from the files; where both say, they must agree, since
  // a plan for the wrong cluster routes transfers over the wrong links.
  int gpus = request.gpus, nodes = request.nodes;
  for (const auto& [path, topo] :
       {std::pair{request.old_path, old_topo}, {request.new_path, new_topo}}) {
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
  // The slots per layer are the old file's; the check is every front end's (FromReplicas).
  auto topology = Topology::FromReplicas(old_placement.num_slots(), nodes, gpus, request.links);
  if (!topology.ok()) {
    return topology.status().WithContext(
        fmt::format("--gpus {} --nodes {} for {} ({} slots per layer): ", gpus, nodes,
                    request.old_path, old_placement.num_slots()));
  }
  PlanOptions options = request.options;
  options.old_name = request.old_path;
  options.new_name = request.new_path;
  return PlanPlacementChange(old_placement, new_placement, *topology, options);
}

}  // namespace eplb
