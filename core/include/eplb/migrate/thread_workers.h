// Worker threads for backends whose workers are OS threads (the host and GPU backends): the
// StartWorker/JoinWorkers half of the backend contract (backend.h), written once.
//
// The threads outlive one rearrangement and wait for the next: creating them anew each time
// cost the foreground tens to hundreds of µs per thread (64 threads for 32 ranks and two
// lanes), inside the migration it delays. Every body still gets a thread of its own at once,
// never a place in a queue behind another body: bodies may wait for each other (a round's
// peer, a barrier), so a pool smaller than the bodies running could deadlock.
//
// Thread-safety: Start and JoinAll are foreground calls (one thread at a time); the bodies run
// on the workers' threads. The destructor waits for the bodies still running, then ends the
// threads.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <semaphore>
#include <thread>
#include <vector>

namespace eplb {

class ThreadWorkers {
 public:
  ThreadWorkers() = default;
  ThreadWorkers(const ThreadWorkers&) = delete;
  ThreadWorkers& operator=(const ThreadWorkers&) = delete;
  ~ThreadWorkers();

  // Runs `body` on a thread of its own: an idle worker's, or a new one. Throws what std::thread
  // throws when no thread can be started (std::system_error), leaving the pool as it was.
  void Start(std::function<void()> body);
  // Waits for every started body to return.
  void JoinAll();
  // The threads made so far (idle or busy).
  size_t threads() const;

 private:
  // One thread and the one body handed to it: the foreground wakes that thread alone, so 64
  // workers starting do not contend for one lock and one condition.
  struct Worker {
    std::binary_semaphore go{0};
    std::function<void()> body;  // empty: stop
    std::thread thread;
  };
  void Loop(Worker* worker);

  mutable std::mutex mu_;
  std::condition_variable done_;  // the last running body returned
  std::vector<Worker*> idle_;
  int running_ = 0;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace eplb
