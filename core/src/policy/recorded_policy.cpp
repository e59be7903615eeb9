#include "eplb/policy/recorded_policy.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "eplb/base/excerpt.h"
#include "eplb/base/file_io.h"
#include "eplb/policy/external_policy.h"

namespace eplb {
namespace {

// The registered recording's entry called `name`, or none.
std::optional<PolicyInfo> FindRecordingPolicy(std::string_view name) {
  std::optional<PolicyInfo> p = FindPolicy(name);
  if (!p || p->placeholder || p->source != PolicySource::kRecording) return std::nullopt;
  return p;
}

// What an entry's step means, for the errors about steps.
constexpr const char* kStepMeaning =
    "a placement's step is the step after which the rearrangement to it starts (0 to the run's "
    "last step), or -1 for the placement the run starts from";

}  // namespace

Result<std::pair<std::string, std::string>> ParsePolicyReplay(std::string_view text) {
  std::string name(kRecordedPolicyName);
  std::string file(text);
  const size_t eq = text.find('=');
  if (eq != std::string_view::npos && eq > 0 && eq + 1 < text.size()) {
    const std::string_view head = text.substr(0, eq);
    const bool word = std::all_of(head.begin(), head.end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.' ||
             ch == '+';
    });
    if (word) {
      EPLB_RETURN_IF_ERROR(CheckPolicyName(head, "--policy-replay"));
      name = std::string(head);
      file = std::string(text.substr(eq + 1));
    }
  }
  if (file.find_first_not_of(" \t") == std::string::npos) {
    return Status::InvalidArgument(
        "--policy-replay is empty; give the recorded placements' file or run folder, e.g. "
        "--policy-replay placements.jsonl or --policy-replay 'prod=runs/tiny'");
  }
  return std::pair{name, file};
}

PolicyInfo RecordedPolicyInfo(const Recording& recording) {
  auto shared = std::make_shared<const Recording>(recording);
  PolicyInfo info{recording.name,
                  "placements replayed from " + recording.path,
                  [shared] { return std::make_unique<RecordedPolicy>(*shared); },
                  {},
                  /*honours_lost_ranks=*/true};  // its placements are checked for it
  info.source = PolicySource::kRecording;
  info.given = recording.path;
  info.listed = info.name != kRecordedPolicyName;
  return info;
}

Status RegisterRecordedPolicy(const Recording& recording) {
  return RegisterGivenPolicy(RecordedPolicyInfo(recording), "--policy-replay");
}

std::string RecordedPolicyPathFor(std::string_view name) {
  const std::optional<PolicyInfo> p = FindRecordingPolicy(name);
  return p ? p->given : std::string();
}

std::string RecordedPolicyNote(std::string_view name) {
  const std::optional<PolicyInfo> r = FindRecordingPolicy(name);
  if (!r) return {};
  std::string path;  // a line break would end the comment
  for (const char c : r->given) {
    const auto byte = static_cast<unsigned char>(c);
    path += byte < 0x20 || byte == 0x7f ? fmt::format("\\x{:02x}", byte) : std::string(1, c);
  }
  return "placements replayed from a file, read only when given again: --policy-replay '" +
         (name == kRecordedPolicyName ? "" : std::string(name) + "=") + path + "'";
}

Status CheckRecordedPolicyGiven(std::string_view name) {
  if (name != kRecordedPolicyName || FindRecordingPolicy(name)) return Status::Ok();
  return Status::InvalidArgument(
      "eplb.policy is 'recorded': placements replayed from a file, which a scenario or run "
      "folder never names (the file is in scenario.yaml's comment, for the record); give it "
      "again: --policy-replay FILE on eplb run, compare or sweep, or eplb.recorded(FILE) in "
      "Python");
}

Result<std::vector<Placement>> CheckRecording(const Recording& recording, const Topology& topology,
                                              int layers, int experts, int steps,
                                              std::span<const int> idle_ranks) {
  if (recording.entries.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: no placements recorded; give at least one", recording.path));
  }
  const int slots = topology.num_slots();
  const int per_gpu = topology.slots_per_gpu();
  // The same slots over another cluster are another placement: a slot's GPU is its index over
  // slots per GPU, so 20 slots on 5 GPUs replayed on 4 would put every expert elsewhere.
  if ((recording.gpus > 0 && recording.gpus != topology.num_ranks()) ||
      (recording.nodes > 0 && recording.nodes != topology.nodes())) {
    return Status::InvalidArgument(fmt::format(
        "{}: recorded for {} GPUs on {} nodes; the scenario has {} GPUs on {} nodes "
        "(cluster.nodes × cluster.gpus_per_node): replay it on the cluster it was made for",
        recording.path, recording.gpus > 0 ? fmt::format("{}", recording.gpus) : "?",
        recording.nodes > 0 ? fmt::format("{}", recording.nodes) : "?", topology.num_ranks(),
        topology.nodes()));
  }
  std::vector<Placement> out;
  out.reserve(recording.entries.size());
  for (size_t i = 0; i < recording.entries.size(); ++i) {
    const RecordedEntry& e = recording.entries[i];
    if (e.step < -1 || e.step >= steps) {
      return Status::InvalidArgument(
          fmt::format("{}: step {} is {} the run's {} steps (run.steps); {}", e.where, e.step,
                      e.step < -1 ? "before" : "beyond", steps, kStepMeaning));
    }
    if (i > 0) {
      const RecordedEntry& before = recording.entries[i - 1];
      // Two at one step only where a run folder's fault asked for one before the interval's.
      const bool same_ok = e.step == before.step && !before.triggered && e.triggered;
      if (e.step < before.step || (e.step == before.step && !same_ok)) {
        return Status::InvalidArgument(fmt::format(
            "{}: step {} comes after step {} ({}); steps must increase, one placement per step",
            e.where, e.step, before.step, before.where));
      }
    }
    if (static_cast<int>(e.phy2log.size()) != layers) {
      return Status::InvalidArgument(
          fmt::format("{}: the placement has {} layers; the scenario's model has {} (model.layers)",
                      e.where, e.phy2log.size(), layers));
    }
    std::vector<int32_t> flat;
    flat.reserve(static_cast<size_t>(layers) * static_cast<size_t>(slots));
    for (int l = 0; l < layers; ++l) {
      const std::vector<int32_t>& row = e.phy2log[static_cast<size_t>(l)];
      if (static_cast<int>(row.size()) != slots) {
        return Status::InvalidArgument(
            fmt::format("{}: layer {} has {} slots; the scenario has {} ({} GPUs × {} slots: "
                        "model.experts {} + eplb.num_redundant_experts {})",
                        e.where, l, row.size(), slots, topology.num_ranks(), per_gpu, experts,
                        slots - experts));
      }
      flat.insert(flat.end(), row.begin(), row.end());
    }
    auto placement = Placement::Create(experts, slots, std::move(flat));
    if (!placement.ok()) {
      return placement.status().WithContext(
          fmt::format("{}: not a placement for the scenario's {} experts: ", e.where, experts));
    }
    if (e.step < 0) {
      for (const int rank : idle_ranks) {
        for (int l = 0; l < layers; ++l) {
          for (int s = rank * per_gpu; s < (rank + 1) * per_gpu; ++s) {
            if (placement->phy2log(l)[static_cast<size_t>(s)] != kEmptySlot) {
              return Status::InvalidArgument(fmt::format(
                  "{}: the initial placement puts expert {} in slot {} of layer {}, on GPU {}, "
                  "which does not serve at the start (cluster.initial_gpus): its slots must be "
                  "empty (-1)",
                  e.where, placement->phy2log(l)[static_cast<size_t>(s)], s, l, rank));
            }
          }
        }
      }
    }
    out.push_back(std::move(placement).value());
  }
  return out;
}

Status CheckRecordedPolicy(std::string_view name, const Topology& topology, int layers, int experts,
                           int steps, std::span<const int> idle_ranks) {
  if (!FindRecordingPolicy(name)) return Status::Ok();
  EPLB_ASSIGN_OR_RETURN(const std::unique_ptr<Policy> policy, MakePolicy(name));
  auto* replay = dynamic_cast<SchedulingPolicy*>(policy.get());
  if (replay == nullptr) return Status::Ok();
  return replay->Schedule(topology, layers, experts, steps, idle_ranks).status();
}

RecordedPolicy::RecordedPolicy(Recording recording)
    : name_(recording.name), recording_(std::move(recording)) {}

Result<RecordedSchedule> RecordedPolicy::Schedule(const Topology& topology, int layers, int experts,
                                                  int steps, std::span<const int> idle_ranks) {
  EPLB_RETURN_IF_ERROR(CheckRecordedPolicyGiven(name_));
  EPLB_ASSIGN_OR_RETURN(placements_,
                        CheckRecording(recording_, topology, layers, experts, steps, idle_ranks));
  next_ = 0;
  RecordedSchedule schedule;
  schedule.replays = true;
  for (size_t i = 0; i < recording_.entries.size(); ++i) {
    const RecordedEntry& e = recording_.entries[i];
    if (e.step < 0) {
      schedule.initial = placements_[i];
      next_ = i + 1;
    } else if (e.triggered) {
      schedule.steps.push_back(e.step);
    }
  }
  return schedule;
}

Result<Placement> RecordedPolicy::Rebalance(const PolicyInput& input) {
  EPLB_RETURN_IF_ERROR(ValidatePolicyInput(input, /*honour_lost_ranks=*/true));
  const Topology& t = input.topology;
  const int layers = static_cast<int>(input.load.rows());
  if (placements_.empty()) {
    // Outside a run (no Schedule call): every entry is checked now, against this input.
    EPLB_ASSIGN_OR_RETURN(placements_,
                          CheckRecording(recording_, t, layers, static_cast<int>(input.load.cols()),
                                         std::max(input.step + 1, 1)));
    next_ = 0;
  }
  const auto& entries = recording_.entries;
  // Entries due while a rearrangement was in flight were skipped by the loop (and counted).
  while (next_ < entries.size() && entries[next_].step < input.step) ++next_;
  if (next_ == entries.size() || entries[next_].step != input.step) {
    return Status::InvalidArgument(fmt::format(
        "the run asks for a placement at step {} (a fault's recovery or scale in the scenario) "
        "and {} records none for that step ({}); add one with \"step\": {}",
        input.step, recording_.path,
        next_ == entries.size() ? std::string("it has no more")
                                : fmt::format("its next is for step {}", entries[next_].step),
        input.step));
  }
  const RecordedEntry& e = entries[next_];
  const Placement& p = placements_[next_++];
  const int per_gpu = t.slots_per_gpu();
  for (const int rank : input.lost_ranks) {
    for (int l = 0; l < layers; ++l) {
      for (int s = rank * per_gpu; s < (rank + 1) * per_gpu; ++s) {
        const int32_t x = p.phy2log(l)[static_cast<size_t>(s)];
        if (x != kEmptySlot) {
          return Status::InvalidArgument(fmt::format(
              "{}: the placement puts expert {} in slot {} of layer {}, on GPU {}, which is lost "
              "or not serving at step {}: its slots must be empty (-1)",
              e.where, x, s, l, rank, input.step));
        }
      }
    }
  }
  return p;
}

}  // namespace eplb
