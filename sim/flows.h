// Host-to-host flows whose cost grows linearly with their number.
//
// Why not Comm::sendto_async: SimGrid 3.32 makes every such communication detached, keeps all
// detached communications of the simulation in one std::list owned by maestro and, when one
// finishes, removes it with std::list::remove, a scan of the whole list. With a flow per GPU in
// flight, a step that overlaps a migration cost O(GPUs²): 31% of a 1,024-GPU run was that scan.
// Mailbox communications are listed only by their two actors instead, so these helpers issue each
// flow as a put from an actor standing on the source host, matched by a get from an actor standing
// on the destination host. CommImpl::start routes a matched communication between its two actors'
// hosts with the same network model call as sendto, so every flow takes exactly the same time.
//
// Thread-safety: SimGrid runs actors one at a time; use only from actors of one engine.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <simgrid/s4u.hpp>

namespace eplb::sim {

struct HostFlow {
  simgrid::s4u::Host* src;
  simgrid::s4u::Host* dst;
  uint64_t bytes;
  double max_bytes_per_s = 0;  // the most the flow carries whatever the links allow (0: no cap)
};

// Brings flows into one receiving actor's host. The courier is a helper actor that, for each
// flow, moves to the flow's source host and puts there, after the receiver has posted a get per
// flow on its own host; the helper's own list holds only the flows of the current call.
// One Courier per receiving actor; create and destroy it inside that actor.
class Courier {
 public:
  Courier();
  ~Courier();  // stops the helper actor
  Courier(const Courier&) = delete;
  Courier& operator=(const Courier&) = delete;

  // Runs `flows` (every dst is the calling actor's host) concurrently from now and returns
  // once all have arrived; element i of the result is flow i's finished communication. Returns
  // an empty vector when Abort() cancelled them.
  std::vector<simgrid::s4u::CommPtr> Receive(std::span<const HostFlow> flows);
  // From another actor: cancels the flows of the Receive in progress, which then returns empty.
  // Idempotent: later calls before that Receive returns do nothing.
  void Abort();
  // Abort() if a flow in progress starts or ends at `host`.
  void AbortIfInvolves(const simgrid::s4u::Host* host);

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
};

// One helper actor standing on each host that a flow starts or ends at, started on first use and
// kept for the rest of the simulation (daemons: they end with the last ordinary actor). Run()
// hands every source its puts and every destination its gets, and waits for the last:
// O(flows) per call.
class PortActors {
 public:
  PortActors();
  PortActors(const PortActors&) = delete;
  PortActors& operator=(const PortActors&) = delete;

  // Runs `flows` concurrently from now; returns each flow's finish time once all have finished.
  // Call from one actor at a time.
  std::vector<double> Run(std::span<const HostFlow> flows);

 private:
  struct Port;
  struct Shared;
  void Start(simgrid::s4u::Host* host, Port& port);
  std::shared_ptr<Shared> shared_;
};

}  // namespace eplb::sim
