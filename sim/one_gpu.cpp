#include "one_gpu.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include <fmt/format.h>
#include <simgrid/s4u.hpp>

#include "eplb/base/file_io.h"
#include "eplb/migrate/forwarding_backend.h"
#include "sim_backend.h"

namespace sg4 = simgrid::s4u;

namespace eplb::sim {
namespace {

struct Field {
  const char* key;
  double OneGpuModel::*value;
  bool rate;  // must be positive; the others may be 0
};

constexpr Field kFields[] = {
    {"copy_gbps", &OneGpuModel::copy_gbps, true},
    {"stream_gbps", &OneGpuModel::stream_gbps, true},
    {"local_copy_gbps", &OneGpuModel::local_copy_gbps, true},
    {"round_us", &OneGpuModel::round_us, false},
    {"start_us", &OneGpuModel::start_us, false},
    {"commit_us", &OneGpuModel::commit_us, false},
    {"step_read_gbps", &OneGpuModel::step_read_gbps, false},
};

// The simulator's backend with the host protocol's costs the device run pays on the caller.
// Everything else is the simulator's own (SimBackend is final: this forwards).
class CostedBackend final : public ForwardingBackend {
 public:
  CostedBackend(SimBackend& inner, const OneGpuModel& model, int ranks)
      : ForwardingBackend(inner),
        start_s_(model.start_us * 1e-6),
        commit_s_(model.commit_us * 1e-6),
        ranks_(ranks) {
    ReportInnerTransfers();
  }
  Status BeginRearrangement() override {
    if (start_s_ > 0) sg4::this_actor::sleep_for(start_s_);
    return ForwardingBackend::BeginRearrangement();
  }
  // The rearranger commits a layer rank by rank: each pays its share of the layer's cost.
  Status CommitLayer(const StagingTarget& target, std::span<const int32_t> slots) override {
    if (commit_s_ > 0) sg4::this_actor::sleep_for(commit_s_ / ranks_);
    return ForwardingBackend::CommitLayer(target, slots);
  }

 private:
  double start_s_, commit_s_;
  int ranks_;
};

// Steps that also read every live weight from HBM over the shared copy link, as the device's
// emulated steps do: the step lasts as long as the slower of the two.
class ReadingSteps final : public StepRunner {
 public:
  ReadingSteps(SimStepRunner& inner, const Platform& platform, double read_bytes,
               double read_bytes_per_s)
      : inner_(inner),
        platform_(platform),
        read_bytes_(read_bytes),
        read_bytes_per_s_(read_bytes_per_s) {}
  Status RunStep(const StepCost& cost, bool contended) override {
    if (read_bytes_per_s_ <= 0 || read_bytes_ <= 0) return inner_.RunStep(cost, contended);
    // The reads on an actor of their own (with its own courier, made and destroyed there), the
    // step's own work here, where the step runner's port actors live.
    const HostFlow read{platform_.hbm_reader_host(), platform_.host(0),
                        static_cast<uint64_t>(read_bytes_), read_bytes_per_s_};
    sg4::ActorPtr reader = sg4::Actor::create("step-reads", sg4::this_actor::get_host(), [&] {
      Courier courier;
      courier.Receive(std::span<const HostFlow>(&read, 1));
    });
    Status result = inner_.RunStep(cost, contended);
    reader->join();
    return result;
  }

 private:
  SimStepRunner& inner_;
  const Platform& platform_;
  double read_bytes_, read_bytes_per_s_;
};

}  // namespace

const std::vector<std::string>& OneGpuModelKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    for (const Field& f : kFields) k.emplace_back(f.key);
    return k;
  }();
  return keys;
}

Status CheckOneGpuModel(const OneGpuModel& model, const std::string& where) {
  for (const Field& f : kFields) {
    const double v = model.*f.value;
    if (!std::isfinite(v) || v < 0 || (f.rate && v == 0)) {
      return Status::InvalidArgument(
          fmt::format("{}: {} is {}; it must be a finite number {}", where, f.key, v,
                      f.rate ? "above 0 (a rate the device run measured)" : "of at least 0"));
    }
  }
  return Status::Ok();
}

Result<OneGpuModel> ParseOneGpuModel(const nlohmann::json& json, const std::string& file,
                                     OneGpuModel base) {
  if (!json.is_object()) {
    return Status::InvalidArgument(
        fmt::format("{}: expected a JSON object with some of the keys {}", file,
                    fmt::join(OneGpuModelKeys(), ", ")));
  }
  for (const auto& [key, value] : json.items()) {
    const Field* field = nullptr;
    for (const Field& f : kFields) {
      if (key == f.key) field = &f;
    }
    if (field == nullptr) {
      return Status::InvalidArgument(fmt::format("{}: unknown key '{}'; the keys are {}", file, key,
                                                 fmt::join(OneGpuModelKeys(), ", ")));
    }
    if (!value.is_number()) {
      return Status::InvalidArgument(
          fmt::format("{}: {} is {}; expected a number", file, key, value.dump()));
    }
    base.*field->value = value.get<double>();
  }
  EPLB_RETURN_IF_ERROR(CheckOneGpuModel(base, file));
  return base;
}

Result<OneGpuModel> LoadOneGpuModel(const std::string& path, OneGpuModel base) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::parse_error& e) {
    return Status::InvalidArgument(fmt::format("{}: not JSON: {}", path, e.what()));
  }
  return ParseOneGpuModel(json, path, base);
}

nlohmann::ordered_json OneGpuModelJson(const OneGpuModel& model) {
  nlohmann::ordered_json out;
  for (const Field& f : kFields) out[f.key] = model.*f.value;
  return out;
}

Scenario OnOneGpu(Scenario scenario, const OneGpuModel& model) {
  ClusterSpec& c = scenario.cluster;
  c.nvlink = {model.stream_gbps, model.round_us, 1.0};
  c.nic = {model.stream_gbps, model.round_us, 1.0};
  c.pcie_gbps = 1e6;
  c.nvswitch_gbps = 0;
  c.fabric_oversubscription = 1;
  c.hbm_gbps = model.local_copy_gbps;
  return scenario;
}

std::unique_ptr<RearrangementBackend> OneGpuBackend(SimBackend& inner, const OneGpuModel& model,
                                                    int ranks) {
  return std::make_unique<CostedBackend>(inner, model, ranks);
}

std::unique_ptr<StepRunner> OneGpuSteps(SimStepRunner& inner, const Platform& platform,
                                        const Scenario& scenario, const OneGpuModel& model) {
  // Every rank's live weights: each of its slots in every layer.
  const double read_bytes = static_cast<double>(scenario.model.layers) *
                            static_cast<double>(scenario.num_slots()) *
                            static_cast<double>(scenario.model.expert_bytes);
  return std::make_unique<ReadingSteps>(inner, platform, read_bytes, model.step_read_gbps * 1e9);
}

}  // namespace eplb::sim
