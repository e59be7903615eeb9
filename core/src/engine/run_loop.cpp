#include "eplb/engine/run_loop.h"

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "eplb/base/file_io.h"
#include "eplb/engine/gpu_memory.h"

namespace eplb {

Result<RunResult> RunLoop(const Scenario& scenario, Workload& workload,
                          RearrangementBackend& backend, StepRunner& runner,
                          std::string backend_name, const RunHooks& hooks) {
  EPLB_RETURN_IF_ERROR(CheckGpuMemory(scenario));
  // Shared with the observer, which stays connected to the backend after this returns.
  struct Transfers {
    std::mutex mu;
    std::vector<TransferRecord> records;
    bool closed = false;
  };
  auto transfers = std::make_shared<Transfers>();
  backend.on_transfer.Connect([transfers](const TransferRecord& t) {
    std::lock_guard lock(transfers->mu);
    if (!transfers->closed) transfers->records.push_back(t);
  });

  RunResult result;
  {
    EplbLoop loop(scenario, workload, backend, runner);
    loop.on_step = hooks.on_step;
    if (hooks.before) EPLB_RETURN_IF_ERROR(hooks.before(loop));
    EPLB_RETURN_IF_ERROR(loop.Run());
    if (hooks.after) EPLB_RETURN_IF_ERROR(hooks.after(loop));
    result.steps = loop.steps();
    result.rearrangements = loop.rearrangements();
    result.commits = loop.commits();
    if (const Placement* initial = loop.recorded_initial()) result.initial = *initial;
    result.skipped_rearrangements = loop.skipped_rearrangements();
    result.held_rearrangements = loop.held_rearrangements();
    result.layer_balance = loop.layer_balance();
  }
  result.scenario = scenario;
  result.backend = std::move(backend_name);
  {
    std::lock_guard lock(transfers->mu);
    transfers->closed = true;
    result.transfers = std::move(transfers->records);
  }
  result.wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - hooks.started).count();
  result.peak_rss_bytes = PeakRssBytes();
  return result;
}

}  // namespace eplb
