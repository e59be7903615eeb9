#include "eplb/migrate/lost_ranks.h"

#include <fmt/format.h>

namespace eplb {

Status LostRanks::CheckLive(const Flow& flow) const {
  for (int r : {flow.src_rank, flow.dst_rank}) {
    if (lost(r)) {
      return Status::Unavailable(fmt::format("rank {} is lost: its transfers failed", r));
    }
  }
  return Status::Ok();
}

Status LostRanks::CheckLive(const Round& round) const {
  for (const Flow& flow : round.flows) EPLB_RETURN_IF_ERROR(CheckLive(flow));
  return Status::Ok();
}

}  // namespace eplb
