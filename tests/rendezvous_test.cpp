// The GPU backend's NCCL protocol, simulated on the CPU: a backend whose rounds behave as
// NCCL's send/receive groups on one communicator per rank (a transfer happens only when the
// sender's and the receiver's calls have both been posted, matched per pair of ranks in issue
// order; a rank's communicator runs one group at a time, as NCCL serialises the kernels of one
// communicator; a wait is a polling loop that a cancellation ends, as the non-blocking
// communicators are polled), with the weights moved by a HostBackend. The rearranger with merged
// lanes must never hang on it, never match a send with the wrong receive, and leave every layer
// wholly old or new when cancelled at any point; and the next rearrangement must work.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "eplb/migrate/forwarding_backend.h"
#include "eplb/migrate/host_backend.h"
#include "eplb/migrate/rearranger.h"
#include "test_util.h"

namespace eplb {
namespace {

using testing::Drift;
using testing::EachLayerIsOneOf;
using testing::MakeTopology;
using testing::RandomPlacement;

class RendezvousBackend final : public ForwardingBackend {
 public:
  explicit RendezvousBackend(HostBackend& inner) : ForwardingBackend(inner) {
    ReportInnerTransfers();
  }

  bool MergesLanes() const override { return true; }
  Status BeginRearrangement() override {  // as the device backend: fresh communicators
    std::lock_guard lock(mu_);
    posted_.clear();
    busy_.clear();
    return Status::Ok();
  }
  Status EndRearrangement() override {  // the abort is over
    std::lock_guard lock(mu_);
    cancel_ = false;
    return Status::Ok();
  }
  void AbortTransfers() override {
    std::lock_guard lock(mu_);
    cancel_ = true;
    cv_.notify_all();
  }

  // Posts the rank's sends and receives of the round as one group, then waits until the peers
  // posted their halves, polling, as a worker on a non-blocking communicator does.
  Status ExecuteRound(const StagingTarget& target, const Round& round,
                      std::span<const Transfer> transfers) override {
    std::vector<std::pair<Key, size_t>> mine;  // (channel, index of my op in it)
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    {
      std::unique_lock lock(mu_);
      // The rank's communicator is busy with its previous group until that one completes.
      while (busy_.count(target.rank) && !cancel_) {
        if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
          return Status::Internal("no progress for 20 s: the ranks deadlocked");
        }
      }
      if (cancel_) return Status::Cancelled("cancelled before the round");
      busy_.insert(target.rank);
      for (const Flow& flow : round.flows) {
        const bool send = flow.src_rank == target.rank;
        if (!send && flow.dst_rank != target.rank) continue;
        for (int32_t t : flow.transfers) {
          Channel& c = posted_[{flow.src_rank, flow.dst_rank}];
          auto& side = send ? c.sends : c.receives;
          side.push_back({target.layer, transfers[t].expert});
          mine.push_back({{flow.src_rank, flow.dst_rank}, side.size() - 1});
        }
      }
    }
    std::unique_lock lock(mu_);
    struct Release {  // the communicator is free again when this round ends, however it ends
      RendezvousBackend* self;
      int rank;
      ~Release() {
        self->busy_.erase(rank);
        self->cv_.notify_all();
      }
    } release{this, target.rank};
    while (true) {
      if (cancel_) return Status::Cancelled("cancelled while waiting for a peer");
      bool all = true;
      for (const auto& [key, index] : mine) {
        const Channel& c = posted_[key];
        if (c.sends.size() <= index || c.receives.size() <= index) {
          all = false;
          continue;
        }
        // NCCL matches by order alone: the k-th send meets the k-th receive, whatever it is.
        if (c.sends[index] != c.receives[index]) {
          return Status::Internal((::testing::Message()
                                   << "rank " << key.first << " -> " << key.second << ": send "
                                   << index << " of layer " << c.sends[index].first
                                   << " met a receive of layer " << c.receives[index].first)
                                      .GetString());
        }
      }
      if (all) break;
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
        return Status::Internal("no progress for 20 s: the ranks deadlocked");
      }
    }
    const Status moved =
        ForwardingBackend::ExecuteRound(target, round, transfers);  // the bytes move now
    return moved;
  }

 private:
  using Key = std::pair<int, int>;  // (src rank, dst rank)
  using Op = std::pair<int, int>;   // (layer, expert)
  struct Channel {
    std::deque<Op> sends, receives;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Channel> posted_;
  std::set<int> busy_;  // ranks whose communicator runs a group
  bool cancel_ = false;
};

TEST(Rendezvous, MergedLanesNeverDeadlockAndCancelLeavesLayersWhole) {
  std::mt19937_64 rng(21);
  for (int trial = 0; trial < 40; ++trial) {
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    const int nodes = 1 + static_cast<int>(rng() % 3), gpn = 1 + static_cast<int>(rng() % 3);
    const int per = 2 + static_cast<int>(rng() % 3), layers = 2 + static_cast<int>(rng() % 5);
    const Topology topo = MakeTopology(nodes, gpn, per);
    const int experts = std::max(1, topo.num_slots() - static_cast<int>(rng() % 3));
    const Placement a = RandomPlacement(rng, layers, topo.num_slots(), experts);
    const Placement b = Drift(rng, a, 0.5), c = Drift(rng, b, 0.5);
    RearrangerOptions o;
    o.layers_per_step = 1 + static_cast<int>(rng() % 2);
    o.staging_layers = 1 + static_cast<int>(rng() % 2);
    HostBackend host(topo, layers, o.staging_layers, 64);
    host.Fill(a);
    RendezvousBackend backend(host);
    Rearranger rearranger(backend, topo, o);
    // First a rearrangement cancelled at a random boundary (or run out), then one to the end.
    const int cancel_at = static_cast<int>(rng() % 5);
    ASSERT_TRUE(rearranger.Start(a, b).ok());
    for (int boundary = 0; rearranger.in_progress(); ++boundary) {
      if (boundary == cancel_at) {
        rearranger.Cancel();
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
      auto committed = rearranger.OnStepBoundary();
      ASSERT_TRUE(committed.ok()) << committed.status().message();
    }
    ASSERT_TRUE(EachLayerIsOneOf(rearranger.placement(), a, b));
    Status v = host.Verify(rearranger.placement());
    ASSERT_TRUE(v.ok()) << v.message();
    const Placement from = rearranger.placement();
    ASSERT_TRUE(rearranger.Start(from, c).ok());
    while (rearranger.in_progress()) {
      auto committed = rearranger.OnStepBoundary();
      ASSERT_TRUE(committed.ok()) << committed.status().message();
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    EXPECT_EQ(rearranger.placement(), c);
    v = host.Verify(c);
    ASSERT_TRUE(v.ok()) << v.message();
  }
}

}  // namespace
}  // namespace eplb
