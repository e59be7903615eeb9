// NVTX annotations in the "eplb" domain, named like the simulator's trace events
// (io/perfetto_trace.cpp: "step", "rearrangement", "commit", "expert E layer L"), so that an
// Nsight Systems capture of a device run lines up with the trace of the same scenario simulated.
#pragma once

#include <string>

#include <nvtx3/nvToolsExt.h>

namespace eplb::device {

inline nvtxDomainHandle_t NvtxDomain() {
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("eplb");
  return domain;
}

inline nvtxEventAttributes_t NvtxAttributes(const std::string& name) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name.c_str();
  return a;
}

// A range from construction to destruction, on the calling thread.
class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name) {
    const nvtxEventAttributes_t a = NvtxAttributes(name);
    nvtxDomainRangePushEx(NvtxDomain(), &a);
  }
  ~NvtxRange() { nvtxDomainRangePop(NvtxDomain()); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

// An instant event.
inline void NvtxMark(const std::string& name) {
  const nvtxEventAttributes_t a = NvtxAttributes(name);
  nvtxDomainMarkEx(NvtxDomain(), &a);
}

}  // namespace eplb::device
