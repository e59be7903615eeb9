// Worker threads for backends whose workers are OS threads (the host and GPU backends): the
// StartWorker/JoinWorkers half of the backend contract (backend.h), written once.
//
// Thread-safety: Start and JoinAll are foreground calls (one thread at a time); the bodies run
// on their own threads. The destructor joins whatever is still running.
#pragma once

#include <functional>
#include <thread>
#include <vector>

namespace eplb {

class ThreadWorkers {
 public:
  ThreadWorkers() = default;
  ThreadWorkers(const ThreadWorkers&) = delete;
  ThreadWorkers& operator=(const ThreadWorkers&) = delete;
  ~ThreadWorkers() { JoinAll(); }

  // Runs `body` on a new thread.
  void Start(std::function<void()> body) { threads_.emplace_back(std::move(body)); }
  // Waits for every started thread to return.
  void JoinAll() {
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  std::vector<std::thread> threads_;
};

}  // namespace eplb
