#include "eplb/migrate/schedule.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "eplb/migrate/names.h"

namespace eplb {

const char* ScheduleStrategyName(ScheduleStrategy strategy) {
  return kScheduleStrategyNames.Name(strategy);
}

Result<ScheduleStrategy> ParseScheduleStrategy(std::string_view name) {
  if (const auto s = kScheduleStrategyNames.Find(name)) return *s;
  return Status::InvalidArgument(
      fmt::format("schedule is '{}'; valid schedules: {}", name, kScheduleStrategyNames.Joined()));
}

namespace {

// Max-min fair rates of `active` flows over send ports [0, ranks) and receive ports
// [ranks, 2·ranks), each of capacity `bandwidth`, by progressive filling: the port with the
// smallest fair share saturates first and fixes the rate of every flow through it.
void MaxMinRates(std::span<const Flow> flows, const std::vector<int>& active, double bandwidth,
                 int ranks, std::vector<double>& rate) {
  const int ports = 2 * ranks;
  std::vector<double> capacity(static_cast<size_t>(ports), bandwidth);
  std::vector<int> unfixed(static_cast<size_t>(ports), 0);
  std::vector<std::vector<int>> on_port(static_cast<size_t>(ports));
  for (int f : active) {
    const int out = flows[f].src_rank, in = ranks + flows[f].dst_rank;
    ++unfixed[out];
    ++unfixed[in];
    on_port[out].push_back(f);
    on_port[in].push_back(f);
    rate[f] = -1;
  }
  int left = static_cast<int>(active.size());
  while (left > 0) {
    int bottleneck = -1;
    double share = std::numeric_limits<double>::infinity();
    for (int p = 0; p < ports; ++p) {
      if (unfixed[p] > 0 && capacity[p] / unfixed[p] < share) {
        share = capacity[p] / unfixed[p];
        bottleneck = p;
      }
    }
    for (int f : on_port[bottleneck]) {
      if (rate[f] >= 0) continue;
      rate[f] = share;
      --left;
      for (int p : {flows[f].src_rank, ranks + flows[f].dst_rank}) {
        capacity[p] -= share;
        --unfixed[p];
      }
    }
  }
}

}  // namespace

double RoundDuration(std::span<const Flow> flows, const LinkSpec& link, int num_ranks) {
  if (flows.empty()) return 0;
  // With at most one flow per port, as in one-peer rounds, every flow runs at full bandwidth.
  {
    std::vector<char> busy(2 * static_cast<size_t>(num_ranks), 0);
    bool shared = false;
    int64_t longest = 0;
    for (const Flow& f : flows) {
      char& out = busy[f.src_rank];
      char& in = busy[num_ranks + f.dst_rank];
      shared |= out || in;
      out = in = 1;
      longest = std::max(longest, f.bytes);
    }
    if (!shared) return link.latency_s + static_cast<double>(longest) / link.bandwidth_bytes_per_s;
  }
  std::vector<double> remaining(flows.size()), rate(flows.size());
  std::vector<int> active;
  for (size_t f = 0; f < flows.size(); ++f) {
    remaining[f] = static_cast<double>(flows[f].bytes);
    if (flows[f].bytes > 0) active.push_back(static_cast<int>(f));
  }
  double t = 0;
  while (!active.empty()) {
    MaxMinRates(flows, active, link.bandwidth_bytes_per_s, num_ranks, rate);
    double dt = std::numeric_limits<double>::infinity();
    for (int f : active) dt = std::min(dt, remaining[f] / rate[f]);
    t += dt;
    std::vector<int> still;
    for (int f : active) {
      remaining[f] -= rate[f] * dt;
      // Rounding leaves crumbs; a flow within a byte-millionth of done is done.
      if (remaining[f] > 1e-6 * static_cast<double>(flows[f].bytes)) still.push_back(f);
    }
    active.swap(still);
  }
  return link.latency_s + t;
}

double TransferLowerBound(std::span<const Transfer> transfers, const Topology& topology) {
  const int ranks = topology.num_ranks();
  double bound = 0;
  for (int c = 0; c < kNumLinkClasses; ++c) {
    std::vector<int64_t> out(static_cast<size_t>(ranks), 0), in(static_cast<size_t>(ranks), 0);
    bool any = false;
    for (const Transfer& t : transfers) {
      if (static_cast<int>(t.link) != c) continue;
      out[t.src_rank] += t.bytes;
      in[t.dst_rank] += t.bytes;
      any = true;
    }
    if (!any) continue;
    const int64_t busiest = std::max(*std::max_element(out.begin(), out.end()),
                                     *std::max_element(in.begin(), in.end()));
    const LinkSpec& link = topology.link(static_cast<LinkClass>(c));
    bound =
        std::max(bound, link.latency_s + static_cast<double>(busiest) / link.bandwidth_bytes_per_s);
  }
  return bound;
}

namespace {

// Transfers of one lane merged per (src, dst) pair, in order of first appearance.
std::vector<Flow> PairFlows(std::span<const Transfer> transfers, const std::vector<int32_t>& lane) {
  std::vector<Flow> flows;
  std::map<std::pair<int32_t, int32_t>, size_t> index;
  for (int32_t i : lane) {
    const Transfer& t = transfers[i];
    auto [it, inserted] = index.emplace(std::make_pair(t.src_rank, t.dst_rank), flows.size());
    if (inserted) flows.push_back({t.src_rank, t.dst_rank, 0, {}});
    Flow& f = flows[it->second];
    f.bytes += t.bytes;
    f.transfers.push_back(i);
  }
  return flows;
}

std::vector<Round> SingleBatch(std::span<const Transfer> transfers,
                               const std::vector<int32_t>& lane, LinkClass link) {
  if (lane.empty()) return {};
  return {Round{link, PairFlows(transfers, lane), 0}};
}

std::vector<Round> GreedyPairs(std::span<const Transfer> transfers,
                               const std::vector<int32_t>& lane, LinkClass link, int ranks) {
  std::vector<Round> rounds;
  std::vector<std::vector<char>> sending, receiving;  // per round, per rank
  for (Flow& flow : PairFlows(transfers, lane)) {
    size_t r = 0;
    while (r < rounds.size() && (sending[r][flow.src_rank] || receiving[r][flow.dst_rank])) ++r;
    if (r == rounds.size()) {
      rounds.push_back(Round{link, {}, 0});
      sending.emplace_back(static_cast<size_t>(ranks), 0);
      receiving.emplace_back(static_cast<size_t>(ranks), 0);
    }
    sending[r][flow.src_rank] = receiving[r][flow.dst_rank] = 1;
    rounds[r].flows.push_back(std::move(flow));
  }
  return rounds;
}

// Edge colouring of the bipartite multigraph senders × receivers, one edge per transfer, with
// exactly max-degree colours: colour an edge with a colour a free at its sender; if a is busy
// at the receiver, swap colours a and b (free at the receiver) along the alternating path from
// the receiver, which never reaches the sender (König's theorem).
std::vector<Round> EdgeColouring(std::span<const Transfer> transfers,
                                 const std::vector<int32_t>& lane, LinkClass link, int ranks) {
  if (lane.empty()) return {};
  std::vector<int> degree_out(static_cast<size_t>(ranks), 0),
      degree_in(static_cast<size_t>(ranks), 0);
  for (int32_t i : lane) {
    ++degree_out[transfers[i].src_rank];
    ++degree_in[transfers[i].dst_rank];
  }
  const int colours = std::max(*std::max_element(degree_out.begin(), degree_out.end()),
                               *std::max_element(degree_in.begin(), degree_in.end()));
  // at[side][rank * colours + c]: the transfer using colour c at that rank, or -1.
  // side 0: senders, side 1: receivers.
  std::vector<int32_t> at[2] = {std::vector<int32_t>(static_cast<size_t>(ranks) * colours, -1),
                                std::vector<int32_t>(static_cast<size_t>(ranks) * colours, -1)};
  std::vector<int> colour_of(transfers.size(), -1);
  auto end_rank = [&](int32_t t, int side) {
    return side == 0 ? transfers[t].src_rank : transfers[t].dst_rank;
  };
  auto free_colour = [&](int side, int rank) {
    for (int c = 0; c < colours; ++c) {
      if (at[side][static_cast<size_t>(rank) * colours + c] < 0) return c;
    }
    return -1;
  };
  std::vector<int32_t> path;
  for (int32_t t : lane) {
    const int u = transfers[t].src_rank, v = transfers[t].dst_rank;
    const int a = free_colour(0, u), b = free_colour(1, v);
    if (at[1][static_cast<size_t>(v) * colours + a] >= 0) {
      // Walk v -a-> u1 -b-> v2 -a-> ... collecting the path's edges.
      path.clear();
      int side = 1, rank = v, c = a;
      while (true) {
        const int32_t e = at[side][static_cast<size_t>(rank) * colours + c];
        if (e < 0) break;
        path.push_back(e);
        side = 1 - side;
        rank = end_rank(e, side);
        c = c == a ? b : a;
      }
      for (int32_t e : path) {
        at[0][static_cast<size_t>(transfers[e].src_rank) * colours + colour_of[e]] = -1;
        at[1][static_cast<size_t>(transfers[e].dst_rank) * colours + colour_of[e]] = -1;
      }
      for (int32_t e : path) {
        colour_of[e] = colour_of[e] == a ? b : a;
        at[0][static_cast<size_t>(transfers[e].src_rank) * colours + colour_of[e]] = e;
        at[1][static_cast<size_t>(transfers[e].dst_rank) * colours + colour_of[e]] = e;
      }
    }
    colour_of[t] = a;
    at[0][static_cast<size_t>(u) * colours + a] = t;
    at[1][static_cast<size_t>(v) * colours + a] = t;
  }
  std::vector<Round> rounds(static_cast<size_t>(colours), Round{link, {}, 0});
  for (int32_t t : lane) {
    const Transfer& tr = transfers[t];
    rounds[colour_of[t]].flows.push_back({tr.src_rank, tr.dst_rank, tr.bytes, {t}});
  }
  return rounds;
}

}  // namespace

Schedule ScheduleTransfers(std::span<const Transfer> transfers, const Topology& topology,
                           ScheduleStrategy strategy) {
  Schedule s;
  s.strategy = strategy;
  s.round_of_transfer.assign(transfers.size(), -1);
  const int ranks = topology.num_ranks();
  for (int c = 0; c < kNumLinkClasses; ++c) {
    const auto link = static_cast<LinkClass>(c);
    std::vector<int32_t> lane;
    for (size_t i = 0; i < transfers.size(); ++i) {
      if (transfers[i].link == link) {
        lane.push_back(static_cast<int32_t>(i));
        s.bytes[link] += transfers[i].bytes;
      }
    }
    switch (strategy) {
      case ScheduleStrategy::kSingleBatch:
        s.lanes[c] = SingleBatch(transfers, lane, link);
        break;
      case ScheduleStrategy::kGreedyPairs:
        s.lanes[c] = GreedyPairs(transfers, lane, link, ranks);
        break;
      case ScheduleStrategy::kBest:
        s.lanes[c] = EdgeColouring(transfers, lane, link, ranks);
        break;
    }
    double lane_time = 0;
    for (size_t r = 0; r < s.lanes[c].size(); ++r) {
      Round& round = s.lanes[c][r];
      round.duration_s = RoundDuration(round.flows, topology.link(link), ranks);
      lane_time += round.duration_s;
      for (const Flow& f : round.flows) {
        for (int32_t t : f.transfers) s.round_of_transfer[t] = static_cast<int32_t>(r);
      }
    }
    s.makespan_s = std::max(s.makespan_s, lane_time);
  }
  s.lower_bound_s = TransferLowerBound(transfers, topology);
  return s;
}

}  // namespace eplb
