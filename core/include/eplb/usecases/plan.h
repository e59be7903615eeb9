// The transfers, local copies and rounds that move one placement to another: the use case
// behind `eplb plan` and the Python module's eplb.plan, defined once so that the two front ends
// cannot drift. Each front end keeps only how it reads its input and prints its output.
//
// PlanPlacementChange takes the placements in memory (Python hands arrays); PlanPlacementFiles
// reads them from placement files first and takes the cluster from the options or, where the
// options leave it out, from what the files record (the command line).
//
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/migrate/schedule.h"
#include "eplb/migrate/transfer_plan.h"
#include "eplb/model/placement.h"
#include "eplb/model/topology.h"

namespace eplb {

// The union of the two front ends' options.
struct PlanOptions {
  std::string sender_rule = "local";  // ParseSenderRule's names
  std::string schedule = "best";      // ParseScheduleStrategy's names
  // Keep experts that stay on a GPU in their old slots (vLLM's preserve_intragpu_slots);
  // the command line's --preserve-slots, off in Python.
  bool preserve_slots = false;
  // Also schedule every layer with every strategy (PlannedMigration::strategy_makespan_s), for
  // the command line's table.
  bool compare_schedules = false;
  // How errors name the two placements (file paths on the command line).
  std::string old_name = "old";
  std::string new_name = "new";
};

struct PlannedMigration {
  SenderRule sender_rule = SenderRule::kLocal;
  ScheduleStrategy schedule = ScheduleStrategy::kBest;
  int num_layers = 0;               // layers in each placement, changed or not
  std::vector<LayerPlan> plans;     // one per changed layer
  std::vector<Schedule> schedules;  // plans[i]'s schedule under `schedule`
  // Totals over the layers moved one after another, as the rearranger moves them.
  int rounds = 0;
  double lower_bound_s = 0, makespan_s = 0;
  PerLink<int64_t> bytes;
  size_t transfers = 0, local_copies = 0;
  // Indexed by ScheduleStrategy: the summed makespan under each; zero unless
  // PlanOptions::compare_schedules.
  std::array<double, 3> strategy_makespan_s{};
};

// Errors: an unknown sender rule or schedule, placements of different shapes (named as
// options.old_name and options.new_name say), and whatever PlanMigration refuses.
Result<PlannedMigration> PlanPlacementChange(const Placement& old_placement,
                                             const Placement& new_placement,
                                             const Topology& topology,
                                             const PlanOptions& options = {});

struct PlanFilesRequest {
  std::string old_path, new_path;  // any placement file ReadAnyPlacementFile reads
  int gpus = 0;                    // 0: as the files record it
  int nodes = 0;                   // 0: as the files record it
  TopologyConfig links;            // expert bytes and the links
  PlanOptions options;             // old_name and new_name are replaced by the paths
};

// Errors, besides PlanPlacementChange's: a file that cannot be read, gpus or nodes that
// disagree with what a file records (named as the command line's --gpus and --nodes), a cluster
// neither given nor recorded, and a cluster that cannot hold the old file's slots.
Result<PlannedMigration> PlanPlacementFiles(const PlanFilesRequest& request);

}  // namespace eplb
