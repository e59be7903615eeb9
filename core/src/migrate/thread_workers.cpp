#include "eplb/migrate/thread_workers.h"

namespace eplb {

ThreadWorkers::~ThreadWorkers() {
  JoinAll();
  for (auto& worker : workers_) worker->go.release();  // with no body: stop
  for (auto& worker : workers_) worker->thread.join();
}

void ThreadWorkers::Start(std::function<void()> body) {
  Worker* worker = nullptr;
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      worker = idle_.back();
      idle_.pop_back();
      ++running_;
    } else {
      workers_.reserve(workers_.size() + 1);  // so that keeping the new worker cannot throw
    }
  }
  if (worker == nullptr) {
    // Starting a thread may fail (std::system_error at the process's thread limit): it is made
    // before anything is counted, so a failure leaves the pool as it was.
    auto fresh = std::make_unique<Worker>();
    fresh->thread = std::thread([this, w = fresh.get()] { Loop(w); });
    worker = fresh.get();
    std::lock_guard lock(mu_);
    workers_.push_back(std::move(fresh));
    ++running_;
  }
  // The worker waits in acquire: nobody else touches its body.
  worker->body = std::move(body);
  worker->go.release();
}

void ThreadWorkers::JoinAll() {
  std::unique_lock lock(mu_);
  done_.wait(lock, [this] { return running_ == 0; });
}

size_t ThreadWorkers::threads() const {
  std::lock_guard lock(mu_);
  return workers_.size();
}

void ThreadWorkers::Loop(Worker* worker) {
  for (;;) {
    worker->go.acquire();
    if (!worker->body) return;
    worker->body();
    worker->body = nullptr;  // its captures die on this thread, before JoinAll may return
    std::lock_guard lock(mu_);
    idle_.push_back(worker);
    if (--running_ == 0) done_.notify_all();
  }
}

}  // namespace eplb
