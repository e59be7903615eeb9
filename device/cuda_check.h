// Every CUDA and NCCL call of the device part goes through these, so a failure names the call,
// what the error code means, and where (rank, layer) it happened.
#pragma once

#include <string>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "eplb/base/status.h"

#ifdef EPLB_HAVE_NCCL
#include <nccl.h>
#endif

namespace eplb::device {

inline Status CudaStatus(cudaError_t error, const char* call, const std::string& where) {
  return Status::Internal(fmt::format("{}{} failed: {} ({})", where, call, cudaGetErrorName(error),
                                      cudaGetErrorString(error)));
}

#ifdef EPLB_HAVE_NCCL
inline Status NcclStatus(ncclResult_t result, const char* call, const std::string& where) {
  return Status::Internal(fmt::format("{}{} failed: {}", where, call, ncclGetErrorString(result)));
}
#endif

}  // namespace eplb::device

// Returns the failure of `call` from the enclosing function, prefixed by `where` ("rank 3: ").
#define EPLB_CUDA(call, where)                                           \
  do {                                                                   \
    const cudaError_t eplb_cuda_error_ = (call);                         \
    if (eplb_cuda_error_ != cudaSuccess)                                 \
      return ::eplb::device::CudaStatus(eplb_cuda_error_, #call, where); \
  } while (0)

#define EPLB_NCCL(call, where)                                            \
  do {                                                                    \
    const ncclResult_t eplb_nccl_result_ = (call);                        \
    if (eplb_nccl_result_ != ncclSuccess)                                 \
      return ::eplb::device::NcclStatus(eplb_nccl_result_, #call, where); \
  } while (0)
