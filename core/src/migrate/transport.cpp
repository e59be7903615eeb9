#include "eplb/migrate/transport.h"

#include <fmt/format.h>

#include "eplb/migrate/names.h"

namespace eplb {

const char* TransportName(Transport transport) {
  return kTransportNames.Name(transport);
}

Result<Transport> ParseTransport(const std::string& name) {
  if (const auto t = kTransportNames.Find(name)) return *t;
  return Status::InvalidArgument(
      fmt::format("transport '{}' is not one of {}", name, kTransportNames.Joined()));
}

TransportCost CostOf(Transport transport) {
  TransportCost c;
  switch (transport) {
    case Transport::kNccl:
      c.uses_sms = true;
      break;
    case Transport::kNixl:
      c.per_layer_s = 0.2e-3 + 0.25e-3;  // a gloo barrier; half of the 0.5 ms polling period
      c.per_message_s = 7e-6;            // UCX cuda_ipc overhead per message
      break;
    case Transport::kGloo:
      c.per_message_s = 0.2e-3;    // ~5,000 gloo operations per second
      c.flow_bytes_per_s = 2.4e9;  // 19.3 Gb/s at 40 MB
      break;
    case Transport::kHostPool:
      c.from_host = true;
      break;
  }
  return c;
}

}  // namespace eplb
