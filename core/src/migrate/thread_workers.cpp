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
    ++running_;
    if (!idle_.empty()) {
      worker = idle_.back();
      idle_.pop_back();
    } else {
      workers_.push_back(std::make_unique<Worker>());
      worker = workers_.back().get();
    }
  }
  // The worker is idle (waiting in acquire) or not started: nobody else touches its body.
  worker->body = std::move(body);
  if (!worker->thread.joinable()) {
    worker->thread = std::thread([this, worker] { Loop(worker); });
  }
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
