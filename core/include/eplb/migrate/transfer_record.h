// What a backend reports of each expert transfer it carried out, and the one signal every
// backend reports it through. Observers (a run's collector, a trace writer) connect to a
// backend's `on_transfer` before the rearrangement starts.
//
// Thread-safety: a TransferObserver is emitted from the backend's worker contexts (threads on
// the host and GPU backends, actors in the simulator), possibly from several at once; connected
// callbacks must be thread-safe. Connect only before emission starts.
#pragma once

#include <cstdint>

#include "eplb/base/signal.h"
#include "eplb/model/topology.h"

namespace eplb {

struct TransferRecord {
  int layer;
  int expert;
  int src_rank;
  int dst_rank;
  int64_t bytes;
  LinkClass link;
  double start_s;  // in the backend's clock (RearrangementBackend::Now)
  double end_s;
};

using TransferObserver = Signal<void(const TransferRecord&)>;

}  // namespace eplb
