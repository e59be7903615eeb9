#include "flows.h"

#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace sg4 = simgrid::s4u;

namespace eplb::sim {
namespace {

// Puts carry no data; SimGrid only asks for a non-null payload.
char payload_marker;

sg4::Mailbox* NewMailbox(const char* kind) {
  static std::atomic<uint64_t> next{0};
  return sg4::Mailbox::by_name(std::string(kind) + std::to_string(next++));
}

sg4::CommPtr Put(sg4::Mailbox* mailbox, uint64_t bytes, double max_bytes_per_s = 0) {
  if (max_bytes_per_s <= 0) return mailbox->put_async(&payload_marker, bytes);
  sg4::CommPtr comm = mailbox->put_init(&payload_marker, bytes);
  comm->set_rate(max_bytes_per_s);
  comm->start();
  return comm;
}

// Waits for every one of `comms`, cancelled ones included; true when any was cancelled. Unlike
// Comm::wait_all, which stops at the first failure, it never leaves a communication unfinished
// to be destroyed (SimGrid then prints a backtrace per communication).
bool WaitEach(const std::vector<sg4::CommPtr>& comms) {
  bool failed = false;
  for (const sg4::CommPtr& c : comms) {
    try {
      c->wait();
    } catch (const simgrid::Exception&) {
      failed = true;
    }
  }
  return failed;
}

}  // namespace

struct Courier::Shared {
  sg4::SemaphorePtr work = sg4::Semaphore::create(0);
  sg4::Mailbox* mailbox = NewMailbox("courier-");
  std::vector<HostFlow> job;
  bool stop = false;
  // The Receive in progress: its flows and gets (empty between calls).
  std::vector<HostFlow> in_flight;
  std::vector<sg4::CommPtr> gets;
  bool aborted = false;
  std::vector<sg4::CommPtr> abort_puts;  // Abort()'s empty puts, kept until they end
};

Courier::Courier() : shared_(std::make_shared<Shared>()) {
  std::shared_ptr<Shared> shared = shared_;
  sg4::Actor::create("courier", sg4::this_actor::get_host(), [shared] {
    for (;;) {
      shared->work->acquire();
      if (shared->stop) return;
      const std::vector<HostFlow> job = std::move(shared->job);
      shared->job.clear();
      std::vector<sg4::CommPtr> puts;
      puts.reserve(job.size());
      for (const HostFlow& f : job) {
        // The receiver's get is already posted, so the put matches at once and the flow is
        // routed from the host the courier stands on now.
        sg4::this_actor::set_host(f.src);
        puts.push_back(Put(shared->mailbox, f.bytes, f.max_bytes_per_s));
      }
      // Waited on, so that SimGrid forgets them as they end (an actor's unwaited activities
      // stay listed with it, and scanning them made a run twice as slow). Those the receiver
      // aborted (Courier::Abort) end cancelled.
      WaitEach(puts);
    }
  })->daemonize();
}

Courier::~Courier() {
  shared_->stop = true;
  shared_->work->release();
}

std::vector<sg4::CommPtr> Courier::Receive(std::span<const HostFlow> flows) {
  std::vector<void*> received(flows.size());
  std::vector<sg4::CommPtr> gets;
  gets.reserve(flows.size());
  for (size_t i = 0; i < flows.size(); ++i)
    gets.push_back(shared_->mailbox->get_async<void>(&received[i]));
  shared_->job.assign(flows.begin(), flows.end());
  shared_->in_flight.assign(flows.begin(), flows.end());
  shared_->gets = gets;
  shared_->aborted = false;
  shared_->work->release();
  // Abort() cancels every get that has not ended, so each wait returns.
  const bool aborted = WaitEach(gets) || shared_->aborted;
  shared_->in_flight.clear();
  shared_->gets.clear();
  if (aborted) return {};
  return gets;
}

void Courier::Abort() {
  // Once per Receive: a loss of several ranks, then the rearranger's cancellation, each abort
  // the same flows.
  if (shared_->gets.empty() || shared_->aborted) return;
  shared_->aborted = true;
  // A copy: cancel() yields to SimGrid, which may run the receiver to the end of its Receive
  // (clearing shared_->gets) before the loop has cancelled the rest.
  const std::vector<sg4::CommPtr> gets = shared_->gets;
  for (const sg4::CommPtr& g : gets) {
    if (g->get_state() == sg4::Activity::State::FINISHED) continue;
    if (g->get_sender() != nullptr) {
      // Matched and under way: cancelling it fails the receiver's wait. One that has just
      // ended (its receiver not yet woken) must not be cancelled: SimGrid 3.32 then crashes.
      if (g->get_remaining() > 0) g->cancel();
    } else {
      // Not matched yet: the helper has not taken the job (it puts a job's flows at once), so
      // it never will, and an empty put ends the get (a cancelled get that is not matched
      // never wakes its receiver); the receiver sees `aborted`.
      shared_->job.clear();
      shared_->abort_puts.push_back(Put(shared_->mailbox, 0));
    }
  }
}

void Courier::AbortIfInvolves(const sg4::Host* host) {
  for (const HostFlow& f : shared_->in_flight) {
    if (f.src == host || f.dst == host) return Abort();
  }
}

struct PortActors::Port {
  sg4::SemaphorePtr work;
  sg4::Mailbox* mailbox = nullptr;
  std::vector<size_t> sends;  // indices into Shared::flows
  int receives = 0;
};

struct PortActors::Shared {
  std::unordered_map<sg4::Host*, Port> ports;  // node-based: a Port never moves
  std::vector<HostFlow> flows;
  std::vector<double> finish;
  size_t pending = 0;
  sg4::SemaphorePtr done = sg4::Semaphore::create(0);
};

PortActors::PortActors() : shared_(std::make_shared<Shared>()) {}

void PortActors::Start(sg4::Host* host, Port& port) {
  port.work = sg4::Semaphore::create(0);
  port.mailbox = NewMailbox("port-");
  std::shared_ptr<Shared> shared = shared_;
  Port* me_ptr = &port;
  sg4::Actor::create("port", host, [shared, me_ptr] {
    Port& me = *me_ptr;
    for (;;) {
      me.work->acquire();
      std::vector<void*> received(static_cast<size_t>(me.receives));
      std::vector<sg4::CommPtr> comms;
      comms.reserve(received.size() + me.sends.size());
      for (void*& r : received) comms.push_back(me.mailbox->get_async<void>(&r));
      const size_t first_send = comms.size();
      for (size_t i : me.sends) {
        const HostFlow& f = shared->flows[i];
        comms.push_back(Put(shared->ports.at(f.dst).mailbox, f.bytes));
      }
      sg4::Comm::wait_all(comms);
      for (size_t k = 0; k < me.sends.size(); ++k)
        shared->finish[me.sends[k]] = comms[first_send + k]->get_finish_time();
      me.sends.clear();
      me.receives = 0;
      if (--shared->pending == 0) shared->done->release();
    }
  })->daemonize();
}

std::vector<double> PortActors::Run(std::span<const HostFlow> flows) {
  Shared& s = *shared_;
  s.flows.assign(flows.begin(), flows.end());
  s.finish.assign(flows.size(), 0.0);
  std::vector<Port*> busy;
  auto touch = [&](sg4::Host* host) {
    Port& port = s.ports[host];
    if (port.sends.empty() && port.receives == 0) busy.push_back(&port);
    if (!port.work) Start(host, port);
    return &port;
  };
  for (size_t i = 0; i < flows.size(); ++i) {
    touch(flows[i].src)->sends.push_back(i);
    ++touch(flows[i].dst)->receives;
  }
  if (busy.empty()) return {};
  s.pending = busy.size();
  for (Port* port : busy) port->work->release();
  s.done->acquire();
  return std::move(s.finish);
}

}  // namespace eplb::sim
