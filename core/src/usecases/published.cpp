#include "eplb/usecases/published.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "eplb/base/excerpt.h"
#include "eplb/base/file_io.h"
#include "eplb/engine/all_to_all.h"
#include "eplb/engine/step_model.h"
#include "eplb/engine/workload.h"
#include "eplb/io/run_folder.h"
#include "eplb/io/scenario_file.h"
#include "eplb/migrate/migration_pricing.h"
#include "eplb/migrate/schedule.h"
#include "eplb/migrate/transfer_plan.h"
#include "eplb/migrate/transport.h"
#include "eplb/model/metrics.h"
#include "eplb/policy/policy.h"

namespace eplb {

namespace {

constexpr int kServingSteps = 32;  // steps the policy sees, then steps measured

// A serving scenario under its policy's placement, over the measured steps.
struct Serving {
  double step_s = 0;           // mean step time
  double imbalance_ratio = 0;  // mean over the steps of the mean over layers
  // The spreads of the GPUs' and the slots' loads and the slots' imbalance ratio
  // (model/metrics.h), means over the steps.
  double gpu_load_std = 0, slot_load_std = 0, slot_imbalance_ratio = 0;
  StepCost mean;  // the step's parts, means over the steps (time fields only)
};

std::string Breakdown(const Serving& s) {
  const StepCost& c = s.mean;
  const double moe = c.compute_s - c.attention_s - c.sm_shared_s;
  return fmt::format(
      "step {:.4g} ms = compute {:.4g} (attention and dense {:.4g}, MoE {:.4g}{}) + exposed "
      "dispatch {:.4g} + combine {:.4g}; hidden dispatch {:.4g}, combine {:.4g}",
      s.step_s * 1e3, c.compute_s * 1e3, c.attention_s * 1e3, moe * 1e3,
      c.sm_shared_s > 0
          ? fmt::format(", slowed by the normal kernels' SMs {:.4g}", c.sm_shared_s * 1e3)
          : std::string(),
      c.dispatch_s * 1e3, c.combine_s * 1e3, c.dispatch_hidden_s * 1e3, c.combine_hidden_s * 1e3);
}

// The placement the scenario's policy gives the load of the workload's first kServingSteps steps,
// from vLLM's initial one (`initial`); `workload` moves on past those steps.
Result<Placement> PolicyPlacement(const Scenario& s, Workload& workload, const Placement& initial) {
  EPLB_ASSIGN_OR_RETURN(std::unique_ptr<Policy> policy, MakePolicy(s.eplb.policy));
  LoadMatrix step(s.model.layers, s.model.experts), window(s.model.layers, s.model.experts);
  window.setZero();
  for (int i = 0; i < kServingSteps; ++i) {
    workload.Next(step);
    window += step;
  }
  PolicyInput input{window, s.topology(), &initial, s.model.groups};
  return policy->Rebalance(input);
}

// The first of a step's parts that is not a finite, non-negative time, in words; empty when
// every part is one. Fields within their ranges can still combine into an overflow.
std::string NonFinitePart(const StepCost& c) {
  const std::pair<const char*, double> parts[] = {{"attention and dense", c.attention_s},
                                                  {"compute", c.compute_s},
                                                  {"SMs lost to the normal kernels", c.sm_shared_s},
                                                  {"exposed dispatch", c.dispatch_s},
                                                  {"exposed combine", c.combine_s},
                                                  {"hidden dispatch", c.dispatch_hidden_s},
                                                  {"hidden combine", c.combine_hidden_s},
                                                  {"the step", c.total_s()}};
  for (const auto& [name, v] : parts) {
    if (!std::isfinite(v) || v < 0) return fmt::format("{} takes {} s", name, v);
  }
  return std::string();
}

Result<Serving> ServeScenario(const Scenario& s) {
  EPLB_ASSIGN_OR_RETURN(std::unique_ptr<Workload> workload, MakeWorkload(s));
  EPLB_ASSIGN_OR_RETURN(const Placement initial,
                        Placement::Initial(s.model.layers, s.model.experts, s.num_slots()));
  EPLB_ASSIGN_OR_RETURN(const Placement placement, PolicyPlacement(s, *workload, initial));
  LoadMatrix step(s.model.layers, s.model.experts);
  StepModel model(s);
  StepCost cost;
  Serving out;
  for (int i = 0; i < kServingSteps; ++i) {
    workload->Next(step);
    model.Cost(step, placement, cost);
    if (const std::string part = NonFinitePart(cost); !part.empty()) {
      return Status::InvalidArgument(
          fmt::format("measured step {}: {}, not a finite time", i, part));
    }
    out.step_s += cost.total_s() / kServingSteps;
    out.imbalance_ratio += cost.imbalance_ratio / kServingSteps;
    const LoadMatrix slots = SlotLoads(step, placement);
    out.gpu_load_std += Spread(GpuLoads(step, placement, model.topology())) / kServingSteps;
    out.slot_load_std += Spread(slots) / kServingSteps;
    out.slot_imbalance_ratio += ImbalanceRatio(slots) / kServingSteps;
    out.mean.compute_s += cost.compute_s / kServingSteps;
    out.mean.attention_s += cost.attention_s / kServingSteps;
    out.mean.sm_shared_s += cost.sm_shared_s / kServingSteps;
    out.mean.dispatch_s += cost.dispatch_s / kServingSteps;
    out.mean.combine_s += cost.combine_s / kServingSteps;
    out.mean.dispatch_hidden_s += cost.dispatch_hidden_s / kServingSteps;
    out.mean.combine_hidden_s += cost.combine_hidden_s / kServingSteps;
  }
  return out;
}

// One stop-the-world rearrangement's stall, priced as the schedule predicts it (schedule.h):
// the scenario's policy moves the experts from vLLM's initial placement to its placement of the
// first steps' load, layer after layer, each priced as the simulator's backend pays it
// (migrate/migration_pricing.h), then the engine's orchestration over the whole rearrangement.
struct Stall {
  double total_s = 0, links_s = 0, fixed_s = 0, messages_s = 0, copies_s = 0;
  int layers = 0;
  double bytes = 0;
  RearrangementOrchestration engine;  // migration.engine's host work (engine_profile.h)
};

Result<Stall> PriceStall(const Scenario& s) {
  EPLB_ASSIGN_OR_RETURN(std::unique_ptr<Workload> workload, MakeWorkload(s));
  const MigrationPricing pricing(s.migration_set_up());
  EPLB_ASSIGN_OR_RETURN(const Topology topology, pricing.CappedTopology(s.topology()));
  EPLB_ASSIGN_OR_RETURN(const Placement initial,
                        Placement::Initial(s.model.layers, s.model.experts, s.num_slots()));
  EPLB_ASSIGN_OR_RETURN(const Placement target, PolicyPlacement(s, *workload, initial));
  EPLB_ASSIGN_OR_RETURN(const std::vector<LayerPlan> plans,
                        PlanMigration(initial, target, topology, s.eplb.sender_rule));
  Stall out;
  std::vector<double> plan_links_s;
  std::vector<int> plan_executions;  // migration.batching: each round of the schedule one
  for (const LayerPlan& plan : plans) {
    const TransportLayerPrice layer =
        pricing.PriceTransportLayer(plan, topology, s.eplb.schedule, s.model.expert_bytes);
    out.links_s += layer.links_s;
    plan_links_s.push_back(layer.links_s);
    if (s.migration.batching && !pricing.from_host()) plan_executions.push_back(layer.executions);
    out.messages_s += layer.messages_s;
    out.copies_s += layer.copies_s;
    out.fixed_s += layer.fixed_s;
    out.total_s += layer.total_s();
    out.bytes += static_cast<double>(plan.bytes.sum() + plan.reload_bytes);
    ++out.layers;
  }
  out.engine = PriceRearrangement(s.migration.engine, s.migration.transport, s.model.expert_tensors,
                                  initial, plans, plan_links_s, s.ep_shape(), plan_executions);
  out.total_s += out.engine.total_s();
  return out;
}

// What a figure decides, for the summary's counts: a kernel's time says nothing of whether a
// balancing question is answered well, so each kind is counted on its own line.
struct FigureCategory {
  const char* key;   // published.json's
  const char* what;  // the table's
  std::array<const char*, 4> measures;
};
constexpr FigureCategory kCategories[] = {
    {"kernels",
     "all-to-all kernels (dispatch and combine)",
     {"dispatch_gbps", "combine_gbps", "dispatch_us", "combine_us"}},
    {"serving_step",
     "serving throughput (the step)",
     {"prefill_input_tokens_per_node_s", "decode_output_tokens_per_node_s",
      "decode_output_tokens_per_user_s"}},
    {"load",
     "the load's spread (the workload model)",
     {"imbalance_ratio", "gpu_load_std", "slot_load_std", "slot_imbalance_ratio"}},
    {"gain", "gains from balance and overlap (speedups)", {"speedup"}},
    {"rearrangement", "rearrangement stalls", {"rearrangement_stall_s"}},
};
const FigureCategory& CategoryOf(const std::string& measure) {
  for (const FigureCategory& c : kCategories) {
    for (const char* m : c.measures) {
      if (m != nullptr && measure == m) return c;
    }
  }
  // Every measure is in kMeasures, and every one of those in a category (the tests check).
  return kCategories[0];
}

std::vector<FigureResult> InCategory(const std::vector<FigureResult>& results,
                                     const FigureCategory& category) {
  std::vector<FigureResult> of;
  for (const FigureResult& r : results) {
    if (&CategoryOf(r.figure.measure) == &category) of.push_back(r);
  }
  return of;
}

// The counts a summary gives: within the accuracy goal or outside it, whatever a figure's note
// or tolerance says; the guard's counts apart, since a widened guard is no claim of accuracy.
struct ErrorSummary {
  double mean_abs_pct = 0;
  int within_goal = 0;
  std::vector<const FigureResult*> outside_goal;
  std::vector<const FigureResult*> past_guard;
};
ErrorSummary Summarise(const std::vector<FigureResult>& results) {
  ErrorSummary e;
  for (const FigureResult& r : results) {
    e.mean_abs_pct += std::fabs(r.error_pct);
    if (r.within_goal()) {
      ++e.within_goal;
    } else {
      e.outside_goal.push_back(&r);
    }
    if (r.past_guard()) e.past_guard.push_back(&r);
  }
  if (!results.empty()) e.mean_abs_pct /= static_cast<double>(results.size());
  return e;
}

}  // namespace

namespace {

// FigureResult::error_pct of `simulated` against `f`: a speedup's on its gain.
double FigureErrorPct(const PublishedFigure& f, double simulated) {
  const double base = f.measure == "speedup" ? f.published - 1 : f.published;
  return 100 * (simulated - f.published) / base;
}

}  // namespace

namespace {

// EvaluateFigure, its errors not yet naming the figure.
Result<FigureResult> Evaluate(const PublishedFigure& f) {
  auto scenario = LoadScenarioFile(f.scenario, f.overrides);
  if (!scenario.ok()) return Status::InvalidArgument(scenario.status().message());
  FigureResult r;
  r.figure = f;
  if (IsAllToAllMeasure(f.measure)) {
    EPLB_ASSIGN_OR_RETURN(const AllToAllResult a, SimulateAllToAll(*scenario, f.tokens, f.mode));
    if (f.measure == "dispatch_gbps") r.simulated = a.dispatch_gbps;
    if (f.measure == "combine_gbps") r.simulated = a.combine_gbps;
    if (f.measure == "dispatch_us") r.simulated = a.dispatch_s * 1e6;
    if (f.measure == "combine_us") r.simulated = a.combine_s * 1e6;
  } else if (f.measure == "rearrangement_stall_s") {
    EPLB_ASSIGN_OR_RETURN(const Stall stall, PriceStall(*scenario));
    r.simulated = stall.total_s;
    r.breakdown = fmt::format(
        "{} layers moving {:.4g} GB: links {:.4g} ms + transport per layer {:.4g} ms + per "
        "message {:.4g} ms + local copies {:.4g} ms ({})",
        stall.layers, stall.bytes / 1e9, stall.links_s * 1e3, stall.fixed_s * 1e3,
        stall.messages_s * 1e3, stall.copies_s * 1e3, TransportName(scenario->migration.transport));
    if (const RearrangementOrchestration& e = stall.engine; e.total_s() > 0) {
      const double n = std::max(1, e.num_layers);
      r.breakdown += fmt::format(
          " + {} engine {:.4g} ms: once {:.4g} (policy {:.4g}, maps {:.4g}); per layer planning "
          "{:.3g}, transfer calls {:.3g}, barrier {:.3g}, polling {:.3g}, write-back {:.3g}",
          EngineName(scenario->migration.engine), e.total_s() * 1e3, e.once.total_s() * 1e3,
          e.once.policy_s * 1e3, e.once.maps_s * 1e3, e.layers.planning_s * 1e3 / n,
          e.layers.transfer_s * 1e3 / n, e.layers.barrier_s * 1e3 / n, e.layers.polling_s * 1e3 / n,
          e.layers.writeback_s * 1e3 / n);
    }
  } else {
    EPLB_ASSIGN_OR_RETURN(const Serving serving, ServeScenario(*scenario));
    const double step_s = serving.step_s;
    r.breakdown = Breakdown(serving);
    const double per_node = double(scenario->workload.tokens_per_step) / scenario->cluster.nodes;
    if (f.measure == "prefill_input_tokens_per_node_s") {
      r.simulated = per_node / step_s / (1 - f.cache_hit);
    } else if (f.measure == "decode_output_tokens_per_node_s") {
      r.simulated = per_node * scenario->output_tokens_per_sequence() / step_s;
    } else if (f.measure == "decode_output_tokens_per_user_s") {
      r.simulated = scenario->output_tokens_per_sequence() / step_s;
    } else if (f.measure == "imbalance_ratio") {
      r.simulated = serving.imbalance_ratio;
    } else if (f.measure == "gpu_load_std") {
      r.simulated = serving.gpu_load_std;
    } else if (f.measure == "slot_load_std") {
      r.simulated = serving.slot_load_std;
    } else if (f.measure == "slot_imbalance_ratio") {
      r.simulated = serving.slot_imbalance_ratio;
    } else {  // speedup
      std::vector<std::string> both = f.overrides;
      both.insert(both.end(), f.versus.begin(), f.versus.end());
      auto other = LoadScenarioFile(f.scenario, both);
      if (!other.ok()) {
        return Status::InvalidArgument(fmt::format("(versus): {}", other.status().message()));
      }
      if (other->workload.tokens_per_step != scenario->workload.tokens_per_step) {
        return Status::InvalidArgument(
            fmt::format("versus: changes workload.tokens_per_step ({} to {}); a speedup compares "
                        "the same tokens in both set-ups",
                        scenario->workload.tokens_per_step, other->workload.tokens_per_step));
      }
      auto versus = ServeScenario(*other);
      if (!versus.ok()) return versus.status().WithContext("versus: ");
      r.simulated = versus->step_s / step_s;
      r.breakdown += "; versus: " + Breakdown(*versus);
    }
  }
  r.error_pct = FigureErrorPct(f, r.simulated);
  if (!std::isfinite(r.simulated) || !std::isfinite(r.error_pct)) {
    return Status::InvalidArgument(
        fmt::format("the simulated {} is {} against {} published (error {}%), not a finite "
                    "number",
                    f.measure, r.simulated, f.published, r.error_pct));
  }
  return r;
}

}  // namespace

Result<FigureResult> EvaluateFigure(const PublishedFigure& f) {
  auto r = Evaluate(f);
  if (r.ok()) return r;
  // The settings are what a figures file adds to its scenario: the likely cause of an overflow.
  return r.status().WithContext(fmt::format(
      "figure {} ({}{}{}): ", f.id, f.scenario,
      f.overrides.empty() ? "" : fmt::format(", set: [{}]", fmt::join(f.overrides, ", ")),
      f.versus.empty() ? "" : fmt::format(", versus: [{}]", fmt::join(f.versus, ", "))));
}

bool FigureResult::within_goal() const {
  return std::fabs(error_pct) <= kAccuracyGoalPct;
}

bool FigureResult::past_guard() const {
  return std::fabs(error_pct) > figure.tolerance_pct;
}

std::string PublishedTable(const std::vector<FigureResult>& results) {
  std::string out = fmt::format("{:<40} {:<34} {:>10} {:>10} {:>8}\n", "figure", "source",
                                "published", "simulated", "error");
  std::string notes;
  for (const FigureResult& r : results) {
    const PublishedFigure& f = r.figure;
    out += fmt::format("{:<40} {:<34} {:>10.4g} {:>10.4g} {:>+7.1f}%  {}\n", f.id, f.source,
                       f.published, r.simulated, r.error_pct, f.unit);
    if (!r.breakdown.empty()) notes += fmt::format("  {}: {}\n", f.id, r.breakdown);
    if (!f.note.empty()) notes += fmt::format("  {}: {}\n", f.id, f.note);
  }
  // Each figure outside the goal is named with its error, whatever its note explains: a reader
  // quoting the count sees which figures it leaves out and by how much.
  // Each kind of figure on its own line first: the headline over all of them mixes kernels'
  // times with the figures that decide balancing questions.
  for (const FigureCategory& c : kCategories) {
    const std::vector<FigureResult> of = InCategory(results, c);
    if (of.empty()) continue;
    const ErrorSummary e = Summarise(of);
    out += fmt::format("{}: {} of {} within the {:g}% goal, mean |error| {:.1f}%\n", c.what,
                       e.within_goal, of.size(), kAccuracyGoalPct, e.mean_abs_pct);
  }
  const ErrorSummary e = Summarise(results);
  out += fmt::format("all: mean |error| {:.1f}%; {} of {} figures within the {:g}% accuracy goal",
                     e.mean_abs_pct, e.within_goal, results.size(), kAccuracyGoalPct);
  if (e.outside_goal.empty()) {
    out += "\n";
  } else {
    out += fmt::format("; {} outside it, whatever their notes explain:\n", e.outside_goal.size());
    size_t width = 0;
    for (const FigureResult* r : e.outside_goal) width = std::max(width, r->figure.id.size());
    for (const FigureResult* r : e.outside_goal) {
      out +=
          fmt::format("  outside the goal: {:<{}} {:>+7.1f}%\n", r->figure.id, width, r->error_pct);
    }
  }
  // The guard catches a figure the model moved away from; it says nothing of accuracy.
  for (const FigureResult* r : e.past_guard) {
    out += fmt::format("  past its regression guard: {} {:+.1f}% (tolerance_pct {:g})\n",
                       r->figure.id, r->error_pct, r->figure.tolerance_pct);
  }
  if (!notes.empty()) out += "notes:\n" + notes;
  return out;
}

nlohmann::ordered_json PublishedJson(const std::vector<FigureResult>& results) {
  nlohmann::ordered_json doc;
  doc["tool"] = ToolVersion();
  doc["format_version"] = kFolderFormatVersion;
  nlohmann::ordered_json figures = nlohmann::ordered_json::array();
  for (const FigureResult& r : results) {
    const PublishedFigure& f = r.figure;
    figures.push_back({{"id", f.id},
                       {"figure", f.figure},
                       {"source", f.source},
                       {"scenario", f.scenario},
                       {"measure", f.measure},
                       {"category", CategoryOf(f.measure).key},
                       {"versus", f.versus},
                       {"unit", f.unit},
                       {"published", f.published},
                       {"simulated", r.simulated},
                       {"error_pct", r.error_pct},
                       {"within_goal", r.within_goal()},
                       {"tolerance_pct", f.tolerance_pct},
                       {"past_guard", r.past_guard()},
                       {"breakdown", r.breakdown},
                       {"note", f.note}});
  }
  const ErrorSummary e = Summarise(results);
  doc["figures"] = figures;
  doc["mean_abs_error_pct"] = e.mean_abs_pct;
  doc["accuracy_goal_pct"] = kAccuracyGoalPct;
  doc["within_goal"] = e.within_goal;
  doc["outside_goal"] = e.outside_goal.size();
  const auto ids = [](const std::vector<const FigureResult*>& rs) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const FigureResult* r : rs) a.push_back(r->figure.id);
    return a;
  };
  doc["outside_goal_ids"] = ids(e.outside_goal);
  doc["past_guard_ids"] = ids(e.past_guard);
  nlohmann::ordered_json categories = nlohmann::ordered_json::array();
  for (const FigureCategory& c : kCategories) {
    const std::vector<FigureResult> of = InCategory(results, c);
    const ErrorSummary ce = Summarise(of);
    categories.push_back(
        {{"category", c.key},
         {"measures",
          [&] {
            nlohmann::ordered_json m = nlohmann::ordered_json::array();
            for (const char* one : c.measures) {
              if (one != nullptr) m.push_back(one);
            }
            return m;
          }()},
         {"figures", of.size()},
         {"within_goal", ce.within_goal},
         {"mean_abs_error_pct",
          of.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(ce.mean_abs_pct)}});
  }
  doc["categories"] = categories;
  return doc;
}

}  // namespace eplb
