// Scheduling: cutting a set of transfers into rounds so that links are not oversubscribed, and
// predicting how long they take.
//
// The model: every GPU has, per link class (NVLink, NIC), one send port and one receive port of
// the topology's bandwidth per direction (split duplex: the directions do not interfere).
// Transfers between one (source, destination) pair in one round travel as one flow. Concurrent
// flows share a port max-min fairly; a flow starts after its link's latency.
//
// The rounds of one link class form a lane. A lane's rounds run one after another (each starts
// when the previous one ends on every rank); the NVLink and NIC lanes run side by side, as
// they are separate hardware. So:
//   round duration  latency + the time for its flows to drain under max-min fair sharing
//                   (with one peer per port, simply the longest flow's bytes / bandwidth)
//   makespan        max over lanes of the sum of the lane's round durations
//   lower bound     max over lanes and ports of latency + the port's bytes / bandwidth: no
//                   schedule of these transfers can finish sooner
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "eplb/base/status.h"
#include "eplb/migrate/transfer_plan.h"
#include "eplb/model/topology.h"

namespace eplb {

enum class ScheduleStrategy {
  // vLLM today: every transfer of the layer in one batch; flows share ports.
  kSingleBatch,
  // vLLM's migration batching: whole pair flows in order, each into the first round where its
  // sender is not yet sending and its receiver not yet receiving on that link.
  kGreedyPairs,
  // Ours: a bipartite edge colouring of the expert transfers (König): as many rounds per lane
  // as the busiest port has experts to move, each round one expert per port, so the makespan
  // is the lower bound plus one latency per round.
  kBest,
};
const char* ScheduleStrategyName(ScheduleStrategy strategy);
Result<ScheduleStrategy> ParseScheduleStrategy(std::string_view name);

struct Flow {
  int32_t src_rank = 0;
  int32_t dst_rank = 0;
  int64_t bytes = 0;
  std::vector<int32_t> transfers;  // indices into the scheduled transfers
};

struct Round {
  LinkClass link = LinkClass::kNvlink;
  std::vector<Flow> flows;
  double duration_s = 0;
};

struct Schedule {
  ScheduleStrategy strategy = ScheduleStrategy::kBest;
  std::vector<Round> lanes[kNumLinkClasses];
  PerLink<int64_t> bytes;
  // For each scheduled transfer, its round's index within its lane.
  std::vector<int32_t> round_of_transfer;
  double lower_bound_s = 0;
  double makespan_s = 0;

  int num_rounds() const { return static_cast<int>(lanes[0].size() + lanes[1].size()); }
};

Schedule ScheduleTransfers(std::span<const Transfer> transfers, const Topology& topology,
                           ScheduleStrategy strategy);

// See the header comment: the bound no schedule of `transfers` can beat.
double TransferLowerBound(std::span<const Transfer> transfers, const Topology& topology);

// Predicted duration of one round: the link's latency plus the drain time of `flows` sharing
// their ports max-min fairly.
double RoundDuration(std::span<const Flow> flows, const LinkSpec& link, int num_ranks);

}  // namespace eplb
