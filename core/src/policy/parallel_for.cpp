#include "policy/parallel_for.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace eplb {
namespace {

class WorkerPool {
 public:
  WorkerPool() : pid_(getpid()) {
    const int workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) - 1;
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { Work(); });
  }
  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  int workers() const { return static_cast<int>(threads_.size()); }

  // Runs chunks [0, chunks) of `run` on the caller and up to `helpers` workers. False when
  // the pool is busy or not this process's; the caller then does the work alone.
  bool Run(int chunks, int helpers, const std::function<void(int)>& run) {
    if (getpid() != pid_) return false;
    std::unique_lock<std::mutex> busy(call_mu_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &run;
      chunks_ = chunks;
      next_.store(0);
      done_ = 0;
      helpers_ = helpers;
      ++generation_;
    }
    wake_.notify_all();
    RunChunks(run, chunks);
    std::unique_lock<std::mutex> lock(mu_);
    finished_.wait(lock, [&] { return done_ == chunks_ && active_ == 0; });
    job_ = nullptr;
    return true;
  }

 private:
  // Takes chunks until none is left; returns how many it ran.
  int RunChunks(const std::function<void(int)>& run, int chunks) {
    int ran = 0;
    for (int c = next_.fetch_add(1); c < chunks; c = next_.fetch_add(1)) {
      run(c);
      ++ran;
    }
    std::lock_guard<std::mutex> lock(mu_);
    done_ += ran;
    if (done_ == chunks_ && active_ == 0) finished_.notify_all();
    return ran;
  }

  void Work() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (helpers_ == 0 || job_ == nullptr) continue;
      --helpers_;
      ++active_;
      const std::function<void(int)>* job = job_;
      const int chunks = chunks_;
      lock.unlock();
      RunChunks(*job, chunks);
      lock.lock();
      --active_;
      if (done_ == chunks_ && active_ == 0) finished_.notify_all();
    }
  }

  const pid_t pid_;
  std::mutex call_mu_;  // one Run at a time
  std::mutex mu_;
  std::condition_variable wake_, finished_;
  const std::function<void(int)>* job_ = nullptr;
  int chunks_ = 0, done_ = 0, helpers_ = 0, active_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::atomic<int> next_{0};
  std::vector<std::thread> threads_;
};

WorkerPool& Pool() {
  static WorkerPool pool;
  return pool;
}

}  // namespace

void ParallelFor(int n, int threads, const std::function<void(int, int)>& body) {
  if (n <= 0) return;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min(threads, n);
  if (threads > 1) {
    // Many small chunks per thread: a worker that wakes late, or a core that another process
    // holds, leaves its share to the others, and the call waits at most one small chunk for
    // the last thread to finish.
    const int pieces = std::min(n, threads * 16);
    const int chunk = (n + pieces - 1) / pieces;
    const int chunks = (n + chunk - 1) / chunk;
    const std::function<void(int)> run = [&](int c) {
      body(c * chunk, std::min(n, (c + 1) * chunk));
    };
    WorkerPool& pool = Pool();
    if (pool.Run(chunks, std::min(threads - 1, pool.workers()), run)) return;
  }
  body(0, n);
}

}  // namespace eplb
