#include "eplb/usecases/validation.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace eplb {
namespace {

using Key = std::tuple<int, int, int, int, int>;  // rearrangement, layer, expert, src, dst

// The rearrangement a transfer belongs to: the last one started at or before it.
int RearrangementOf(const RunResult& run, double start_s) {
  int index = 0;
  for (size_t i = 0; i < run.rearrangements.size(); ++i) {
    if (run.rearrangements[i].start_s <= start_s) index = static_cast<int>(i);
  }
  return index;
}

std::map<Key, const TransferRecord*> Index(const RunResult& run) {
  std::map<Key, const TransferRecord*> out;
  for (const TransferRecord& t : run.transfers) {
    out[{RearrangementOf(run, t.start_s), t.layer, t.expert, t.src_rank, t.dst_rank}] = &t;
  }
  return out;
}

double ErrorPct(double measured, double simulated) {
  return measured > 0 ? 100.0 * (simulated - measured) / measured : 0.0;
}

template <typename T>
ErrorStats Stats(const std::vector<T>& rows) {
  ErrorStats s;
  std::vector<double> abs;
  for (const T& r : rows) abs.push_back(std::fabs(r.error_pct));
  s.count = static_cast<int>(abs.size());
  if (abs.empty()) return s;
  std::sort(abs.begin(), abs.end());
  double sum = 0;
  for (double a : abs) sum += a;
  s.mean_abs_pct = sum / static_cast<double>(abs.size());
  const size_t mid = abs.size() / 2;
  s.median_abs_pct = abs.size() % 2 ? abs[mid] : (abs[mid - 1] + abs[mid]) / 2;
  s.max_abs_pct = abs.back();
  return s;
}

struct Span {
  double first = 1e300, last = -1e300;
  int transfers = 0;
  void Add(const TransferRecord& t) {
    first = std::min(first, t.start_s);
    last = std::max(last, t.end_s);
    ++transfers;
  }
  double length() const { return transfers ? last - first : 0; }
};

nlohmann::ordered_json StatsJson(const ErrorStats& s) {
  return {{"count", s.count},
          {"mean_abs_error_pct", s.mean_abs_pct},
          {"median_abs_error_pct", s.median_abs_pct},
          {"max_abs_error_pct", s.max_abs_pct}};
}

nlohmann::ordered_json TimingJson(const LayerTiming& l) {
  return {{"rearrangement", l.rearrangement}, {"layer", l.layer},
          {"transfers", l.transfers},         {"measured_s", l.measured_s},
          {"simulated_s", l.simulated_s},     {"error_pct", l.error_pct}};
}

}  // namespace

Validation CompareTimings(const RunResult& measured, const RunResult& simulated) {
  Validation v;
  const auto m = Index(measured);
  const auto s = Index(simulated);
  // Spans over matched transfers only, so both sides cover the same work.
  std::map<std::pair<int, int>, std::pair<Span, Span>> layers;  // (rearrangement, layer)
  std::map<int, std::pair<Span, Span>> rearrangements;
  for (const auto& [key, mt] : m) {
    const auto it = s.find(key);
    if (it == s.end()) {
      ++v.unmatched_measured;
      continue;
    }
    const TransferRecord& st = *it->second;
    const double md = mt->end_s - mt->start_s, sd = st.end_s - st.start_s;
    v.transfers.push_back({std::get<0>(key), mt->layer, mt->expert, mt->src_rank, mt->dst_rank,
                           mt->link, md, sd, ErrorPct(md, sd)});
    auto& l = layers[{std::get<0>(key), mt->layer}];
    l.first.Add(*mt);
    l.second.Add(st);
    auto& r = rearrangements[std::get<0>(key)];
    r.first.Add(*mt);
    r.second.Add(st);
  }
  for (const auto& [key, st] : s) {
    if (!m.count(key)) ++v.unmatched_simulated;
  }
  for (const auto& [key, spans] : layers) {
    const double md = spans.first.length(), sd = spans.second.length();
    v.layers.push_back({key.first, key.second, spans.first.transfers, md, sd, ErrorPct(md, sd)});
  }
  for (const auto& [index, spans] : rearrangements) {
    const double md = spans.first.length(), sd = spans.second.length();
    v.rearrangements.push_back({index, -1, spans.first.transfers, md, sd, ErrorPct(md, sd)});
  }
  // Start to last commit, by order: only where both sides finished it.
  const size_t both = std::min(measured.rearrangements.size(), simulated.rearrangements.size());
  for (size_t i = 0; i < both; ++i) {
    const RearrangementRecord& mr = measured.rearrangements[i];
    const RearrangementRecord& sr = simulated.rearrangements[i];
    if (mr.end_s < 0 || sr.end_s < 0 || mr.cancelled || sr.cancelled) continue;
    const auto it = rearrangements.find(static_cast<int>(i));
    const int transfers = it == rearrangements.end() ? 0 : it->second.first.transfers;
    const double md = mr.end_s - mr.start_s, sd = sr.end_s - sr.start_s;
    v.walls.push_back({static_cast<int>(i), -1, transfers, md, sd, ErrorPct(md, sd)});
  }
  v.transfer_error = Stats(v.transfers);
  v.wall_error = Stats(v.walls);
  v.layer_error = Stats(v.layers);
  v.rearrangement_error = Stats(v.rearrangements);
  return v;
}

nlohmann::ordered_json ValidationJson(const Validation& v) {
  nlohmann::ordered_json out;
  out["summary"] = {{"transfers", StatsJson(v.transfer_error)},
                    {"layers", StatsJson(v.layer_error)},
                    {"rearrangements", StatsJson(v.rearrangement_error)},
                    {"walls", StatsJson(v.wall_error)},
                    {"unmatched_measured", v.unmatched_measured},
                    {"unmatched_simulated", v.unmatched_simulated}};
  out["rearrangements"] = nlohmann::ordered_json::array();
  for (const LayerTiming& r : v.rearrangements) out["rearrangements"].push_back(TimingJson(r));
  out["walls"] = nlohmann::ordered_json::array();
  for (const LayerTiming& r : v.walls) out["walls"].push_back(TimingJson(r));
  out["layers"] = nlohmann::ordered_json::array();
  for (const LayerTiming& l : v.layers) out["layers"].push_back(TimingJson(l));
  out["transfers"] = nlohmann::ordered_json::array();
  for (const TransferTiming& t : v.transfers) {
    out["transfers"].push_back({{"rearrangement", t.rearrangement},
                                {"layer", t.layer},
                                {"expert", t.expert},
                                {"src_rank", t.src_rank},
                                {"dst_rank", t.dst_rank},
                                {"link", LinkClassName(t.link)},
                                {"measured_s", t.measured_s},
                                {"simulated_s", t.simulated_s},
                                {"error_pct", t.error_pct}});
  }
  return out;
}

std::string ValidationTable(const Validation& v) {
  std::string out = fmt::format("{:>13} {:>5} {:>9} {:>13} {:>13} {:>9}\n", "rearrangement",
                                "layer", "transfers", "measured ms", "simulated ms", "error %");
  for (const LayerTiming& l : v.layers) {
    out += fmt::format("{:>13} {:>5} {:>9} {:>13.3f} {:>13.3f} {:>+9.1f}\n", l.rearrangement,
                       l.layer, l.transfers, l.measured_s * 1e3, l.simulated_s * 1e3, l.error_pct);
  }
  const auto line = [](const char* what, const ErrorStats& s) {
    return fmt::format("{:<15} |error| mean {:.1f}%, median {:.1f}%, max {:.1f}% over {}\n", what,
                       s.mean_abs_pct, s.median_abs_pct, s.max_abs_pct, s.count);
  };
  out += line("per transfer", v.transfer_error);
  out += line("per layer", v.layer_error);
  out += line("per rearrangement", v.rearrangement_error);
  for (const LayerTiming& w : v.walls) {
    out += fmt::format(
        "rearrangement {} start to last commit: measured {:.3f} ms, simulated {:.3f} ms "
        "({:+.1f}%)\n",
        w.rearrangement, w.measured_s * 1e3, w.simulated_s * 1e3, w.error_pct);
  }
  out += line("start to commit", v.wall_error);
  if (v.unmatched_measured || v.unmatched_simulated) {
    out += fmt::format(
        "unmatched       {} measured and {} simulated transfers have no counterpart (the runs "
        "planned differently)\n",
        v.unmatched_measured, v.unmatched_simulated);
  }
  return out;
}

}  // namespace eplb
